// Package bufpool is the fixed-size packet buffer pool shared by psp's
// software dataplanes (UDP and in-memory).
//
// A Pool preallocates every nic.Buffer and one contiguous backing array for
// their payload room, and keeps the free ones on a lock-free stack, so Get
// and Put are safe from any goroutine and allocate nothing. Each buffer
// carries its pool slot in Buffer.Index; Put panics on a buffer that is not
// from this pool or is already free, because both are bugs that would
// otherwise corrupt packets silently. A pool holds only memory: there is
// nothing to close.
//
// # Last in, first out
//
// Get returns the buffer put back last. A server that answers one request
// at a time receives each into the buffer the previous one was answered
// from, still in the CPU's caches and TLB, instead of the buffer that has
// been free longest: with thousands of buffers (megabytes), a queue hands
// out memory no core has touched for thousands of requests, and the first
// pass over the pool touches pages never mapped. BenchmarkReuse measures
// the difference against such a queue (github.com/puzpuzpuz/xsync/v4's
// MPMCQueue, which this pool used before). The price is contention: Get
// and Put swap one word, and BenchmarkGetPutParallel, which does nothing
// else, is slower than with the queue. A lock would be simpler, but a
// thread preempted while holding it would stall every other caller.
package bufpool

import (
	"sync/atomic"

	"github.com/persephone-go/psp/nic"
)

// maxBuffers is the most buffers a pool holds: slots plus one fit in 32
// bits, and Buffer.Index is an int32.
const maxBuffers = 1<<31 - 1

// Pool is a fixed set of packet buffers.
type Pool struct {
	bufs    []nic.Buffer
	backing []byte
	size    int
	inPool  []atomic.Bool
	// The free buffers form a stack linked through next: top's low 32 bits
	// are the top buffer's slot plus one (0: the pool is empty), next[i]
	// the slot under slot i plus one. Top's high 32 bits count the
	// changes, so that a compare-and-swap fails when the stack changed
	// after the top was read, even if the same slot is back on top (the
	// ABA problem; the count would have to wrap in between, 2^32 changes).
	next []atomic.Uint32
	_    [64]byte // top alone on its cache line: the fields above are read by every call
	top  atomic.Uint64
	_    [56]byte
}

// New returns a pool of n buffers of size bytes each, all free. n and size
// must be positive (callers validate their configuration first).
func New(n, size int) *Pool {
	if n <= 0 || size <= 0 || n > maxBuffers {
		panic("bufpool: n and size must be positive, n at most 2^31-1")
	}
	p := &Pool{
		bufs:    make([]nic.Buffer, n),
		backing: make([]byte, n*size),
		size:    size,
		inPool:  make([]atomic.Bool, n),
		next:    make([]atomic.Uint32, n),
	}
	// Slot 0 on top, each slot above the next one.
	for i := range p.bufs {
		b := &p.bufs[i]
		b.Index = int32(i)
		b.Data = p.room(i)
		p.inPool[i].Store(true)
		if i+1 < n {
			p.next[i].Store(uint32(i + 2))
		}
	}
	p.top.Store(1)
	return p
}

func (p *Pool) room(i int) []byte {
	return p.backing[i*p.size : (i+1)*p.size : (i+1)*p.size]
}

// Get takes a free buffer, or returns nil when none is free. The buffer's
// Data is its whole room and its other fields are zero, except Index.
func (p *Pool) Get() *nic.Buffer {
	for {
		top := p.top.Load()
		slot := uint32(top)
		if slot == 0 {
			return nil
		}
		// next[slot-1] may change under us if another goroutine takes
		// the slot and puts it back; the count in top then fails the swap.
		under := p.next[slot-1].Load()
		if p.top.CompareAndSwap(top, changed(top, under)) {
			b := &p.bufs[slot-1]
			p.inPool[slot-1].Store(false)
			*b = nic.Buffer{Data: p.room(int(b.Index)), Index: b.Index}
			return b
		}
	}
}

// changed returns top after a push or pop that leaves onTop (a slot plus
// one, 0 for none) on top.
func changed(top uint64, onTop uint32) uint64 {
	return (top>>32+1)<<32 | uint64(onTop)
}

// Put returns b to the pool. It panics if b is nil, not from this pool, or
// already free.
func (p *Pool) Put(b *nic.Buffer) {
	i := int(b.Index)
	if i < 0 || i >= len(p.bufs) || &p.bufs[i] != b {
		panic("nic: buffer returned to a pool it does not belong to")
	}
	if !p.inPool[i].CompareAndSwap(false, true) {
		panic("nic: buffer returned to its pool twice")
	}
	for {
		top := p.top.Load()
		p.next[i].Store(uint32(top))
		if p.top.CompareAndSwap(top, changed(top, uint32(i+1))) {
			return
		}
	}
}

// Size returns the number of buffers in the pool.
func (p *Pool) Size() int { return len(p.bufs) }

// BufSize returns each buffer's payload room in bytes.
func (p *Pool) BufSize() int { return p.size }

// Free returns the number of free buffers. It scans the pool: use it for
// statistics and tests, not per packet. Under concurrent Get/Put it is a
// snapshot.
func (p *Pool) Free() int {
	n := 0
	for i := range p.inPool {
		if p.inPool[i].Load() {
			n++
		}
	}
	return n
}

// Owns reports whether b is one of the pool's buffers.
func (p *Pool) Owns(b *nic.Buffer) bool {
	i := int(b.Index)
	return i >= 0 && i < len(p.bufs) && &p.bufs[i] == b
}
