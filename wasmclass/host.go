package wasmclass

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/persephone-go/psp/app"
)

// HostSpec describes the classifier a Host runs.
type HostSpec struct {
	// Name names the classifier: it prefixes its type names
	// ("name/type") and the errors NewHost reports about its module (a
	// server gives its tenant's name). Non-empty, without '/'.
	Name string
	// Wasm is the classifier module.
	Wasm []byte
	// MaxTypes is the size of the classifier's type id range, UNKNOWN
	// included (default: the module's N). Modules swapped in later must
	// have N <= MaxTypes.
	MaxTypes int
	// Options apply to every module the Host loads. If Options.CacheDir
	// is set (and Options.Cache is not), the Host opens a compilation
	// cache there and closes it with the Host.
	Options Options
	// Fail is what becomes of a packet the classifier fails to classify
	// (a trap, fuel, a bad answer, the breaker open, the module
	// disabled): see FailPolicy.
	Fail FailPolicy
}

// FailPolicy is a Host's failure policy, as Istio's WasmPlugin
// failStrategy.
type FailPolicy int

// Failure policies.
const (
	// FailOpen answers a faulting packet app.Unknown (served at the
	// lowest priority); the breaker shuts out a module that keeps faulting
	// (Options.BreakerThreshold).
	FailOpen FailPolicy = iota
	// FailClosed answers it app.Faulted, for the dispatcher to drop.
	FailClosed
	// FailReload answers it app.Faulted too, and gives the module's next
	// call a fresh instance, shutting it out only when it crash-loops
	// (Options.Reload, Envoy's FAIL_RELOAD).
	FailReload
)

// String returns "open", "closed" or "reload".
func (p FailPolicy) String() string {
	switch p {
	case FailOpen:
		return "open"
	case FailClosed:
		return "closed"
	case FailReload:
		return "reload"
	}
	return fmt.Sprintf("FailPolicy(%d)", int(p))
}

// options are the options of a Host's modules: o (as given: its defaults
// not applied), with Reload and its backoff defaults when the Host
// reloads.
func (p FailPolicy) options(o Options) Options {
	if p != FailReload {
		return o
	}
	o.Reload = true
	if o.BreakerBackoff == 0 {
		o.BreakerBackoff = DefaultReloadBackoff
	}
	if o.BreakerMaxBackoff == 0 {
		o.BreakerMaxBackoff = max(DefaultReloadMaxBackoff, o.BreakerBackoff)
	}
	return o
}

// faultedLocal is the type a fail-closed Host's faulting calls write
// (Instance.faultMark).
const faultedLocal = ^uint32(0)

// Host runs one classifier and hot-swaps it. Its methods are safe for
// concurrent use; the classification itself goes through Callers, one per
// goroutine. Close the Callers, then the Host.
type Host struct {
	name     string
	opts     Options
	maxTypes int
	mark     uint32 // Instance.faultMark: faultedLocal if the host fails closed
	// cache is the compilation cache the host opened (Options.CacheDir,
	// or a directory of its own for CompileInChild), nil if none: Close
	// closes it once no compilation uses it.
	cache    *sharedCache
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

	swapMu sync.Mutex // serialises Swap and Close
	closed atomic.Bool

	callersMu sync.Mutex // guards callers; held by Swap while it pre-creates instances
	callers   map[*Caller]struct{}
}

// version is one loaded module of a Host.
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

// NewHost loads the classifier. Its errors do not name the Host: the
// caller knows what it is for.
func NewHost(ctx context.Context, spec HostSpec) (*Host, error) {
	if spec.Name == "" || strings.Contains(spec.Name, "/") {
		return nil, fmt.Errorf("wasmclass: new host: %w: name %q must be non-empty and without '/'", ErrBadSpec, spec.Name)
	}
	opts, err := spec.Fail.options(spec.Options).withDefaults()
	if err != nil {
		return nil, fmt.Errorf("wasmclass: new host: %w", err)
	}
	h := &Host{name: spec.Name, opts: opts, inflight: map[uint64]context.CancelFunc{}, callers: map[*Caller]struct{}{}}
	if spec.Fail == FailClosed || spec.Fail == FailReload {
		h.mark = faultedLocal
	}
	tmpDir := "" // a cache directory the host creates (removed with its cache)
	if h.opts.Cache == nil && h.opts.CacheDir == "" && h.opts.CompileInChild {
		// Compile children fill a file cache that the host's loads share.
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
	m, err := Load(ctx, spec.Wasm, h.opts)
	if err != nil {
		return fail(err)
	}
	h.maxTypes = spec.MaxTypes
	if h.maxTypes == 0 {
		h.maxTypes = m.NumTypes()
	}
	if h.maxTypes < m.NumTypes() || h.maxTypes > MaxTypes {
		_ = m.Close(ctx)
		return fail(fmt.Errorf("wasmclass: new host: %w: MaxTypes %d must be in %d..%d (the module's N..%d)",
			ErrBadSpec, h.maxTypes, m.NumTypes(), MaxTypes, MaxTypes))
	}
	h.current.Store(newVersion(m, 1, spec.Wasm))
	return h, nil
}

// NumTypes returns the size of the classifier's type space (UNKNOWN
// included): MaxTypes. It does not change with swaps.
func (h *Host) NumTypes() int { return h.maxTypes }

// Types returns the type names: 0 is "UNKNOWN", then "name/type" from the
// current module (ids past its N are named "name/type<i>").
func (h *Host) Types() []string {
	names := make([]string, 1, h.maxTypes)
	names[0] = "UNKNOWN"
	local := h.current.Load().mod.info.TypeNames
	for l := 1; l < h.maxTypes; l++ {
		n := defaultTypeName(l)
		if l < len(local) {
			n = local[l]
		}
		names = append(names, h.name+"/"+n)
	}
	return names
}

// Status is a Host's state, for status pages.
type Status struct {
	Name      string      `json:"name"`
	Version   int         `json:"version"` // 1 at start, +1 per successful swap
	NumTypes  int         `json:"numTypes"`
	MaxTypes  int         `json:"maxTypes"`
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

// Status returns the Host's state.
func (h *Host) Status() Status {
	v := h.current.Load()
	var open int64
	if v.mod.BreakerOpen() {
		open = 1
	}
	st := Status{
		Name: h.name, Version: v.number, NumTypes: v.mod.NumTypes(), MaxTypes: h.maxTypes,
		TypeNames: v.mod.Types(), Faults: h.faults.snapshot(),
		BreakersOpen: open, Disabled: v.mod.Disabled(),
		SHA256: hex.EncodeToString(v.sha256[:]), Size: len(v.wasm), LoadedAt: v.loaded,
	}
	if p := h.previous.Load(); p != nil {
		st.PreviousSHA256 = hex.EncodeToString(p.sha256[:])
	}
	return st
}

// Swap loads wasm as the Host's new classifier and switches to it. The
// load (validation, instrumentation, compilation) and the creation of an
// instance for each Caller run on the calling goroutine, off the hot path;
// callers switch at their next batch, so every packet is classified by
// exactly one version. On error the running module stays in place. Returns
// the new version number.
//
// Swaps are ordered: a swap lands only if ctx is not done when it is ready
// to (a push whose client gave up never lands later) and no newer swap has
// started; starting a swap cancels the older ones still loading (they fail
// with ErrSuperseded). So the newest push always wins.
func (h *Host) Swap(ctx context.Context, wasm []byte) (int, error) {
	return h.SwapIf(ctx, wasm, Expect{})
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

// SwapIf is Swap, but only if the running version is the one exp names,
// checked before the load and again, atomically, where the swap lands;
// otherwise it fails with ErrConflict and the running version stays.
func (h *Host) SwapIf(ctx context.Context, wasm []byte, exp Expect) (int, error) {
	if err := exp.check(h.current.Load()); err != nil {
		return 0, fmt.Errorf("wasmclass: swap %q: %w (the running version stays)", h.name, err)
	}
	seq, ctx, done := h.startPush(ctx)
	defer done()
	m, err := Load(ctx, wasm, h.opts)
	if err != nil {
		if h.superseded(seq) {
			err = fmt.Errorf("%w (%w)", ErrSuperseded, err)
		}
		return 0, fmt.Errorf("wasmclass: swap %q: %w (the running version stays)", h.name, err)
	}
	if m.NumTypes() > h.maxTypes {
		_ = m.Close(ctx)
		return 0, fmt.Errorf("wasmclass: swap %q: module has %d types, the host's range holds %d: %w (raise MaxTypes; the running version stays)",
			h.name, m.NumTypes(), h.maxTypes, ErrBadABI)
	}
	h.swapMu.Lock()
	defer h.swapMu.Unlock()
	if h.closed.Load() {
		_ = m.Close(ctx)
		return 0, fmt.Errorf("wasmclass: swap %q: %w", h.name, ErrClosed)
	}
	old := h.current.Load()
	if err := exp.check(old); err != nil {
		_ = m.Close(ctx)
		return 0, fmt.Errorf("wasmclass: swap %q: %w (the running version stays)", h.name, err)
	}
	nv := newVersion(m, old.number+1, wasm)
	h.precreate(ctx, nv)
	// The last moment to give up: after this the swap has happened.
	if err := h.land(ctx, seq); err != nil {
		h.dropPrecreated(ctx, nv)
		_ = m.Close(context.WithoutCancel(ctx))
		return 0, fmt.Errorf("wasmclass: swap %q: %w (the running version stays)", h.name, err)
	}
	h.current.Store(nv)
	h.previous.Store(&version{number: old.number, wasm: old.wasm, sha256: old.sha256, loaded: old.loaded})
	old.mod.retire(ctx)
	h.retired = append(h.retired, old.mod)
	// Forget retired modules that have closed.
	kept := h.retired[:0]
	for _, r := range h.retired {
		r.mu.Lock()
		done := r.closed
		r.mu.Unlock()
		if !done {
			kept = append(kept, r)
		}
	}
	clear(h.retired[len(kept):])
	h.retired = kept
	return nv.number, nil
}

// Rollback swaps the previous module back in (loading the bytes it was
// uploaded as, as Swap does) and returns the new version number; the
// module it replaces becomes the previous one, so a second Rollback undoes
// the first. It fails with ErrNoPrevious when the Host was never swapped.
func (h *Host) Rollback(ctx context.Context) (int, error) {
	return h.RollbackIf(ctx, Expect{})
}

// RollbackIf is Rollback, but only if the running version is the one exp
// names (see SwapIf).
func (h *Host) RollbackIf(ctx context.Context, exp Expect) (int, error) {
	p := h.previous.Load()
	if p == nil {
		return 0, fmt.Errorf("wasmclass: rollback %q: %w", h.name, ErrNoPrevious)
	}
	v, err := h.SwapIf(ctx, p.wasm, exp)
	if err != nil {
		return 0, fmt.Errorf("wasmclass: rollback %q to %x: %w", h.name, p.sha256[:6], err)
	}
	return v, nil
}

// Current returns the running module as uploaded, its SHA-256 and its
// version number.
func (h *Host) Current() (wasm []byte, sum [32]byte, number int) {
	v := h.current.Load()
	return v.wasm, v.sha256, v.number
}

// startPush registers a push and cancels the older ones still in flight.
// done must be called when the push returns.
func (h *Host) startPush(ctx context.Context) (uint64, context.Context, func()) {
	ctx, cancel := context.WithCancel(ctx)
	h.pushMu.Lock()
	defer h.pushMu.Unlock()
	h.pushSeq++
	seq := h.pushSeq
	for _, c := range h.inflight {
		c()
	}
	h.inflight[seq] = cancel
	return seq, ctx, func() {
		h.pushMu.Lock()
		delete(h.inflight, seq)
		h.pushMu.Unlock()
		cancel()
	}
}

// superseded reports whether a push newer than seq has started.
func (h *Host) superseded(seq uint64) bool {
	h.pushMu.Lock()
	defer h.pushMu.Unlock()
	return h.pushSeq > seq
}

// land decides, once and for all, whether push seq lands.
func (h *Host) land(ctx context.Context, seq uint64) error {
	h.pushMu.Lock()
	defer h.pushMu.Unlock()
	switch {
	case h.pushSeq > seq || h.landed > seq:
		return ErrSuperseded
	case ctx.Err() != nil:
		return fmt.Errorf("gave up before landing: %w", context.Cause(ctx))
	}
	h.landed = seq
	return nil
}

// dropPrecreated closes the instances precreate made for a version that
// did not land.
func (h *Host) dropPrecreated(ctx context.Context, nv *version) {
	h.callersMu.Lock()
	defer h.callersMu.Unlock()
	for c := range h.callers {
		if p := c.pending.Load(); p != nil && p.ver == nv && c.pending.CompareAndSwap(p, nil) {
			_ = p.inst.Close(ctx)
		}
	}
}

// precreate gives every Caller an instance of nv, which it picks up when
// it notices the swap. Instances a Caller did not pick up (swapped again
// in between) are closed here.
func (h *Host) precreate(ctx context.Context, nv *version) {
	h.callersMu.Lock()
	defer h.callersMu.Unlock()
	for c := range h.callers {
		inst, err := nv.mod.newInstance(context.WithoutCancel(ctx), &h.faults)
		if err != nil {
			continue // the Caller will try itself
		}
		if prev := c.pending.Swap(&pendingInstance{ver: nv, inst: inst}); prev != nil {
			_ = prev.inst.Close(ctx)
		}
	}
}

// Close closes the Host's modules (current and retired); Callers still
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
	if v := h.current.Load(); v != nil {
		errs = append(errs, v.mod.Close(ctx))
	}
	for _, r := range h.retired {
		errs = append(errs, r.Close(ctx))
	}
	h.retired = nil
	if h.cache != nil {
		// Now, or by the last compilation still using it (a swap racing
		// this Close fails with ErrClosed).
		errs = append(errs, h.cache.close())
	}
	return errors.Join(errs...)
}

// Caller classifies packets for one goroutine: it holds one instance of
// the Host's classifier, created at first use and replaced when the Host
// is swapped. It is NOT safe for concurrent use. Close it before closing
// the Host.
type Caller struct {
	h    *Host
	ctx  context.Context
	ver  *version
	inst *Instance
	// pending is the instance Swap created for the next version.
	pending atomic.Pointer[pendingInstance]
	res     [MaxBatch]uint32
}

// pendingInstance is an instance Swap created for a Caller.
type pendingInstance struct {
	ver  *version
	inst *Instance
}

// NewCaller returns a Caller for one goroutine, with an instance of the
// current version, created here (off the hot path); Swap creates the next
// ones.
func (h *Host) NewCaller() (*Caller, error) {
	if h.closed.Load() {
		return nil, fmt.Errorf("wasmclass: new caller: %w", ErrClosed)
	}
	c := &Caller{h: h, ctx: context.Background()}
	h.callersMu.Lock()
	defer h.callersMu.Unlock()
	v := h.current.Load()
	if inst, err := v.mod.newInstance(c.ctx, &h.faults); err == nil {
		c.ver, c.inst = v, inst
	}
	h.callers[c] = struct{}{}
	return c, nil
}

// dropPending closes the instance Swap prepared and the Caller did not
// take.
func (c *Caller) dropPending(ctx context.Context) error {
	if p := c.pending.Swap(nil); p != nil {
		return p.inst.Close(ctx)
	}
	return nil
}

// ClassifyBatch implements app.Classifier: it classifies payloads (of any
// number) into out[:len(payloads)], which must be at least as long.
// Faulting packets get app.Unknown (app.Faulted when the Host fails
// closed).
func (c *Caller) ClassifyBatch(payloads [][]byte, out []app.Type) {
	out = out[:len(payloads)]
	for start := 0; start < len(payloads); start += MaxBatch {
		end := min(start+MaxBatch, len(payloads))
		c.chunk(payloads[start:end], out[start:end])
	}
}

// chunk classifies at most MaxBatch payloads.
func (c *Caller) chunk(payloads [][]byte, out []app.Type) {
	inst := c.instance(len(payloads))
	if inst == nil {
		faulted := app.Unknown
		if c.h.mark != 0 {
			faulted = app.Faulted
		}
		for i := range out {
			out[i] = faulted
		}
		return
	}
	inst.faultMark = c.h.mark
	res := c.res[:len(payloads)]
	inst.ClassifyBatch(payloads, res)
	for i, l := range res {
		switch l {
		case 0:
			out[i] = app.Unknown
		case faultedLocal:
			out[i] = app.Faulted
		default:
			out[i] = app.Type(l)
		}
	}
}

// instance returns the caller's instance of the current version,
// switching versions if the Host was swapped. nil if none can be made
// (counted as an unavailable fault of n packets).
func (c *Caller) instance(n int) *Instance {
	h := c.h
	v := h.current.Load()
	if v == c.ver && c.inst != nil {
		return c.inst
	}
	if old := c.inst; old != nil {
		// Closing waits for the instance's spares goroutine and releases
		// its memory: not on the caller's goroutine. The caller never
		// touches old again.
		go old.Close(c.ctx)
		c.inst = nil
	}
	if p := c.pending.Swap(nil); p != nil {
		if p.ver == v {
			c.ver, c.inst = v, p.inst
			return p.inst
		}
		_ = p.inst.Close(c.ctx) // prepared for a version already replaced
	}
	for {
		c.ver = v
		inst, err := v.mod.newInstance(c.ctx, &h.faults)
		if err == nil {
			c.inst = inst
			return inst
		}
		// A swap may have retired v between the Load above and
		// newInstance: then a newer version is current; try it.
		if nv := h.current.Load(); nv != v && errors.Is(err, ErrClosed) {
			v = nv
			continue
		}
		h.faults.kinds[FaultUnavailable].Add(uint64(n))
		return nil
	}
}

// FaultTotal returns how many packets this Caller's instance sent to
// UNKNOWN because of faults (an open breaker included), plus its restarts
// after a trap: it grows when a call of the Caller faulted. It reads the
// instance's own counters (no atomics) and is for the Caller's goroutine
// only; a swap starts a new instance from zero.
func (c *Caller) FaultTotal() uint64 {
	if c.inst == nil {
		return 0
	}
	return c.inst.faults.Total() + c.inst.faults.Restarts
}

// Close closes the caller's instance.
func (c *Caller) Close() error {
	c.h.callersMu.Lock()
	delete(c.h.callers, c)
	c.h.callersMu.Unlock()
	errs := []error{c.dropPending(c.ctx)}
	if c.inst != nil {
		errs = append(errs, c.inst.Close(c.ctx))
		c.inst = nil
	}
	return errors.Join(errs...)
}
