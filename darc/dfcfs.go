package darc

// DFCFS is decentralized first-come first-served: each worker has its own
// FIFO of QueueCapacity requests; arrivals are spread round-robin over the
// workers, whatever their type (a model of NIC receive-side scaling). A worker
// serves only its own queue: there is no stealing. An arrival whose worker
// queue is full is dropped and counted against its type (a type's budget
// still bounds what it holds over all the queues).
type DFCFS struct {
	core
	queues   []fifo
	nonEmpty bitset // workers whose queue holds requests
	next     int    // worker of the next arrival
}

// NewDFCFS returns a d-FCFS policy.
func NewDFCFS(cfg Config) (*DFCFS, error) {
	c, err := newCore(NameDFCFS, cfg)
	if err != nil {
		return nil, err
	}
	capacity := c.cfg.QueueCapacity
	if capacity == 0 { // sized by the pool: the whole of it, up to the default
		capacity = min(c.cfg.Pool, DefaultQueueCapacity)
	}
	for t := range c.lim { // the most a type can have queued
		c.capacity[t] = int(min(int64(c.lim[t].budget), int64(capacity)*int64(c.cfg.Workers)))
	}
	capacities := sameCapacity(c.cfg.Workers, capacity)
	return &DFCFS{
		core:     c,
		queues:   newQueues(queueArena(capacities, c.cfg.Pool), capacities),
		nonEmpty: make(bitset, len(c.idle)),
	}, nil
}

// sameCapacity returns n copies of capacity.
func sameCapacity(n, capacity int) []int {
	cs := make([]int, n)
	for i := range cs {
		cs[i] = capacity
	}
	return cs
}

// Enqueue implements Policy.
func (p *DFCFS) Enqueue(r Request, now int64) Verdict {
	r.Type = p.typeOf(r.Type)
	l := &p.lim[r.Type]
	if !p.admit(l) {
		return p.over(r.Type)
	}
	w := p.next
	if p.next++; p.next == p.cfg.Workers {
		p.next = 0
	}
	if _, ok := p.queues[w].push(entry{req: r, enq: now}); !ok {
		return p.full(r.Type)
	}
	p.nonEmpty.set(w)
	return p.accepted(l, now)
}

// Dispatch implements Policy. A worker's queue mixes types, so a request
// past its deadline behind a fresh head is found when it reaches the head.
func (p *DFCFS) Dispatch(now int64, out []Assignment) int {
	n := 0
	if now >= p.nextExpiry {
		next := noDeadline
		for w := range p.queues {
			q := &p.queues[w]
			if n = p.sweepHead(q, now, out, n, &next); q.n == 0 {
				p.nonEmpty.clear(w)
			}
		}
		p.nextExpiry = next
	}
	for n < len(out) {
		w := firstAnd(p.idle, p.nonEmpty)
		if w < 0 {
			break
		}
		q := &p.queues[w]
		if e := q.pop(); p.expired(&e, now) {
			p.expire(out, n, e)
		} else {
			p.assign(out, n, w, e)
		}
		if q.n == 0 {
			p.nonEmpty.clear(w)
		}
		n++
	}
	return n
}

// Complete implements Policy.
func (p *DFCFS) Complete(worker int, typ Type, service int64, now int64) {
	p.release(worker, typ, service)
}

// Snapshot implements Policy.
func (p *DFCFS) Snapshot(s *Snapshot) { p.snapshot(s, p.name) }
