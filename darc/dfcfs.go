package darc

// DFCFS is decentralized first-come first-served: each worker has its own
// FIFO of QueueCapacity requests; arrivals are spread round-robin over the
// workers, whatever their type (a model of NIC receive-side scaling). A worker
// serves only its own queue: there is no stealing. An arrival whose worker
// queue is full is dropped and counted against its type.
type DFCFS struct {
	core
	queues   []ring
	nonEmpty bitset // workers whose queue holds requests
	next     int    // worker of the next arrival
}

// NewDFCFS returns a d-FCFS policy.
func NewDFCFS(cfg Config) (*DFCFS, error) {
	c, err := newCore(NameDFCFS, cfg)
	if err != nil {
		return nil, err
	}
	return &DFCFS{
		core:     c,
		queues:   newQueues(c.cfg.Workers, c.cfg.QueueCapacity),
		nonEmpty: make(bitset, len(c.idle)),
	}, nil
}

// newQueues returns n rings of the given capacity sharing one slab.
func newQueues(n, capacity int) []ring {
	size := pow2(capacity)
	slab := make([]entry, n*size)
	qs := make([]ring, n)
	for i := range qs {
		qs[i] = newRing(slab[i*size:(i+1)*size:(i+1)*size], capacity)
	}
	return qs
}

// Enqueue implements Policy.
func (p *DFCFS) Enqueue(r Request, now int64) bool {
	r.Type = p.typeOf(r.Type)
	w := p.next
	if p.next++; p.next == p.cfg.Workers {
		p.next = 0
	}
	if !p.queues[w].push(entry{req: r, enq: now}) {
		return p.drop(r.Type)
	}
	p.nonEmpty.set(w)
	p.accepted(r.Type)
	return true
}

// Dispatch implements Policy.
func (p *DFCFS) Dispatch(now int64, out []Assignment) int {
	n := 0
	for n < len(out) {
		w := firstAnd(p.idle, p.nonEmpty)
		if w < 0 {
			break
		}
		q := &p.queues[w]
		p.assign(out, n, w, q.pop())
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
