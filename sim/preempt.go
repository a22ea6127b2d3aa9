package sim

import (
	"slices"
)

// Worker phases of the preemptive engine.
const (
	phaseIdle uint8 = iota
	phaseRunning
	phaseSwitching // paying a preemption's cost
)

type tsWorker struct {
	handle      int32
	requeue     int32 // shinjuku: the preempted request, queued once the switch is paid
	phase       uint8
	preferShort bool // preempt: take the oldest short request next
	version     uint32
	sliceStart  int64
}

// preemptive runs ts, ts-mq, shinjuku and preempt. Each busy worker has
// one pending event (end of slice or end of a preemption's cost); an
// interrupted slice's event is invalidated by bumping the worker's version.
// Queues hold requests by the type the classifier gave them.
type preemptive struct {
	*run
	policy        string
	quantum, cost int64
	delay         int64
	capacity      int
	workers       []tsWorker
	events        eventHeap
	queues        []fifo    // ts: 1; ts-mq, shinjuku: one per type; preempt: [short, long]
	order         []int     // ts-mq: type indexes, shortest mean first
	short         []bool    // preempt: type index is short
	slo           []float64 // shinjuku: per type, the target its waits are divided by (ns)
	queuedByType  []int
	timers        fifo // preempt: pending preemption deadlines
	seq           int64
	preemptions   uint64
}

func newPreemptive(cfg Config) *preemptive {
	w := &cfg.Workload
	capacity := cfg.Darc.QueueCapacity
	if capacity == 0 {
		capacity = 4096
	}
	e := &preemptive{
		run:          newRun(cfg),
		policy:       cfg.Policy,
		quantum:      int64(cfg.TS.Quantum),
		cost:         int64(cfg.TS.PreemptCost),
		delay:        int64(cfg.TS.PreemptDelay),
		capacity:     capacity,
		workers:      make([]tsWorker, cfg.Workers),
		events:       eventHeap{items: make([]event, 0, cfg.Workers)},
		queuedByType: make([]int, len(w.Types)),
	}
	for i := range e.workers {
		e.workers[i].handle, e.workers[i].requeue = -1, -1
	}
	means := make([]float64, len(w.Types))
	for i, t := range w.Types {
		means[i] = t.Service.MeanNs()
	}
	switch cfg.Policy {
	case PolicyTS:
		e.queues = make([]fifo, 1)
	case PolicyShinjuku:
		e.queues = make([]fifo, len(w.Types))
		e.slo = means
	case PolicyTSMultiQueue:
		e.queues = make([]fifo, len(w.Types))
		for i := range w.Types {
			e.order = append(e.order, i)
		}
		slices.SortStableFunc(e.order, func(a, b int) int {
			switch {
			case means[a] < means[b]:
				return -1
			case means[a] > means[b]:
				return 1
			}
			return 0
		})
	case PolicyPreempt:
		e.queues = make([]fifo, 2)
		delta := cfg.Darc.Delta
		if delta == 0 {
			delta = 0.2
		}
		shortest := slices.Min(means)
		e.short = make([]bool, len(w.Types))
		for i, m := range means {
			e.short[i] = m-shortest < delta*shortest
		}
	}
	return e
}

func (e *preemptive) queueOf(h int32) int {
	switch e.policy {
	case PolicyTSMultiQueue, PolicyShinjuku:
		return int(e.reqs[h].seen)
	case PolicyPreempt:
		if e.short[e.reqs[h].seen] {
			return 0
		}
		return 1
	}
	return 0
}

func (e *preemptive) push(h int32) {
	e.seq++
	e.reqs[h].seq = e.seq
	e.queues[e.queueOf(h)].push(int64(h))
	e.queuedByType[e.reqs[h].seen]++
	e.queuedN++
}

func (e *preemptive) queued() bool {
	for i := range e.queues {
		if e.queues[i].len() > 0 {
			return true
		}
	}
	return false
}

// pop takes the next request to run at now, or -1.
func (e *preemptive) pop(preferShort bool, now int64) int32 {
	q := -1
	switch e.policy {
	case PolicyShinjuku:
		// The queue whose head waited longest for its type's target
		// (Shinjuku's smart_tskq_dequeue); ties to the lowest index.
		best := 0.0
		for t := range e.queues {
			if e.queues[t].len() == 0 {
				continue
			}
			ratio := float64(now-e.reqs[e.queues[t].peek()].arrival) / e.slo[t]
			if q < 0 || ratio > best {
				q, best = t, ratio
			}
		}
	case PolicyTS:
		if e.queues[0].len() > 0 {
			q = 0
		}
	case PolicyTSMultiQueue:
		for _, t := range e.order {
			if e.queues[t].len() > 0 {
				q = t
				break
			}
		}
	case PolicyPreempt:
		s, l := &e.queues[0], &e.queues[1]
		switch {
		case s.len() > 0 && (preferShort || l.len() == 0 || e.reqs[s.peek()].seq < e.reqs[l.peek()].seq):
			q = 0
		case l.len() > 0:
			q = 1
		}
	}
	if q < 0 {
		return -1
	}
	h := int32(e.queues[q].pop())
	e.queuedByType[e.reqs[h].seen]--
	e.queuedN--
	return h
}

func (e *preemptive) schedule(w int, at int64) {
	e.events.push(event{at: at, worker: int32(w), version: e.workers[w].version})
}

// start runs request h on worker w from now for a slice.
func (e *preemptive) start(w int, h int32, now int64) {
	wk := &e.workers[w]
	if wk.phase == phaseIdle {
		e.idleW--
	}
	wk.handle, wk.phase, wk.sliceStart = h, phaseRunning, now
	slice := e.reqs[h].remaining
	if e.policy != PolicyPreempt && slice > e.quantum {
		slice = e.quantum
	}
	e.schedule(w, now+slice)
}

// next gives worker w the next queued request, or makes it idle.
func (e *preemptive) next(w int, now int64) {
	wk := &e.workers[w]
	h := e.pop(wk.preferShort, now)
	wk.preferShort = false
	if h >= 0 {
		e.start(w, h, now)
		return
	}
	if wk.phase != phaseIdle {
		e.idleW++
	}
	wk.handle, wk.phase = -1, phaseIdle
}

// switchOut pays a preemption's cost on worker w, then takes the next request.
func (e *preemptive) switchOut(w int, now int64) {
	e.preemptions++
	if e.cost == 0 {
		e.next(w, now)
		return
	}
	wk := &e.workers[w]
	wk.handle, wk.phase = -1, phaseSwitching
	e.busy(now, now+e.cost)
	e.schedule(w, now+e.cost)
}

// stopSlice ends worker w's running slice at now and returns its handle.
func (e *preemptive) stopSlice(w int, now int64) int32 {
	wk := &e.workers[w]
	h := wk.handle
	e.busy(wk.sliceStart, now)
	e.reqs[h].remaining -= now - wk.sliceStart
	return h
}

func (e *preemptive) onWorkerEvent(w int, now int64) {
	wk := &e.workers[w]
	if wk.phase == phaseSwitching {
		if h := wk.requeue; h >= 0 {
			wk.requeue = -1
			e.push(h)
			e.next(w, now)
			e.dispatchIdle(now)
			return
		}
		e.next(w, now)
		return
	}
	h := e.stopSlice(w, now)
	switch {
	case e.reqs[h].remaining <= 0:
		e.complete(h, now)
		e.next(w, now)
	case e.policy == PolicyShinjuku:
		// Preempted at every quantum; the request is back in its queue
		// once the switch is paid (at once when it is free).
		if e.cost == 0 {
			e.push(h)
			e.switchOut(w, now)
			e.dispatchIdle(now)
		} else {
			e.workers[w].requeue = h
			e.switchOut(w, now)
		}
	case e.queued():
		e.push(h)
		e.switchOut(w, now)
	default:
		e.start(w, h, now) // nobody waits: keep running, no switch
	}
}

// dispatchIdle gives queued requests to idle workers (after a preemption
// under shinjuku, which preempts even when workers are idle).
func (e *preemptive) dispatchIdle(now int64) {
	for w := 0; e.idleW > 0 && e.queuedN > 0 && w < len(e.workers); w++ {
		if e.workers[w].phase == phaseIdle {
			e.start(w, e.pop(false, now), now)
		}
	}
}

func (e *preemptive) onArrival(now int64) {
	h := e.arrive(now)
	if e.idleW > 0 {
		for w := range e.workers {
			if e.workers[w].phase == phaseIdle {
				e.start(w, h, now)
				return
			}
		}
	}
	if e.queuedByType[e.reqs[h].seen] >= e.capacity {
		e.drop(h, now)
		return
	}
	e.push(h)
	if e.policy == PolicyPreempt && e.short[e.reqs[h].seen] {
		e.timers.push(now + e.delay)
	}
}

// onTimer preempts one worker running a long request if a short one waits.
func (e *preemptive) onTimer(now int64) {
	if e.queues[0].len() == 0 {
		return
	}
	victim := -1
	for w := range e.workers {
		wk := &e.workers[w]
		if wk.phase == phaseRunning && !e.short[e.reqs[wk.handle].seen] {
			if victim < 0 || wk.sliceStart > e.workers[victim].sliceStart {
				victim = w // the most recent start loses the least progress
			}
		}
	}
	if victim < 0 {
		return
	}
	h := e.stopSlice(victim, now)
	e.workers[victim].version++ // cancel its slice-end event
	e.workers[victim].preferShort = true
	e.push(h)
	e.switchOut(victim, now)
}

func (e *preemptive) loop() {
	for !e.stopped() {
		// Drop stale events of interrupted slices.
		for e.events.len() > 0 {
			top := e.events.top()
			if top.version == e.workers[top.worker].version {
				break
			}
			e.events.pop()
		}
		tw, tt, ta := int64(never), int64(never), e.nextArrival
		if e.events.len() > 0 {
			tw = e.events.top().at
		}
		if e.timers.len() > 0 {
			tt = e.timers.peek()
		}
		switch {
		case tw == never && tt == never && ta == never:
			return
		case tw <= tt && tw <= ta:
			ev := e.events.pop()
			e.account(ev.at)
			e.onWorkerEvent(int(ev.worker), ev.at)
		case tt <= ta:
			e.timers.pop()
			e.account(tt)
			e.onTimer(tt)
		default:
			e.account(ta)
			e.onArrival(ta)
		}
	}
}
