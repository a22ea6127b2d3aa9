package wasmclass

import (
	"sync"
	"sync/atomic"
	"time"
)

// breaker is a module version's circuit breaker, shared by all its
// instances. It counts faulting calls in windows of Options.BreakerWindow
// (successes do not reset the count, so alternating good and bad calls
// cannot keep it closed) and opens at Options.BreakerThreshold: calls are
// then refused for a backoff, after which one instance makes a half-open
// call; a fault reopens it for twice the backoff, a success closes it.
// The backoff is a crash-loop backoff (as Envoy's): it keeps growing from
// one opening to the next, doubling up to Options.BreakerMaxBackoff, and
// goes back to Options.BreakerBackoff only once the breaker has stayed
// closed for Options.BreakerReset; so a module that keeps faulting spends
// ever longer off the hot path, not a fixed probation.
// With Options.Reload it counts only crashes (faults of instances that
// had answered no call yet) and opens at the first.
// Exceeding Options.TimeLimit disables the module for good.
//
// The hot path reads state once per call; a clock is read only on fault
// paths and while the breaker is open.
type breaker struct {
	// state: 0 closed; stateDisabled; otherwise open until that time
	// (nanoseconds since epoch).
	state   atomic.Int64
	probing atomic.Bool // a half-open call is in flight
	epoch   time.Time

	mu          sync.Mutex
	threshold   int
	window      time.Duration
	minBackoff  time.Duration
	maxBackoff  time.Duration
	reset       time.Duration // closed this long, the backoff is back to minBackoff
	reload      bool          // count crashes only, open at the first (Options.Reload)
	backoff     time.Duration // of the next opening
	closedAt    time.Duration // when a half-open call last closed it; 0: never opened
	windowStart time.Duration
	count       int
	trips       atomic.Uint64
}

const stateDisabled = -1

func (b *breaker) init(o Options) {
	b.threshold, b.window = o.BreakerThreshold, o.BreakerWindow
	b.minBackoff, b.maxBackoff, b.backoff = o.BreakerBackoff, o.BreakerMaxBackoff, o.BreakerBackoff
	b.reset = o.BreakerReset
	b.reload = o.Reload
	b.epoch = time.Now()
}

func (b *breaker) now() time.Duration { return time.Since(b.epoch) + 1 }

func (b *breaker) disabled() bool { return b.state.Load() == stateDisabled }

func (b *breaker) isOpen() bool { return b.state.Load() > 0 }

// disable turns the module off for good (a call exceeded the time limit).
func (b *breaker) disable() { b.state.Store(stateDisabled) }

// allow is called when state is not closed. It reports whether the call
// may go ahead and, if not, why; a call allowed with kind FaultBreakerOpen
// is the half-open call.
func (b *breaker) allow() (bool, FaultKind) {
	s := b.state.Load()
	switch {
	case s == 0:
		return true, FaultTrap
	case s == stateDisabled:
		return false, FaultUnavailable
	case time.Duration(s) > b.now() || !b.probing.CompareAndSwap(false, true):
		return false, FaultBreakerOpen
	}
	return true, FaultBreakerOpen
}

// probeDone gives up a half-open call that could not be made.
func (b *breaker) probeDone(probing bool) bool {
	if probing {
		b.probing.Store(false)
	}
	return false
}

// fault records a faulting call (the half-open call if probing); crash
// says that the instance had answered no call yet.
func (b *breaker) fault(probing, crash bool) {
	if b.threshold == 0 || (b.reload && !probing && !crash) {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	if probing {
		b.open(now)
		b.probing.Store(false)
		return
	}
	if now-b.windowStart > b.window {
		b.windowStart, b.count = now, 0
	}
	if b.count++; (b.reload || b.count >= b.threshold) && b.state.Load() == 0 {
		if b.closedAt != 0 && now-b.closedAt >= b.reset {
			b.backoff = b.minBackoff // a clean period since it last closed
		}
		b.open(now)
	}
}

// open opens the breaker for the current backoff and doubles the next
// one (up to the cap).
func (b *breaker) open(now time.Duration) {
	if b.state.Load() == stateDisabled {
		return
	}
	b.state.Store(int64(now + b.backoff))
	b.backoff = min(2*b.backoff, b.maxBackoff)
	b.count = 0
	b.trips.Add(1)
}

// openFor returns how much longer the breaker stays open (0 if closed).
func (b *breaker) openFor() time.Duration {
	s := b.state.Load()
	if s <= 0 {
		return 0
	}
	return max(0, time.Duration(s)-b.now())
}

// succeeded closes the breaker after a good half-open call.
func (b *breaker) succeeded() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.state.Load() != stateDisabled {
		b.state.Store(0)
	}
	// The backoff stays: it resets only after a clean period (fault).
	b.closedAt = b.now()
	b.windowStart, b.count = b.closedAt, 0
	b.probing.Store(false)
}
