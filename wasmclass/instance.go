package wasmclass

import (
	"context"
	"encoding/binary"
	"errors"
	"sync/atomic"

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
	FaultBreakerOpen                  // not called: the circuit breaker was open
	numFaultKinds
)

var faultNames = [numFaultKinds]string{"trap", "fuel", "badCount", "outOfRange", "breakerOpen"}

// String returns the kind's short name, as used in FaultCounts' JSON.
func (k FaultKind) String() string {
	if k < 0 || k >= numFaultKinds {
		return "unknown"
	}
	return faultNames[k]
}

// FaultCounts counts packets sent to UNKNOWN, per cause. Every packet of a
// call that trapped, ran out of fuel or returned a bad count is counted;
// for out-of-range results only the packets concerned; for an open breaker
// every packet not classified.
type FaultCounts struct {
	Trap        uint64 `json:"trap"`
	Fuel        uint64 `json:"fuel"`
	BadCount    uint64 `json:"badCount"`
	OutOfRange  uint64 `json:"outOfRange"`
	BreakerOpen uint64 `json:"breakerOpen"`
	// Restarts counts instances re-created after a trap.
	Restarts uint64 `json:"restarts"`
}

// Total returns the number of packets sent to UNKNOWN by faults.
func (f FaultCounts) Total() uint64 {
	return f.Trap + f.Fuel + f.BadCount + f.OutOfRange + f.BreakerOpen
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
	}
}

// sharedFaults aggregates the faults of several instances (a Host tenant's
// callers). Updated only on fault paths.
type sharedFaults struct {
	kinds        [numFaultKinds]atomic.Uint64
	restarts     atomic.Uint64
	breakersOpen atomic.Int64
}

func (s *sharedFaults) snapshot() FaultCounts {
	var f FaultCounts
	for k := range s.kinds {
		f.add(FaultKind(k), s.kinds[k].Load())
	}
	f.Restarts = s.restarts.Load()
	return f
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
// inconsistent (e.g. a C shadow stack pointer that was never restored), so
// the instance is re-created from the compiled module, with fresh memory,
// before its next call. The circuit breaker bounds the cost of a guest that
// keeps trapping.
type Instance struct {
	m   *Module
	ctx context.Context

	mod      api.Module // nil after a trap until re-created
	classify api.Function
	batch    api.Function
	tank     api.Global
	mem      api.Memory
	view     []byte // the whole guest memory, valid while memSize is unchanged
	memSize  uint32
	buf      uint32 // I/O buffer address
	slots    int
	n        uint32 // number of types
	stack    []uint64

	faults FaultCounts
	shared *sharedFaults // optional aggregate (Host)

	// Circuit breaker.
	consecutive int // consecutive faulting calls
	open        bool
	skip        int // packets still to skip while open
	backoff     int // next open period, in packets
	closed      bool
}

// NewInstance creates an instance of m (calling _initialize for WASI
// modules). ctx is kept for the instance's calls.
func (m *Module) NewInstance(ctx context.Context) (*Instance, error) {
	return m.newInstance(ctx, nil)
}

func (m *Module) newInstance(ctx context.Context, shared *sharedFaults) (*Instance, error) {
	if err := m.acquire(); err != nil {
		return nil, err
	}
	i := &Instance{
		m: m, ctx: ctx, n: uint32(m.info.NumTypes), stack: make([]uint64, 1),
		shared: shared, backoff: m.opts.BreakerBackoff,
	}
	if err := i.start(); err != nil {
		m.release(ctx)
		return nil, err
	}
	return i, nil
}

// start instantiates the guest and caches its exports and memory view.
func (i *Instance) start() error {
	mod, err := i.m.instantiate(i.ctx, i.m.info.Initialize)
	if err != nil {
		return err
	}
	addr, size, err := ioBuffer(i.ctx, mod)
	if err != nil {
		_ = mod.Close(i.ctx)
		return err
	}
	i.mod = mod
	i.classify = mod.ExportedFunction(exportClassify)
	i.batch = mod.ExportedFunction(exportBatch)
	i.tank = mod.ExportedGlobal(fuel.GlobalExport)
	i.mem = mod.Memory()
	i.buf = addr
	i.slots = int(min(MaxBatch, (size-IOHeader)/SlotSize))
	i.refreshView()
	return nil
}

func (i *Instance) refreshView() {
	i.memSize = i.mem.Size()
	i.view, _ = i.mem.Read(0, i.memSize)
}

// Faults returns the packets this instance sent to UNKNOWN, per cause.
func (i *Instance) Faults() FaultCounts { return i.faults }

// BreakerOpen reports whether the instance's circuit breaker is open.
func (i *Instance) BreakerOpen() bool { return i.open }

// Close releases the instance. Safe to call twice.
func (i *Instance) Close(ctx context.Context) error {
	if i.closed {
		return nil
	}
	i.closed = true
	if i.open && i.shared != nil {
		i.shared.breakersOpen.Add(-1)
	}
	var err error
	if i.mod != nil {
		err = i.mod.Close(ctx)
		i.mod = nil
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
	if err := i.classify.CallWithStack(i.ctx, i.stack); err != nil {
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
		n := min(len(payloads), i.slotsOrMax())
		i.classifyChunk(payloads[:n], out[:n])
		payloads, out = payloads[n:], out[n:]
	}
}

func (i *Instance) slotsOrMax() int {
	if i.slots == 0 {
		return MaxBatch
	}
	return i.slots
}

func (i *Instance) classifyChunk(payloads [][]byte, out []uint32) {
	n := len(payloads)
	if !i.ready(n) || n > i.slots {
		clear(out)
		return
	}
	for s, p := range payloads {
		i.writeSlot(s, p)
	}
	i.stack[0] = uint64(n)
	if err := i.batch.CallWithStack(i.ctx, i.stack); err != nil {
		clear(out)
		i.trapped(err, n)
		return
	}
	i.checkMemory()
	if uint32(i.stack[0]) != uint32(n) {
		clear(out)
		i.fault(FaultBadCount, uint64(n))
		return
	}
	res := i.view[i.buf : i.buf+uint32(4*n)]
	bad := 0
	for s := range out {
		t := binary.LittleEndian.Uint32(res[4*s:])
		if t >= i.n {
			t = 0
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

// ready reports whether the guest may be called for n packets: the breaker
// is closed (or its backoff is over) and the instance exists (re-creating
// it after a trap).
func (i *Instance) ready(n int) bool {
	if i.open {
		if i.skip > 0 {
			i.skip -= n
			i.count(FaultBreakerOpen, uint64(n))
			return false
		}
		// Half-open: try one call. consecutive is still at the threshold,
		// so one more fault reopens the breaker with a longer backoff.
	}
	if i.mod == nil {
		if i.closed {
			i.count(FaultTrap, uint64(n))
			return false
		}
		if err := i.start(); err != nil {
			i.fault(FaultTrap, uint64(n))
			return false
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
	slot := i.view[off : off+SlotSize : off+SlotSize]
	caplen := min(len(payload), Prefix)
	// caplen and wirelen, both u32 little-endian, in one store.
	binary.LittleEndian.PutUint64(slot, uint64(caplen)|uint64(uint32(len(payload)))<<32)
	copy(slot[8:], payload[:caplen])
}

// checkMemory refreshes the cached view if the guest grew its memory.
func (i *Instance) checkMemory() {
	if i.mem.Size() != i.memSize {
		i.refreshView()
	}
}

// trapped handles a failed call: classify the trap, drop the instance so
// that the next call re-creates it, count the fault.
func (i *Instance) trapped(err error, n int) {
	kind := FaultTrap
	var exit *sys.ExitError
	if !errors.As(err, &exit) && i.tank != nil && int64(i.tank.Get()) < 0 {
		kind = FaultFuel
	}
	_ = i.mod.Close(i.ctx)
	i.mod, i.classify, i.batch, i.tank, i.mem, i.view = nil, nil, nil, nil, nil, nil
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

// fault records a faulting call and trips the breaker after
// BreakerThreshold consecutive ones.
func (i *Instance) fault(kind FaultKind, n uint64) {
	i.count(kind, n)
	i.consecutive++
	if i.consecutive < i.m.opts.BreakerThreshold {
		return
	}
	if !i.open && i.shared != nil {
		i.shared.breakersOpen.Add(1)
	}
	i.open = true
	i.skip = i.backoff
	i.backoff = min(2*i.backoff, i.m.opts.BreakerMaxBackoff)
}

// success closes the breaker. Called after a call without fault.
func (i *Instance) success() {
	i.consecutive = 0
	if i.open {
		i.open = false
		i.backoff = i.m.opts.BreakerBackoff
		if i.shared != nil {
			i.shared.breakersOpen.Add(-1)
		}
	}
}
