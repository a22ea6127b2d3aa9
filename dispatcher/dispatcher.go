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

// statsPerType: a stats publish reads every type (BenchmarkPublish), and a
// classifier may declare 65,535, during whose publish nothing is
// dispatched, so publishes are at least this long per type apart (65,536
// types: 1.6 s; up to 4,000 types, the stats interval decides), about 1% of
// the dispatcher's time at BenchmarkPublish's cost per type. It counts
// types, not the time a publish took, which the OS preempting the
// dispatcher would stretch at random.
const statsPerType = 25 * time.Microsecond

// statsEvery is how long after a stats publish the next one comes.
func (d *Dispatcher) statsEvery() time.Duration {
	return max(d.spec.StatsInterval, time.Duration(d.numTypes)*statsPerType)
}

// stopGrace is how long Run waits, once the drain is over, for the workers
// to return: idle workers return at once, a worker still in its handler
// after it is abandoned (its request counted as a shutdown drop).
const stopGrace = 100 * time.Millisecond

// shedWindow is the span over which Stats.ShedRate is measured and
// Stats.Overloaded decided; shedSlots is how many stats intervals the ring
// of past totals keeps to cover it.
const (
	shedWindow = time.Second
	shedSlots  = 64
)

// task is what the dispatcher pushes to a worker: the request and when it
// was accepted and dispatched (dataplane clock), for its stage times.
type task struct {
	buf                  *nic.Buffer
	typ                  darc.Type
	accepted, dispatched int64
}

// Outcomes a worker reports in a completion.
const (
	outcomeAnswered   uint8 = iota
	outcomeApp              // the handler refused the request
	outcomeServiceCap       // the handler refused it: over its service cap
	outcomeTxError          // the reply was not transmitted
	outcomePanic            // the handler panicked
	outcomeShutdown         // the worker stopped before running it
)

// completion is what a worker sends back when it finishes a request.
type completion struct {
	typ        darc.Type
	start, end int64 // handler start and end, dataplane clock
	outcome    uint8
}

// worker is one application worker's links.
type worker struct {
	id     int
	cpu    int
	in     *ring.SPSC[task]
	out    *ring.SPSC[completion]
	tx     nic.TxQueue
	parked atomic.Bool
	wake   chan struct{}
	stages *stageRecorder // written by the worker goroutine only
}

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

	// Serving in place (see inplace.go): the limit (<= 0: off), the
	// dispatcher's own TX queue (nil: in place, the chosen worker's; no
	// "overloaded" replies), how it runs requests and records their
	// stages.
	inPlaceLimit  int64
	ownTx         nic.TxQueue
	inPlaceRunner *runner
	inPlaceStages *stageRecorder

	// Everything below belongs to the dispatcher goroutine.
	rx       []*nic.Buffer
	release  []*nic.Buffer // buffers of dropped requests, released per step
	replies  []*nic.Buffer // "overloaded" replies, sent per step
	assign   []darc.Assignment
	table    []*nic.Buffer // request handle -> buffer, while queued in the policy
	tableTyp []darc.Type   // request handle -> type
	free     []uint32      // free handles (a stack)
	counters []typeCounters
	drops    Drops
	received uint64
	answered uint64
	queued   uint64
	busy     int
	draining bool
	replied  uint64
	abandon  int
	parks    uint64 // times the dispatcher parked (see Stats.DispatcherParks)

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
		spec:     spec,
		dp:       dp,
		policy:   tp,
		sched:    tp,
		app:      handler,
		numTypes: numTypes,
		names:    typeNames(spec.TypeNames, snap, numTypes),
		pool:     pool,
		stopCh:   make(chan struct{}),
		rx:       make([]*nic.Buffer, spec.Burst),
		release:  make([]*nic.Buffer, 0, spec.Burst+spec.Workers),
		replies:  make([]*nic.Buffer, 0, spec.Burst+spec.Workers),
		assign:   make([]darc.Assignment, spec.Workers),
		table:    make([]*nic.Buffer, spec.MaxRequests),
		tableTyp: make([]darc.Type, spec.MaxRequests),
		free:     make([]uint32, spec.MaxRequests),
		counters: make([]typeCounters, numTypes),
		shedRing: make([]uint64, shedSlots*(numTypes+1)),
		shedAt:   make([]int64, shedSlots),
		loopDone: make(chan struct{}),
	}
	if shared, ok := tp.(*darc.Shared); ok {
		d.sched = shared.Policy // one interface call less per request
	}
	d.serve, _ = handler.(app.OutcomeHandler)
	d.admit, _ = handler.(app.Admitter)
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
	d.dropQueued()
	d.stopLanes()
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

// enqueue admits b, of global type typ, into the policy's typed queues,
// or drops it counted by reason: the path every classified request takes.
func (d *Dispatcher) enqueue(b *nic.Buffer, typ darc.Type, now int64) {
	c := &d.counters[typ]
	c.received++
	if d.admit != nil {
		if r, ok := d.admitted(typ, b); !ok {
			d.drops.add(r)
			c.drops.add(r)
			d.release = append(d.release, b)
			return
		}
	}
	if len(d.free) == 0 {
		d.shed(b, typ, ReasonOverload)
		return
	}
	h := d.free[len(d.free)-1]
	switch d.sched.Enqueue(darc.Request{Handle: uint64(h), Type: typ}, now) {
	case darc.Accepted:
		d.free = d.free[:len(d.free)-1]
		d.table[h] = b
		d.tableTyp[h] = typ
		d.queued++
		c.queued++
	case darc.OverBudget:
		d.shed(b, typ, ReasonBudget)
	case darc.NoTenant:
		d.drops.add(ReasonRemoved)
		c.drops.add(ReasonRemoved)
		d.release = append(d.release, b)
	default:
		d.shed(b, typ, ReasonQueueFull)
	}
}

// faulted drops b, which its tenant's classifier failed on (the tenant
// fails closed), counted as received and dropped under typ (the tenant's
// UNKNOWN), with an "overloaded" reply where the application gives one.
func (d *Dispatcher) faulted(b *nic.Buffer, typ darc.Type) {
	d.counters[typ].received++
	d.shed(b, typ, ReasonClassifierFault)
}

// admitted asks the application whether to queue b, treating a panic as a
// refusal.
func (d *Dispatcher) admitted(t darc.Type, b *nic.Buffer) (r Reason, ok bool) {
	defer func() {
		if recover() != nil {
			r, ok = ReasonApp, false
		}
	}()
	switch d.admit.Admit(t, b) {
	case app.Answer:
		return 0, true
	case app.RefuseOverCap:
		return ReasonServiceCap, false
	}
	return ReasonApp, false
}

// shed drops request b of type t, which the server chose not to serve,
// counting it for reason r: with an app.OverloadReplier application the
// request gets an "overloaded" reply, else its buffer is released.
func (d *Dispatcher) shed(b *nic.Buffer, t darc.Type, r Reason) {
	d.drops.add(r)
	d.counters[t].drops.add(r)
	if d.replier != nil && d.replyOverloaded(t, b) {
		d.replies = append(d.replies, b)
		d.replied++
		return
	}
	d.release = append(d.release, b)
}

// replyOverloaded asks the application for an "overloaded" reply, treating
// a panic as a refusal.
func (d *Dispatcher) replyOverloaded(t darc.Type, b *nic.Buffer) (ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	return d.replier.ReplyOverloaded(t, b)
}

// flush releases the buffers of dropped requests and sends the
// "overloaded" replies gathered during a step.
func (d *Dispatcher) flush() {
	if len(d.release) > 0 {
		d.dp.Release(d.release...)
		clear(d.release)
		d.release = d.release[:0]
	}
	if len(d.replies) > 0 {
		d.ownTx.Send(d.replies) // returns every buffer to the pool
		clear(d.replies)
		d.replies = d.replies[:0]
	}
}

// completionsPending reports whether a worker's completion ring holds a
// completion.
func (d *Dispatcher) completionsPending() bool {
	for _, w := range d.workers {
		if w.out.Len() > 0 {
			return true
		}
	}
	return false
}

// collect drains every worker's completion ring into the policy.
func (d *Dispatcher) collect(now int64) int {
	n := 0
	for _, w := range d.workers {
		for {
			c, ok := w.out.Pop()
			if !ok {
				break
			}
			n++
			d.complete(w.id, c, now)
		}
	}
	return n
}

// complete gives worker w's completion c to the policy and counts it.
func (d *Dispatcher) complete(w int, c completion, now int64) {
	d.busy--
	service := c.end - c.start
	if service < 0 {
		service = 0
	}
	d.sched.Complete(w, c.typ, service, now)
	tc := &d.counters[c.typ]
	tc.running--
	tc.completed++
	tc.serviceNs += uint64(service)
	if d.inPlaceLimit > 0 && c.outcome != outcomeShutdown {
		tc.expect.Add(service)
	}
	r := ReasonTxError
	switch c.outcome {
	case outcomeAnswered:
		d.answered++
		tc.answered++
		return
	case outcomeApp:
		r = ReasonApp
	case outcomeServiceCap:
		r = ReasonServiceCap
	case outcomePanic:
		r = ReasonPanic
	case outcomeShutdown:
		r = ReasonShutdown
	}
	d.drops.add(r)
	tc.drops.add(r)
}

// dispatch asks the policy for assignments and pushes them to the workers,
// or serves them in place (see inplace.go), asking again while it served
// some in place and the round has time left; requests the policy expired
// are dropped.
func (d *Dispatcher) dispatch(now int64) int {
	total := 0
	round := inPlaceRounds * d.inPlaceLimit // expected service left to serve in place
	for {
		k := d.sched.Dispatch(now, d.assign)
		total += k
		served := 0
		for _, a := range d.assign[:k] {
			h := uint32(a.Request.Handle)
			b := d.table[h]
			d.table[h] = nil
			d.free = append(d.free, h)
			d.queued--
			t := a.Request.Type
			c := &d.counters[t]
			c.queued--
			if a.Worker < 0 {
				r := ReasonExpired
				if a.Worker == darc.Removed {
					r = ReasonRemoved
				}
				d.shed(b, t, r)
				continue
			}
			wait := now - a.Enqueued
			if wait > c.maxWait {
				c.maxWait = wait
			}
			c.dispatched++
			if wait > 0 {
				c.queueingNs += uint64(wait)
			}
			c.running++
			d.busy++
			w := d.workers[a.Worker]
			if d.inPlace(w, c, &round) {
				d.serveInPlace(w, task{buf: b, typ: t, accepted: a.Enqueued, dispatched: d.lastNow})
				served++
				continue
			}
			if !w.in.Push(task{buf: b, typ: t, accepted: a.Enqueued, dispatched: now}) {
				// A policy dispatches to idle workers only, and a worker holds
				// at most one request: a full ring is a policy bug.
				panic(fmt.Sprintf("dispatcher: policy %q dispatched to busy worker %d", d.policy.Name(), a.Worker))
			}
			if w.parked.Load() {
				select {
				case w.wake <- struct{}{}:
				default:
				}
			}
		}
		if served == 0 || d.queued == 0 || round <= 0 {
			break
		}
		now = d.lastNow
	}
	d.flushInPlace()
	if len(d.release)+len(d.replies) > 0 {
		d.flush()
	}
	return total
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

// startWorkers starts one goroutine per worker and waits until each has
// locked (and pinned) its thread.
func (d *Dispatcher) startWorkers(wg *sync.WaitGroup) error {
	ready := make(chan error, len(d.workers))
	for _, w := range d.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d.work(w, ready)
		}()
	}
	var first error
	for range d.workers {
		if err := <-ready; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// stopWorkers tells the workers to finish and waits for them, at most
// stopGrace: a worker still in its handler then is left to finish on its
// own (its request is counted as a shutdown drop by abandonRunning), so a
// handler that never returns cannot hold the shutdown. Requests still in a
// worker's ring are not run: the worker releases them as shutdown drops.
func (d *Dispatcher) stopWorkers(wg *sync.WaitGroup) {
	d.stop.Store(true)
	close(d.stopCh)
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	t := time.NewTimer(stopGrace)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	}
}

// lockThread locks the calling goroutine to its OS thread, for good (the
// thread exits with the goroutine, so no other goroutine inherits its
// affinity or timer slack), when threads are pinned or busy-poll: the
// paper's one-thread-per-core model. Under spin-then-park without pinning
// the goroutines stay unlocked, and park and sleep through the Go
// scheduler rather than in system calls of their own: waking a parked
// locked goroutine hands its processor to its own thread (two thread
// wake-ups instead of one), and the runtime's monitor (sysmon) preempts,
// and takes the processor of, any goroutine it has not seen go through
// the scheduler for 10ms, which for a locked goroutine costs two thread
// switches each time and, with a thread per worker sleeping in futex or
// nanosleep, kept sysmon polling every 20µs (a sixth of a core).
func (d *Dispatcher) lockThread() {
	if len(d.spec.CPUs) == 0 && d.spec.Idle == IdleSpinThenPark {
		return
	}
	runtime.LockOSThread()
	lowerTimerSlack()
}

// work is worker w's goroutine body.
func (d *Dispatcher) work(w *worker, ready chan<- error) {
	d.lockThread()
	if w.cpu >= 0 {
		if err := affinity.Pin(w.cpu); err != nil {
			ready <- fmt.Errorf("dispatcher: pin worker %d to cpu %d: %w", w.id, w.cpu, err)
			return
		}
	}
	ready <- nil

	one := make([]*nic.Buffer, 1)
	run := d.newRunner(w.tx, w.stages, false)
	parking := d.spec.Idle == IdleSpinThenPark
	spin := int64(d.spec.Spin)
	var idleSince int64 = -1
	defer func() { w.stages.publish(d.dp.Now()) }()
	for {
		t, ok := w.in.Pop()
		if !ok {
			if d.stop.Load() {
				if w.in.Len() == 0 {
					return
				}
				continue
			}
			now := d.dp.Now()
			w.stages.maybePublish(now)
			if idleSince < 0 {
				idleSince = now
				continue
			}
			if !parking || now-idleSince < spin {
				continue
			}
			w.stages.publish(now)
			w.parked.Store(true)
			if w.in.Len() == 0 && !d.stop.Load() {
				select {
				case <-w.wake:
				case <-d.stopCh:
				}
			}
			w.parked.Store(false)
			idleSince = -1
			continue
		}
		idleSince = -1
		if d.stop.Load() { // the drain is over: do not start new work
			one[0] = t.buf
			d.dp.Release(one...)
			one[0] = nil
			for !w.out.Push(completion{typ: t.typ, outcome: outcomeShutdown}) {
				runtime.Gosched()
			}
			continue
		}
		c := d.run(run, w.id, w.tx, t)
		for !w.out.Push(c) {
			runtime.Gosched() // cannot happen with one request per worker; be safe
		}
		if d.sleeping.Load() && d.sleeping.CompareAndSwap(true, false) {
			d.waker.WakeRecv()
		}
	}
}

// multiOutcome transmits (or releases) an app.MultiHandler's reply and returns
// the request's outcome.
func multiOutcome(r *reply, answer, panicked bool) uint8 {
	if panicked {
		r.discard()
		return outcomePanic
	}
	served := r.sent > 0 || r.noReply
	if !r.finish(answer) {
		return outcomeTxError
	}
	if !answer && !served {
		return outcomeApp
	}
	return outcomeAnswered
}

// handle runs the application and returns the outcome, turning a panic
// into a dropped request so a bad request or an application bug cannot
// bring the server down.
func (d *Dispatcher) handle(w int, typ darc.Type, b *nic.Buffer) (outcome uint8) {
	defer func() {
		if recover() != nil {
			outcome = outcomePanic
		}
	}()
	if d.serve != nil {
		switch d.serve.Serve(w, typ, b) {
		case app.Answer:
			return outcomeAnswered
		case app.RefuseOverCap:
			return outcomeServiceCap
		default:
			return outcomeApp
		}
	}
	if d.app.Handle(w, typ, b) {
		return outcomeAnswered
	}
	return outcomeApp
}

// handleMulti is handle for an app.MultiHandler.
func (d *Dispatcher) handleMulti(m app.MultiHandler, w int, typ darc.Type, b *nic.Buffer, r *reply) (answer, panicked bool) {
	defer func() {
		if recover() != nil {
			answer, panicked = false, true
		}
	}()
	return m.HandleMulti(w, typ, b, r), false
}

// publish builds a Stats snapshot and makes it visible to Stats.
func (d *Dispatcher) publish(now int64) {
	snap := &d.snapshotBuffer
	d.policy.Snapshot(snap)
	d.inPlaceStages.publish(now)
	s := &Stats{
		InPlaceLimitNs:   d.inPlaceLimit,
		DispatcherSpinNs: d.dispatcherSpin(),
		DispatcherParks:  d.parks,
		At:               now,
		Workers:          len(d.workers),
		Running:          d.ran.Load() && !d.stop.Load(),
		Draining:         d.draining,
		Received:         d.received,
		Answered:         d.answered,
		Drops:            d.drops,
		Dropped:          d.drops.Total(),
		OverloadReplies:  d.replied,
		Queued:           d.queued,
		Busy:             d.busy,
		InFlight:         d.queued + uint64(d.busy) + uint64(d.classifying()),
		Pool:             d.pool,
		Abandoned:        d.abandon,
		Types:            make([]TypeStats, d.numTypes),
		Policy:           cloneSnapshot(snap),
		Dataplane:        d.dp.Stats(),
	}
	if window := float64(now - d.windowStart); window > 0 {
		s.IdleWorkers = d.idleAcc / window
		s.CPUWaste = d.wasteAcc / window
	}
	if run := float64(now - d.runStart); run > 0 && d.runStart != 0 {
		s.CPUWasteTotal = d.wasteTotal / run
	}
	s.IdleWorkerSeconds = d.idleTotal / 1e9
	s.WasteWorkerSeconds = d.wasteTotal / 1e9
	d.idleAcc, d.wasteAcc, d.windowStart = 0, 0, now
	for t := range s.Types {
		c := &d.counters[t]
		if *c == (typeCounters{}) { // never seen: a name, all zeros
			s.Types[t].Type, s.Types[t].Name = darc.Type(t), d.names[t]
			continue
		}
		ts := TypeStats{Type: darc.Type(t), Name: d.names[t], Received: c.received, Answered: c.answered,
			Dropped: c.drops.Total(), Drops: c.drops, Queued: int(c.queued), Running: c.running, MaxWaitNs: c.maxWait,
			Dispatched: c.dispatched, QueueingNsSum: c.queueingNs, Completed: c.completed, ServiceNsSum: c.serviceNs,
			InPlace: c.inPlace, HandOffs: c.handOffs, ExpectedServiceNs: c.expect.Ns()}
		c.maxWait = 0
		s.Types[t] = ts
	}
	d.shedRates(s, now)
	d.tenantStats(s)
	d.retireRemoved()
	d.stats.Store(s)
}

// shedRates fills s's shed rates over the last shedWindow from a ring of
// the shed totals recorded at most every shedWindow/32 (so the ring covers
// the window whatever the stats interval).
func (d *Dispatcher) shedRates(s *Stats, now int64) {
	stride := d.numTypes + 1
	total := func(t int) uint64 { // t = -1: all types
		if t < 0 {
			return s.Drops.Shed()
		}
		return s.Types[t].Drops.Shed()
	}
	// The oldest recorded slot within the window, else the newest before it.
	base := -1
	for i := 1; i <= d.shedCount; i++ {
		j := (d.shedNext - i + shedSlots) % shedSlots
		base = j
		if now-d.shedAt[j] > int64(shedWindow) {
			break
		}
	}
	if base >= 0 {
		if span := float64(now-d.shedAt[base]) / 1e9; span > 0 {
			b := d.shedRing[base*stride : (base+1)*stride]
			s.ShedRate = float64(total(-1)-b[0]) / span
			s.Overloaded = total(-1) > b[0]
			for t := range s.Types {
				if x := total(t) - b[t+1]; x != 0 {
					s.Types[t].ShedRate = float64(x) / span
				}
			}
		}
	}
	last := (d.shedNext - 1 + shedSlots) % shedSlots
	if d.shedCount > 0 && now-d.shedAt[last] < int64(shedWindow)/32 {
		return
	}
	slot := d.shedRing[d.shedNext*stride : (d.shedNext+1)*stride]
	slot[0] = total(-1)
	for t := range s.Types {
		slot[t+1] = total(t)
	}
	d.shedAt[d.shedNext] = now
	d.shedNext = (d.shedNext + 1) % shedSlots
	d.shedCount = min(d.shedCount+1, shedSlots)
}

// cloneSnapshot deep-copies s so the published copy shares nothing with the
// dispatcher's reused buffer.
func cloneSnapshot(s *darc.Snapshot) darc.Snapshot {
	c := *s
	c.Groups = make([]darc.Group, len(s.Groups))
	for i, g := range s.Groups {
		g.Types = append([]darc.Type(nil), g.Types...)
		g.Reserved = append([]int(nil), g.Reserved...)
		g.Stealable = append([]int(nil), g.Stealable...)
		c.Groups[i] = g
	}
	c.Types = append([]darc.TypeState(nil), s.Types...)
	c.Busy = append([]bool(nil), s.Busy...)
	if s.Tenants != nil {
		c.Tenants = make([]darc.TenantState, len(s.Tenants))
		for i, t := range s.Tenants {
			t.Home = append([]int(nil), t.Home...)
			c.Tenants[i] = t
		}
	}
	return c
}
