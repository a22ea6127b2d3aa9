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

	// measurement window [warm, end]
	arrived, completed, dropped uint64
	busyNs                      float64

	tenants *tenantRun // multi-tenant runs only
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
	expectedInFlight := 4 * cfg.Workers
	r.reqs = make([]request, 0, expectedInFlight)
	r.free = make([]int32, 0, expectedInFlight)
	r.advanceArrival()
	return r
}

func (r *run) advanceArrival() {
	t := r.arrivals.Next()
	if t >= r.end {
		t = never
	}
	r.nextArrival = t
}

// arrive creates the request arriving now and returns its handle.
func (r *run) arrive(now int64) int32 {
	typ, svc := r.sampler.Next()
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
		if tr := r.tenants; tr != nil {
			tr.arrived[tr.types.tenant[typ]]++
		}
	}
	r.advanceArrival()
	return h
}

func (r *run) drop(h int32, now int64) {
	if now >= r.warm {
		r.dropped++
		typ := r.reqs[h].typ
		r.rec.Drop(int(typ))
		if tr := r.tenants; tr != nil {
			k := tr.types.tenant[typ]
			tr.dropped[k]++
			tr.rec[k].Drop(int(tr.types.local[typ]))
		}
	}
	r.free = append(r.free, h)
}

// expire drops request h, which waited past its deadline. It counts in the
// window when it arrived in it (it was counted as an arrival then).
func (r *run) expire(h int32) {
	if q := &r.reqs[h]; q.arrival >= r.warm {
		r.dropped++
		r.rec.Expire(int(q.typ))
		if tr := r.tenants; tr != nil {
			k := tr.types.tenant[q.typ]
			tr.dropped[k]++
			tr.rec[k].Expire(int(tr.types.local[q.typ]))
		}
	}
	r.free = append(r.free, h)
}

func (r *run) complete(h int32, now int64) {
	q := &r.reqs[h]
	if q.arrival >= r.warm {
		r.rec.Record(int(q.typ), now-q.arrival, q.service)
		if tr := r.tenants; tr != nil {
			tr.rec[tr.types.tenant[q.typ]].Record(int(tr.types.local[q.typ]), now-q.arrival, q.service)
		}
	}
	if now >= r.warm && now <= r.end {
		r.completed++
		if tr := r.tenants; tr != nil {
			tr.completed[tr.types.tenant[q.typ]]++
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
	if r.tenants != nil {
		p.Tenants = r.tenants.points(c, &p, window)
	}
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
	e.loop()
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
}

func newNonPreemptive(cfg Config, pol darc.Policy) *nonPreemptive {
	e := &nonPreemptive{
		run:      newRun(cfg),
		pol:      pol,
		out:      make([]darc.Assignment, cfg.Workers),
		running:  make([]int32, cfg.Workers),
		darcType: make([]darc.Type, len(cfg.Workload.Types)),
		events:   eventHeap{items: make([]event, 0, cfg.Workers)},
	}
	for i := range e.darcType {
		e.darcType[i] = darc.Type(i + 1)
	}
	return e
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
			e.pol.Complete(int(ev.worker), e.darcType[q.typ], q.service, now)
			e.complete(h, now)
		default:
			now = ta
			h := e.arrive(now)
			if e.pol.Enqueue(darc.Request{Handle: uint64(h), Type: e.darcType[e.reqs[h].typ]}, now) != darc.Accepted {
				e.drop(h, now)
			}
		}
		n := e.pol.Dispatch(now, e.out)
		for _, a := range e.out[:n] {
			h := int32(a.Request.Handle)
			if a.Worker < 0 { // expired (or its tenant removed)
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
