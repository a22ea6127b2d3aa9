package server

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/persephone-go/psp/darc"
	"github.com/persephone-go/psp/dispatcher"
	"github.com/persephone-go/psp/wasmclass"
)

// A multi-tenant server gives each tenant its own classifier (a Wasm host
// of its own, whose caller runs on the tenant's lane in the dispatcher, or
// the application's native classifier, inline), its own share in the
// policy (darc.Tenants) and its own token. multiTenants holds what the
// server keeps per tenant; the dispatcher and the policy hold the rest and
// apply changes between two iterations of the dispatcher's loop.

// MaxTenantTypes bounds a tenant's type range on a multi-tenant server
// (its module's type count, or max_types): each type has its queues.
const MaxTenantTypes = 1024

// mtTenant is one live tenant of a multi-tenant server.
type mtTenant struct {
	cfg       Tenant
	host      *wasmclass.Host // nil: the native classifier
	caller    *wasmclass.Caller
	numTypes  int
	typeNames []string // local ids
	added     time.Time
}

// multiTenants is a multi-tenant server's tenant set. Lifecycle changes
// are serialised by mu; status reads take it too.
type multiTenants struct {
	s           *Server
	mu          sync.Mutex
	live        map[string]*mtTenant
	native      dispatcher.Classifier
	nativeTypes []string
	wopts       wasmclass.Options // every tenant's base classifier options
	// compile builds an added tenant's classifier (load; tests slow it
	// down). Called without mu.
	compile func(ctx context.Context, t Tenant) (*mtTenant, error)
}

// newMultiTenants loads every configured tenant's classifier.
func newMultiTenants(ctx context.Context, s *Server, cfg Config, app *Application, wopts wasmclass.Options) (*multiTenants, error) {
	mt := &multiTenants{s: s, live: map[string]*mtTenant{}, wopts: cfg.ClassifierOptions.wasm(wopts)}
	mt.compile = mt.load
	if app.Classifier != nil {
		mt.native, mt.nativeTypes = app.Classifier, app.TypeNames
	} else {
		mt.native, mt.nativeTypes = dispatcher.HeaderClassifier{}, headerTypes()
	}
	for _, t := range cfg.Tenants {
		lt, err := mt.load(ctx, t)
		if err != nil {
			mt.closeAll()
			return nil, err
		}
		mt.live[t.Name] = lt
	}
	return mt, nil
}

// load builds a tenant's classifier (off the hot path).
func (mt *multiTenants) load(ctx context.Context, t Tenant) (*mtTenant, error) {
	lt := &mtTenant{cfg: t, added: time.Now()}
	bin := t.Wasm
	if len(bin) == 0 && t.Classifier != "" {
		var err error
		if bin, err = readWasm(t.Classifier); err != nil {
			return nil, fmt.Errorf("server: tenant %q: %w", t.Name, err)
		}
	}
	if len(bin) == 0 {
		lt.numTypes = len(mt.nativeTypes)
		lt.typeNames = slices.Clone(mt.nativeTypes)
		return lt, nil
	}
	closed, _ := failClosed(t.Fail) // validated
	host, err := wasmclass.NewHost(ctx, wasmclass.HostSpec{
		Tenants: []wasmclass.TenantSpec{{Name: t.Name, Wasm: bin, MaxTypes: t.MaxTypes, Options: t.ClassifierOptions.wasm(wasmclass.Options{}), FailClosed: closed}},
		Options: mt.wopts,
	})
	if err != nil {
		return nil, fmt.Errorf("%w: tenant %q: %w", ErrBadClassifier, t.Name, err)
	}
	caller, err := host.NewCaller()
	if err != nil {
		host.Close(ctx)
		return nil, fmt.Errorf("server: tenant %q: %w", t.Name, err)
	}
	lt.host, lt.caller = host, caller
	lt.numTypes = host.NumTypes()
	if lt.numTypes > MaxTenantTypes {
		caller.Close()
		host.Close(ctx)
		return nil, fmt.Errorf("%w: tenant %q: %d types (max_types or the module's count), at most %d on a multi-tenant server", ErrConfig, t.Name, lt.numTypes, MaxTenantTypes)
	}
	st := host.Status()[0]
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
func (lt *mtTenant) share(cfg Config) (darc.TenantConfig, error) {
	t := lt.cfg
	tc := darc.TenantConfig{Name: t.Name, NumTypes: lt.numTypes, TypeNames: lt.typeNames,
		Workers: t.Workers, Weight: t.Weight, MaxWorkers: t.MaxWorkers, Buffers: t.Buffers, MaxBuffers: t.MaxBuffers}
	prefix := t.Name + "/"
	for name, l := range cfg.Types {
		local, ok := strings.CutPrefix(name, prefix)
		if !ok {
			continue
		}
		i := slices.Index(lt.typeNames, local)
		if i < 0 {
			return tc, fmt.Errorf("%w: types: no request type named %q (tenant %s's types: %s)", ErrConfig, name, t.Name, strings.Join(lt.typeNames, ", "))
		}
		if tc.Budgets == nil {
			tc.Budgets, tc.Guarantees, tc.Deadlines = make([]int, lt.numTypes), make([]int, lt.numTypes), make([]int64, lt.numTypes)
		}
		tc.Budgets[i], tc.Guarantees[i] = l.Budget, l.Guarantee
		tc.Deadlines[i], _ = deadlineNs(l.Deadline)
	}
	return tc, nil
}

// dispatcherTenant is t as the dispatcher runs it.
func (mt *multiTenants) dispatcherTenant(lt *mtTenant, share darc.TenantConfig) dispatcher.Tenant {
	dt := dispatcher.Tenant{Name: lt.cfg.Name, Ports: lt.cfg.Ports, Share: share}
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
func (mt *multiTenants) policyTenants(cfg Config) ([]darc.TenantConfig, []dispatcher.Tenant, error) {
	var tcs []darc.TenantConfig
	var dts []dispatcher.Tenant
	for _, t := range cfg.Tenants {
		lt := mt.live[t.Name]
		tc, err := lt.share(cfg)
		if err != nil {
			return nil, nil, err
		}
		tcs = append(tcs, tc)
		dts = append(dts, mt.dispatcherTenant(lt, tc))
	}
	return tcs, dts, nil
}

// ports returns every live tenant's ports but the listen port.
func (mt *multiTenants) ports(listen uint16) []uint16 {
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
func (mt *multiTenants) closeAll() error {
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
func (mt *multiTenants) get(name string) (*mtTenant, error) {
	mt.mu.Lock()
	defer mt.mu.Unlock()
	lt, ok := mt.live[name]
	if !ok {
		return nil, fmt.Errorf("%w %q", ErrUnknownTenant, name)
	}
	return lt, nil
}

// swap hot-swaps a tenant's Wasm classifier.
func (mt *multiTenants) swap(ctx context.Context, name string, wasm []byte, exp wasmclass.Expect) (int, error) {
	lt, err := mt.get(name)
	if err != nil {
		return 0, err
	}
	if lt.host == nil {
		return 0, fmt.Errorf("%w: tenant %q runs the native classifier", ErrNoWasm, name)
	}
	v, err := lt.host.SwapIf(ctx, name, wasm, exp)
	return v, swapError(name, err)
}

func (mt *multiTenants) rollback(ctx context.Context, name string, exp wasmclass.Expect) (int, error) {
	lt, err := mt.get(name)
	if err != nil {
		return 0, err
	}
	if lt.host == nil {
		return 0, fmt.Errorf("%w: tenant %q runs the native classifier", ErrNoWasm, name)
	}
	v, err := lt.host.RollbackIf(ctx, name, exp)
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
func (mt *multiTenants) add(ctx context.Context, t Tenant) (*mtTenant, error) {
	s := mt.s
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
	if _, err := failClosed(t.Fail); err != nil {
		return nil, fmt.Errorf("%w: tenant %q: %v", ErrConfig, t.Name, err)
	}
	tok, hasTok, err := loadToken(t.TokenFile, t.TokenSHA256)
	if err != nil {
		return nil, fmt.Errorf("%w: tenant %q: %v", ErrConfig, t.Name, err)
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
	if err := mt.checkPorts(t.Name, t.Ports); err != nil {
		mt.closeTenant(lt)
		return nil, err
	}
	share, err := lt.share(s.cfg)
	if err != nil {
		mt.closeTenant(lt)
		return nil, err
	}
	added, err := mt.openPorts(t.Ports)
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

// exists reports whether a live tenant is called name.
func (mt *multiTenants) exists(name string) bool {
	mt.mu.Lock()
	defer mt.mu.Unlock()
	_, ok := mt.live[name]
	return ok
}

// checkPorts refuses ports another live tenant has, and a second default.
func (mt *multiTenants) checkPorts(name string, ports []uint16) error {
	for other, lt := range mt.live {
		if other == name {
			continue
		}
		for _, p := range ports {
			if slices.Contains(lt.cfg.Ports, p) {
				return fmt.Errorf("%w: port %d belongs to tenant %q", ErrConfig, p, other)
			}
		}
		if len(ports) == 0 && len(lt.cfg.Ports) == 0 {
			return fmt.Errorf("%w: tenant %q is already the default tenant (the one without ports)", ErrConfig, other)
		}
	}
	for _, p := range ports {
		if p == 0 {
			return fmt.Errorf("%w: port 0", ErrConfig)
		}
	}
	return nil
}

// openPorts makes the dataplane receive on ports it does not yet, and
// returns those.
func (mt *multiTenants) openPorts(ports []uint16) ([]uint16, error) {
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
func (mt *multiTenants) closePorts(ports []uint16) {
	if ps, ok := mt.s.dp.(portSet); ok {
		for _, p := range ports {
			_ = ps.RemovePort(p)
		}
	}
}

// closeTenant closes a classifier the dispatcher never got.
func (mt *multiTenants) closeTenant(lt *mtTenant) {
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
func (mt *multiTenants) update(ctx context.Context, name string, u TenantUpdate) (*mtTenant, error) {
	s := mt.s
	mt.mu.Lock()
	defer mt.mu.Unlock()
	lt, ok := mt.live[name]
	if !ok {
		return nil, fmt.Errorf("%w %q", ErrUnknownTenant, name)
	}
	t := u.apply(lt.cfg)
	if err := t.validateShare(); err != nil {
		return nil, fmt.Errorf("%w: tenant %q: %v", ErrConfig, name, err)
	}
	tok, hasTok, err := loadToken(t.TokenFile, t.TokenSHA256)
	if err != nil {
		return nil, fmt.Errorf("%w: tenant %q: %v", ErrConfig, name, err)
	}
	if err := mt.checkPorts(name, t.Ports); err != nil {
		return nil, err
	}
	next := *lt
	next.cfg = t
	share, err := next.share(s.cfg)
	if err != nil {
		return nil, err
	}
	added, err := mt.openPorts(t.Ports)
	if err != nil {
		return nil, err
	}
	if err := s.disp.UpdateTenant(ctx, dispatcher.Tenant{Name: name, Ports: t.Ports, Share: share}); err != nil {
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
func (mt *multiTenants) unused(ports []uint16) []uint16 {
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
func (mt *multiTenants) remove(ctx context.Context, name string) (*mtTenant, error) {
	s := mt.s
	mt.mu.Lock()
	defer mt.mu.Unlock()
	lt, ok := mt.live[name]
	if !ok {
		return nil, fmt.Errorf("%w %q", ErrUnknownTenant, name)
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
func (mt *multiTenants) status(st *dispatcher.Stats) []TenantInfo {
	mt.mu.Lock()
	defer mt.mu.Unlock()
	var out []TenantInfo
	seen := map[string]bool{}
	for _, ts := range st.Tenants {
		var ti TenantInfo
		lt, live := mt.live[ts.Name]
		switch {
		case live && !ts.Removed && lt.host != nil:
			ti = classifierInfo(lt.host.Status()[0])
			ti.Fail = failName(lt.cfg.Fail)
		case live && !ts.Removed:
			ti = TenantInfo{Name: ts.Name, Version: 1, Native: true}
		default:
			ti = TenantInfo{Name: ts.Name}
		}
		if live && !ts.Removed {
			ti.Types = lt.typeNames
			seen[ts.Name] = true
		}
		ti.Ports = ts.Ports
		ti.Removed = ts.Removed || !live // published stats may be a little older
		ti.Received, ti.Answered, ti.Dropped = ts.Received, ts.Answered, ts.Dropped
		drops := ts.Drops
		ti.Drops = &drops
		ti.Queued, ti.Running, ti.Classifying = ts.Queued, ts.Running, ts.Classifying
		ti.Isolation, ti.OnLane, ti.Escalations = ts.Isolation, ts.OnLane, ts.Escalations
		ti.ClassifierCalls, ti.ClassifierBusySeconds = ts.ClassifierCalls, float64(ts.ClassifierBusyNs)/1e9
		p := ts.Policy
		ti.Share = &Share{HomeWorkers: p.Home, Weight: p.Weight, MaxWorkers: p.MaxWorkers, Busy: p.Busy, Borrowed: p.Borrowed,
			Lent: p.Lent, Guarantee: p.Guarantee, Budget: p.Budget, Held: p.Held, Phase: p.Phase, Reservations: p.Reservations}
		if ti.Share.HomeWorkers == nil {
			ti.Share.HomeWorkers = []int{}
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
			ti = classifierInfo(lt.host.Status()[0])
			ti.Fail = failName(lt.cfg.Fail)
		}
		ti.Types, ti.Ports = lt.typeNames, lt.cfg.Ports
		out = append(out, ti)
	}
	return out
}

// names returns the live tenants' names, sorted.
func (mt *multiTenants) names() []string {
	mt.mu.Lock()
	defer mt.mu.Unlock()
	names := make([]string, 0, len(mt.live))
	for n := range mt.live {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// describe is the classifier part of the startup line.
func (mt *multiTenants) describe() string {
	mt.mu.Lock()
	defer mt.mu.Unlock()
	if len(mt.live) == 0 {
		return "multi-tenant, no tenants yet"
	}
	var parts []string
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for n := range mt.live {
			if !yield(n) {
				return
			}
		}
	}) {
		lt := mt.live[name]
		src := "native"
		if lt.host != nil {
			src = "wasm " + lt.cfg.Classifier
			if lt.cfg.Classifier == "" {
				src = fmt.Sprintf("wasm %d-byte module", len(lt.cfg.Wasm))
			}
		}
		p := "default"
		if len(lt.cfg.Ports) > 0 {
			p = fmt.Sprintf("ports %v", lt.cfg.Ports)
		}
		parts = append(parts, fmt.Sprintf("tenant %s=%s (%s)", name, src, p))
	}
	return "multi-tenant: " + strings.Join(parts, ", ")
}
