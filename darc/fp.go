package darc

// FP is non-preemptive fixed priority (shortest job first by type): on every
// dispatch the queue of the shortest known type is drained first, to any idle
// worker (lowest id first), then the next shortest, and so on; Unknown comes
// last and may also use any worker.
//
// Type order comes from Config.Profile when given, then from profiling: after
// every MinSamples completions the types seen in that window are re-sorted by
// their mean service time there; types not seen keep their last mean; types
// never profiled come after all profiled ones, by id.
type FP struct {
	core
	queues []fifo // per type
	order  []Type // known types, shortest first
	mean   []float64
}

// NewFP returns a fixed-priority policy.
func NewFP(cfg Config) (*FP, error) {
	c, err := newCore(NameFP, cfg)
	if err != nil {
		return nil, err
	}
	p := &FP{
		core:   c,
		queues: newQueues(queueArena(c.capacity, c.cfg.Pool), c.capacity),
		order:  make([]Type, 0, c.numTypes-1),
		mean:   make([]float64, c.numTypes),
	}
	for t := 1; t < c.numTypes; t++ {
		p.order = append(p.order, Type(t))
	}
	for _, pr := range c.cfg.Profile {
		p.mean[pr.Type] = pr.MeanNs
	}
	sortByMean(p.order, p.mean)
	return p, nil
}

// sortByMean sorts types by ascending mean, unprofiled (mean 0) last, ties by
// id. Insertion sort: no allocation, and type counts are small.
func sortByMean(order []Type, mean []float64) {
	less := func(a, b Type) bool {
		ma, mb := mean[a], mean[b]
		switch {
		case ma == mb:
			return a < b
		case ma == 0:
			return false
		case mb == 0:
			return true
		}
		return ma < mb
	}
	for i := 1; i < len(order); i++ {
		for j := i; j > 0 && less(order[j], order[j-1]); j-- {
			order[j], order[j-1] = order[j-1], order[j]
		}
	}
}

// Enqueue implements Policy.
func (p *FP) Enqueue(r Request, now int64) Verdict {
	r.Type = p.typeOf(r.Type)
	l := &p.lim[r.Type]
	if !p.admit(l) {
		return p.over(r.Type)
	}
	if _, ok := p.queues[r.Type].push(entry{req: r, enq: now}); !ok {
		return p.full(r.Type)
	}
	return p.accepted(l, now)
}

// Dispatch implements Policy.
func (p *FP) Dispatch(now int64, out []Assignment) int {
	n := 0
	if now >= p.nextExpiry {
		if n = p.sweepQueues(p.queues, now, out); n > 0 && n == len(out) {
			return n
		}
	}
	for _, t := range p.order {
		if p.total == 0 || p.idleCount == 0 {
			return n
		}
		n = p.drain(&p.queues[t], out, n)
	}
	return p.drain(&p.queues[Unknown], out, n)
}

func (p *FP) drain(q *fifo, out []Assignment, n int) int {
	for q.n > 0 && n < len(out) && p.idleCount > 0 {
		p.assign(out, n, p.idle.first(), q.pop())
		n++
	}
	return n
}

// Complete implements Policy.
func (p *FP) Complete(worker int, typ Type, service int64, now int64) {
	p.release(worker, typ, service)
	if p.win.total >= uint64(p.cfg.MinSamples) {
		for t := 1; t < p.numTypes; t++ {
			if p.win.count[t] > 0 {
				p.mean[t] = p.win.mean(t)
			}
		}
		sortByMean(p.order, p.mean)
		p.win.reset()
	}
}

// Snapshot implements Policy.
func (p *FP) Snapshot(s *Snapshot) { p.snapshot(s, p.name) }
