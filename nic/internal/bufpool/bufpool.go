// Package bufpool is the fixed-size packet buffer pool shared by psp's
// software dataplanes (UDP and in-memory).
//
// A Pool preallocates every nic.Buffer and one contiguous backing array for
// their payload room, and keeps the free ones in a lock-free bounded MPMC
// queue (github.com/puzpuzpuz/xsync/v4), so Get and Put are safe from any
// goroutine and allocate nothing. Each buffer carries its pool slot in
// Buffer.Index; Put panics on a buffer that is not from this pool or is
// already free, because both are bugs that would otherwise corrupt packets
// silently. A pool holds only memory: there is nothing to close.
package bufpool

import (
	"runtime"
	"sync/atomic"

	"github.com/persephone-go/psp/nic"
	"github.com/puzpuzpuz/xsync/v4"
)

// getRetries is how many times Get retries a failed dequeue.
const getRetries = 8

// Pool is a fixed set of packet buffers.
type Pool struct {
	bufs    []nic.Buffer
	backing []byte
	size    int
	inPool  []atomic.Bool
	free    *xsync.MPMCQueue[*nic.Buffer]
}

// New returns a pool of n buffers of size bytes each, all free. n and size
// must be positive (callers validate their configuration first).
func New(n, size int) *Pool {
	if n <= 0 || size <= 0 {
		panic("bufpool: n and size must be positive")
	}
	p := &Pool{
		bufs:    make([]nic.Buffer, n),
		backing: make([]byte, n*size),
		size:    size,
		inPool:  make([]atomic.Bool, n),
		free:    xsync.NewMPMCQueue[*nic.Buffer](n),
	}
	for i := range p.bufs {
		b := &p.bufs[i]
		b.Index = int32(i)
		b.Data = p.room(i)
		p.inPool[i].Store(true)
		p.free.TryEnqueue(b)
	}
	return p
}

func (p *Pool) room(i int) []byte {
	return p.backing[i*p.size : (i+1)*p.size : (i+1)*p.size]
}

// Get takes a free buffer, or returns nil when none is free. The buffer's
// Data is its whole room and its other fields are zero, except Index.
func (p *Pool) Get() *nic.Buffer {
	b, ok := p.free.TryDequeue()
	// TryDequeue also fails while a concurrent Put is half-way through the
	// slot it would read, or loses a race with another Get: retry a few
	// times before calling the pool empty.
	for try := 0; !ok && try < getRetries; try++ {
		b, ok = p.free.TryDequeue()
	}
	if !ok {
		return nil
	}
	p.inPool[b.Index].Store(false)
	*b = nic.Buffer{Data: p.room(int(b.Index)), Index: b.Index}
	return b
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
	// The queue has room for every buffer, so TryEnqueue fails only while it
	// races with another Put or with a Get still reading the slot: retry.
	for spins := 0; !p.free.TryEnqueue(b); spins++ {
		if spins%64 == 63 {
			runtime.Gosched()
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
