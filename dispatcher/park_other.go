//go:build !linux

package dispatcher

import "time"

// block waits on the channel while the state is parkAsleep.
func (p *parker) block() {
	t := time.NewTimer(100 * time.Millisecond)
	defer t.Stop()
	select {
	case <-p.ch:
	case <-t.C:
	}
}

// unblock wakes the goroutine waiting in block, if any.
func (p *parker) unblock() {
	select {
	case p.ch <- struct{}{}:
	default:
	}
}
