package darc

// CFCFS is centralized first-come first-served: one FIFO across all types, in
// arrival order; the head goes to the lowest idle worker. Unknown requests are
// ordinary requests here.
//
// The central queue holds up to QueueCapacity requests of each type, so flow
// control is per type as with the other policies: a type over its share is
// dropped while the others are still accepted.
type CFCFS struct {
	core
	fifo ring
}

// NewCFCFS returns a c-FCFS policy.
func NewCFCFS(cfg Config) (*CFCFS, error) {
	c, err := newCore(NameCFCFS, cfg)
	if err != nil {
		return nil, err
	}
	total := c.cfg.QueueCapacity * c.numTypes
	p := &CFCFS{core: c, fifo: newRing(make([]entry, pow2(total)), total)}
	return p, nil
}

// Enqueue implements Policy.
func (p *CFCFS) Enqueue(r Request, now int64) bool {
	r.Type = p.typeOf(r.Type)
	if p.queued[r.Type] >= p.cfg.QueueCapacity {
		return p.drop(r.Type)
	}
	p.fifo.push(entry{req: r, enq: now})
	p.accepted(r.Type)
	return true
}

// Dispatch implements Policy.
func (p *CFCFS) Dispatch(now int64, out []Assignment) int {
	n := 0
	for n < len(out) && p.fifo.n > 0 && p.idleCount > 0 {
		p.assign(out, n, p.idle.first(), p.fifo.pop())
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
