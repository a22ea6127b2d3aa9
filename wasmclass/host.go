package wasmclass

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/persephone-go/psp/app"
)

// HostSpec describes the tenants of a Host.
type HostSpec struct {
	// Tenants, in order: their type ranges are laid out in this order in
	// the global type space.
	Tenants []TenantSpec
	// Options apply to every tenant's modules. If Options.CacheDir is set
	// (and Options.Cache is not), the Host opens one compilation cache there
	// and shares it across tenants.
	Options Options
}

// TenantSpec describes one tenant: a classifier and the traffic it sees.
type TenantSpec struct {
	// Name identifies the tenant (Swap, Status) and prefixes its type names
	// ("name/type"). Non-empty, unique, without '/'.
	Name string
	// Ports are the UDP destination ports whose packets this tenant
	// classifies. Empty makes it the default tenant, which gets every
	// packet whose port no tenant lists (at most one default tenant; without
	// one such packets are UNKNOWN).
	Ports []uint16
	// Wasm is the classifier module.
	Wasm []byte
	// MaxTypes is the size of the tenant's type id range, UNKNOWN included
	// (its types 1..MaxTypes-1 get global ids). Default: the module's N.
	// Modules swapped in later must have N <= MaxTypes.
	MaxTypes int
	// Options override HostSpec.Options for this tenant's modules: every
	// non-zero field wins (limits, fuel, time limit, breaker, compilation).
	Options Options
	// FailClosed: a packet the tenant's classifier fails to classify (a
	// trap, fuel, a bad answer, the breaker open, the module disabled) is
	// answered app.Faulted, for the dispatcher to drop, instead of
	// app.Unknown (failing open, the default).
	FailClosed bool
}

// faultedLocal is the local type a fail-closed tenant's faulting calls
// write (Instance.faultMark).
const faultedLocal = ^uint32(0)

// Host runs several tenants' classifiers and hot-swaps them. Its methods
// are safe for concurrent use; the classification itself goes through
// Callers, one per goroutine. Close the Callers, then the Host.
type Host struct {
	opts Options
	// cache is the compilation cache the host opened (Options.CacheDir,
	// or a directory of its own for CompileInChild), nil if none: Close
	// closes it once no compilation uses it.
	cache    *sharedCache
	tenants  []*tenant
	byName   map[string]*tenant
	byPort   []uint16 // port -> tenant index + 1; 0 = default tenant or none
	dflt     int      // default tenant index, -1 if none
	numTypes int

	swapMu sync.Mutex // serialises Swap and Close
	closed atomic.Bool

	callersMu sync.Mutex // guards callers; held by Swap while it pre-creates instances
	callers   map[*Caller]struct{}
}

// tenant is one tenant's state shared by all callers.
type tenant struct {
	name     string
	base     uint32 // global id of the tenant's local type 1
	maxTypes int
	opts     Options // the tenant's options over the host's
	mark     uint32  // Instance.faultMark: faultedLocal if the tenant fails closed
	current  atomic.Pointer[version]
	previous atomic.Pointer[version] // the version before current (its module retired), for Rollback
	faults   sharedFaults
	retired  []*Module // swapped-out modules that may still have instances

	// Pushes are ordered: each Swap takes a sequence number; a load that
	// finishes after a newer push has started (or landed) never lands, and
	// starting a push cancels the loads of older ones.
	pushMu   sync.Mutex
	pushSeq  uint64
	landed   uint64
	inflight map[uint64]context.CancelFunc
}

// version is one loaded module of a tenant.
type version struct {
	mod    *Module
	number int
	wasm   []byte // the module as uploaded, kept for a rollback to it
	sha256 [32]byte
	loaded time.Time
}

func newVersion(m *Module, number int, wasm []byte) *version {
	return &version{mod: m, number: number, wasm: wasm, sha256: sha256.Sum256(wasm), loaded: time.Now()}
}

// NewHost loads every tenant's classifier. It fails if any module fails to
// load, naming the tenant.
func NewHost(ctx context.Context, spec HostSpec) (*Host, error) {
	opts, err := spec.Options.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("wasmclass: new host: %w", err)
	}
	h := &Host{opts: opts, byName: map[string]*tenant{}, byPort: make([]uint16, 1<<16), dflt: -1, numTypes: 1,
		callers: map[*Caller]struct{}{}}
	if len(spec.Tenants) == 0 {
		return nil, fmt.Errorf("wasmclass: new host: %w: no tenants", ErrBadSpec)
	}
	if len(spec.Tenants) >= 1<<16-1 {
		return nil, fmt.Errorf("wasmclass: new host: %w: too many tenants", ErrBadSpec)
	}
	tmpDir := "" // a cache directory the host creates (removed with its cache)
	if h.opts.Cache == nil && h.opts.CacheDir == "" && h.opts.CompileInChild {
		// Compile children fill a file cache that the tenants share.
		if tmpDir, err = os.MkdirTemp("", "psp-wasm-cache-"); err != nil {
			return nil, fmt.Errorf("wasmclass: new host: compilation cache: %w", err)
		}
		h.opts.CacheDir = tmpDir
	}
	if h.opts.Cache == nil && h.opts.CacheDir != "" {
		cache, err := openCache(h.opts.CacheDir)
		if err != nil {
			if tmpDir != "" {
				os.RemoveAll(tmpDir)
			}
			return nil, fmt.Errorf("wasmclass: new host: %w", err)
		}
		h.cache = &sharedCache{cache: cache, dir: tmpDir}
		h.opts.Cache, h.opts.shared = cache, h.cache
	}
	fail := func(err error) (*Host, error) {
		_ = h.Close(ctx)
		return nil, err
	}
	for idx, ts := range spec.Tenants {
		if ts.Name == "" || containsSlash(ts.Name) {
			return fail(fmt.Errorf("wasmclass: new host: %w: tenant %d: name %q must be non-empty and without '/'", ErrBadSpec, idx, ts.Name))
		}
		if _, dup := h.byName[ts.Name]; dup {
			return fail(fmt.Errorf("wasmclass: new host: %w: duplicate tenant %q", ErrBadSpec, ts.Name))
		}
		if len(ts.Ports) == 0 {
			if h.dflt >= 0 {
				return fail(fmt.Errorf("wasmclass: new host: %w: tenants %q and %q both lack ports (only one default tenant)",
					ErrBadSpec, h.tenants[h.dflt].name, ts.Name))
			}
			h.dflt = idx
		}
		for _, p := range ts.Ports {
			if prev := h.byPort[p]; prev != 0 {
				return fail(fmt.Errorf("wasmclass: new host: %w: port %d claimed by tenants %q and %q",
					ErrBadSpec, p, h.tenants[prev-1].name, ts.Name))
			}
			h.byPort[p] = uint16(idx + 1)
		}
		topts := ts.Options.Merge(h.opts)
		if _, err := topts.withDefaults(); err != nil {
			return fail(&TenantError{Tenant: ts.Name, Err: fmt.Errorf("wasmclass: new host: %w", err)})
		}
		m, err := Load(ctx, ts.Wasm, topts)
		if err != nil {
			return fail(&TenantError{Tenant: ts.Name, Err: err})
		}
		maxTypes := ts.MaxTypes
		if maxTypes == 0 {
			maxTypes = m.NumTypes()
		}
		if maxTypes < m.NumTypes() || maxTypes > MaxTypes {
			_ = m.Close(ctx)
			return fail(&TenantError{Tenant: ts.Name, Err: fmt.Errorf("wasmclass: new host: %w: MaxTypes %d must be in %d..%d (the module's N..%d)",
				ErrBadSpec, maxTypes, m.NumTypes(), MaxTypes, MaxTypes)})
		}
		t := &tenant{name: ts.Name, base: uint32(h.numTypes), maxTypes: maxTypes, opts: topts, inflight: map[uint64]context.CancelFunc{}}
		if ts.FailClosed {
			t.mark = faultedLocal
		}
		t.current.Store(newVersion(m, 1, ts.Wasm))
		h.numTypes += maxTypes - 1
		h.tenants = append(h.tenants, t)
		h.byName[t.name] = t
	}
	return h, nil
}

func containsSlash(s string) bool {
	for _, c := range s {
		if c == '/' {
			return true
		}
	}
	return false
}

// NumTypes returns the size of the global type space (UNKNOWN included).
// It does not change with swaps.
func (h *Host) NumTypes() int { return h.numTypes }

// Types returns the global type names: 0 is "UNKNOWN", then each tenant's
// range in order, named "tenant/type" from its current module (ids past its
// N are named "tenant/type<i>").
func (h *Host) Types() []string {
	names := make([]string, 1, h.numTypes)
	names[0] = "UNKNOWN"
	for _, t := range h.tenants {
		local := t.current.Load().mod.info.TypeNames
		for l := 1; l < t.maxTypes; l++ {
			n := defaultTypeName(l)
			if l < len(local) {
				n = local[l]
			}
			names = append(names, t.name+"/"+n)
		}
	}
	return names
}

// TenantStatus is a tenant's state, for status pages.
type TenantStatus struct {
	Name      string      `json:"name"`
	Version   int         `json:"version"` // 1 at start, +1 per successful swap
	NumTypes  int         `json:"numTypes"`
	MaxTypes  int         `json:"maxTypes"`
	BaseType  uint32      `json:"baseType"` // global id of the tenant's type 1
	TypeNames []string    `json:"typeNames"`
	Faults    FaultCounts `json:"faults"` // all callers, all versions
	// BreakersOpen is 1 while the current version's circuit breaker is
	// open, 0 otherwise.
	BreakersOpen int64 `json:"breakersOpen"`
	// Disabled: a call of the current version exceeded its time limit;
	// its packets go to UNKNOWN until a swap replaces it.
	Disabled bool `json:"disabled,omitempty"`
	// SHA256 (hex), Size (bytes) and LoadedAt identify the module the
	// current version runs: the bytes as uploaded. PreviousSHA256 is the
	// version Rollback returns to ("" when there is none).
	SHA256         string    `json:"sha256"`
	Size           int       `json:"size"`
	LoadedAt       time.Time `json:"loadedAt"`
	PreviousSHA256 string    `json:"previousSha256,omitempty"`
}

// Status returns every tenant's state.
func (h *Host) Status() []TenantStatus {
	out := make([]TenantStatus, len(h.tenants))
	for i, t := range h.tenants {
		v := t.current.Load()
		var open int64
		if v.mod.BreakerOpen() {
			open = 1
		}
		out[i] = TenantStatus{
			Name: t.name, Version: v.number, NumTypes: v.mod.NumTypes(), MaxTypes: t.maxTypes,
			BaseType: t.base, TypeNames: v.mod.Types(), Faults: t.faults.snapshot(),
			BreakersOpen: open, Disabled: v.mod.Disabled(),
			SHA256: hex.EncodeToString(v.sha256[:]), Size: len(v.wasm), LoadedAt: v.loaded,
		}
		if p := t.previous.Load(); p != nil {
			out[i].PreviousSHA256 = hex.EncodeToString(p.sha256[:])
		}
	}
	return out
}

// Swap loads wasm as the tenant's new classifier and switches to it. The
// load (validation, instrumentation, compilation) and the creation of an
// instance for each Caller run on the calling goroutine, off the hot path;
// callers switch at their next batch, so every packet is classified by
// exactly one version. On error the running module stays in place. Returns
// the new version number.
//
// Swaps of a tenant are ordered: a swap lands only if ctx is not done when
// it is ready to (a push whose client gave up never lands later) and no
// newer swap of the tenant has started; starting a swap cancels the older
// ones still loading (they fail with ErrSuperseded). So the newest push
// always wins.
func (h *Host) Swap(ctx context.Context, name string, wasm []byte) (int, error) {
	return h.SwapIf(ctx, name, wasm, Expect{})
}

// Expect names the version a conditional swap expects to replace (as XDP's
// XDP_FLAGS_REPLACE does): a zero field is not checked.
type Expect struct {
	// SHA256 is the running module's SHA-256 in hex.
	SHA256 string
	// Version is the running version's number.
	Version int
}

// check returns ErrConflict unless v is the version e names.
func (e Expect) check(v *version) error {
	if e.SHA256 != "" && e.SHA256 != hex.EncodeToString(v.sha256[:]) {
		return fmt.Errorf("%w: %s runs, %s expected", ErrConflict, hex.EncodeToString(v.sha256[:]), e.SHA256)
	}
	if e.Version != 0 && e.Version != v.number {
		return fmt.Errorf("%w: version %d runs, %d expected", ErrConflict, v.number, e.Version)
	}
	return nil
}

// SwapIf is Swap, but only if the tenant's running version is the one exp
// names, checked before the load and again, atomically, where the swap
// lands; otherwise it fails with ErrConflict and the running version stays.
func (h *Host) SwapIf(ctx context.Context, name string, wasm []byte, exp Expect) (int, error) {
	t, ok := h.byName[name]
	if !ok {
		return 0, fmt.Errorf("wasmclass: swap %q: %w", name, ErrUnknownTenant)
	}
	if err := exp.check(t.current.Load()); err != nil {
		return 0, fmt.Errorf("wasmclass: swap %q: %w (the running version stays)", name, err)
	}
	seq, ctx, done := t.startPush(ctx)
	defer done()
	m, err := Load(ctx, wasm, t.opts)
	if err != nil {
		if t.superseded(seq) {
			err = fmt.Errorf("%w (%w)", ErrSuperseded, err)
		}
		return 0, fmt.Errorf("wasmclass: swap %q: %w (the running version stays)", name, err)
	}
	if m.NumTypes() > t.maxTypes {
		_ = m.Close(ctx)
		return 0, fmt.Errorf("wasmclass: swap %q: module has %d types, the tenant's range holds %d: %w (raise MaxTypes; the running version stays)",
			name, m.NumTypes(), t.maxTypes, ErrBadABI)
	}
	h.swapMu.Lock()
	defer h.swapMu.Unlock()
	if h.closed.Load() {
		_ = m.Close(ctx)
		return 0, fmt.Errorf("wasmclass: swap %q: %w", name, ErrClosed)
	}
	old := t.current.Load()
	if err := exp.check(old); err != nil {
		_ = m.Close(ctx)
		return 0, fmt.Errorf("wasmclass: swap %q: %w (the running version stays)", name, err)
	}
	nv := newVersion(m, old.number+1, wasm)
	h.precreate(ctx, t, nv)
	// The last moment to give up: after this the swap has happened.
	if err := t.land(ctx, seq); err != nil {
		h.dropPrecreated(ctx, t, nv)
		_ = m.Close(context.WithoutCancel(ctx))
		return 0, fmt.Errorf("wasmclass: swap %q: %w (the running version stays)", name, err)
	}
	t.current.Store(nv)
	t.previous.Store(&version{number: old.number, wasm: old.wasm, sha256: old.sha256, loaded: old.loaded})
	old.mod.retire(ctx)
	t.retired = append(t.retired, old.mod)
	// Forget retired modules that have closed.
	kept := t.retired[:0]
	for _, r := range t.retired {
		r.mu.Lock()
		done := r.closed
		r.mu.Unlock()
		if !done {
			kept = append(kept, r)
		}
	}
	clear(t.retired[len(kept):])
	t.retired = kept
	return nv.number, nil
}

// Rollback swaps the tenant's previous module back in (loading the bytes
// it was uploaded as, as Swap does) and returns the new version number;
// the module it replaces becomes the previous one, so a second Rollback
// undoes the first. It fails with ErrNoPrevious when the tenant was never
// swapped.
func (h *Host) Rollback(ctx context.Context, name string) (int, error) {
	return h.RollbackIf(ctx, name, Expect{})
}

// RollbackIf is Rollback, but only if the running version is the one exp
// names (see SwapIf).
func (h *Host) RollbackIf(ctx context.Context, name string, exp Expect) (int, error) {
	t, ok := h.byName[name]
	if !ok {
		return 0, fmt.Errorf("wasmclass: rollback %q: %w", name, ErrUnknownTenant)
	}
	p := t.previous.Load()
	if p == nil {
		return 0, fmt.Errorf("wasmclass: rollback %q: %w", name, ErrNoPrevious)
	}
	v, err := h.SwapIf(ctx, name, p.wasm, exp)
	if err != nil {
		return 0, fmt.Errorf("wasmclass: rollback %q to %x: %w", name, p.sha256[:6], err)
	}
	return v, nil
}

// Current returns the tenant's running module as uploaded, its SHA-256 and
// its version number.
func (h *Host) Current(name string) (wasm []byte, sum [32]byte, number int, err error) {
	t, ok := h.byName[name]
	if !ok {
		return nil, sum, 0, fmt.Errorf("wasmclass: %q: %w", name, ErrUnknownTenant)
	}
	v := t.current.Load()
	return v.wasm, v.sha256, v.number, nil
}

// startPush registers a push of t and cancels the older ones still in
// flight. done must be called when the push returns.
func (t *tenant) startPush(ctx context.Context) (uint64, context.Context, func()) {
	ctx, cancel := context.WithCancel(ctx)
	t.pushMu.Lock()
	defer t.pushMu.Unlock()
	t.pushSeq++
	seq := t.pushSeq
	for _, c := range t.inflight {
		c()
	}
	t.inflight[seq] = cancel
	return seq, ctx, func() {
		t.pushMu.Lock()
		delete(t.inflight, seq)
		t.pushMu.Unlock()
		cancel()
	}
}

// superseded reports whether a push newer than seq has started.
func (t *tenant) superseded(seq uint64) bool {
	t.pushMu.Lock()
	defer t.pushMu.Unlock()
	return t.pushSeq > seq
}

// land decides, once and for all, whether push seq lands.
func (t *tenant) land(ctx context.Context, seq uint64) error {
	t.pushMu.Lock()
	defer t.pushMu.Unlock()
	switch {
	case t.pushSeq > seq || t.landed > seq:
		return ErrSuperseded
	case ctx.Err() != nil:
		return fmt.Errorf("gave up before landing: %w", context.Cause(ctx))
	}
	t.landed = seq
	return nil
}

// dropPrecreated closes the instances precreate made for a version that
// did not land.
func (h *Host) dropPrecreated(ctx context.Context, t *tenant, nv *version) {
	h.callersMu.Lock()
	defer h.callersMu.Unlock()
	for c := range h.callers {
		ct := c.tenantOf(t)
		if p := ct.pending.Load(); p != nil && p.ver == nv && ct.pending.CompareAndSwap(p, nil) {
			_ = p.inst.Close(ctx)
		}
	}
}

// precreate gives every Caller an instance of nv, which it picks up when
// it notices the swap. Instances a Caller did not pick up (swapped again
// in between) are closed here.
func (h *Host) precreate(ctx context.Context, t *tenant, nv *version) {
	h.callersMu.Lock()
	defer h.callersMu.Unlock()
	for c := range h.callers {
		ct := c.tenantOf(t)
		inst, err := nv.mod.newInstance(context.WithoutCancel(ctx), &t.faults)
		if err != nil {
			continue // the Caller will try itself
		}
		if prev := ct.pending.Swap(&pendingInstance{ver: nv, inst: inst}); prev != nil {
			_ = prev.inst.Close(ctx)
		}
	}
}

// Close closes every tenant's modules (current and retired); Callers still
// open stop classifying (their packets become UNKNOWN). Close the Callers
// first. A swap or rollback still loading fails with ErrClosed; the
// compilation cache the host opened closes once no compilation uses it.
func (h *Host) Close(ctx context.Context) error {
	h.swapMu.Lock()
	defer h.swapMu.Unlock()
	if h.closed.Swap(true) {
		return nil
	}
	var errs []error
	h.callersMu.Lock()
	for c := range h.callers {
		errs = append(errs, c.dropPending(ctx))
	}
	h.callersMu.Unlock()
	for _, t := range h.tenants {
		if v := t.current.Load(); v != nil {
			errs = append(errs, v.mod.Close(ctx))
		}
		for _, r := range t.retired {
			errs = append(errs, r.Close(ctx))
		}
		t.retired = nil
	}
	if h.cache != nil {
		// Now, or by the last compilation still using it (a swap racing
		// this Close fails with ErrClosed).
		errs = append(errs, h.cache.close())
	}
	return errors.Join(errs...)
}

// Caller classifies packets for one goroutine: it holds one instance per
// tenant, created at first use and replaced when the tenant is swapped. It
// is NOT safe for concurrent use. Close it before closing the Host.
type Caller struct {
	h       *Host
	ctx     context.Context
	tenants []callerTenant
	used    []int // tenants with packets in the current chunk
}

// callerTenant is a Caller's view of one tenant and its scratch space for
// one chunk of packets.
type callerTenant struct {
	t    *tenant
	ver  *version
	inst *Instance
	// pending is the instance Swap created for the next version.
	pending atomic.Pointer[pendingInstance]
	idx     [MaxBatch]int
	pay     [MaxBatch][]byte
	res     [MaxBatch]uint32
	n       int
}

// pendingInstance is an instance Swap created for a Caller.
type pendingInstance struct {
	ver  *version
	inst *Instance
}

// NewCaller returns a Caller for one goroutine, with an instance of every
// tenant's current version, created here (off the hot path); Swap creates
// the next ones.
func (h *Host) NewCaller() (*Caller, error) {
	if h.closed.Load() {
		return nil, fmt.Errorf("wasmclass: new caller: %w", ErrClosed)
	}
	c := &Caller{h: h, ctx: context.Background(), tenants: make([]callerTenant, len(h.tenants)), used: make([]int, 0, len(h.tenants))}
	h.callersMu.Lock()
	defer h.callersMu.Unlock()
	for i, t := range h.tenants {
		ct := &c.tenants[i]
		ct.t = t
		v := t.current.Load()
		if inst, err := v.mod.newInstance(c.ctx, &t.faults); err == nil {
			ct.ver, ct.inst = v, inst
		}
	}
	h.callers[c] = struct{}{}
	return c, nil
}

// tenantOf returns the Caller's state for t.
func (c *Caller) tenantOf(t *tenant) *callerTenant {
	for i := range c.tenants {
		if c.tenants[i].t == t {
			return &c.tenants[i]
		}
	}
	panic("wasmclass: tenant of another host")
}

// dropPending closes the instances Swap prepared and the Caller did not
// take.
func (c *Caller) dropPending(ctx context.Context) error {
	var errs []error
	for i := range c.tenants {
		if p := c.tenants[i].pending.Swap(nil); p != nil {
			errs = append(errs, p.inst.Close(ctx))
		}
	}
	return errors.Join(errs...)
}

// ClassifyBatch classifies payloads (of any number) into out[:len(payloads)],
// in global type ids. dstPorts[i] selects the tenant of payloads[i]; a nil
// dstPorts sends everything to the default tenant. Packets of no tenant and
// faulting packets get app.Unknown (app.Faulted for faulting packets of
// a tenant that fails closed). out must be at least as long as
// payloads, and dstPorts too when not nil.
func (c *Caller) ClassifyBatch(payloads [][]byte, dstPorts []uint16, out []app.Type) {
	out = out[:len(payloads)]
	if dstPorts != nil {
		dstPorts = dstPorts[:len(payloads)]
	}
	for start := 0; start < len(payloads); start += MaxBatch {
		end := min(start+MaxBatch, len(payloads))
		var ports []uint16
		if dstPorts != nil {
			ports = dstPorts[start:end]
		}
		c.chunk(payloads[start:end], ports, out[start:end])
	}
}

func (c *Caller) chunk(payloads [][]byte, ports []uint16, out []app.Type) {
	h := c.h
	c.used = c.used[:0]
	for i, p := range payloads {
		ti := h.dflt
		if ports != nil {
			if tp := h.byPort[ports[i]]; tp != 0 {
				ti = int(tp) - 1
			}
		}
		if ti < 0 {
			out[i] = app.Unknown
			continue
		}
		ct := &c.tenants[ti]
		if ct.n == 0 {
			c.used = append(c.used, ti)
		}
		ct.idx[ct.n] = i
		ct.pay[ct.n] = p
		ct.n++
	}
	for _, ti := range c.used {
		ct := &c.tenants[ti]
		n := ct.n
		ct.n = 0
		inst := c.instance(ct, n)
		if inst == nil {
			faulted := app.Unknown
			if ct.t.mark != 0 {
				faulted = app.Faulted
			}
			for _, i := range ct.idx[:n] {
				out[i] = faulted
			}
			clear(ct.pay[:n])
			continue
		}
		inst.faultMark = ct.t.mark
		inst.ClassifyBatch(ct.pay[:n], ct.res[:n])
		for k, i := range ct.idx[:n] {
			switch l := ct.res[k]; {
			case l == 0:
				out[i] = app.Unknown
			case l == faultedLocal:
				out[i] = app.Faulted
			default:
				out[i] = app.Type(ct.t.base + l - 1)
			}
		}
		clear(ct.pay[:n]) // do not keep payloads alive
	}
}

// instance returns the caller's instance of the tenant's current version,
// switching versions if the tenant was swapped. nil if none can be made
// (counted as a trap fault of the tenant).
func (c *Caller) instance(ct *callerTenant, n int) *Instance {
	v := ct.t.current.Load()
	if v == ct.ver && ct.inst != nil {
		return ct.inst
	}
	if old := ct.inst; old != nil {
		// Closing waits for the instance's spares goroutine and releases
		// its memory: not on the caller's goroutine. The caller never
		// touches old again.
		go old.Close(c.ctx)
		ct.inst = nil
	}
	if p := ct.pending.Swap(nil); p != nil {
		if p.ver == v {
			ct.ver, ct.inst = v, p.inst
			return p.inst
		}
		_ = p.inst.Close(c.ctx) // prepared for a version already replaced
	}
	for {
		ct.ver = v
		inst, err := v.mod.newInstance(c.ctx, &ct.t.faults)
		if err == nil {
			ct.inst = inst
			return inst
		}
		// A swap may have retired v between the Load above and
		// newInstance: then a newer version is current; try it.
		if nv := ct.t.current.Load(); nv != v && errors.Is(err, ErrClosed) {
			v = nv
			continue
		}
		ct.t.faults.kinds[FaultUnavailable].Add(uint64(n))
		return nil
	}
}

// FaultTotal returns how many packets this Caller's instances sent to
// UNKNOWN because of faults (an open breaker included), plus their
// restarts after a trap: it grows when a call of the Caller faulted. It
// reads the instances' own counters (no atomics) and is for the Caller's
// goroutine only; a swap starts new instances from zero.
func (c *Caller) FaultTotal() uint64 {
	n := uint64(0)
	for i := range c.tenants {
		if inst := c.tenants[i].inst; inst != nil {
			n += inst.faults.Total() + inst.faults.Restarts
		}
	}
	return n
}

// Close closes the caller's instances.
func (c *Caller) Close() error {
	c.h.callersMu.Lock()
	delete(c.h.callers, c)
	c.h.callersMu.Unlock()
	errs := []error{c.dropPending(c.ctx)}
	for i := range c.tenants {
		if ct := &c.tenants[i]; ct.inst != nil {
			errs = append(errs, ct.inst.Close(c.ctx))
			ct.inst = nil
		}
	}
	return errors.Join(errs...)
}
