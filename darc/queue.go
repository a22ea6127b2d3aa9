package darc

import "math/bits"

// entry is a queued request and the time it was enqueued.
type entry struct {
	req Request
	enq int64
}

// ring is a bounded FIFO of entries. Its buffer is a power of two so that
// indexing is a mask; limit is the configured capacity.
type ring struct {
	buf   []entry
	mask  int
	head  int
	n     int
	limit int
}

func newRing(slab []entry, limit int) ring {
	return ring{buf: slab, mask: len(slab) - 1, limit: limit}
}

// pow2 returns the smallest power of two >= n (n >= 1).
func pow2(n int) int {
	if n <= 1 {
		return 1
	}
	return 1 << bits.Len(uint(n-1))
}

func (q *ring) push(e entry) bool {
	if q.n == q.limit {
		return false
	}
	q.buf[(q.head+q.n)&q.mask] = e
	q.n++
	return true
}

// pop removes and returns the head; the ring must not be empty.
func (q *ring) pop() entry {
	e := q.buf[q.head]
	q.head = (q.head + 1) & q.mask
	q.n--
	return e
}

// at returns the i-th oldest entry (0 is the head); i < q.n.
func (q *ring) at(i int) *entry { return &q.buf[(q.head+i)&q.mask] }

// typeRing is a bounded FIFO of type ids: c-FCFS's arrival order over the
// typed queues.
type typeRing struct {
	buf  []Type
	mask int
	head int
	n    int
}

func newTypeRing(capacity int) typeRing {
	size := pow2(capacity)
	return typeRing{buf: make([]Type, size), mask: size - 1}
}

// push appends t; the ring is sized so it never overflows.
func (q *typeRing) push(t Type) {
	q.buf[(q.head+q.n)&q.mask] = t
	q.n++
}

func (q *typeRing) peek() Type { return q.buf[q.head] }

func (q *typeRing) pop() Type {
	t := q.buf[q.head]
	q.head = (q.head + 1) & q.mask
	q.n--
	return t
}

func (q *typeRing) reset() { q.head, q.n = 0, 0 }
