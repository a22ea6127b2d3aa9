package wasmclass

import (
	"testing"
	"time"
)

func TestHostileLoopRunsOutOfFuel(t *testing.T) {
	m := load(t, "loop", Options{})
	i := instance(t, m)
	start := time.Now()
	if got := i.Classify([]byte("x")); got != 0 {
		t.Errorf("Classify = %d, want 0", got)
	}
	out := make([]uint32, 10)
	i.ClassifyBatch(payloads(10, 2), out)
	t.Logf("two calls of an infinite loop took %v; faults %+v", time.Since(start), i.Faults())
	if f := i.Faults(); f.Fuel != 11 || f.Trap != 0 {
		t.Errorf("faults = %+v, want 11 fuel", f)
	}
	for k, v := range out {
		if v != 0 {
			t.Errorf("out[%d] = %d, want 0", k, v)
		}
	}
}

func TestHostileRecursion(t *testing.T) {
	m := load(t, "recurse", Options{})
	i := instance(t, m)
	start := time.Now()
	if got := i.Classify([]byte("x")); got != 0 {
		t.Errorf("Classify = %d, want 0", got)
	}
	t.Logf("runaway recursion took %v; faults %+v", time.Since(start), i.Faults())
	if f := i.Faults(); f.Fuel+f.Trap != 1 {
		t.Errorf("faults = %+v, want one fuel or trap fault", f)
	}
}

func TestTrapBreaker(t *testing.T) {
	m := load(t, "trap", Options{BreakerThreshold: 3, BreakerBackoff: 10, BreakerMaxBackoff: 20})
	i := instance(t, m)
	// Three trapping calls open the breaker.
	for k := 0; k < 3; k++ {
		if got := i.Classify([]byte("x")); got != 0 {
			t.Fatalf("Classify = %d, want 0", got)
		}
	}
	if !i.BreakerOpen() {
		t.Fatal("breaker closed after 3 traps")
	}
	if f := i.Faults(); f.Trap != 3 || f.Restarts != 2 {
		t.Errorf("faults = %+v, want 3 traps, 2 restarts", f)
	}
	// 10 packets skipped without calling the guest, then one retry that
	// traps again and doubles the backoff.
	out := make([]uint32, 10)
	i.ClassifyBatch(payloads(10, 2), out)
	if f := i.Faults(); f.BreakerOpen != 10 || f.Trap != 3 {
		t.Errorf("after backoff: faults = %+v, want 10 skipped, 3 traps", f)
	}
	i.Classify([]byte("x")) // half-open retry
	if f := i.Faults(); f.Trap != 4 || !i.BreakerOpen() {
		t.Errorf("after retry: faults = %+v open=%v, want 4 traps and an open breaker", f, i.BreakerOpen())
	}
	out = make([]uint32, 20)
	i.ClassifyBatch(payloads(20, 2), out)
	if f := i.Faults(); f.BreakerOpen != 30 {
		t.Errorf("doubled backoff: faults = %+v, want 30 skipped", f)
	}
}

func TestBreakerCloses(t *testing.T) {
	// A good call after the backoff closes the breaker. The fault is
	// injected directly: no fixture faults once and then recovers.
	m := load(t, "good", Options{BreakerThreshold: 1, BreakerBackoff: 2})
	i := instance(t, m)
	i.fault(FaultTrap, 1)
	if !i.BreakerOpen() {
		t.Fatal("breaker closed after a fault with threshold 1")
	}
	if got := i.Classify([]byte{2}); got != 0 {
		t.Errorf("open breaker: Classify = %d, want 0", got)
	}
	i.Classify([]byte{2}) // skip ends
	if got := i.Classify([]byte{2}); got != 2 || i.BreakerOpen() {
		t.Errorf("half-open: Classify = %d (want 2), open = %v (want false)", got, i.BreakerOpen())
	}
}

func TestResultFaults(t *testing.T) {
	for _, tc := range []struct {
		fixture string
		want    FaultCounts
	}{
		{"outofrange", FaultCounts{OutOfRange: 41}},
		{"badcount", FaultCounts{BadCount: 40, OutOfRange: 0}},
	} {
		t.Run(tc.fixture, func(t *testing.T) {
			i := instance(t, load(t, tc.fixture, Options{BreakerThreshold: 100}))
			out := make([]uint32, 40)
			for k := range out {
				out[k] = 7
			}
			i.ClassifyBatch(payloads(40, 3), out)
			for k, v := range out {
				if v != 0 {
					t.Fatalf("out[%d] = %d, want 0", k, v)
				}
			}
			single := i.Classify([]byte("x"))
			if tc.fixture == "badcount" {
				// psp_classify itself is fine.
				if single != 1 {
					t.Errorf("Classify = %d, want 1", single)
				}
			} else if single != 0 {
				t.Errorf("Classify = %d, want 0", single)
			}
			if f := i.Faults(); f != tc.want {
				t.Errorf("faults = %+v, want %+v", f, tc.want)
			}
		})
	}
}

func TestMemoryBombIsCapped(t *testing.T) {
	const limit = 16
	m := load(t, "membomb", Options{MemoryLimitPages: limit})
	i := instance(t, m)
	for k := 0; k < 3; k++ {
		if got := i.Classify([]byte("x")); got != 1 {
			t.Fatalf("Classify = %d, want 1", got)
		}
	}
	if got := i.mem.Size(); got != limit*65536 {
		t.Errorf("memory = %d bytes, want the %d-page limit", got, limit)
	}
	if len(i.view) != limit*65536 {
		t.Errorf("cached view = %d bytes, want it refreshed to %d", len(i.view), limit*65536)
	}
	out := make([]uint32, 33)
	i.ClassifyBatch(payloads(33, 2), out)
	for k, v := range out {
		if v != 1 {
			t.Fatalf("out[%d] = %d, want 1", k, v)
		}
	}
}
