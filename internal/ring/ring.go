package ring

import (
	"math/bits"
	"sync/atomic"
)

// cacheLine is a conservative cache-line size (128 bytes covers adjacent-line
// prefetching on x86 and the 128-byte lines of some arm64 cores).
const cacheLine = 128

// maxCapacity is the largest power of two an int holds.
const maxCapacity = 1 << (bits.UintSize - 2)

// SPSC is a bounded single-producer single-consumer ring of T.
// Create it with New; the zero value is not usable.
type SPSC[T any] struct {
	_ [cacheLine]byte
	// Read-only after New.
	slots []T
	mask  uint64
	_     [cacheLine - 32]byte
	// Producer's line.
	tail       atomic.Uint64 // next slot to write; published with a release store
	cachedHead uint64        // producer's last view of head
	_          [cacheLine - 16]byte
	// Consumer's line.
	head       atomic.Uint64 // next slot to read; published with a release store
	cachedTail uint64        // consumer's last view of tail
	_          [cacheLine - 16]byte
}

// New returns an empty ring holding at least capacity items: capacity is
// rounded up to a power of two. It panics if capacity is not positive or
// cannot be rounded up within an int, like make does for a negative length.
func New[T any](capacity int) *SPSC[T] {
	if capacity <= 0 || capacity > maxCapacity {
		panic("ring: capacity must be positive and at most half the largest int")
	}
	size := uint64(1) << bits.Len64(uint64(capacity-1))
	return &SPSC[T]{slots: make([]T, size), mask: size - 1}
}

// Push appends v and reports whether there was room. Producer only.
func (r *SPSC[T]) Push(v T) bool {
	tail := r.tail.Load() // only this goroutine writes tail
	if tail-r.cachedHead > r.mask {
		r.cachedHead = r.head.Load()
		if tail-r.cachedHead > r.mask {
			return false
		}
	}
	r.slots[tail&r.mask] = v
	r.tail.Store(tail + 1)
	return true
}

// Pop removes and returns the oldest item; ok is false when the ring is
// empty. Consumer only. The slot is cleared so that the ring does not keep
// popped pointers alive.
func (r *SPSC[T]) Pop() (v T, ok bool) {
	head := r.head.Load() // only this goroutine writes head
	if head == r.cachedTail {
		r.cachedTail = r.tail.Load()
		if head == r.cachedTail {
			return v, false
		}
	}
	slot := &r.slots[head&r.mask]
	v = *slot
	var zero T
	*slot = zero
	r.head.Store(head + 1)
	return v, true
}

// Len returns the number of items in the ring. From any goroutine other than
// the producer or consumer it is a snapshot that may already be stale.
func (r *SPSC[T]) Len() int {
	head := r.head.Load()
	tail := r.tail.Load() // read after head, so tail >= head
	n := tail - head
	if n > uint64(len(r.slots)) { // items were popped and pushed between the loads
		n = uint64(len(r.slots))
	}
	return int(n)
}

// Cap returns the ring's capacity.
func (r *SPSC[T]) Cap() int { return len(r.slots) }
