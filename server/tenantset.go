package server

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/persephone-go/psp/app"
	"github.com/persephone-go/psp/darc"
	"github.com/persephone-go/psp/dispatcher"
	"github.com/persephone-go/psp/wasmclass"
)

// A server is the set of its tenants. Each has its own classifier (a Wasm
// host of its own, whose caller runs inline on the dispatcher or on the
// tenant's lane, or the application's native classifier, inline), its own
// range of types in the policy (with darc and darc-static its own share of
// the workers and of the pool: darc.Tenants; with the other policies a
// fixed set sharing one policy: darc.Shared) and its own token. A server
// started with one classifier (Config.Classifier, or none: the native
// one) has one tenant, the default, called DefaultTenant, owning every
// port: tenants added later take their ports from it. The server keeps
// each tenant's configuration and classifier (a loadedTenant in its
// tenantRegistry); the dispatcher routes its ports and runs its
// classifier (a dispatcher.TenantSpec), the policy holds its type range
// and share (a darc.TenantConfig); changes apply between two iterations
// of the dispatcher's loop.

// MaxTenantTypes bounds the type range of a tenant added or listed in
// Config.Tenants (its module's type count, or max_types): each type has
// its queues. The default tenant of Config.Classifier is bounded by the
// policy's type space alone, as a server of one classifier always was.
const MaxTenantTypes = 1024

// loadedTenant is one live tenant of a server: its configuration and its
// classifier, loaded.
type loadedTenant struct {
	cfg       Tenant
	host      *wasmclass.Host // nil: the native classifier
	caller    *wasmclass.Caller
	numTypes  int
	typeNames []string // local ids
	// implicit: the default tenant made of Config.Classifier (or of the
	// native classifier); its types keep the names a server of one
	// classifier gives them (the policy's type 0 is its UNKNOWN).
	implicit bool
	added    time.Time
	// memoryPages is its Wasm classifier's memory limit (0: native).
	memoryPages uint32
}

// tenantRegistry is a server's tenants, by name. Lifecycle changes are
// serialised by mu; status reads take it too.
type tenantRegistry struct {
	s           *Server
	mu          sync.Mutex
	live        map[string]*loadedTenant
	native      app.Classifier
	nativeTypes []string
	nativeName  string            // describes the native classifier
	pool        bool              // the policy has a pool (type budgets apply)
	wopts       wasmclass.Options // every tenant's base classifier options
	// compile builds an added tenant's classifier (load; tests slow it
	// down). Called without mu.
	compile func(ctx context.Context, t Tenant) (*loadedTenant, error)
}

// newTenantRegistry loads every configured tenant's classifier:
// Config.Tenants, or the default tenant of Config.Classifier (or of the
// native classifier) unless MultiTenant asks to start with none.
func newTenantRegistry(ctx context.Context, s *Server, cfg Config, app *Application, wopts wasmclass.Options) (*tenantRegistry, error) {
	mt := &tenantRegistry{s: s, live: map[string]*loadedTenant{}, wopts: cfg.ClassifierOptions.wasm(wopts)}
	mt.compile = mt.load
	if app.Classifier != nil {
		mt.native, mt.nativeTypes, mt.nativeName = app.Classifier, app.TypeNames, "native "+app.Name
	} else {
		mt.native, mt.nativeTypes, mt.nativeName = dispatcher.HeaderClassifier{}, headerTypes(), "native psp header"
	}
	for _, t := range cfg.Tenants {
		lt, err := mt.load(ctx, t)
		if err != nil {
			mt.closeAll()
			return nil, err
		}
		mt.live[t.Name] = lt
	}
	if len(cfg.Tenants) == 0 && !cfg.MultiTenant {
		t := Tenant{Name: DefaultTenant, Classifier: cfg.Classifier, Wasm: cfg.classifierWasm, Fail: cfg.Fail, MaxTypes: cfg.classifierMaxTypes}
		lt, err := mt.loadUpTo(ctx, t, 0)
		if err != nil {
			return nil, err
		}
		lt.implicit = true
		mt.live[t.Name] = lt
	}
	return mt, nil
}

// configured returns the tenants the server starts with, in order:
// Config.Tenants, or the implicit default tenant.
func (mt *tenantRegistry) configured(cfg Config) []*loadedTenant {
	var out []*loadedTenant
	for _, t := range cfg.Tenants {
		out = append(out, mt.live[t.Name])
	}
	if lt := mt.live[DefaultTenant]; lt != nil && lt.implicit {
		out = append(out, lt)
	}
	return out
}

// typeName is the name a tenant's local type has in the server's type
// space: "tenant/type", but for the implicit default tenant the name a
// server of one classifier always gave it (a Wasm classifier's types are
// default/type, the native classifier's its own, UNKNOWN the policy's).
func (lt *loadedTenant) typeName(local int) string {
	n := lt.typeNames[local]
	switch {
	case !lt.implicit:
		return lt.cfg.Name + "/" + n
	case local == 0:
		return "UNKNOWN"
	case lt.host != nil:
		return lt.cfg.Name + "/" + n
	}
	return n
}

// load builds a tenant's classifier (off the hot path).
func (mt *tenantRegistry) load(ctx context.Context, t Tenant) (*loadedTenant, error) {
	return mt.loadUpTo(ctx, t, MaxTenantTypes)
}

// loadUpTo is load with a bound on the tenant's types (0: the policy's
// own bound only; the default tenant of Config.Classifier, whose types are
// the server's whole type space, as they always were).
func (mt *tenantRegistry) loadUpTo(ctx context.Context, t Tenant, maxTypes int) (*loadedTenant, error) {
	lt := &loadedTenant{cfg: t, added: time.Now()}
	bin := t.Wasm
	if len(bin) == 0 && t.Classifier != "" {
		var err error
		if bin, err = readWasm(t.Classifier); err != nil {
			return nil, fmt.Errorf("server: tenant %q: %w", t.Name, err)
		}
	} else if len(bin) > maxWasmFileBytes {
		return nil, fmt.Errorf("server: tenant %q: classifier of %d bytes, larger than %d", t.Name, len(bin), maxWasmFileBytes)
	}
	if len(bin) == 0 {
		lt.numTypes = len(mt.nativeTypes)
		lt.typeNames = slices.Clone(mt.nativeTypes)
		return lt, nil
	}
	fail, _ := failPolicy(t.Fail) // validated
	host, err := wasmclass.NewHost(ctx, wasmclass.HostSpec{Name: t.Name, Wasm: bin, MaxTypes: t.MaxTypes,
		Options: t.ClassifierOptions.wasm(wasmclass.Options{}).Merge(mt.wopts), Fail: fail})
	if err != nil {
		return nil, fmt.Errorf("%w: tenant %q: %w", ErrBadClassifier, t.Name, err)
	}
	caller, err := host.NewCaller()
	if err != nil {
		host.Close(ctx)
		return nil, fmt.Errorf("server: tenant %q: %w", t.Name, err)
	}
	lt.host, lt.caller = host, caller
	lt.memoryPages = mt.memoryPages(t)
	lt.numTypes = host.NumTypes()
	if maxTypes > 0 && lt.numTypes > maxTypes {
		caller.Close()
		host.Close(ctx)
		return nil, fmt.Errorf("%w: tenant %q: %d types (max_types or the module's count), at most %d for a tenant", ErrConfig, t.Name, lt.numTypes, maxTypes)
	}
	st := host.Status()
	lt.typeNames = make([]string, lt.numTypes)
	for i := range lt.typeNames {
		if i < len(st.TypeNames) && st.TypeNames[i] != "" {
			lt.typeNames[i] = st.TypeNames[i]
		} else if i == 0 {
			lt.typeNames[i] = "UNKNOWN"
		} else {
			lt.typeNames[i] = fmt.Sprintf("type%d", i)
		}
	}
	return lt, nil
}

// share is t's configuration in the policy, with the per-type limits cfg
// gives as "tenant/type".
func (lt *loadedTenant) share(cfg Config, pool bool) (darc.TenantConfig, error) {
	t := lt.cfg
	tc := darc.TenantConfig{Name: t.Name, NumTypes: lt.numTypes, TypeNames: lt.typeNames,
		Workers: t.Workers, Weight: t.Weight, MaxWorkers: t.MaxWorkers, Buffers: t.Buffers, MaxBuffers: t.MaxBuffers}
	names := make([]string, lt.numTypes)
	for i := range names {
		names[i] = lt.typeName(i)
	}
	if lt.implicit {
		tc.Default, tc.TypeNames = true, names
	}
	for name, l := range cfg.Types {
		i := slices.Index(names, name)
		if i < 0 {
			if !lt.implicit && strings.HasPrefix(name, t.Name+"/") {
				return tc, fmt.Errorf("%w: types: no request type named %q (tenant %s's types: %s)", ErrConfig, name, t.Name, strings.Join(names, ", "))
			}
			continue
		}
		if tc.Budgets == nil {
			tc.Budgets, tc.Guarantees, tc.Deadlines = make([]int, lt.numTypes), make([]int, lt.numTypes), make([]int64, lt.numTypes)
		}
		tc.Budgets[i], tc.Guarantees[i] = l.Budget, l.Guarantee
		tc.Deadlines[i], _ = deadlineNs(l.Deadline)
	}
	if !pool {
		// No pool (a dataplane that lends no buffers): no budgets to keep.
		tc.Budgets, tc.Guarantees = nil, nil
	}
	return tc, nil
}

// dispatcherTenant is t as the dispatcher runs it.
func (mt *tenantRegistry) dispatcherTenant(lt *loadedTenant, share darc.TenantConfig) dispatcher.TenantSpec {
	dt := dispatcher.TenantSpec{Name: lt.cfg.Name, Ports: lt.cfg.Ports, Share: share}
	if lt.host == nil {
		dt.Classifier, dt.Isolation = mt.native, dispatcher.IsolateInline
		return dt
	}
	dt.Classifier = lt.caller
	dt.Isolation, _ = lt.cfg.isolation() // validated
	host, caller := lt.host, lt.caller
	dt.Release = func() {
		// On the lane's goroutine, after its last call.
		caller.Close()
		host.Close(context.Background())
	}
	return dt
}

// policyTenants returns the policy's tenants for the configured ones.
func (mt *tenantRegistry) policyTenants(cfg Config) ([]darc.TenantConfig, []dispatcher.TenantSpec, error) {
	var tcs []darc.TenantConfig
	var dts []dispatcher.TenantSpec
	for _, lt := range mt.configured(cfg) {
		tc, err := lt.share(cfg, mt.pool)
		if err != nil {
			return nil, nil, err
		}
		tcs = append(tcs, tc)
		dts = append(dts, mt.dispatcherTenant(lt, tc))
	}
	return tcs, dts, nil
}

// ports returns every live tenant's ports but the listen port.
func (mt *tenantRegistry) ports(listen uint16) []uint16 {
	var ps []uint16
	for _, lt := range mt.live {
		for _, p := range lt.cfg.Ports {
			if p != listen && !slices.Contains(ps, p) {
				ps = append(ps, p)
			}
		}
	}
	slices.Sort(ps)
	return ps
}

// closeAll closes every classifier (the dispatcher never ran, or has
// stopped: closing twice is harmless).
func (mt *tenantRegistry) closeAll() error {
	var errs []error
	for _, lt := range mt.live {
		if lt.caller != nil {
			errs = append(errs, lt.caller.Close())
		}
		if lt.host != nil {
			errs = append(errs, lt.host.Close(context.Background()))
		}
	}
	return errors.Join(errs...)
}

// get returns the live tenant called name.
func (mt *tenantRegistry) get(name string) (*loadedTenant, error) {
	mt.mu.Lock()
	defer mt.mu.Unlock()
	return mt.lookup(name)
}

// runningSHA returns the SHA-256 (hex) of the module tenant name runs, ""
// for a native or unknown tenant.
func (mt *tenantRegistry) runningSHA(name string) string {
	lt, err := mt.get(name)
	if err != nil || lt.host == nil {
		return ""
	}
	return lt.host.Status().SHA256
}

// lookup is get with mt.mu held.
func (mt *tenantRegistry) lookup(name string) (*loadedTenant, error) {
	lt, ok := mt.live[name]
	if !ok {
		return nil, fmt.Errorf("%w %q", darc.ErrUnknownTenant, name)
	}
	return lt, nil
}

// swap hot-swaps a tenant's Wasm classifier.
func (mt *tenantRegistry) swap(ctx context.Context, name string, wasm []byte, exp wasmclass.Expect) (int, error) {
	lt, err := mt.get(name)
	if err != nil {
		return 0, err
	}
	if lt.host == nil {
		return 0, fmt.Errorf("%w: tenant %q runs the native classifier", ErrNoWasm, name)
	}
	v, err := lt.host.SwapIf(ctx, wasm, exp)
	return v, swapError(name, err)
}

func (mt *tenantRegistry) rollback(ctx context.Context, name string, exp wasmclass.Expect) (int, error) {
	lt, err := mt.get(name)
	if err != nil {
		return 0, err
	}
	if lt.host == nil {
		return 0, fmt.Errorf("%w: tenant %q runs the native classifier", ErrNoWasm, name)
	}
	v, err := lt.host.RollbackIf(ctx, exp)
	return v, swapError(name, err)
}

// portSet is implemented by dataplanes that change their UDP ports while
// running (nic/udp, nic/dpdk).
type portSet interface {
	AddPort(port uint16) error
	RemovePort(port uint16) error
}

// add adds a tenant while the server runs: classifier, ports, policy share
// and credentials, or nothing on error.
func (mt *tenantRegistry) add(ctx context.Context, t Tenant) (*loadedTenant, error) {
	s := mt.s
	if !s.cfg.shares() {
		return nil, fmt.Errorf("%w: add %q: policy %s has no tenant shares, so its tenants are fixed when the server starts (start it with policy darc or darc-static to add tenants)", ErrFixedTenants, t.Name, s.cfg.Policy)
	}
	if err := validTenantName(t.Name); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	if err := t.validateShare(); err != nil {
		return nil, fmt.Errorf("%w: tenant %q: %v", ErrConfig, t.Name, err)
	}
	if err := t.ClassifierOptions.validate(); err != nil {
		return nil, fmt.Errorf("%w: tenant %q: classifier_options: %v", ErrConfig, t.Name, err)
	}
	if _, err := t.isolation(); err != nil {
		return nil, fmt.Errorf("%w: tenant %q: %v", ErrConfig, t.Name, err)
	}
	if _, err := failPolicy(t.Fail); err != nil {
		return nil, fmt.Errorf("%w: tenant %q: %v", ErrConfig, t.Name, err)
	}
	tok, hasTok, err := loadToken(t.TokenFile, t.TokenSHA256)
	if err != nil {
		return nil, fmt.Errorf("%w: tenant %q: %v", ErrConfig, t.Name, err)
	}
	if err := mt.uniqueToken(t.Name, tok, hasTok); err != nil {
		return nil, err
	}
	if mt.exists(t.Name) {
		return nil, fmt.Errorf("%w: %q", ErrTenantExists, t.Name)
	}
	// Compile outside the lock: status, metrics and the other tenants'
	// swaps, rollbacks and changes do not wait for this module (up to
	// its compile timeout). What the lock guards is checked again below.
	lt, err := mt.compile(ctx, t)
	if err != nil {
		return nil, err
	}
	mt.mu.Lock()
	defer mt.mu.Unlock()
	if _, ok := mt.live[t.Name]; ok {
		mt.closeTenant(lt)
		return nil, fmt.Errorf("%w: %q", ErrTenantExists, t.Name)
	}
	share, err := lt.share(s.cfg, mt.pool)
	if err != nil {
		mt.closeTenant(lt)
		return nil, err
	}
	// Checked again: credentials change under mt.mu only.
	if err := mt.uniqueToken(t.Name, tok, hasTok); err != nil {
		mt.closeTenant(lt)
		return nil, err
	}
	added, err := mt.openPorts(t.Name, t.Ports)
	if err != nil {
		mt.closeTenant(lt)
		return nil, err
	}
	if _, err := s.disp.AddTenant(ctx, mt.dispatcherTenant(lt, share)); err != nil {
		mt.closePorts(added)
		mt.closeTenant(lt)
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	mt.live[t.Name] = lt
	s.creds.setTenant(t.Name, tok, hasTok)
	return lt, nil
}

// uniqueToken refuses tenant name's token (when it has one) if another
// principal holds it.
func (mt *tenantRegistry) uniqueToken(name string, tok [32]byte, hasTok bool) error {
	if !hasTok {
		return nil
	}
	if err := mt.s.creds.unique(tok, name); err != nil {
		return fmt.Errorf("%w: tenant %q: token: %w", ErrConfig, name, err)
	}
	return nil
}

// memoryPages is the memory limit of t's Wasm classifier, in pages (0:
// the native classifier).
func (mt *tenantRegistry) memoryPages(t Tenant) uint32 {
	if len(t.Wasm) == 0 && t.Classifier == "" {
		return 0
	}
	return cmp.Or(t.ClassifierOptions.wasm(wasmclass.Options{}).Merge(mt.wopts).MemoryLimitPages, wasmclass.DefaultMemoryLimitPages)
}

// pagesOf is the memory limit of the live tenant name's Wasm classifier,
// in pages (0: the native classifier, or no such tenant).
func (mt *tenantRegistry) pagesOf(name string) uint32 {
	mt.mu.Lock()
	defer mt.mu.Unlock()
	if lt, ok := mt.live[name]; ok {
		return lt.memoryPages
	}
	return 0
}

// classifierHeap is what the live tenants' classifiers hold in the Go heap
// at most (see classifierHeap).
func (mt *tenantRegistry) classifierHeap() int64 {
	mt.mu.Lock()
	defer mt.mu.Unlock()
	var n int64
	for _, lt := range mt.live {
		n += classifierHeap(lt.memoryPages)
	}
	return n
}

// exists reports whether a live tenant is called name.
func (mt *tenantRegistry) exists(name string) bool {
	mt.mu.Lock()
	defer mt.mu.Unlock()
	_, ok := mt.live[name]
	return ok
}

// openPorts makes the dataplane receive on ports it does not yet, and
// returns those. It first checks name's ports against the other live
// tenants' (dispatcher.CheckPorts, which the dispatcher applies again),
// so that nothing is opened for ports that will be refused.
func (mt *tenantRegistry) openPorts(name string, ports []uint16) ([]uint16, error) {
	var others []dispatcher.TenantSpec
	for n, lt := range mt.live {
		others = append(others, dispatcher.TenantSpec{Name: n, Ports: lt.cfg.Ports})
	}
	if err := dispatcher.CheckPorts(dispatcher.TenantSpec{Name: name, Ports: ports}, others); err != nil {
		return nil, fmt.Errorf("%w: tenant %q: %v", ErrConfig, name, err)
	}
	listen := mt.s.listenPort()
	served := mt.ports(listen)
	var added []uint16
	for _, p := range ports {
		if p == listen || slices.Contains(served, p) || slices.Contains(added, p) {
			continue
		}
		ps, ok := mt.s.dp.(portSet)
		if !ok {
			mt.closePorts(added)
			return nil, fmt.Errorf("%w: the %s dataplane cannot add port %d while running", ErrConfig, mt.s.cfg.Dataplane, p)
		}
		if err := ps.AddPort(p); err != nil {
			mt.closePorts(added)
			return nil, fmt.Errorf("%w: %w", ErrConfig, err)
		}
		added = append(added, p)
	}
	return added, nil
}

// closePorts stops receiving on ports.
func (mt *tenantRegistry) closePorts(ports []uint16) {
	if ps, ok := mt.s.dp.(portSet); ok {
		for _, p := range ports {
			_ = ps.RemovePort(p)
		}
	}
}

// closeTenant closes a classifier the dispatcher never got.
func (mt *tenantRegistry) closeTenant(lt *loadedTenant) {
	if lt.caller != nil {
		lt.caller.Close()
	}
	if lt.host != nil {
		lt.host.Close(context.Background())
	}
}

// TenantUpdate changes a live tenant (PATCH /tenants/{name}): the fields
// given replace the tenant's; absent ones (null) stay.
type TenantUpdate struct {
	Ports       *[]uint16 `json:"ports,omitempty"`
	Workers     *int      `json:"workers,omitempty"`
	Weight      *float64  `json:"weight,omitempty"`
	MaxWorkers  *int      `json:"max_workers,omitempty"`
	Buffers     *int      `json:"buffers,omitempty"`
	MaxBuffers  *int      `json:"max_buffers,omitempty"`
	TokenSHA256 *string   `json:"token_sha256,omitempty"`
}

// changesShare reports whether u sets a share field.
func (u TenantUpdate) changesShare() bool {
	return u.Workers != nil || u.Weight != nil || u.MaxWorkers != nil || u.Buffers != nil || u.MaxBuffers != nil
}

// apply returns t with u's fields.
func (u TenantUpdate) apply(t Tenant) Tenant {
	if u.Ports != nil {
		t.Ports = slices.Clone(*u.Ports)
	}
	if u.Workers != nil {
		t.Workers = *u.Workers
	}
	if u.Weight != nil {
		t.Weight = *u.Weight
	}
	if u.MaxWorkers != nil {
		t.MaxWorkers = *u.MaxWorkers
	}
	if u.Buffers != nil {
		t.Buffers = *u.Buffers
	}
	if u.MaxBuffers != nil {
		t.MaxBuffers = *u.MaxBuffers
	}
	if u.TokenSHA256 != nil {
		t.TokenSHA256, t.TokenFile = *u.TokenSHA256, ""
	}
	return t
}

// update changes a live tenant's ports, share and token.
func (mt *tenantRegistry) update(ctx context.Context, name string, u TenantUpdate) (*loadedTenant, error) {
	s := mt.s
	mt.mu.Lock()
	defer mt.mu.Unlock()
	lt, err := mt.lookup(name)
	if err != nil {
		return nil, err
	}
	if !s.cfg.shares() && u.changesShare() {
		return nil, fmt.Errorf("%w: update %q: policy %s has no tenant shares (start the server with policy darc or darc-static to give tenants shares; its ports and token can change)", ErrFixedTenants, name, s.cfg.Policy)
	}
	t := u.apply(lt.cfg)
	if err := t.validateShare(); err != nil {
		return nil, fmt.Errorf("%w: tenant %q: %v", ErrConfig, name, err)
	}
	tok, hasTok, err := loadToken(t.TokenFile, t.TokenSHA256)
	if err != nil {
		return nil, fmt.Errorf("%w: tenant %q: %v", ErrConfig, name, err)
	}
	if err := mt.uniqueToken(name, tok, hasTok); err != nil {
		return nil, err
	}
	next := *lt
	next.cfg = t
	share, err := next.share(s.cfg, mt.pool)
	if err != nil {
		return nil, err
	}
	added, err := mt.openPorts(name, t.Ports)
	if err != nil {
		return nil, err
	}
	if err := s.disp.UpdateTenant(ctx, dispatcher.TenantSpec{Name: name, Ports: t.Ports, Share: share}); err != nil {
		mt.closePorts(added)
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	old := lt.cfg.Ports
	lt.cfg = t
	mt.closePorts(mt.unused(old))
	if u.TokenSHA256 != nil {
		s.creds.setTenant(name, tok, hasTok)
	}
	return lt, nil
}

// unused returns the ports of ports no live tenant has (nor the listen
// port).
func (mt *tenantRegistry) unused(ports []uint16) []uint16 {
	listen := mt.s.listenPort()
	served := mt.ports(listen)
	var out []uint16
	for _, p := range ports {
		if p != listen && !slices.Contains(served, p) {
			out = append(out, p)
		}
	}
	return out
}

// remove removes a live tenant: the dispatcher drops its queued requests
// (removed) and answers its running ones, its lane closes its classifier,
// its ports close, its token is forgotten.
func (mt *tenantRegistry) remove(ctx context.Context, name string) (*loadedTenant, error) {
	s := mt.s
	mt.mu.Lock()
	defer mt.mu.Unlock()
	lt, err := mt.lookup(name)
	if err != nil {
		return nil, err
	}
	if !s.cfg.shares() {
		return nil, fmt.Errorf("%w: remove %q: policy %s has no tenant shares, so its tenants are fixed when the server starts (start it with policy darc or darc-static to remove tenants)", ErrFixedTenants, name, s.cfg.Policy)
	}
	if err := s.disp.RemoveTenant(ctx, name); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	delete(mt.live, name)
	mt.closePorts(mt.unused(lt.cfg.Ports))
	s.creds.setTenant(name, [32]byte{}, false)
	return lt, nil
}

// status returns every tenant's state, live ones first in the order the
// dispatcher has them, then removed ones.
func (mt *tenantRegistry) status(st *dispatcher.Stats) []TenantInfo {
	mt.mu.Lock()
	defer mt.mu.Unlock()
	var out []TenantInfo
	seen := map[string]bool{}
	for _, ts := range st.Tenants {
		var ti TenantInfo
		lt, live := mt.live[ts.Name]
		switch {
		case live && !ts.Removed && lt.host != nil:
			ti = classifierInfo(lt.host.Status())
			ti.Fail = failName(lt.cfg.Fail)
		case live && !ts.Removed:
			ti = TenantInfo{Name: ts.Name, Version: 1, Native: true}
		default:
			ti = TenantInfo{Name: ts.Name}
		}
		ti.Ports = ts.Ports
		if live && !ts.Removed {
			ti.Types = lt.typeNames
			ti.Ports = lt.cfg.Ports // the server's own record: the stats may be a stats interval older
			seen[ts.Name] = true
		}
		ti.Removed = ts.Removed || !live // published stats may be a little older
		ti.Received, ti.Answered, ti.Dropped = ts.Received, ts.Answered, ts.Dropped
		drops := ts.Drops
		ti.Drops = &drops
		ti.Queued, ti.Running, ti.Parked, ti.Classifying = ts.Queued, ts.Running, ts.Parked, ts.Classifying
		ti.Isolation, ti.OnLane, ti.Escalations = ts.Isolation, ts.OnLane, ts.Escalations
		ti.ClassifierCalls, ti.ClassifierBusySeconds = ts.ClassifierCalls, float64(ts.ClassifierBusyNs)/1e9
		if p := ts.Policy; mt.s.cfg.shares() { // a fixed set under c-FCFS, d-FCFS or FP has none
			ti.Share = &Share{HomeWorkers: p.Home, Weight: p.Weight, MaxWorkers: p.MaxWorkers, Busy: p.Busy, Borrowed: p.Borrowed,
				Lent: p.Lent, Guarantee: p.Guarantee, Budget: p.Budget, Held: p.Held, Phase: p.Phase, Reservations: p.Reservations}
			if ti.Share.HomeWorkers == nil {
				ti.Share.HomeWorkers = []int{}
			}
		}
		if ti.Types == nil {
			ti.Types = []string{}
		}
		out = append(out, ti)
	}
	// Live tenants the published stats do not have yet (just added).
	var late []string
	for name := range mt.live {
		if !seen[name] {
			late = append(late, name)
		}
	}
	sort.Strings(late)
	for _, name := range late {
		lt := mt.live[name]
		ti := TenantInfo{Name: name, Version: 1, Native: true}
		if lt.host != nil {
			ti = classifierInfo(lt.host.Status())
			ti.Fail = failName(lt.cfg.Fail)
		}
		ti.Types, ti.Ports = lt.typeNames, lt.cfg.Ports
		out = append(out, ti)
	}
	return out
}

// maxDescribed bounds the tenants the startup line names: a server may
// have 1,024 tenants of 1,024 ports each; psp tenant list shows them all.
const maxDescribed = 16

// describe is the classifier part of the startup line.
func (mt *tenantRegistry) describe() string {
	mt.mu.Lock()
	defer mt.mu.Unlock()
	if len(mt.live) == 0 {
		return "none yet: no tenants (add them with psp tenant add)"
	}
	var parts []string
	names := slices.Sorted(maps.Keys(mt.live))
	for _, name := range names[:min(len(names), maxDescribed)] {
		lt := mt.live[name]
		src := mt.nativeName
		if lt.host != nil {
			src = "wasm " + lt.cfg.Classifier
			if lt.cfg.Classifier == "" {
				src = fmt.Sprintf("wasm %d-byte module", len(lt.cfg.Wasm))
			}
			if mt.s.pending.describe(name, "") != "" {
				src += " (pending: not fetched yet)"
			}
		}
		p := "default"
		if len(lt.cfg.Ports) > 0 {
			p = "ports " + FormatPorts(lt.cfg.Ports)
		}
		parts = append(parts, fmt.Sprintf("tenant %s=%s (%s)", name, src, p))
	}
	if n := len(names) - maxDescribed; n > 0 {
		parts = append(parts, fmt.Sprintf("and %d more (psp tenant list)", n))
	}
	return strings.Join(parts, ", ")
}

// FormatPorts writes ports in their order, comma-separated, a run of
// three or more consecutive ones as a range ("7001-7010"): a tenant may
// have 1,024 (MaxTenantPorts). ParsePorts reads it back.
func FormatPorts(ps []uint16) string {
	var s []string
	for i := 0; i < len(ps); {
		j := i
		for j+1 < len(ps) && ps[j+1] == ps[j]+1 {
			j++
		}
		if j-i >= 2 {
			s = append(s, fmt.Sprintf("%d-%d", ps[i], ps[j]))
			i = j + 1
			continue
		}
		s = append(s, strconv.Itoa(int(ps[i])))
		i++
	}
	return strings.Join(s, ",")
}

// ParsePorts parses a port list as FormatPorts writes it ("7001,7005-7010"),
// in order and without removing repeats (a tenant's ports are checked
// apart, repeats refused by name).
func ParsePorts(s string) ([]uint16, error) {
	var ports []uint16
	port := func(f string) (int, error) {
		p, err := strconv.ParseUint(strings.TrimSpace(f), 10, 16)
		if err != nil || p == 0 {
			return 0, fmt.Errorf("%q is not a port (1..65535)", f)
		}
		return int(p), nil
	}
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		lo, hi, isRange := strings.Cut(f, "-")
		first, err := port(lo)
		if err != nil {
			return nil, err
		}
		last := first
		if isRange {
			if last, err = port(hi); err != nil {
				return nil, err
			}
			if last < first {
				return nil, fmt.Errorf("range %q is reversed", f)
			}
		}
		for p := first; p <= last; p++ {
			ports = append(ports, uint16(p))
		}
	}
	return ports, nil
}
