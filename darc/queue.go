package darc

import (
	"math"
	"math/bits"
)

// entry is a queued request and the time it was enqueued.
type entry struct {
	req Request
	enq int64
}

// A policy's queues (one per type, or per worker) draw their entries from
// one arena of slots: a queued request takes a slot and gives it back when
// it leaves. The queues together then take memory for the most requests the
// policy can hold at once (its pool), where a buffer per queue sized for
// that queue's own bound took it for every queue at once: 65,535 types each
// allowed 2,048 requests needed 6 GB of queues for a pool of 1 Mi buffers.

// noSlot ends a list of slots.
const noSlot = -1

// eagerSlots is how many slots an arena allocates when it is made (at most
// its limit). It doubles when its queues first hold more, on the goroutine
// running the policy: a copy, once per doubling, while more than 65,536
// requests wait; a pool of 1<<24 would otherwise take 512 MiB of slots at
// once, and queues without a pool (each type's capacity times the types)
// gigabytes.
const eagerSlots = 1 << 16

// slot is one queued entry and its links.
type slot struct {
	e    entry
	next int32 // the next slot of its queue (or of the free list)
	arr  int32 // the next slot in DARC's startup arrival order
}

// arena hands out slots, up to limit.
type arena struct {
	slots []slot
	free  int32 // first free slot, noSlot if none
	fresh int   // slots handed out at least once (slots[fresh:] never were)
	limit int
}

// newArena returns an arena of at most limit slots (<= 0: as many as int32
// indexes).
func newArena(limit int) *arena {
	if limit <= 0 || limit > math.MaxInt32 {
		limit = math.MaxInt32
	}
	return &arena{slots: make([]slot, min(limit, eagerSlots)), free: noSlot, limit: limit}
}

// take returns a free slot's index, or noSlot when limit are in use.
func (a *arena) take() int32 {
	if i := a.free; i != noSlot {
		a.free = a.slots[i].next
		return i
	}
	if a.fresh < len(a.slots) {
		a.fresh++
		return int32(a.fresh - 1)
	}
	return a.grow()
}

// grow is take when every slot allocated so far is in use: it doubles the
// slots, up to limit.
func (a *arena) grow() int32 {
	if a.fresh == a.limit {
		return noSlot
	}
	grown := make([]slot, len(a.slots)+min(len(a.slots), a.limit-len(a.slots)))
	copy(grown, a.slots)
	a.slots = grown
	a.fresh++
	return int32(a.fresh - 1)
}

// give returns slot i to the free list.
func (a *arena) give(i int32) {
	a.slots[i].next = a.free
	a.free = i
}

// pow2 returns the smallest power of two >= n (n >= 1).
func pow2(n int) int {
	if n <= 1 {
		return 1
	}
	return 1 << bits.Len(uint(n-1))
}

// fifo is a bounded FIFO of entries kept in an arena's slots; limit is its
// configured capacity.
type fifo struct {
	a          *arena
	head, tail int32
	n, limit   int
}

func newFIFO(a *arena, limit int) fifo {
	return fifo{a: a, head: noSlot, tail: noSlot, limit: limit}
}

// push appends e and returns its slot; ok is false, and nothing is queued,
// when the queue holds its limit or the arena has no slot left.
func (q *fifo) push(e entry) (i int32, ok bool) {
	if q.n >= q.limit {
		return noSlot, false
	}
	if i = q.a.take(); i == noSlot {
		return noSlot, false
	}
	s := &q.a.slots[i]
	s.e, s.next = e, noSlot
	if q.n == 0 {
		q.head = i
	} else {
		q.a.slots[q.tail].next = i
	}
	q.tail = i
	q.n++
	return i, true
}

// pop removes and returns the head; the queue must not be empty.
func (q *fifo) pop() entry {
	i := q.head
	s := &q.a.slots[i]
	e := s.e
	q.head = s.next
	q.n--
	if q.n == 0 {
		q.head, q.tail = noSlot, noSlot
	}
	q.a.give(i)
	return e
}

// at returns the i-th oldest entry (0 is the head); i < q.n. It walks i
// links: callers look at the first two.
func (q *fifo) at(i int) *entry {
	s := &q.a.slots[q.head]
	for ; i > 0; i-- {
		s = &q.a.slots[s.next]
	}
	return &s.e
}

// arrivalOrder is DARC's startup order over its typed queues: a list
// through the slots of the queued known-type requests, oldest first. Each
// pop of a known type's head in startup pops this list's head too (that
// request is the oldest).
type arrivalOrder struct {
	a          *arena
	head, tail int32
	n          int
}

func newArrivalOrder(a *arena) arrivalOrder {
	return arrivalOrder{a: a, head: noSlot, tail: noSlot}
}

// push appends the request in slot i (just pushed on its queue).
func (o *arrivalOrder) push(i int32) {
	o.a.slots[i].arr = noSlot
	if o.n == 0 {
		o.head = i
	} else {
		o.a.slots[o.tail].arr = i
	}
	o.tail = i
	o.n++
}

// peek returns the type of the oldest request; the order must not be empty.
func (o *arrivalOrder) peek() Type { return o.a.slots[o.head].e.req.Type }

// pop removes the oldest request from the order, before its queue's pop
// frees its slot.
func (o *arrivalOrder) pop() Type {
	s := &o.a.slots[o.head]
	o.head = s.arr
	if o.n--; o.n == 0 {
		o.head, o.tail = noSlot, noSlot
	}
	return s.e.req.Type
}

func (o *arrivalOrder) reset() { o.head, o.tail, o.n = noSlot, noSlot, 0 }

// queueArena returns an arena for queues of the given capacities: room for
// all of them full at once, or for the pool when that is less (a policy
// holds at most its pool).
func queueArena(capacities []int, pool int) *arena {
	total := 0
	for _, c := range capacities {
		if total += c; total >= math.MaxInt32 {
			break
		}
	}
	if pool > 0 {
		total = min(total, pool)
	}
	return newArena(max(total, 1))
}

// newQueues returns a queue for each capacity, kept in a.
func newQueues(a *arena, capacities []int) []fifo {
	qs := make([]fifo, len(capacities))
	for i, c := range capacities {
		qs[i] = newFIFO(a, c)
	}
	return qs
}
