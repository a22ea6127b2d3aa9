package wasmclass

import (
	"context"
	"errors"
	"strings"
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
	// The fuel and the stack bound stop it; the time limit is set out of
	// the way, since the race detector slows the host exits of deep
	// recursion past the default.
	m := load(t, "recurse", Options{TimeLimit: 10 * time.Second})
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
	m := load(t, "trap", Options{BreakerThreshold: 3, BreakerBackoff: 300 * time.Millisecond, BreakerMaxBackoff: time.Second})
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
	// Packets are skipped without calling the guest during the backoff.
	out := make([]uint32, 10)
	i.ClassifyBatch(payloads(10, 2), out)
	if f := i.Faults(); f.BreakerOpen != 10 || f.Trap != 3 {
		t.Errorf("during the backoff: faults = %+v, want 10 skipped, 3 traps", f)
	}
	// Another instance of the same version sees the same breaker.
	if !instance(t, m).BreakerOpen() {
		t.Error("the breaker is not the module's")
	}
	time.Sleep(350 * time.Millisecond)
	i.Classify([]byte("x")) // half-open retry: traps, the backoff doubles
	if f := i.Faults(); f.Trap != 4 || !i.BreakerOpen() {
		t.Errorf("after retry: faults = %+v open=%v, want 4 traps and an open breaker", f, i.BreakerOpen())
	}
	time.Sleep(350 * time.Millisecond)
	i.Classify([]byte("x")) // still open: 600 ms backoff
	if f := i.Faults(); f.Trap != 4 || f.BreakerOpen != 11 {
		t.Errorf("doubled backoff: faults = %+v, want 11 skipped, 4 traps", f)
	}
}

func TestBreakerCountsFaultsNotStreaks(t *testing.T) {
	// Good and bad calls alternate: a breaker counting consecutive faults
	// would never open; faults per window open it.
	m := load(t, "good", Options{BreakerThreshold: 4, BreakerWindow: time.Hour, BreakerBackoff: time.Hour, BreakerMaxBackoff: time.Hour})
	i := instance(t, m)
	for k := 0; k < 4; k++ {
		if got := i.Classify([]byte{2}); got != 2 {
			t.Fatalf("Classify = %d, want 2", got)
		}
		i.fault(FaultTrap, 1)
	}
	if !i.BreakerOpen() {
		t.Fatal("breaker closed after 4 faults alternating with good calls")
	}
	if got := i.Classify([]byte{2}); got != 0 {
		t.Errorf("open breaker: Classify = %d, want 0", got)
	}
}

func TestBreakerCloses(t *testing.T) {
	// A good call after the backoff closes the breaker. The fault is
	// injected directly: no fixture faults once and then recovers.
	m := load(t, "good", Options{BreakerThreshold: 1, BreakerBackoff: 200 * time.Millisecond})
	i := instance(t, m)
	i.fault(FaultTrap, 1)
	if !i.BreakerOpen() {
		t.Fatal("breaker closed after a fault with threshold 1")
	}
	if got := i.Classify([]byte{2}); got != 0 {
		t.Errorf("open breaker: Classify = %d, want 0", got)
	}
	time.Sleep(250 * time.Millisecond)
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
	if got := i.g.mem.Size(); got != limit*65536 {
		t.Errorf("memory = %d bytes, want the %d-page limit", got, limit)
	}
	if len(i.g.view) != limit*65536 {
		t.Errorf("cached view = %d bytes, want it refreshed to %d", len(i.g.view), limit*65536)
	}
	out := make([]uint32, 33)
	i.ClassifyBatch(payloads(33, 2), out)
	for k, v := range out {
		if v != 1 {
			t.Fatalf("out[%d] = %d, want 1", k, v)
		}
	}
}

// callExport calls an extra export of i's guest directly and reports
// whether it ran out of fuel (trapped with the tank below zero).
func callExport(t *testing.T, i *Instance, name string) (outOfFuel bool) {
	t.Helper()
	if !i.ready(1) {
		t.Fatal("instance not ready")
	}
	_, err := i.g.mod.ExportedFunction(name).Call(context.Background())
	if err == nil {
		return false
	}
	return int64(i.g.tank.Get()) < 0
}

func TestHostileBulkMemoryIsMetered(t *testing.T) {
	// 1000 loop iterations per call fit a budget of 10,000 units; the 64
	// MiB each call writes must not.
	m := load(t, "bulkbomb", Options{Fuel: 10_000, BreakerThreshold: 100})
	i := instance(t, m)
	if !callExport(t, i, "table_fill") {
		t.Error("table.fill of 65536 elements 1000 times did not run out of fuel")
	}
	if got := i.Classify([]byte("x")); got != 0 {
		t.Errorf("memory.fill: Classify = %d, want 0", got)
	}
	out := []uint32{7, 7}
	i.ClassifyBatch(payloads(2, 2), out)
	if out[0] != 0 || out[1] != 0 {
		t.Errorf("memory.copy: out = %v, want UNKNOWN", out)
	}
	if f := i.Faults(); f.Fuel != 3 || f.Trap != 0 {
		t.Errorf("faults = %+v, want 3 fuel", f)
	}
	if st := m.Info().Fuel; st.BulkOps != 3 {
		t.Errorf("fuel stats = %+v, want 3 bulk instructions metered", st)
	}
}

func TestHostileLongLoopBodies(t *testing.T) {
	// 200 iterations of 700 bytes of code (in the loop, or in a leaf called
	// from it) fit a budget of 1000 units only if each costs one unit.
	i := instance(t, load(t, "bigbody", Options{Fuel: 1000, BreakerThreshold: 100}))
	expectOutOfFuel(t, i, "long loop body", "2 fuel faults")
	if !callExport(t, i, "small_leaves") {
		t.Error("small_leaves: 4000 calls to a short leaf did not run out of fuel")
	}
	// With enough fuel the same work completes: the charge is bounded.
	i = instance(t, load(t, "bigbody", Options{Fuel: 1_000_000}))
	if got := i.Classify([]byte("x")); got != 1 || i.Faults().Total() != 0 {
		t.Errorf("budget 1e6: Classify = %d, faults %+v; want 1, none", got, i.Faults())
	}
}

// expectOutOfFuel checks that i, which runs out of fuel on any payload,
// answers 0 to Classify and UNKNOWN to a batch of one payload whose two
// calls fault (wantFaults says which).
func expectOutOfFuel(t *testing.T, i *Instance, what, wantFaults string) {
	t.Helper()
	if got := i.Classify([]byte("x")); got != 0 {
		t.Errorf("%s: Classify = %d, want 0", what, got)
	}
	out := []uint32{7}
	i.ClassifyBatch(payloads(1, 2), out)
	if f := i.Faults(); f.Fuel != 2 || out[0] != 0 {
		t.Errorf("faults = %+v, out = %v; want %s, UNKNOWN", f, out, wantFaults)
	}
}

func TestHostileTables(t *testing.T) {
	i := instance(t, load(t, "tablebomb", Options{}))
	if got := i.Classify([]byte("x")); got != 1 {
		t.Errorf("Classify = %d, want 1 (table.grow by 2^21 elements must fail)", got)
	}
	_, err := Load(context.Background(), fixture(t, "bigtable"), Options{})
	if !errors.Is(err, ErrMemoryLimit) || !strings.Contains(err.Error(), "limit is 1048576") {
		t.Errorf("table of 2^24 elements: err = %v, want ErrMemoryLimit", err)
	}
}

func TestHostileControlFlow(t *testing.T) {
	opts := Options{Fuel: 10_000, BreakerThreshold: 100}
	m := load(t, "escapes", opts)
	i := instance(t, m)
	expectOutOfFuel(t, i, "call_indirect recursion", "2 fuel faults (recursion, br_table loop)")
	for _, name := range []string{"mutual", "nested"} {
		if !callExport(t, instance(t, m), name) {
			t.Errorf("%s: did not run out of fuel", name)
		}
	}
}

func TestHostileInitialisation(t *testing.T) {
	for _, name := range []string{"startloop", "initloop"} {
		start := time.Now()
		_, err := Load(context.Background(), fixture(t, name), Options{Fuel: 1000})
		t.Logf("%s: Load failed after %v: %v", name, time.Since(start), err)
		if err == nil || !strings.Contains(err.Error(), "unreachable") {
			t.Errorf("%s: err = %v, want a fuel trap (unreachable)", name, err)
		}
	}
}

func TestHostileLocals(t *testing.T) {
	// A function declaring 2^32-1 locals in 5 bytes: without a check the
	// decoder expands them into a 4 GiB slice.
	bin := []byte{0, 'a', 's', 'm', 1, 0, 0, 0,
		1, 4, 1, 0x60, 0, 0, // type section: () -> ()
		3, 2, 1, 0, // function section: one function of type 0
		10, 10, 1, 8, 1, 0xff, 0xff, 0xff, 0xff, 0x0f, 0x7f, 0x0b} // code: (local 4294967295 i32)
	_, err := Load(context.Background(), bin, Options{})
	if !errors.Is(err, ErrLimit) || !strings.Contains(err.Error(), "more than 2000 locals") {
		t.Errorf("err = %v, want ErrLimit for too many locals", err)
	}
}

func TestHostileWASICalls(t *testing.T) {
	// 1000 loop iterations per call fit a budget of 10,000 units; the work
	// the WASI calls do for their arguments must not.
	m := load(t, "wasibomb", Options{Fuel: 10_000, BreakerThreshold: 100})
	if st := m.Info().Fuel; st.ImportCalls != 3 {
		t.Errorf("fuel stats = %+v, want 3 WASI calls metered", st)
	}
	i := instance(t, m)
	if !callExport(t, i, "poll") {
		t.Error("poll_oneoff with 1000 subscriptions 1000 times did not run out of fuel")
	}
	if got := i.Classify([]byte("x")); got != 0 {
		t.Errorf("random_get: Classify = %d, want 0", got)
	}
	out := []uint32{7}
	i.ClassifyBatch(payloads(1, 2), out)
	if f := i.Faults(); f.Fuel != 2 || out[0] != 0 {
		t.Errorf("fd_write: faults = %+v, out = %v; want 2 fuel faults, UNKNOWN", f, out)
	}
	// With enough fuel the calls complete and the arguments reach WASI
	// intact (the charge saves and restores them).
	i = instance(t, load(t, "wasibomb", Options{Fuel: 1_000_000_000, TimeLimit: time.Minute}))
	if got := i.Classify([]byte("x")); got != 1 || i.Faults().Total() != 0 {
		t.Fatalf("budget 2e7: Classify = %d, faults %+v; want 1, none", got, i.Faults())
	}
	if v, ok := i.g.mem.ReadUint64Le(65536 + 1000); !ok || v == 0 {
		t.Errorf("random_get wrote nothing at 66536: %x, %v", v, ok)
	}
}

func TestMeteredImportReferenceRefused(t *testing.T) {
	// A table holding random_get would let call_indirect skip its charge.
	_, err := Load(context.Background(), fixture(t, "wasiref"), Options{})
	if !errors.Is(err, ErrInvalidModule) || !strings.Contains(err.Error(), "may only be called directly") {
		t.Errorf("err = %v, want ErrInvalidModule for an indirect reference to a metered import", err)
	}
}

func TestHostileMemoryDeclarations(t *testing.T) {
	_, err := Load(context.Background(), fixture(t, "datapast"), Options{})
	if err == nil || !strings.Contains(err.Error(), "out of bounds") {
		t.Errorf("data segment past the memory: err = %v, want an out of bounds failure", err)
	}
	_, err = Load(context.Background(), fixture(t, "bigmin"), Options{})
	if !errors.Is(err, ErrMemoryLimit) || !strings.Contains(err.Error(), "minimum of 65 pages, limit is 64") {
		t.Errorf("minimum over the limit: err = %v, want ErrMemoryLimit", err)
	}
}
