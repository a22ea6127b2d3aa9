package ring

import (
	"runtime"
	"testing"

	"github.com/puzpuzpuz/xsync/v4"
)

// queue is the common shape of the two SPSC queues compared here.
type queue[T any] interface {
	push(T) bool
	pop() (T, bool)
}

type ours[T any] struct{ r *SPSC[T] }

func (q ours[T]) push(v T) bool    { return q.r.Push(v) }
func (q ours[T]) pop() (T, bool)   { return q.r.Pop() }
func newOurs[T any](c int) ours[T] { return ours[T]{New[T](c)} }

type theirs[T any] struct{ q *xsync.SPSCQueue[T] }

func (q theirs[T]) push(v T) bool      { return q.q.TryEnqueue(v) }
func (q theirs[T]) pop() (T, bool)     { return q.q.TryDequeue() }
func newTheirs[T any](c int) theirs[T] { return theirs[T]{xsync.NewSPSCQueue[T](c)} }

// BenchmarkSPSC compares this package's ring with xsync's SPSCQueue.
//
//   - SameGoroutine: one Push and one Pop per op on one goroutine (the cost of
//     the operations without cross-core traffic).
//   - Throughput: a producer goroutine pushes b.N items, the consumer pops
//     them; ns/op is per item.
//   - PingPong: a request goes one way and the reply comes back on a second
//     ring (the dispatcher-worker round trip); ns/op is per round trip.
//
// The queues are called directly (not through the queue interface) in the
// loops so that both get the same inlining.
func BenchmarkSPSC(b *testing.B) {
	const capacity = 1024
	b.Run("impl=ring/SameGoroutine", func(b *testing.B) {
		r := New[*int](capacity)
		x := 1
		b.ReportAllocs()
		for b.Loop() {
			r.Push(&x)
			r.Pop()
		}
	})
	b.Run("impl=xsync/SameGoroutine", func(b *testing.B) {
		q := xsync.NewSPSCQueue[*int](capacity)
		x := 1
		b.ReportAllocs()
		for b.Loop() {
			q.TryEnqueue(&x)
			q.TryDequeue()
		}
	})
	b.Run("impl=ring/Throughput", func(b *testing.B) { throughput(b, newOurs[uint64](capacity)) })
	b.Run("impl=xsync/Throughput", func(b *testing.B) { throughput(b, newTheirs[uint64](capacity)) })
	b.Run("impl=ring/PingPong", func(b *testing.B) {
		pingPong(b, newOurs[uint64](capacity), newOurs[uint64](capacity))
	})
	b.Run("impl=xsync/PingPong", func(b *testing.B) {
		pingPong(b, newTheirs[uint64](capacity), newTheirs[uint64](capacity))
	})
}

func throughput[Q queue[uint64]](b *testing.B, q Q) {
	if runtime.GOMAXPROCS(0) < 2 {
		b.Skip("needs GOMAXPROCS >= 2")
	}
	b.ReportAllocs()
	n := uint64(b.N)
	done := make(chan uint64)
	b.ResetTimer()
	go func() {
		var sum uint64
		for got, idle := uint64(0), 0; got < n; {
			if v, ok := q.pop(); ok {
				sum += v
				got++
			} else {
				idle = backoff(idle)
			}
		}
		done <- sum
	}()
	for i, idle := uint64(0), 0; i < n; {
		if q.push(i) {
			i++
		} else {
			idle = backoff(idle)
		}
	}
	if sum := <-done; sum != n*(n-1)/2 {
		b.Fatalf("consumer sum %d, want %d", sum, n*(n-1)/2)
	}
}

func pingPong[Q queue[uint64]](b *testing.B, there, back Q) {
	if runtime.GOMAXPROCS(0) < 2 {
		b.Skip("needs GOMAXPROCS >= 2")
	}
	b.ReportAllocs()
	n := uint64(b.N)
	go func() {
		for got, idle := uint64(0), 0; got < n; {
			if v, ok := there.pop(); ok {
				for !back.push(v) {
				}
				got++
			} else {
				idle = backoff(idle)
			}
		}
	}()
	b.ResetTimer()
	for i := uint64(0); i < n; i++ {
		for !there.push(i) {
		}
		for idle := 0; ; {
			if v, ok := back.pop(); ok {
				if v != i {
					b.Fatalf("reply %d, want %d", v, i)
				}
				break
			}
			idle = backoff(idle)
		}
	}
}

// backoff spins, yielding the P every 1024 failed attempts so that a
// descheduled partner goroutine on a busy machine gets to run.
func backoff(idle int) int {
	if idle++; idle%1024 == 0 {
		runtime.Gosched()
	}
	return idle
}
