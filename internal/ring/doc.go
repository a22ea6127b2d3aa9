// Package ring provides SPSC, a bounded lock-free ring for exactly one
// producer goroutine and one consumer goroutine: the dispatcher-to-worker and
// worker-to-dispatcher links of the request pipeline.
//
// # Concurrency
//
// Push may be called only by the producer goroutine and Pop only by the
// consumer goroutine; Len and Cap may be called from any goroutine. A ring
// holds no resources beyond memory: there is nothing to close.
//
// # Design
//
// The producer's index and its cached copy of the consumer's index share one
// cache line; the consumer's index and its cached copy of the producer's
// index share another, so each side reads the other's line only when its
// cached copy says the ring looks full (producer) or empty (consumer). The
// indices grow without wrapping the slot array (a 64-bit counter does not
// overflow in practice) and slots are found with a mask, so the capacity is a
// power of two. BenchmarkSPSC in ring_bench_test.go compares this ring with
// github.com/puzpuzpuz/xsync/v4's SPSCQueue on the same operations.
package ring
