package sim

// eventHeap is a binary min-heap of worker events ordered by time, then
// worker id (so runs are deterministic). It never shrinks its backing array
// and allocates only when it grows past its capacity.
type eventHeap struct {
	items []event
}

type event struct {
	at      int64
	worker  int32
	version uint32 // preemptive engine: stale when it differs from the worker's
}

func (e event) less(o event) bool {
	return e.at < o.at || (e.at == o.at && e.worker < o.worker)
}

func (h *eventHeap) len() int { return len(h.items) }

func (h *eventHeap) top() event { return h.items[0] }

func (h *eventHeap) push(e event) {
	h.items = append(h.items, e)
	i := len(h.items) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !h.items[i].less(h.items[p]) {
			break
		}
		h.items[i], h.items[p] = h.items[p], h.items[i]
		i = p
	}
}

func (h *eventHeap) pop() event {
	it := h.items
	top := it[0]
	n := len(it) - 1
	it[0] = it[n]
	it = it[:n]
	i := 0
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && it[r].less(it[l]) {
			m = r
		}
		if !it[m].less(it[i]) {
			break
		}
		it[i], it[m] = it[m], it[i]
		i = m
	}
	h.items = it
	return top
}

// fifo is a growable ring buffer of int64 values (request handles or timer
// deadlines). It allocates only when it grows.
type fifo struct {
	buf        []int64
	head, size int
}

func (q *fifo) len() int { return q.size }

func (q *fifo) push(v int64) {
	if q.size == len(q.buf) {
		n := max(16, 2*len(q.buf))
		buf := make([]int64, n)
		for i := 0; i < q.size; i++ {
			buf[i] = q.buf[(q.head+i)%len(q.buf)]
		}
		q.buf, q.head = buf, 0
	}
	q.buf[(q.head+q.size)%len(q.buf)] = v
	q.size++
}

func (q *fifo) peek() int64 { return q.buf[q.head] }

func (q *fifo) pop() int64 {
	v := q.buf[q.head]
	q.head++
	if q.head == len(q.buf) {
		q.head = 0
	}
	q.size--
	return v
}
