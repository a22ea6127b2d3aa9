package darc

// CFCFS is centralized first-come first-served: one FIFO across all types, in
// arrival order; the head goes to the lowest idle worker. Unknown requests are
// ordinary requests here.
//
// The central queue holds up to QueueCapacity requests of each type (each
// type's budget with a pool), so flow control is per type as with the other
// policies: a type over its share is dropped while the others are still
// accepted. The queue mixes types, so a request past its deadline behind a
// fresh head is found when it reaches the head.
type CFCFS struct {
	core
	fifo fifo
}

// NewCFCFS returns a c-FCFS policy.
func NewCFCFS(cfg Config) (*CFCFS, error) {
	c, err := newCore(NameCFCFS, cfg)
	if err != nil {
		return nil, err
	}
	a := queueArena(c.capacity, c.cfg.Pool)
	p := &CFCFS{core: c, fifo: newFIFO(a, a.limit)}
	return p, nil
}

// Enqueue implements Policy.
func (p *CFCFS) Enqueue(r Request, now int64) Verdict {
	r.Type = p.typeOf(r.Type)
	l := &p.lim[r.Type]
	if !p.admit(l) {
		return p.over(r.Type)
	}
	if l.queued >= l.capacity {
		return p.full(r.Type)
	}
	p.fifo.push(entry{req: r, enq: now})
	return p.accepted(l, now)
}

// Dispatch implements Policy.
func (p *CFCFS) Dispatch(now int64, out []Assignment) int {
	n := 0
	if now >= p.nextExpiry {
		next := noDeadline
		n = p.sweepHead(&p.fifo, now, out, n, &next)
		p.nextExpiry = next
	}
	for n < len(out) && p.fifo.n > 0 && p.idleCount > 0 {
		if e := p.fifo.pop(); p.expired(&e, now) {
			p.expire(out, n, e)
		} else {
			p.assign(out, n, p.idle.first(), e)
		}
		n++
	}
	return n
}

// Complete implements Policy.
func (p *CFCFS) Complete(worker int, typ Type, service int64, now int64) {
	p.release(worker, typ, service)
}

// Snapshot implements Policy.
func (p *CFCFS) Snapshot(s *Snapshot) { p.snapshot(s, p.name) }
