package dispatcher

import "sync/atomic"

// parker lets one worker sleep until the dispatcher has a request for it.
// The worker announces that it is going to sleep (prepare), checks its ring
// once more and sleeps (sleep) unless something arrived; the dispatcher,
// after pushing a request, wakes it if it announced (wake). Because both
// sides use sequentially consistent atomics (the ring's indexes and the
// state), either the worker sees the request or the dispatcher sees the
// announcement: no wake-up is lost.
//
// On Linux the worker's thread sleeps in futex(2) and the dispatcher wakes
// that thread directly: one kernel wake-up, no Go scheduler in between (a
// goroutine locked to its thread and parked on a channel needs two: the
// runtime first wakes a spare thread, which hands its processor to the
// locked one). Elsewhere it falls back to a channel.
type parker struct {
	state atomic.Uint32 // parkRunning or parkAsleep
	ch    chan struct{} // the fallback's wake-up (non-Linux)
}

const (
	parkRunning uint32 = iota
	parkAsleep
)

func newParker() *parker { return &parker{ch: make(chan struct{}, 1)} }

// prepare announces that the worker is about to sleep.
func (p *parker) prepare() { p.state.Store(parkAsleep) }

// done withdraws the announcement (the worker is running again).
func (p *parker) done() { p.state.Store(parkRunning) }

// sleep blocks until wake is called after prepare (it returns at once when
// that already happened), or spuriously: the caller re-checks its ring.
func (p *parker) sleep() {
	if p.state.Load() == parkAsleep {
		p.block()
	}
}

// wake wakes the worker if it announced that it sleeps; it reports whether
// it did.
func (p *parker) wake() bool {
	if p.state.Load() != parkAsleep || !p.state.CompareAndSwap(parkAsleep, parkRunning) {
		return false
	}
	p.unblock()
	return true
}
