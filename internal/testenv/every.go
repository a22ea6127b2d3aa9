package testenv

import (
	"testing"
	"time"
)

// Every calls f every interval in a goroutine of its own, a sampler or a
// poller beside the work a test measures, until the stop it returns is
// called; stop returns once f has returned for the last time.
func Every(interval time.Duration, f func()) (stop func()) {
	quit := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-quit:
				return
			case <-time.After(interval):
			}
			f()
		}
	}()
	return func() {
		close(quit)
		<-done
	}
}

// WaitFor polls cond every millisecond until it holds, failing the test
// when it does not within timeout (what says what was awaited).
func WaitFor(tb testing.TB, what string, timeout time.Duration, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// Await returns what ch receives, failing the test when nothing comes
// within timeout (what says what was awaited: "Run to return").
func Await[T any](tb testing.TB, ch <-chan T, timeout time.Duration, what string) T {
	tb.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(timeout):
		tb.Fatalf("timed out waiting for %s", what)
		var zero T
		return zero
	}
}
