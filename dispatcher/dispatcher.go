package dispatcher

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/persephone-go/psp/app"
	"github.com/persephone-go/psp/darc"
	"github.com/persephone-go/psp/internal/affinity"
	"github.com/persephone-go/psp/internal/ring"
	"github.com/persephone-go/psp/nic"
)

// What the dispatcher does once it has been idle for Spec.DispatcherSpin
// (or Spec.Spin, if longer) under IdleSpinThenPark. Before that it spins
// for Spec.Spin, then polls, yielding its CPU after each poll that found
// nothing (yieldCPU). When no request waits, only an arrival can create work
// to dispatch: it blocks in Recv, which an arrival ends at once, for at
// most recvWaitIdle (completions, which only update the profile and free
// workers that nobody waits for, are collected when it wakes, before the
// arrival is dispatched). While requests wait in a queue it must also
// notice completions at once (a freed worker can take one): with a
// dataplane whose waiting Recv can be ended from another thread (a
// recvWaker: the UDP dataplane waiting in the kernel), it blocks in Recv
// the same way and the worker that completes a request ends the wait;
// with any other dataplane it polls: non-blocking Recv, then a precise
// nanosleep of pollInterval (Go's timers cannot wait for less than about a
// millisecond).
const (
	pollInterval = 20 * time.Microsecond
	recvWaitIdle = 5 * time.Millisecond
	// yieldEvery: under spin-then-park the dispatcher goroutine, which
	// otherwise never goes through the Go scheduler (it waits in system
	// calls), yields at least this often, so that the runtime's monitor
	// never finds it unscheduled for 10ms (see lockThread).
	yieldEvery = 5 * time.Millisecond
)

// extraBuffers is a dataplane with buffers beyond those it lends to
// requests (nic.BufferPool.RequestBuffers): room for the classifier lanes.
type extraBuffers interface {
	ExtraBuffers() int
}

// recvWaker is a dataplane whose waiting Recv another goroutine can end.
type recvWaker interface {
	// RecvWakeable reports whether WakeRecv works in the dataplane's
	// configuration.
	RecvWakeable() bool
	// WakeRecv ends a waiting Recv at once, or makes the next one return
	// at once.
	WakeRecv()
}

// stopGrace is how long Run waits, once the drain is over, for the workers
// to return: idle workers return at once, a worker still in its handler
// after it is abandoned (its request counted as a shutdown drop).
const stopGrace = 100 * time.Millisecond

// Dispatcher is a running request pipeline; see the package documentation.
type Dispatcher struct {
	spec   Spec
	dp     nic.Dataplane
	policy TenantPolicy
	// sched is the policy the hot path calls (Enqueue, Dispatch,
	// Complete): policy itself, or the one a darc.Shared shares.
	sched    darc.Policy
	app      app.Handler
	serve    app.OutcomeHandler  // app, when it says why it refuses
	admit    app.Admitter        // app, when it refuses some requests at the door
	replier  app.OverloadReplier // app, when it answers shed requests
	numTypes int
	names    []string
	pool     int
	workers  []*worker
	stats    atomic.Pointer[Stats]
	ran      atomic.Bool
	stop     atomic.Bool
	stopCh   chan struct{}
	// waker, when not nil, lets workers end the dispatcher's wait in Recv;
	// sleeping is set while it waits there with requests queued (a
	// completion then matters at once), on a cache line of its own.
	waker    recvWaker
	_        [64]byte
	sleeping atomic.Bool
	// stageTypes is numTypes for readers on other goroutines (Stages):
	// the type space grows as tenants are added.
	stageTypes atomic.Int64
	_          [64]byte

	// The tenants, their lanes and the lifecycle commands the loop
	// applies (a dispatcher built with one classifier has one tenant).
	mt       *tenantRouter
	lifeMu   sync.Mutex // guards started, stopped
	started  bool
	stopped  bool
	loopDone chan struct{}

	// Serving in place (see dispatch.go): the limit (<= 0: off), the
	// dispatcher's own TX queue (nil: in place, the chosen worker's; no
	// "overloaded" replies), how it runs requests and records their
	// stages.
	inPlaceLimit  int64
	ownTx         nic.TxQueue
	inPlaceRunner *runner
	inPlaceStages *stageRecorder
	// inPlaceEnd is when the request served in place last ended, while
	// the dispatcher has done nothing since but pick the next request (0
	// otherwise): the next request served in place starts then, without a
	// clock read of its own. A clock read costs about what the pick does
	// (tens of ns), so the pick is counted in the service time of the
	// requests served in place rather than paid for with a second read.
	inPlaceEnd int64

	// Everything below belongs to the dispatcher goroutine.
	rx      []*nic.Buffer
	release []*nic.Buffer // buffers of dropped requests, released per step
	replies []*nic.Buffer // "overloaded" replies, sent per step
	// followOns are requests chained to one that completed or was dropped
	// (nic.Buffer.Next), to be received; followSpare is its other slice.
	followOns   []*nic.Buffer
	followSpare []*nic.Buffer
	chained     []*nic.Buffer // by worker: the request chained to the one it runs
	// Parked requests (park.go): the application that parks them, the
	// requests in the order they parked, the earliest time limit among
	// them (0: none) and the application's epoch last seen.
	parker    app.Parker
	parked    []parkedRequest
	parkNext  int64
	parkEpoch uint64
	assign    []darc.Assignment
	table     []*nic.Buffer // request handle -> buffer, while queued in the policy
	tableTyp  []darc.Type   // request handle -> type
	free      []uint32      // free handles (a stack)
	counters  []typeCounters
	drops     Drops
	received  uint64
	answered  uint64
	queued    uint64
	busy      int
	draining  bool
	replied   uint64
	abandon   int
	parks     uint64 // times the dispatcher parked (see Stats.DispatcherParks)

	shedRing  []uint64 // per stats interval: shed total, then per type
	shedAt    []int64
	shedNext  int
	shedCount int

	lastNow        int64
	idleAcc        float64 // idle workers x ns, this stats window
	wasteAcc       float64
	windowStart    int64
	wasteTotal     float64 // idle workers x ns while requests waited, whole run
	idleTotal      float64 // idle workers x ns, whole run
	runStart       int64
	snapshotBuffer darc.Snapshot
}

// New builds a dispatcher that receives from dp, classifies, schedules
// with policy and runs app on spec.Workers workers. The policy must have
// been built for spec.Workers workers and dp opened with (at least) as
// many TX queues. A dispatcher serves tenants: with a TenantPolicy they are
// spec.Tenants (more can be added while it runs; cls is not used); with
// any other policy, one default tenant called DefaultTenant, with
// classifier cls, owning every port and the policy's whole type space. New
// validates spec, including that every CPU in spec.CPUs is one this
// process may use.
func New(spec Spec, dp nic.Dataplane, cls app.Classifier, policy darc.Policy, handler app.Handler) (*Dispatcher, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	spec = spec.withDefaults()
	tp, withTenants := policy.(TenantPolicy)
	if dp == nil || (cls == nil && !withTenants) || policy == nil || handler == nil {
		return nil, fmt.Errorf("%w: dataplane, classifier, policy and application are all required", ErrSpec)
	}
	tenants := spec.Tenants
	if !withTenants {
		if len(spec.Tenants) > 0 {
			return nil, fmt.Errorf("%w: Spec.Tenants needs a policy with tenants (darc.Config.Tenants), not %q", ErrSpec, policy.Name())
		}
		shared, err := darc.ShareTenant(policy, DefaultTenant)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrSpec, err)
		}
		tp = shared
		tenants = []TenantSpec{{Name: DefaultTenant, Classifier: cls, Isolation: IsolateInline}}
	}
	if len(spec.CPUs) > 0 {
		if err := affinity.Validate(spec.CPUs); err != nil {
			return nil, fmt.Errorf("dispatcher: cpus %v: %w", spec.CPUs, err)
		}
	}
	var snap darc.Snapshot
	policy.Snapshot(&snap)
	if snap.Workers != spec.Workers {
		return nil, fmt.Errorf("%w: policy %q has %d workers, spec has %d", ErrSpec, policy.Name(), snap.Workers, spec.Workers)
	}
	numTypes := len(snap.Types)
	if numTypes < 1 {
		return nil, fmt.Errorf("%w: policy %q reports no types", ErrSpec, policy.Name())
	}
	pool := snap.Pool
	if bp, ok := dp.(nic.BufferPool); ok && pool > bp.RequestBuffers() {
		return nil, fmt.Errorf("%w: policy %q holds up to %d requests, more than the %d buffers the dataplane can lend (build the policy with darc.Config.Pool = %d)",
			ErrSpec, policy.Name(), pool, bp.RequestBuffers(), bp.RequestBuffers())
	}
	if bp, ok := dp.(nic.BufferPool); ok && withTenants && pool > 0 {
		extra := 0
		if e, ok := dp.(extraBuffers); ok {
			extra = e.ExtraBuffers()
		}
		if lend := bp.RequestBuffers() + extra; pool+spec.LaneBuffers > lend {
			return nil, fmt.Errorf("%w: policy %q holds up to %d requests and the classifier lanes %d, more than the %d buffers the dataplane can lend (build the policy with darc.Config.Pool = %d)",
				ErrSpec, policy.Name(), pool, spec.LaneBuffers, lend, lend-spec.LaneBuffers)
		}
	}
	d := &Dispatcher{
		spec:        spec,
		dp:          dp,
		policy:      tp,
		sched:       tp,
		app:         handler,
		numTypes:    numTypes,
		names:       typeNames(spec.TypeNames, snap, numTypes),
		pool:        pool,
		stopCh:      make(chan struct{}),
		rx:          make([]*nic.Buffer, spec.Burst),
		release:     make([]*nic.Buffer, 0, spec.Burst+spec.Workers),
		replies:     make([]*nic.Buffer, 0, spec.Burst+spec.Workers),
		followOns:   make([]*nic.Buffer, 0, 2*spec.Burst+spec.Workers),
		followSpare: make([]*nic.Buffer, 0, 2*spec.Burst+spec.Workers),
		chained:     make([]*nic.Buffer, spec.Workers),
		assign:      make([]darc.Assignment, spec.Workers),
		table:       make([]*nic.Buffer, spec.MaxRequests),
		tableTyp:    make([]darc.Type, spec.MaxRequests),
		free:        make([]uint32, spec.MaxRequests),
		counters:    make([]typeCounters, numTypes),
		shedRing:    make([]uint64, shedSlots*(numTypes+1)),
		shedAt:      make([]int64, shedSlots),
		loopDone:    make(chan struct{}),
	}
	if shared, ok := tp.(*darc.Shared); ok {
		d.sched = shared.Policy // one interface call less per request
	}
	d.serve, _ = handler.(app.OutcomeHandler)
	d.admit, _ = handler.(app.Admitter)
	d.parker, _ = handler.(app.Parker)
	// The dispatcher's own TX queue, the one after the workers' when the
	// dataplane was opened with it, carries its "overloaded" replies and
	// those of the requests it serves in place.
	d.ownTx = dp.TxQueue(spec.Workers)
	if r, ok := handler.(app.OverloadReplier); ok && d.ownTx != nil {
		d.replier = r
	}
	for i := range d.free {
		d.free[i] = uint32(spec.MaxRequests - 1 - i) // pop order 0, 1, 2, ...
	}
	for w := 0; w < spec.Workers; w++ {
		tx := dp.TxQueue(w)
		if tx == nil {
			return nil, fmt.Errorf("%w: dataplane has no TX queue for worker %d (opened with fewer workers?)", ErrSpec, w)
		}
		d.workers = append(d.workers, &worker{
			id:     w,
			cpu:    spec.workerCPU(w),
			in:     ring.New[task](spec.RingCapacity),
			out:    ring.New[completion](spec.RingCapacity),
			tx:     tx,
			wake:   make(chan struct{}, 1),
			stages: newStageRecorder(numTypes),
		})
	}
	if w, ok := dp.(recvWaker); ok && w.RecvWakeable() && spec.Idle == IdleSpinThenPark {
		d.waker = w
	}
	if spec.Idle == IdleSpinThenPark && spec.InPlaceLimit > 0 {
		d.inPlaceLimit = int64(spec.InPlaceLimit)
	}
	d.inPlaceStages = newStageRecorder(numTypes)
	d.inPlaceRunner = d.newRunner(d.ownTx, d.inPlaceStages, true)
	d.snapshotBuffer = snap
	d.stageTypes.Store(int64(numTypes))
	mt, err := newTenantRouter(d, tp, tenants)
	if err != nil {
		return nil, err
	}
	d.mt = mt
	d.publish(dp.Now())
	return d, nil
}

// typeNames merges the spec's names with the policy's.
func typeNames(spec []string, snap darc.Snapshot, n int) []string {
	names := make([]string, n)
	for i := range names {
		switch {
		case i < len(spec) && spec[i] != "":
			names[i] = spec[i]
		case i < len(snap.Types) && snap.Types[i].Name != "":
			names[i] = snap.Types[i].Name
		case i == 0:
			names[i] = "UNKNOWN"
		default:
			names[i] = fmt.Sprintf("type%d", i)
		}
	}
	return names
}

// Spec returns the dispatcher's spec with defaults applied.
func (d *Dispatcher) Spec() Spec { return d.spec }

// TypeNames returns the type names used in Stats, index = type id.
func (d *Dispatcher) TypeNames() []string { return append([]string(nil), d.names...) }

// Stats returns the latest published snapshot (at most Spec.StatsInterval
// old; final after Run returns). Safe from any goroutine; the caller must not
// modify it.
func (d *Dispatcher) Stats() *Stats { return d.stats.Load() }

// Run runs the pipeline until ctx is cancelled (or the dataplane fails or is
// closed), then shuts down gracefully (see the package documentation). It
// returns nil after a shutdown requested through ctx, the dataplane's error
// otherwise. Run may be called once.
func (d *Dispatcher) Run(ctx context.Context) error {
	if !d.ran.CompareAndSwap(false, true) {
		return ErrRunning
	}
	errc := make(chan error, 1)
	go func() {
		d.lockThread()
		errc <- d.loop(ctx)
	}()
	return <-errc
}

// loop is the dispatcher goroutine's body.
func (d *Dispatcher) loop(ctx context.Context) error {
	if cpu := d.spec.dispatcherCPU(); cpu >= 0 {
		if err := affinity.Pin(cpu); err != nil {
			return fmt.Errorf("dispatcher: pin dispatcher to cpu %d: %w", cpu, err)
		}
	}
	var wg sync.WaitGroup
	defer d.markStopped()
	if err := d.startWorkers(&wg); err != nil {
		d.stopWorkers(&wg)
		return err
	}
	d.lifeMu.Lock()
	d.started = true
	d.startLanes()
	d.lifeMu.Unlock()

	now := d.dp.Now()
	d.runStart, d.lastNow, d.windowStart = now, now, now
	nextStats := now + int64(d.spec.StatsInterval)
	lastWork := now
	var drainDeadline int64
	var runErr error
	done := ctx.Done()
	parking := d.spec.Idle == IdleSpinThenPark
	// Idle, the dispatcher spins for Spec.Spin, then polls yielding its
	// core until Spec.DispatcherSpin, then parks.
	spin := int64(d.spec.Spin)
	poll := max(spin, int64(d.spec.DispatcherSpin))
	yields := parking && len(d.spec.CPUs) == 0
	lastYield := now
	idle := false

	for {
		if !d.draining {
			select {
			case <-done:
				d.draining = true
				drainDeadline = d.dp.Now() + int64(d.spec.DrainTimeout)
			default:
			}
		}
		if len(d.mt.cmds) > 0 {
			d.runCommands()
		}
		var wait time.Duration
		idleFor := d.lastNow - lastWork
		if parking && idleFor > poll && !idle {
			d.parks++
		}
		idle = parking && idleFor > poll
		announced := false
		switch {
		case !idle || d.draining:
		case d.classifying() > 0:
			// Lanes hold packets: keep collecting their verdicts.
		case d.queued == 0:
			wait = recvWaitIdle
		case d.waker != nil:
			// Announce the wait, then look at the completion rings
			// once more: either a worker that completes from now on
			// sees the announcement and wakes us, or we see its
			// completion here and do not wait.
			d.sleeping.Store(true)
			announced = true
			if !d.completionsPending() {
				wait = recvWaitIdle
			}
		}
		worked, err := d.step(wait)
		if announced {
			d.sleeping.Store(false)
		}
		now = d.lastNow
		if err != nil && !d.draining {
			if !errors.Is(err, nic.ErrClosed) {
				runErr = fmt.Errorf("dispatcher: receive: %w", err)
			}
			d.draining = true
			drainDeadline = now + int64(d.spec.DrainTimeout)
		}
		if worked {
			lastWork = now
		}
		if d.draining && ((d.queued == 0 && d.busy == 0 && d.classifying() == 0) || now >= drainDeadline) {
			break
		}
		switch {
		case worked || !parking || idleFor <= spin:
		case !idle:
			yieldCPU() // polling: any other thread ready on this core runs first
		case wait == 0 && !announced:
			preciseSleep(pollInterval)
		}
		if now >= nextStats {
			d.publish(now)
			nextStats = now + int64(d.statsEvery())
		}
		if yields && now-lastYield >= int64(yieldEvery) {
			runtime.Gosched()
			lastYield = now
		}
	}

	d.stopWorkers(&wg)
	now = d.dp.Now()
	d.collect(now)
	d.abandonRunning()
	d.dropParked()
	d.dropQueued()
	d.stopLanes()
	d.dropFollowOns()
	d.publish(now)
	return runErr
}

// dispatcherSpin is how long the dispatcher polls after its last work
// before it parks (-1: never parks).
func (d *Dispatcher) dispatcherSpin() int64 {
	if d.spec.Idle != IdleSpinThenPark {
		return -1
	}
	return max(int64(d.spec.Spin), int64(d.spec.DispatcherSpin), 0)
}

// classifying is the number of packets on tenants' classifier lanes.
func (d *Dispatcher) classifying() int { return d.mt.classifying }

// markStopped ends the lifecycle: later changes fail with ErrStopped.
func (d *Dispatcher) markStopped() {
	d.lifeMu.Lock()
	d.stopped = true
	d.lifeMu.Unlock()
	close(d.loopDone)
}

// step runs one iteration of the loop: receive a burst (unless draining),
// classify and enqueue it, collect completions, dispatch. It reports whether
// anything happened. It allocates nothing.
func (d *Dispatcher) step(wait time.Duration) (bool, error) {
	worked := false
	var err error
	if !d.draining {
		var n int
		n, err = d.dp.Recv(d.rx, wait)
		if n > 0 {
			d.advance(d.dp.Now())
			d.accept(d.rx[:n], d.lastNow)
			worked = true
		}
	}
	now := d.dp.Now()
	d.advance(now)
	if d.mt.classifying > 0 && d.collectLanes(now) > 0 {
		worked = true
	}
	if d.collect(now) > 0 {
		worked = true
	}
	if len(d.parked) > 0 && d.wakeParked(now) > 0 {
		worked = true
	}
	if d.dispatch(now) > 0 {
		worked = true
	}
	return worked, err
}

// advance moves the dispatcher's clock to now, accumulating idle-worker time.
func (d *Dispatcher) advance(now int64) {
	dt := now - d.lastNow
	if dt <= 0 {
		return
	}
	idle := float64(len(d.workers)-d.busy) * float64(dt)
	d.idleAcc += idle
	d.idleTotal += idle
	if d.queued > 0 {
		d.wasteAcc += idle
		d.wasteTotal += idle
	}
	d.lastNow = now
}

// dropQueued drops the requests still queued in the policy after the
// workers stopped (the drain timed out), counting them as shutdown drops
// (with an "overloaded" reply when the application gives one).
func (d *Dispatcher) dropQueued() {
	for h, b := range d.table {
		if b == nil {
			continue
		}
		t := d.tableTyp[h]
		d.table[h] = nil
		d.free = append(d.free, uint32(h))
		d.queued--
		d.counters[t].queued--
		d.shed(b, t, ReasonShutdown)
		if len(d.release)+len(d.replies) >= d.spec.Burst {
			d.flush()
		}
	}
	d.flush()
}

// dropFollowOns drops, as received and shut down, the requests chained to
// those that completed or were dropped during the shutdown.
func (d *Dispatcher) dropFollowOns() {
	for len(d.followOns) > 0 {
		b := d.followOns[len(d.followOns)-1]
		d.followOns[len(d.followOns)-1] = nil
		d.followOns = d.followOns[:len(d.followOns)-1]
		d.received++
		d.counters[darc.Unknown].received++
		d.shed(b, darc.Unknown, ReasonShutdown)
		d.flush() // b's own chain joins followOns
	}
}

// abandonRunning counts the requests still on workers once the drain and
// the stop grace are over as shutdown drops: Run returns without them.
func (d *Dispatcher) abandonRunning() {
	for t := range d.counters {
		c := &d.counters[t]
		if c.running <= 0 {
			continue
		}
		n := c.running
		c.running = 0
		c.drops.Shutdown += uint64(n)
		d.drops.Shutdown += uint64(n)
		d.busy -= n
		d.abandon += n
	}
}
