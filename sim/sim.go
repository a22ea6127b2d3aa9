package sim

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/persephone-go/psp/darc"
	"github.com/persephone-go/psp/internal/connpick"
	"github.com/persephone-go/psp/report"
	"github.com/persephone-go/psp/workload"
)

const never = math.MaxInt64

// request is one simulated request. Handles are indexes into run.reqs.
type request struct {
	arrival   int64
	service   int64
	remaining int64 // preemptive policies: service time still to run
	seq       int64 // preempt: FIFO order across its two queues
	typ       int32 // workload type index (the true type)
	seen      int32 // type index the classifier gave it (Config.Misclassify)
	trace     int32 // index in Config.Trace (traced runs)

	// Config.Conns: the request's connection, the next request of it
	// (-1: none yet), and, once the request is done, when and how.
	conn, nextOnConn int32
	doneAt           int64
	outcome          outcome
}

// phaseRun is one phase of the arrival process: its own Poisson process and
// mix, whose type indexes map to the run's.
type phaseRun struct {
	start, end int64
	sampler    *workload.Sampler
	arrivals   *workload.Arrivals
	index      []int32 // phase type index -> run type index
}

// run is the state shared by both engines.
type run struct {
	cfg     Config
	rec     *report.Recorder
	tl      *report.TimelineRecorder
	phases  []phaseRun
	phase   int
	misrng  *rand.Rand
	ntypes  int32
	rttNs   int64
	costNs  float64 // dispatcher time per request
	dispEnd float64 // when the dispatcher is next free

	reqs []request
	free []int32

	// nextArrival is when the next request reaches its queue (its arrival
	// plus any wait for the dispatcher); pendingArrival is its arrival.
	nextArrival, pendingArrival int64
	warm, end                   int64
	next                        int // Config.Trace: the next arrival

	// measurement window [warm, end]
	arrived, completed, dropped uint64
	typeArrived, typeCompleted  []uint64
	typeDropped                 []uint64
	busyNs                      float64

	// idle workers and queued requests, for the CPU waste: the time
	// integral of idle workers while a request waits.
	idleW, queuedN int
	lastAcct       int64

	// done, when not nil, cancels the run (RunContext): the loops look at
	// it every stopEvery events and end once it is closed.
	done      <-chan struct{}
	nEvents   uint64
	cancelled bool
	wasteNs   float64

	tenants *tenantRun // multi-tenant runs only

	conns  []connTurns      // Config.Conns: per connection, its requests not yet answered
	picker *connpick.Picker // Config.Conns without a trace: each request's connection
}

func newRun(cfg Config) *run {
	w := &cfg.Workload
	ids := make([]uint32, len(w.Types))
	for i, t := range w.Types {
		ids[i] = t.ID
	}
	n := len(w.Types)
	r := &run{
		cfg:           cfg,
		rec:           report.NewRecorder(w.TypeNames(), ids),
		ntypes:        int32(n),
		rttNs:         int64(cfg.NetworkRTT),
		end:           int64(cfg.Duration),
		typeArrived:   make([]uint64, n),
		typeCompleted: make([]uint64, n),
		typeDropped:   make([]uint64, n),
		idleW:         cfg.Workers,
	}
	if cfg.DispatcherRate > 0 {
		r.costNs = 1e9 / cfg.DispatcherRate
	}
	if cfg.Misclassify > 0 {
		r.misrng = rand.New(rand.NewPCG(cfg.Seed^0x6a09e667f3bcc909, cfg.Seed+7))
	}
	if cfg.Timeline > 0 {
		r.tl = report.NewTimelineRecorder(w.TypeNames(), int64(cfg.Timeline))
	}
	if cfg.Conns > 0 {
		r.conns = newConnTurns(cfg.Conns)
		if len(cfg.Trace) == 0 {
			r.picker, _ = connpick.New(cfg.ConnPick, cfg.Conns) // checked by validate
		}
	}
	if len(cfg.Phases.Phases) == 0 {
		index := make([]int32, n)
		for i := range index {
			index[i] = int32(i)
		}
		r.phases = []phaseRun{{start: 0, end: r.end, sampler: w.NewSampler(cfg.Seed),
			arrivals: workload.NewArrivals(cfg.Rate, cfg.Seed), index: index}}
	} else {
		start := int64(0)
		for i, ph := range cfg.Phases.Phases {
			mix := cfg.Phases.Mix(i)
			seed := cfg.Seed + uint64(i)*0x9e3779b97f4a7c15
			pr := phaseRun{start: start, end: start + int64(ph.Duration), sampler: mix.NewSampler(seed),
				arrivals: workload.NewArrivals(cfg.phaseRate(i), seed)}
			for _, k := range cfg.Phases.Indexes(i) {
				pr.index = append(pr.index, int32(k))
			}
			r.phases = append(r.phases, pr)
			if r.tl != nil {
				r.tl.Phase(start, ph.Name)
			}
			start = pr.end
		}
	}
	r.warm = int64(cfg.Warmup * float64(cfg.Duration))
	for i := range cfg.TraceLatencies {
		cfg.TraceLatencies[i] = -1
	}
	if n := len(cfg.Trace); n > 0 {
		r.warm = 0
		if i := int(cfg.Warmup * float64(n)); i > 0 {
			r.warm = cfg.Trace[min(i, n-1)].At
		}
	}
	expectedInFlight := 4 * cfg.Workers
	r.reqs = make([]request, 0, expectedInFlight)
	r.free = make([]int32, 0, expectedInFlight)
	r.advanceArrival()
	return r
}

// advanceArrival draws the next arrival, moving on to the next phase when
// the current one is over, and the time it reaches its queue.
func (r *run) advanceArrival() {
	if tr := r.cfg.Trace; len(tr) > 0 {
		if r.next >= len(tr) || tr[r.next].At >= r.end {
			r.nextArrival = never
			return
		}
		t := tr[r.next].At
		r.pendingArrival, r.nextArrival = t, t
		if r.costNs > 0 {
			r.dispEnd = max(float64(t), r.dispEnd) + r.costNs
			r.nextArrival = int64(r.dispEnd)
		}
		return
	}
	for r.phase < len(r.phases) {
		ph := &r.phases[r.phase]
		// Compared before adding the phase's start: Next may return
		// math.MaxInt64 (no further arrival), which must not wrap around.
		if next := ph.arrivals.Next(); next < ph.end-ph.start {
			t := ph.start + next
			r.pendingArrival, r.nextArrival = t, t
			if r.costNs > 0 {
				r.dispEnd = max(float64(t), r.dispEnd) + r.costNs
				r.nextArrival = int64(r.dispEnd)
			}
			return
		}
		r.phase++
	}
	r.nextArrival = never
}

// arrive creates the request reaching its queue now and returns its
// handle.
func (r *run) arrive(now int64) int32 {
	var typ, idx, conn int32
	var svc int64
	if tr := r.cfg.Trace; len(tr) > 0 {
		typ, svc, idx, conn = int32(tr[r.next].Type), tr[r.next].ServiceNs, int32(r.next), int32(tr[r.next].Conn)
		r.next++
	} else {
		ph := &r.phases[r.phase]
		var pt int
		pt, svc = ph.sampler.Next()
		typ = ph.index[pt]
	}
	seen := typ
	if r.misrng != nil && r.ntypes > 1 && r.misrng.Float64() < r.cfg.Misclassify {
		seen = int32(r.misrng.IntN(int(r.ntypes) - 1))
		if seen >= typ {
			seen++
		}
	}
	var h int32
	if n := len(r.free); n > 0 {
		h = r.free[n-1]
		r.free = r.free[:n-1]
	} else {
		h = int32(len(r.reqs))
		r.reqs = append(r.reqs, request{})
	}
	a := r.pendingArrival
	r.reqs[h] = request{arrival: a, service: svc, remaining: svc, typ: typ, seen: seen, trace: idx}
	if r.conns != nil {
		if r.picker != nil {
			conn = int32(r.picker.Pick())
		}
		r.onConn(h, conn)
	}
	if a >= r.warm {
		r.arrived++
		r.typeArrived[typ]++
		if tr := r.tenants; tr != nil {
			tr.arrived[tr.types.tenant[typ]]++
		}
	}
	r.advanceArrival()
	return h
}

// drop refuses request h now (its queue is full).
func (r *run) drop(h int32, now int64) { r.finish(h, now, outcomeDropped) }

// expire drops request h now, which waited past its deadline.
func (r *run) expire(h int32, now int64) { r.finish(h, now, outcomeExpired) }

// complete ends request h, served, at now: its worker's completion.
func (r *run) complete(h int32, now int64) {
	if now >= r.warm && now <= r.end {
		q := &r.reqs[h]
		r.completed++
		r.typeCompleted[q.typ]++
		if tr := r.tenants; tr != nil {
			tr.completed[tr.types.tenant[q.typ]]++
		}
	}
	r.finish(h, now, outcomeServed)
}

// finish ends request h at now. Without connections its reply (or its
// drop) is counted at once; with them, when its turn on its connection
// comes (answer).
func (r *run) finish(h int32, now int64, o outcome) {
	if r.conns == nil {
		r.answer(h, now, o)
		return
	}
	q := &r.reqs[h]
	q.doneAt, q.outcome = now, o
	r.answerInOrder(q.conn)
}

// answer counts request h's end: its reply at time at (served), or its
// drop or expiry (counted in the window when it arrived in it, as it was
// counted as an arrival then), and frees it.
func (r *run) answer(h int32, at int64, o outcome) {
	q := &r.reqs[h]
	in := q.arrival >= r.warm
	tr := r.tenants
	switch o {
	case outcomeServed:
		server := at - q.arrival
		if in {
			r.rec.RecordEndToEnd(int(q.typ), server, r.rttNs, q.service)
			if r.cfg.TraceLatencies != nil {
				r.cfg.TraceLatencies[q.trace] = server + r.rttNs
			}
			if tr != nil {
				tr.rec[tr.types.tenant[q.typ]].RecordEndToEnd(int(tr.types.local[q.typ]), server, r.rttNs, q.service)
			}
		}
		if r.tl != nil {
			r.tl.Record(int(q.typ), at, server+r.rttNs, q.service)
		}
	case outcomeDropped, outcomeExpired:
		if in {
			r.dropped++
			r.typeDropped[q.typ]++
			if o == outcomeDropped {
				r.rec.Drop(int(q.typ))
			} else {
				r.rec.Expire(int(q.typ))
			}
			if tr != nil {
				k := tr.types.tenant[q.typ]
				tr.dropped[k]++
				if o == outcomeDropped {
					tr.rec[k].Drop(int(tr.types.local[q.typ]))
				} else {
					tr.rec[k].Expire(int(tr.types.local[q.typ]))
				}
			}
		}
	}
	r.free = append(r.free, h)
}

// busy accounts worker time spent in [from, to] within the window.
func (r *run) busy(from, to int64) {
	from, to = max(from, r.warm), min(to, r.end)
	if to > from {
		r.busyNs += float64(to - from)
	}
}

// account adds the CPU waste since the last event: idle workers while a
// request waited. Engines call it at every event, before changing state.
func (r *run) account(now int64) {
	if r.queuedN > 0 && r.idleW > 0 {
		from, to := max(r.lastAcct, r.warm), min(now, r.end)
		if to > from {
			r.wasteNs += float64(r.idleW) * float64(to-from)
		}
	}
	r.lastAcct = now
}

// point builds the result.
func (r *run) point() report.Point {
	c := &r.cfg
	window := float64(r.end - r.warm)
	name := c.Workload.Name
	if len(c.Phases.Phases) > 0 {
		name = c.Phases.Name
	}
	p := report.Point{
		Source:      c.Source,
		Policy:      c.Policy,
		Workload:    name,
		Workers:     c.Workers,
		Load:        c.Load,
		OfferedRate: c.Rate,
		DurationSec: window / 1e9,
		Seed:        c.Seed,
	}
	if window > 0 {
		p.AchievedRate = float64(r.completed) / window * 1e9
		p.MeanIdleWorkers = float64(c.Workers) - r.busyNs/window
		p.WastedWorkers = r.wasteNs / window
	}
	r.rec.Fill(&p)
	// Requests in the system grew by arrived - dropped - completed over
	// the window; a sustained load keeps that growth negligible, overall
	// and for every type.
	slack := float64(c.Workers)
	growth := float64(r.arrived) - float64(r.dropped) - float64(r.completed)
	p.Sustained = r.dropped == 0 && growth <= max(0.001*float64(r.arrived), slack)
	for i := range p.Types {
		arrived, dropped := float64(r.typeArrived[i]), r.typeDropped[i]
		g := arrived - float64(dropped) - float64(r.typeCompleted[i])
		switch {
		case dropped > 0:
			p.Types[i].NotSustained = fmt.Sprintf("%d dropped (%.2g%% of its arrivals)", dropped, 100*float64(dropped)/max(arrived, 1))
		case g > max(0.001*arrived, 2*slack):
			p.Types[i].NotSustained = fmt.Sprintf("backlog grew by %.0f requests (%.2g%% of its arrivals)", g, 100*g/max(arrived, 1))
		}
		if p.Types[i].NotSustained != "" {
			p.Sustained = false
		}
	}
	if r.tl != nil {
		p.Timeline = r.tl.Finish(r.lastAcct)
	}
	if r.tenants != nil {
		p.Tenants = r.tenants.points(c, &p, window)
	}
	return p
}

// stopEvery is how many events a run simulates between two looks at its
// cancellation: a few milliseconds of work.
const stopEvery = 1 << 16

// stopped reports whether the run was cancelled, looking every stopEvery
// events; the loops return when it is true.
func (r *run) stopped() bool {
	r.nEvents++
	if r.done == nil || r.nEvents%stopEvery != 0 {
		return false
	}
	select {
	case <-r.done:
		r.cancelled = true
		return true
	default:
		return false
	}
}

// Run simulates one configuration and returns its load point.
//
// # Errors
//
// Invalid configurations return errors wrapping ErrInvalidConfig or
// ErrUnknownPolicy; darc's own validation errors are wrapped too.
func Run(cfg Config) (report.Point, error) {
	return RunContext(context.Background(), cfg)
}

// RunContext is Run stopping early, returning ctx's error, when ctx is
// cancelled (within a few milliseconds of simulation).
func RunContext(ctx context.Context, cfg Config) (report.Point, error) {
	if err := ctx.Err(); err != nil {
		return report.Point{}, err
	}
	if err := cfg.Validate(); err != nil {
		return report.Point{}, fmt.Errorf("simulate: %w", err)
	}
	cfg = cfg.withDefaults()
	if isPreemptive(cfg.Policy) {
		e := newPreemptive(cfg)
		e.done = ctx.Done()
		e.loop()
		if e.cancelled {
			return report.Point{}, ctx.Err()
		}
		return e.point(), nil
	}
	dcfg, tt := cfg.darcConfig()
	pol, err := darc.New(cfg.Policy, dcfg)
	if err != nil {
		return report.Point{}, fmt.Errorf("simulate %s: %w", cfg.Policy, err)
	}
	e := newNonPreemptive(cfg, pol)
	if len(cfg.Tenants) > 0 {
		e.tenants = newTenantRun(&cfg, tt)
		e.darcType = tt.darcType
	}
	e.done = ctx.Done()
	e.loop()
	if e.cancelled {
		return report.Point{}, ctx.Err()
	}
	return e.point(), nil
}

// nonPreemptive drives a darc.Policy: the next event is either the next
// arrival or the earliest completion; after each, the policy dispatches.
type nonPreemptive struct {
	*run
	pol      darc.Policy
	out      []darc.Assignment
	running  []int32     // handle per worker
	darcType []darc.Type // workload type index -> the policy's type
	events   eventHeap

	// Serving in place (Config.InPlaceLimit): the limit, each classified
	// type's expected service, and when the dispatcher is done with what
	// it serves in place.
	inPlace  int64
	expect   []darc.ServiceEstimate
	dispBusy int64
	// InPlace counts the requests served in place (in the window or not).
	inPlaceServed uint64

	// timeline: the reservations the policy adopts
	reserving interface{ Reservations() uint64 }
	lastRes   uint64
	snap      darc.Snapshot
	groups    []report.ReservedGroup
}

func newNonPreemptive(cfg Config, pol darc.Policy) *nonPreemptive {
	e := &nonPreemptive{
		run:      newRun(cfg),
		pol:      pol,
		out:      make([]darc.Assignment, cfg.Workers),
		running:  make([]int32, cfg.Workers),
		darcType: make([]darc.Type, len(cfg.Workload.Types)),
		events:   eventHeap{items: make([]event, 0, cfg.Workers)},
		inPlace:  int64(cfg.InPlaceLimit),
		expect:   make([]darc.ServiceEstimate, len(cfg.Workload.Types)),
	}
	for i := range e.darcType {
		e.darcType[i] = darc.Type(i + 1)
	}
	if e.tl != nil {
		e.reserving, _ = pol.(interface{ Reservations() uint64 })
		e.noteReservation(0)
	}
	return e
}

// noteReservation records the policy's reservation on the timeline when it
// changed.
func (e *nonPreemptive) noteReservation(now int64) {
	if e.reserving == nil {
		return
	}
	n := e.reserving.Reservations()
	if n == e.lastRes {
		return
	}
	e.lastRes = n
	e.pol.Snapshot(&e.snap)
	e.groups = e.groups[:0]
	for _, g := range e.snap.Groups {
		rg := report.ReservedGroup{Workers: len(g.Reserved), Spillway: g.Spillway}
		for _, t := range g.Types {
			rg.Types = append(rg.Types, e.snap.Types[t].Name)
		}
		e.groups = append(e.groups, rg)
	}
	e.tl.Reserve(now, e.groups)
}

func (e *nonPreemptive) loop() {
	for !e.stopped() {
		tc := int64(never)
		if e.events.len() > 0 {
			tc = e.events.top().at
		}
		ta := e.nextArrival
		if ta != never {
			ta = max(ta, e.dispBusy) // the dispatcher reads it once free
		}
		var now int64
		switch {
		case tc == never && ta == never:
			return
		case tc <= ta:
			ev := e.events.pop()
			now = max(ev.at, e.dispBusy) // noticed once the dispatcher is free
			e.account(now)
			h := e.running[ev.worker]
			q := &e.reqs[h]
			e.pol.Complete(int(ev.worker), e.darcType[q.seen], q.service, now)
			if e.inPlace > 0 {
				e.expect[q.seen].Add(q.service)
			}
			e.idleW++
			e.complete(h, ev.at)
		default:
			now = ta
			e.account(now)
			h := e.arrive(now)
			if e.pol.Enqueue(darc.Request{Handle: uint64(h), Type: e.darcType[e.reqs[h].seen]}, now) == darc.Accepted {
				e.queuedN++
			} else {
				e.drop(h, now)
			}
		}
		n := e.pol.Dispatch(now, e.out)
		for _, a := range e.out[:n] {
			h := int32(a.Request.Handle)
			if a.Worker < 0 { // expired (or its tenant removed)
				e.expire(h, now)
				e.queuedN--
				continue
			}
			start := now
			if e.inPlace > 0 {
				if x := &e.expect[e.reqs[h].seen]; x.Ready() && x.Ns() <= e.inPlace {
					// Served in place: after what the dispatcher already
					// serves, and holding it until done.
					start = max(now, e.dispBusy)
					e.dispBusy = start + e.reqs[h].service
					e.inPlaceServed++
				}
			}
			done := start + e.reqs[h].service
			e.running[a.Worker] = h
			e.events.push(event{at: done, worker: int32(a.Worker)})
			e.busy(start, done)
			e.idleW--
			e.queuedN--
		}
		if e.tl != nil {
			e.noteReservation(now)
		}
	}
}
