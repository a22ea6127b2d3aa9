package wasmclass

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/sys"

	"github.com/persephone-go/psp/wasmclass/internal/fuel"
)

// FaultKind names a reason for sending packets to UNKNOWN.
type FaultKind int

// Fault kinds.
const (
	FaultTrap        FaultKind = iota // the guest trapped (unreachable, out of bounds, stack overflow, exit, ...)
	FaultFuel                         // the guest ran out of fuel
	FaultBadCount                     // psp_classify_batch returned a count other than n
	FaultOutOfRange                   // a result outside 0..N-1
	FaultBreakerOpen                  // not called: the module's circuit breaker was open
	FaultTime                         // the call exceeded Options.TimeLimit (the module is disabled)
	FaultUnavailable                  // not called: the module is disabled, or no instance was ready after a trap
	numFaultKinds
)

var faultNames = [numFaultKinds]string{"trap", "fuel", "badCount", "outOfRange", "breakerOpen", "time", "unavailable"}

// String returns the kind's short name, as used in FaultCounts' JSON.
func (k FaultKind) String() string {
	if k < 0 || k >= numFaultKinds {
		return "unknown"
	}
	return faultNames[k]
}

// FaultCounts counts packets sent to UNKNOWN, per cause. Every packet of a
// call that trapped, ran out of fuel or time or returned a bad count is
// counted; for out-of-range results only the packets concerned; for an
// open breaker or an unavailable module every packet not classified.
type FaultCounts struct {
	Trap        uint64 `json:"trap"`
	Fuel        uint64 `json:"fuel"`
	BadCount    uint64 `json:"badCount"`
	OutOfRange  uint64 `json:"outOfRange"`
	BreakerOpen uint64 `json:"breakerOpen"`
	Time        uint64 `json:"time"`
	Unavailable uint64 `json:"unavailable"`
	// Restarts counts instances replaced after a trap.
	Restarts uint64 `json:"restarts"`
}

// Total returns the number of packets sent to UNKNOWN by faults.
func (f FaultCounts) Total() uint64 {
	return f.Trap + f.Fuel + f.BadCount + f.OutOfRange + f.BreakerOpen + f.Time + f.Unavailable
}

func (f *FaultCounts) add(k FaultKind, n uint64) {
	switch k {
	case FaultTrap:
		f.Trap += n
	case FaultFuel:
		f.Fuel += n
	case FaultBadCount:
		f.BadCount += n
	case FaultOutOfRange:
		f.OutOfRange += n
	case FaultBreakerOpen:
		f.BreakerOpen += n
	case FaultTime:
		f.Time += n
	case FaultUnavailable:
		f.Unavailable += n
	}
}

// sharedFaults aggregates the faults of several instances (a Host's
// callers). Updated only on fault paths.
type sharedFaults struct {
	kinds    [numFaultKinds]atomic.Uint64
	restarts atomic.Uint64
}

func (s *sharedFaults) snapshot() FaultCounts {
	var f FaultCounts
	for k := range s.kinds {
		f.add(FaultKind(k), s.kinds[k].Load())
	}
	f.Restarts = s.restarts.Load()
	return f
}

// guest is one wazero instance of the module with its cached exports and
// memory view.
type guest struct {
	mod      api.Module
	classify api.Function
	batch    api.Function
	tank     api.MutableGlobal // nil without fuel
	calls    api.Global
	mem      api.Memory
	view     []byte // the whole guest memory, valid while memSize is unchanged
	memSize  uint32
}

// newGuest instantiates the module and restores the state initialisation
// left (or, without a snapshot, relies on instantiation alone: the start
// function and _initialize never run again).
func (m *Module) newGuest(ctx context.Context) (*guest, error) {
	mod, err := m.rt.InstantiateModule(ctx, m.compiled, wazero.NewModuleConfig().WithName("").WithStartFunctions())
	if err != nil {
		return nil, fmt.Errorf("wasmclass: instantiate: %w", err)
	}
	if m.snap != nil {
		if err := m.snap.restore(mod); err != nil {
			_ = mod.Close(ctx)
			return nil, fmt.Errorf("wasmclass: %w", err)
		}
	}
	g := &guest{mod: mod, classify: mod.ExportedFunction(exportClassify), batch: mod.ExportedFunction(exportBatch), mem: mod.Memory()}
	g.tank, _ = mod.ExportedGlobal(fuel.GlobalExport).(api.MutableGlobal)
	g.calls = mod.ExportedGlobal(fuel.CallsExport)
	g.refreshView()
	return g, nil
}

func (g *guest) refreshView() {
	g.memSize = g.mem.Size()
	g.view, _ = g.mem.Read(0, g.memSize)
}

// Instance is one instantiation of a Module, with its own memory. It is
// NOT safe for concurrent use: use one Instance per calling goroutine. The
// goroutine that created it closes it.
//
// An Instance never returns an error from classification: every fault sends
// the packets concerned to UNKNOWN (0) and is counted (Faults).
//
// After a trap (including a fuel trap and a stack overflow) the guest may
// have been stopped half-way through its work, leaving its memory
// inconsistent, so the instance switches to a spare guest, prepared in the
// state initialisation left, and a goroutine of the instance prepares the
// next spare and closes the dead guest: the calling goroutine only swaps a
// pointer. The module's circuit breaker bounds how often this happens.
type Instance struct {
	m   *Module
	ctx context.Context

	g     *guest // nil after a trap until a spare is taken
	cur   atomic.Pointer[guest]
	buf   uint32 // I/O buffer address
	slots int
	n     uint32 // number of types
	stack []uint64

	faults  FaultCounts
	shared  *sharedFaults // optional aggregate (Host)
	probing bool          // this instance makes the breaker's half-open call
	fresh   bool          // the current guest has answered no call yet
	closed  bool
	// faultMark is the result a faulting call writes (0, UNKNOWN, unless
	// the Host fails closed).
	faultMark uint32

	// Spares: a goroutine of the instance keeps one ready and closes dead
	// guests.
	spare   atomic.Pointer[guest]
	kick    chan struct{}
	dead    chan *guest
	stopped chan struct{}
	done    sync.WaitGroup

	killMu sync.Mutex  // the watchdog's writes to the tank vs. reads after a trap
	killed atomic.Bool // the watchdog stopped the current call
}

// NewInstance creates an instance of m. ctx is kept for the instance's
// calls.
func (m *Module) NewInstance(ctx context.Context) (*Instance, error) {
	return m.newInstance(ctx, nil)
}

func (m *Module) newInstance(ctx context.Context, shared *sharedFaults) (*Instance, error) {
	if err := m.acquire(); err != nil {
		return nil, err
	}
	g, err := m.newGuest(ctx)
	if err != nil {
		m.release(ctx)
		return nil, err
	}
	i := &Instance{
		m: m, ctx: ctx, g: g, n: uint32(m.info.NumTypes), stack: make([]uint64, 1), shared: shared,
		buf: m.info.IOBuffer, slots: m.info.Slots,
		kick: make(chan struct{}, 1), dead: make(chan *guest, 8), stopped: make(chan struct{}),
	}
	i.cur.Store(g)
	i.fresh = true
	i.done.Add(1)
	go i.spares()
	i.kick <- struct{}{}
	if m.watch != nil {
		m.watch.add(i)
	}
	return i, nil
}

// spares keeps one spare guest ready and closes dead ones, off the
// calling goroutine.
func (i *Instance) spares() {
	defer i.done.Done()
	ctx := context.WithoutCancel(i.ctx)
	for {
		select {
		case <-i.stopped:
			for {
				select {
				case g := <-i.dead:
					_ = g.mod.Close(ctx)
				default:
					if g := i.spare.Swap(nil); g != nil {
						_ = g.mod.Close(ctx)
					}
					return
				}
			}
		case g := <-i.dead:
			_ = g.mod.Close(ctx)
		case <-i.kick:
		}
		if i.spare.Load() == nil {
			if g, err := i.m.newGuest(ctx); err == nil {
				i.spare.Store(g)
			}
		}
	}
}

// Faults returns the packets this instance sent to UNKNOWN, per cause.
func (i *Instance) Faults() FaultCounts { return i.faults }

// BreakerOpen reports whether the module's circuit breaker is open.
func (i *Instance) BreakerOpen() bool { return i.m.breaker.isOpen() }

// Close releases the instance. Safe to call twice.
func (i *Instance) Close(ctx context.Context) error {
	if i.closed {
		return nil
	}
	i.closed = true
	if i.m.watch != nil {
		i.m.watch.remove(i)
	}
	close(i.stopped)
	i.done.Wait()
	var err error
	if i.g != nil {
		err = i.g.mod.Close(ctx)
		i.g = nil
	}
	i.m.release(ctx)
	return err
}

// Classify classifies one payload (up to Prefix bytes are shown to the
// guest) and returns its type in 0..N-1; any fault returns 0.
func (i *Instance) Classify(payload []byte) uint32 {
	if !i.ready(1) {
		return 0
	}
	i.writeSlot(0, payload)
	if err := i.g.classify.CallWithStack(i.ctx, i.stack); err != nil {
		i.trapped(err, 1)
		return 0
	}
	i.checkMemory()
	t := uint32(i.stack[0])
	if t >= i.n {
		i.fault(FaultOutOfRange, 1)
		return 0
	}
	i.success()
	return t
}

// ClassifyBatch classifies payloads into out[:len(payloads)] (out must be
// at least as long), calling the guest once per batch of up to Slots
// packets. Faults send the packets concerned to 0.
func (i *Instance) ClassifyBatch(payloads [][]byte, out []uint32) {
	out = out[:len(payloads)]
	for len(payloads) > 0 {
		n := min(len(payloads), i.slots)
		i.classifyChunk(payloads[:n], out[:n])
		payloads, out = payloads[n:], out[n:]
	}
}

func (i *Instance) classifyChunk(payloads [][]byte, out []uint32) {
	n := len(payloads)
	if !i.ready(n) {
		i.markFaulted(out)
		return
	}
	for s, p := range payloads {
		i.writeSlot(s, p)
	}
	i.stack[0] = uint64(n)
	if err := i.g.batch.CallWithStack(i.ctx, i.stack); err != nil {
		i.markFaulted(out)
		i.trapped(err, n)
		return
	}
	i.checkMemory()
	if uint32(i.stack[0]) != uint32(n) {
		i.markFaulted(out)
		i.fault(FaultBadCount, uint64(n))
		return
	}
	res := i.g.view[i.buf : i.buf+uint32(4*n)]
	bad := 0
	for s := range out {
		t := binary.LittleEndian.Uint32(res[4*s:])
		if t >= i.n {
			t = i.faultMark
			bad++
		}
		out[s] = t
	}
	if bad > 0 {
		i.fault(FaultOutOfRange, uint64(bad))
		return
	}
	i.success()
}

// markFaulted writes the fault mark to out.
func (i *Instance) markFaulted(out []uint32) {
	if i.faultMark == 0 {
		clear(out)
		return
	}
	for s := range out {
		out[s] = i.faultMark
	}
}

// ready reports whether the guest may be called for n packets: the
// module's breaker lets the call through and a guest is ready (after a
// trap, a spare is taken).
func (i *Instance) ready(n int) bool {
	if i.m.breaker.state.Load() != 0 {
		switch allowed, kind := i.m.breaker.allow(); {
		case !allowed:
			i.count(kind, uint64(n))
			return false
		case kind == FaultBreakerOpen:
			i.probing = true
		}
	}
	if i.g == nil {
		if i.closed {
			i.count(FaultUnavailable, uint64(n))
			return false
		}
		g := i.spare.Swap(nil)
		if g == nil && i.m.opts.syncSpares {
			g, _ = i.m.newGuest(i.ctx)
		}
		if g == nil {
			i.count(FaultUnavailable, uint64(n))
			i.probing = i.m.breaker.probeDone(i.probing)
			return false
		}
		i.g = g
		i.cur.Store(g)
		i.fresh = true
		select {
		case i.kick <- struct{}{}:
		default:
		}
		i.faults.Restarts++
		if i.shared != nil {
			i.shared.restarts.Add(1)
		}
	}
	return true
}

// writeSlot copies payload into slot s of the I/O buffer.
func (i *Instance) writeSlot(s int, payload []byte) {
	off := i.buf + IOHeader + uint32(s)*SlotSize
	slot := i.g.view[off : off+SlotSize : off+SlotSize]
	caplen := min(len(payload), Prefix)
	// caplen and wirelen, both u32 little-endian, in one store.
	binary.LittleEndian.PutUint64(slot, uint64(caplen)|uint64(uint32(len(payload)))<<32)
	copy(slot[8:], payload[:caplen])
}

// checkMemory refreshes the cached view if the guest grew its memory.
func (i *Instance) checkMemory() {
	if i.g.mem.Size() != i.g.memSize {
		i.g.refreshView()
	}
}

// trapped handles a failed call: classify the trap, hand the guest to the
// spares goroutine (the next call takes a spare), count the fault.
func (i *Instance) trapped(err error, n int) {
	kind := FaultTrap
	var exit *sys.ExitError
	i.killMu.Lock()
	switch {
	case i.killed.Swap(false) && i.g.tank != nil && int64(i.g.tank.Get()) < killedBelow:
		// The watchdog emptied the tank of this very call (a call that
		// ended before it could trap left the flag; the next call's
		// refill undid the write).
		kind = FaultTime
	case !errors.As(err, &exit) && i.g.tank != nil && int64(i.g.tank.Get()) < 0:
		kind = FaultFuel
	}
	g := i.g
	i.g = nil
	i.cur.Store(nil)
	i.killMu.Unlock()
	select {
	case i.dead <- g:
	default:
		_ = g.mod.Close(i.ctx) // the spares goroutine is behind: close here
	}
	select {
	case i.kick <- struct{}{}:
	default:
	}
	if kind == FaultTime {
		i.m.breaker.disable()
	}
	i.fault(kind, uint64(n))
}

// count records n packets sent to UNKNOWN for kind, without touching the
// breaker.
func (i *Instance) count(kind FaultKind, n uint64) {
	i.faults.add(kind, n)
	if i.shared != nil {
		i.shared.kinds[kind].Add(n)
	}
}

// fault records a faulting call with the module's breaker.
func (i *Instance) fault(kind FaultKind, n uint64) {
	i.count(kind, n)
	i.m.breaker.fault(i.probing, i.fresh)
	i.probing = false
}

// success records an answered call; it ends a half-open call (the
// breaker closes).
func (i *Instance) success() {
	i.fresh = false
	if i.probing {
		i.m.breaker.succeeded()
		i.probing = false
	}
}
