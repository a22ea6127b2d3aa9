package dispatcher

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/persephone-go/psp/darc"
	"github.com/persephone-go/psp/internal/affinity"
	"github.com/persephone-go/psp/internal/ring"
	"github.com/persephone-go/psp/nic"
)

// What the dispatcher does once it has been idle for Spec.Spin under
// IdleSpinThenPark. When no request waits, only an arrival can create work
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

// recvWaker is a dataplane whose waiting Recv another goroutine can end.
type recvWaker interface {
	// RecvWakeable reports whether WakeRecv works in the dataplane's
	// configuration.
	RecvWakeable() bool
	// WakeRecv ends a waiting Recv at once, or makes the next one return
	// at once.
	WakeRecv()
}

// task is what the dispatcher pushes to a worker: the request and when it
// was accepted and dispatched (dataplane clock), for its stage times.
type task struct {
	buf                  *nic.Buffer
	typ                  darc.Type
	accepted, dispatched int64
}

// Outcomes a worker reports in a completion.
const (
	outcomeAnswered uint8 = iota
	outcomeApp            // the handler refused the request
	outcomeTxError        // the reply was not transmitted
	outcomePanic          // the handler panicked
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
	spec     Spec
	dp       nic.Dataplane
	cls      Classifier
	policy   darc.Policy
	app      Handler
	numTypes int
	names    []string
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
	_        [64]byte

	// Everything below belongs to the dispatcher goroutine.
	rx       []*nic.Buffer
	payloads [][]byte
	ports    []uint16
	types    []darc.Type
	release  []*nic.Buffer
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

	lastNow        int64
	idleAcc        float64 // idle workers x ns, this stats window
	wasteAcc       float64
	windowStart    int64
	wasteTotal     float64 // idle workers x ns while requests waited, whole run
	idleTotal      float64 // idle workers x ns, whole run
	runStart       int64
	snapshotBuffer darc.Snapshot
}

// New builds a dispatcher that receives from dp, classifies with cls,
// schedules with policy and runs app on spec.Workers workers. The policy must
// have been built for spec.Workers workers and dp opened with (at least) as
// many TX queues. New validates spec, including that every CPU in spec.CPUs is
// one this process may use.
func New(spec Spec, dp nic.Dataplane, cls Classifier, policy darc.Policy, app Handler) (*Dispatcher, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	spec = spec.withDefaults()
	if dp == nil || cls == nil || policy == nil || app == nil {
		return nil, fmt.Errorf("%w: dataplane, classifier, policy and application are all required", ErrSpec)
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
	d := &Dispatcher{
		spec:     spec,
		dp:       dp,
		cls:      cls,
		policy:   policy,
		app:      app,
		numTypes: numTypes,
		names:    typeNames(spec.TypeNames, snap, numTypes),
		stopCh:   make(chan struct{}),
		rx:       make([]*nic.Buffer, spec.Burst),
		payloads: make([][]byte, spec.Burst),
		ports:    make([]uint16, spec.Burst),
		types:    make([]darc.Type, spec.Burst),
		release:  make([]*nic.Buffer, 0, spec.Burst),
		assign:   make([]darc.Assignment, spec.Workers),
		table:    make([]*nic.Buffer, spec.MaxRequests),
		tableTyp: make([]darc.Type, spec.MaxRequests),
		free:     make([]uint32, spec.MaxRequests),
		counters: make([]typeCounters, numTypes),
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
	d.snapshotBuffer = snap
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
	if err := d.startWorkers(&wg); err != nil {
		d.stopWorkers(&wg)
		return err
	}

	now := d.dp.Now()
	d.runStart, d.lastNow, d.windowStart = now, now, now
	nextStats := now + int64(d.spec.StatsInterval)
	lastWork := now
	var drainDeadline int64
	var runErr error
	done := ctx.Done()
	parking := d.spec.Idle == IdleSpinThenPark
	spin := int64(d.spec.Spin)
	yields := parking && len(d.spec.CPUs) == 0
	lastYield := now

	for {
		if !d.draining {
			select {
			case <-done:
				d.draining = true
				drainDeadline = d.dp.Now() + int64(d.spec.DrainTimeout)
			default:
			}
		}
		var wait time.Duration
		idle := parking && d.lastNow-lastWork > spin
		announced := false
		switch {
		case !idle || d.draining:
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
		if d.draining && ((d.queued == 0 && d.busy == 0) || now >= drainDeadline) {
			break
		}
		if !worked && idle && wait == 0 && !announced {
			preciseSleep(pollInterval)
		}
		if now >= nextStats {
			d.publish(now)
			nextStats = now + int64(d.spec.StatsInterval)
		}
		if yields && now-lastYield >= int64(yieldEvery) {
			runtime.Gosched()
			lastYield = now
		}
	}

	d.stopWorkers(&wg)
	now = d.dp.Now()
	d.collect(now)
	d.dropQueued()
	d.publish(now)
	return runErr
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

// accept classifies a received burst and enqueues it.
func (d *Dispatcher) accept(bufs []*nic.Buffer, now int64) {
	n := len(bufs)
	for i, b := range bufs {
		d.payloads[i] = b.Payload()
		d.ports[i] = b.DstPort
	}
	d.cls.ClassifyBatch(d.payloads[:n], d.ports[:n], d.types[:n])
	rel := d.release[:0]
	for i, b := range bufs {
		d.payloads[i] = nil
		d.received++
		switch {
		case b.Len < d.spec.MinPayload:
			d.drops.Runt++
			rel = append(rel, b)
			continue
		case b.WireLen > b.Len:
			d.drops.Truncated++
			rel = append(rel, b)
			continue
		}
		t := d.types[i]
		if int(t) >= d.numTypes {
			t = darc.Unknown
		}
		c := &d.counters[t]
		c.received++
		if len(d.free) == 0 {
			d.drops.Overload++
			c.dropped++
			rel = append(rel, b)
			continue
		}
		h := d.free[len(d.free)-1]
		d.free = d.free[:len(d.free)-1]
		d.table[h] = b
		d.tableTyp[h] = t
		if !d.policy.Enqueue(darc.Request{Handle: uint64(h), Type: t}, now) {
			d.table[h] = nil
			d.free = append(d.free, h)
			d.drops.QueueFull++
			c.dropped++
			rel = append(rel, b)
			continue
		}
		d.queued++
		c.queued++
	}
	if len(rel) > 0 {
		d.dp.Release(rel...)
		clear(rel)
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
			d.busy--
			service := c.end - c.start
			if service < 0 {
				service = 0
			}
			d.policy.Complete(w.id, c.typ, service, now)
			tc := &d.counters[c.typ]
			tc.completed++
			tc.serviceNs += uint64(service)
			switch c.outcome {
			case outcomeAnswered:
				d.answered++
				tc.answered++
			case outcomeApp:
				d.drops.App++
				tc.dropped++
			case outcomePanic:
				d.drops.Panic++
				tc.dropped++
			default:
				d.drops.TxError++
				tc.dropped++
			}
		}
	}
	return n
}

// dispatch asks the policy for assignments and pushes them to the workers.
func (d *Dispatcher) dispatch(now int64) int {
	k := d.policy.Dispatch(now, d.assign)
	for _, a := range d.assign[:k] {
		h := uint32(a.Request.Handle)
		b := d.table[h]
		d.table[h] = nil
		d.free = append(d.free, h)
		d.queued--
		tc := &d.counters[d.tableTyp[h]]
		tc.queued--
		tc.dispatched++
		if wait := now - a.Enqueued; wait > 0 {
			tc.queueingNs += uint64(wait)
		}
		d.busy++
		w := d.workers[a.Worker]
		if !w.in.Push(task{buf: b, typ: a.Request.Type, accepted: a.Enqueued, dispatched: now}) {
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
	return k
}

// dropQueued releases the requests still queued in the policy after the
// workers stopped (the drain timed out), counting them as shutdown drops.
func (d *Dispatcher) dropQueued() {
	for h, b := range d.table {
		if b == nil {
			continue
		}
		c := &d.counters[d.tableTyp[h]]
		c.queued--
		c.dropped++
		d.table[h] = nil
		d.free = append(d.free, uint32(h))
		d.drops.Shutdown++
		d.queued--
		d.dp.Release(b)
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

// stopWorkers tells the workers to finish and waits for them. Workers answer
// whatever is in their ring first.
func (d *Dispatcher) stopWorkers(wg *sync.WaitGroup) {
	d.stop.Store(true)
	close(d.stopCh)
	wg.Wait()
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
		st := stamps{received: t.buf.RxTime, accepted: t.accepted, dispatched: t.dispatched}
		st.started = d.dp.Now()
		answer, panicked := d.handle(w.id, t.typ, t.buf)
		st.finished = d.dp.Now()
		outcome := outcomeAnswered
		one[0] = t.buf
		if panicked {
			d.dp.Release(one...)
			outcome = outcomePanic
		} else if answer {
			if n, _ := w.tx.Send(one); n != 1 {
				outcome = outcomeTxError
			} else {
				st.sent = d.dp.Now()
			}
		} else {
			d.dp.Release(one...)
			outcome = outcomeApp
		}
		one[0] = nil
		w.stages.record(int(t.typ), &st)
		for !w.out.Push(completion{typ: t.typ, start: st.started, end: st.finished, outcome: outcome}) {
			runtime.Gosched() // cannot happen with one request per worker; be safe
		}
		if d.sleeping.Load() && d.sleeping.CompareAndSwap(true, false) {
			d.waker.WakeRecv()
		}
	}
}

// handle runs the application, turning a panic into a dropped request so a
// bad request or an application bug cannot bring the server down.
func (d *Dispatcher) handle(w int, typ darc.Type, b *nic.Buffer) (answer, panicked bool) {
	defer func() {
		if recover() != nil {
			answer, panicked = false, true
		}
	}()
	return d.app.Handle(w, typ, b), false
}

// publish builds a Stats snapshot and makes it visible to Stats.
func (d *Dispatcher) publish(now int64) {
	snap := &d.snapshotBuffer
	d.policy.Snapshot(snap)
	s := &Stats{
		At:        now,
		Workers:   len(d.workers),
		Running:   d.ran.Load() && !d.stop.Load(),
		Draining:  d.draining,
		Received:  d.received,
		Answered:  d.answered,
		Drops:     d.drops,
		Dropped:   d.drops.Total(),
		Queued:    d.queued,
		Busy:      d.busy,
		InFlight:  d.queued + uint64(d.busy),
		Types:     make([]TypeStats, d.numTypes),
		Policy:    cloneSnapshot(snap),
		Dataplane: d.dp.Stats(),
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
		c := d.counters[t]
		ts := TypeStats{Type: darc.Type(t), Name: d.names[t], Received: c.received, Answered: c.answered, Dropped: c.dropped,
			Queued: int(c.queued), Dispatched: c.dispatched, QueueingNsSum: c.queueingNs, Completed: c.completed, ServiceNsSum: c.serviceNs}
		s.Types[t] = ts
	}
	d.stats.Store(s)
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
	return c
}
