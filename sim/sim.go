package sim

import (
	"fmt"
	"math"

	"github.com/persephone-go/psp/darc"
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
	typ       int32 // workload type index
}

// run is the state shared by both engines.
type run struct {
	cfg      Config
	rec      *report.Recorder
	sampler  *workload.Sampler
	arrivals *workload.Arrivals

	reqs []request
	free []int32

	nextArrival int64
	warm, end   int64
	next        int // Config.Trace: the next arrival

	// measurement window [warm, end]
	arrived, completed, dropped uint64
	busyNs                      float64
}

func newRun(cfg Config) *run {
	w := &cfg.Workload
	ids := make([]uint32, len(w.Types))
	for i, t := range w.Types {
		ids[i] = t.ID
	}
	r := &run{
		cfg:      cfg,
		rec:      report.NewRecorder(w.TypeNames(), ids),
		sampler:  w.NewSampler(cfg.Seed),
		arrivals: workload.NewArrivals(cfg.Rate, cfg.Seed),
		end:      int64(cfg.Duration),
	}
	r.warm = int64(cfg.Warmup * float64(cfg.Duration))
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

func (r *run) advanceArrival() {
	var t int64
	switch {
	case len(r.cfg.Trace) == 0:
		t = r.arrivals.Next()
	case r.next < len(r.cfg.Trace):
		t = r.cfg.Trace[r.next].At
	default:
		t = never
	}
	if t >= r.end {
		t = never
	}
	r.nextArrival = t
}

// arrive creates the request arriving now and returns its handle.
func (r *run) arrive(now int64) int32 {
	var typ int
	var svc int64
	if len(r.cfg.Trace) > 0 {
		a := r.cfg.Trace[r.next]
		typ, svc = a.Type, a.ServiceNs
		r.next++
	} else {
		typ, svc = r.sampler.Next()
	}
	var h int32
	if n := len(r.free); n > 0 {
		h = r.free[n-1]
		r.free = r.free[:n-1]
	} else {
		h = int32(len(r.reqs))
		r.reqs = append(r.reqs, request{})
	}
	r.reqs[h] = request{arrival: now, service: svc, remaining: svc, typ: int32(typ)}
	if now >= r.warm {
		r.arrived++
	}
	r.advanceArrival()
	return h
}

func (r *run) drop(h int32, now int64) {
	if now >= r.warm {
		r.dropped++
		r.rec.Drop(int(r.reqs[h].typ))
	}
	r.free = append(r.free, h)
}

// expire drops request h, which waited past its deadline. It counts in the
// window when it arrived in it (it was counted as an arrival then).
func (r *run) expire(h int32) {
	if q := &r.reqs[h]; q.arrival >= r.warm {
		r.dropped++
		r.rec.Expire(int(q.typ))
	}
	r.free = append(r.free, h)
}

func (r *run) complete(h int32, now int64) {
	q := &r.reqs[h]
	if q.arrival >= r.warm {
		r.rec.Record(int(q.typ), now-q.arrival, q.service)
	}
	if now >= r.warm && now <= r.end {
		r.completed++
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

// point builds the result.
func (r *run) point() report.Point {
	c := &r.cfg
	window := float64(r.end - r.warm)
	p := report.Point{
		Source:      c.Source,
		Policy:      c.Policy,
		Workload:    c.Workload.Name,
		Workers:     c.Workers,
		Load:        c.Load,
		OfferedRate: c.Rate,
		DurationSec: window / 1e9,
	}
	if window > 0 {
		p.AchievedRate = float64(r.completed) / window * 1e9
		p.MeanIdleWorkers = float64(c.Workers) - r.busyNs/window
	}
	// Requests in the system grew by arrived - dropped - completed over
	// the window; a sustained load keeps that growth negligible.
	growth := float64(r.arrived) - float64(r.dropped) - float64(r.completed)
	p.Sustained = r.dropped == 0 && growth <= max(0.001*float64(r.arrived), float64(c.Workers))
	r.rec.Fill(&p)
	return p
}

// Run simulates one configuration and returns its load point.
//
// # Errors
//
// Invalid configurations return errors wrapping ErrInvalidConfig or
// ErrUnknownPolicy; darc's own validation errors are wrapped too.
func Run(cfg Config) (report.Point, error) {
	if err := cfg.Validate(); err != nil {
		return report.Point{}, fmt.Errorf("simulate: %w", err)
	}
	cfg = cfg.withDefaults()
	if isPreemptive(cfg.Policy) {
		e := newPreemptive(cfg)
		e.loop()
		return e.point(), nil
	}
	pol, err := darc.New(cfg.Policy, cfg.darcConfig())
	if err != nil {
		return report.Point{}, fmt.Errorf("simulate %s: %w", cfg.Policy, err)
	}
	e := newNonPreemptive(cfg, pol)
	e.loop()
	return e.point(), nil
}

// nonPreemptive drives a darc.Policy: the next event is either the next
// arrival or the earliest completion; after each, the policy dispatches.
type nonPreemptive struct {
	*run
	pol     darc.Policy
	out     []darc.Assignment
	running []int32 // handle per worker
	events  eventHeap
}

func newNonPreemptive(cfg Config, pol darc.Policy) *nonPreemptive {
	return &nonPreemptive{
		run:     newRun(cfg),
		pol:     pol,
		out:     make([]darc.Assignment, cfg.Workers),
		running: make([]int32, cfg.Workers),
		events:  eventHeap{items: make([]event, 0, cfg.Workers)},
	}
}

func (e *nonPreemptive) loop() {
	for {
		tc := int64(never)
		if e.events.len() > 0 {
			tc = e.events.top().at
		}
		ta := e.nextArrival
		var now int64
		switch {
		case tc == never && ta == never:
			return
		case tc <= ta:
			ev := e.events.pop()
			now = ev.at
			h := e.running[ev.worker]
			q := &e.reqs[h]
			e.pol.Complete(int(ev.worker), darc.Type(q.typ+1), q.service, now)
			e.complete(h, now)
		default:
			now = ta
			h := e.arrive(now)
			if e.pol.Enqueue(darc.Request{Handle: uint64(h), Type: darc.Type(e.reqs[h].typ + 1)}, now) != darc.Accepted {
				e.drop(h, now)
			}
		}
		n := e.pol.Dispatch(now, e.out)
		for _, a := range e.out[:n] {
			h := int32(a.Request.Handle)
			if a.Worker == darc.Expired {
				e.expire(h)
				continue
			}
			done := now + e.reqs[h].service
			e.running[a.Worker] = h
			e.events.push(event{at: done, worker: int32(a.Worker)})
			e.busy(now, done)
		}
	}
}
