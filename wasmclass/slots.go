package wasmclass

import (
	"context"
	"runtime"
	"sync"
)

// compileSlots bounds the compilations running at once in the process,
// every Module and Host together: a compile child may use
// Options.CompileMemory of address space and a CPU, and tenants pushing
// modules at once must not multiply that. It is the package's one piece of
// state shared across Hosts, by design (SetCompileConcurrency).
var compileSlots = newSlots(defaultCompileConcurrency())

// defaultCompileConcurrency is half the CPUs, at least one.
func defaultCompileConcurrency() int { return max(1, runtime.NumCPU()/2) }

// SetCompileConcurrency sets how many modules the process compiles at
// once, all Hosts together (n <= 0: the default, half the
// CPUs, at least one), and returns the previous setting. Loads past it
// wait for a slot, within their context; the wait does not count against
// Options.CompileTimeout. Safe for concurrent use; compilations already
// running keep their slots.
func SetCompileConcurrency(n int) int {
	if n <= 0 {
		n = defaultCompileConcurrency()
	}
	return compileSlots.resize(n)
}

// slots is a counting semaphore whose size can change and whose waits
// follow a context.
type slots struct {
	mu    sync.Mutex
	limit int
	used  int
	peak  int           // the most used at once (tests)
	wake  chan struct{} // closed when a slot is released or the limit grows
}

func newSlots(n int) *slots { return &slots{limit: n, wake: make(chan struct{})} }

// acquire waits for a slot until ctx is done. release gives it back (call
// it once).
func (s *slots) acquire(ctx context.Context) (release func(), err error) {
	for {
		s.mu.Lock()
		if s.used < s.limit {
			s.used++
			s.peak = max(s.peak, s.used)
			s.mu.Unlock()
			var once sync.Once
			return func() { once.Do(s.release) }, nil
		}
		wake := s.wake
		s.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
			return func() {}, context.Cause(ctx)
		}
	}
}

func (s *slots) release() {
	s.mu.Lock()
	s.used--
	s.broadcast()
	s.mu.Unlock()
}

// broadcast wakes every waiter; s.mu is held.
func (s *slots) broadcast() {
	close(s.wake)
	s.wake = make(chan struct{})
}

func (s *slots) resize(n int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	prev := s.limit
	s.limit = n
	s.broadcast()
	return prev
}

func (s *slots) size() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.limit
}

// stats returns the slots in use and the peak since the last resetPeak.
func (s *slots) stats() (used, peak int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.used, s.peak
}

func (s *slots) resetPeak() {
	s.mu.Lock()
	s.peak = s.used
	s.mu.Unlock()
}
