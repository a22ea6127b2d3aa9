package wasmclass

import (
	"testing"
	"time"
)

// TestBreakerBackoffGrows: a module that keeps faulting, with good calls
// in between that close its breaker each time, stays off the hot path for
// longer and longer (doubling up to the cap), not for a fixed probation;
// the backoff starts over after a clean period.
func TestBreakerBackoffGrows(t *testing.T) {
	const base, maxBackoff, reset = 20 * time.Millisecond, 160 * time.Millisecond, 400 * time.Millisecond
	var b breaker
	b.init(Options{BreakerThreshold: 2, BreakerWindow: time.Hour, BreakerBackoff: base, BreakerMaxBackoff: maxBackoff, BreakerReset: reset})
	trip := func() time.Duration {
		t.Helper()
		b.fault(false, false)
		b.fault(false, false)
		if !b.isOpen() {
			t.Fatal("two faults did not open the breaker")
		}
		return b.openFor()
	}
	// closeAfter waits for the half-open call and makes it succeed.
	closeAfter := func() {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			if ok, kind := b.allow(); ok && kind == FaultBreakerOpen {
				b.succeeded()
				return
			}
			time.Sleep(time.Millisecond)
		}
		t.Fatal("no half-open call allowed")
	}
	want := base
	for i := range 6 {
		got := trip()
		// openFor is read just after opening: within a few ms of the backoff.
		if got > want || got < want-want/4 {
			t.Fatalf("opening %d: open for %v, want %v", i+1, got, want)
		}
		t.Logf("opening %d: open for %v", i+1, got.Round(time.Millisecond))
		closeAfter()
		want = min(2*want, maxBackoff)
	}
	time.Sleep(reset + 50*time.Millisecond) // a clean period
	if got := trip(); got > base || got < base-base/4 {
		t.Fatalf("after %v closed: open for %v, want the base %v again", reset, got, base)
	}
	closeAfter()
	if got := trip(); got > 2*base || got < 2*base-base/2 {
		t.Errorf("next opening: open for %v, want %v", got, 2*base)
	}
}
