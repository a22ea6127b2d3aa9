package darc

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"testing"
)

// hugeNumbers are values a typo, a script or an attacker may give any
// numeric setting.
var hugeNumbers = []float64{1e308, math.MaxFloat64, math.Inf(1), math.Inf(-1), math.NaN(), -1, -1e308,
	MaxWeight * (1 + 1e-9), 1e300, 5e-324, 1e-300, MaxWeight, 1}

var hugeInts = []int{math.MaxInt, math.MaxInt - 1, math.MaxInt / 2, math.MaxInt32, math.MinInt, -1, 1 << 40, 1 << 24, (1 << 24) + 1}

// noPanic runs f and fails the test if it panics.
func noPanic(t *testing.T, what string, f func() error) error {
	t.Helper()
	var err error
	func() {
		defer func() {
			if r := recover(); r != nil {
				t.Fatalf("%s: panic: %v", what, r)
			}
		}()
		err = f()
	}()
	return err
}

// checkShares asserts what the policy computed from whatever it accepted:
// every live tenant has a home of at least one worker, homes fit the
// workers, guarantees fit the pool.
func checkShares(t *testing.T, what string, p *Tenants) {
	t.Helper()
	var s Snapshot
	p.Snapshot(&s)
	homes, guar := 0, 0
	for _, ts := range s.Tenants {
		if ts.Removed {
			continue
		}
		if len(ts.Home) < 1 {
			t.Fatalf("%s: tenant %s has no home worker: %+v", what, ts.Name, ts)
		}
		homes += len(ts.Home)
		if ts.Guarantee < 0 || ts.Budget < ts.Guarantee {
			t.Fatalf("%s: tenant %s guarantee %d budget %d", what, ts.Name, ts.Guarantee, ts.Budget)
		}
		guar += ts.Guarantee
	}
	if homes > p.workers {
		t.Fatalf("%s: homes add up to %d of %d workers", what, homes, p.workers)
	}
	if p.cfg.Pool > 0 && guar > p.cfg.Pool {
		t.Fatalf("%s: guarantees add up to %d of a pool of %d", what, guar, p.cfg.Pool)
	}
}

// TestTenantHugeWeights: a crash found by probing (PATCH a's weight to 1e308, add
// b with 1e308: the weights' sum is +Inf, every share NaN, index -1 in
// partition) and the rest of its class: every weight is either refused
// with ErrInvalidConfig or yields sane shares, never a panic.
func TestTenantHugeWeights(t *testing.T) {
	for _, w1 := range hugeNumbers {
		for _, w2 := range hugeNumbers {
			what := fmt.Sprintf("weights %v, %v", w1, w2)
			p := newTenantsT(t, Config{Workers: 4, Pool: 4096, MinSamples: 50, Tenants: []TenantConfig{{Name: "a", NumTypes: 2, Buffers: 1000}}})
			err1 := noPanic(t, what, func() error { return p.UpdateTenant(TenantConfig{Name: "a", NumTypes: 2, Weight: w1, Buffers: 1000}) })
			err2 := noPanic(t, what, func() error {
				_, err := p.AddTenant(TenantConfig{Name: "b", NumTypes: 2, Weight: w2, Buffers: 1000})
				return err
			})
			for i, err := range []error{err1, err2} {
				w := []float64{w1, w2}[i]
				valid := w >= 0 && w <= MaxWeight
				if valid != (err == nil) {
					t.Errorf("%s: weight %v: err %v (valid: %v)", what, w, err, valid)
				}
				if err != nil && !errors.Is(err, ErrInvalidConfig) {
					t.Errorf("%s: err %v, want ErrInvalidConfig", what, err)
				}
			}
			checkShares(t, what, p)
			dispatchT(p, 1, 4)
		}
	}
	// Many tenants at the largest weight: the sum stays finite.
	p, err := NewTenants(NameDARC, Config{Workers: 64, Pool: 1 << 20, MinSamples: 50})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 64 {
		if _, err := p.AddTenant(TenantConfig{Name: fmt.Sprint("t", i), NumTypes: 2, Weight: MaxWeight}); err != nil {
			t.Fatal(err)
		}
	}
	checkShares(t, "64 tenants at MaxWeight", p)
}

// TestTenantHugeCounts: type counts, worker counts, buffers, guarantees,
// budgets and deadlines at the ends of int are refused, not wrapped.
func TestTenantHugeCounts(t *testing.T) {
	for _, n := range hugeInts {
		for field, tc := range map[string]TenantConfig{
			"numtypes":    {NumTypes: n},
			"workers":     {NumTypes: 2, Workers: n},
			"max workers": {NumTypes: 2, MaxWorkers: n},
			"buffers":     {NumTypes: 2, Buffers: n},
			"max buffers": {NumTypes: 2, MaxBuffers: n},
			"guarantees":  {NumTypes: 2, Guarantees: []int{0, n}},
			"guarantees2": {NumTypes: 3, Guarantees: []int{n, n, n}},
			"budgets":     {NumTypes: 2, Budgets: []int{0, n}},
			"deadlines":   {NumTypes: 2, Deadlines: []int64{0, int64(n)}},
			"reserved":    {NumTypes: 2, StaticReserved: n},
		} {
			what := fmt.Sprintf("%s = %d", field, n)
			p := newTenantsT(t, Config{Workers: 4, Pool: 1 << 24, MinSamples: 50, Tenants: []TenantConfig{{Name: "a", NumTypes: 2}}})
			tc.Name = "b"
			err := noPanic(t, what, func() error { _, err := p.AddTenant(tc); return err })
			tooBig := n > 1<<24 || n < 0
			if field == "deadlines" {
				tooBig = int64(n) > MaxDeadline
			}
			if err == nil && tooBig {
				t.Errorf("%s: accepted", what)
			}
			checkShares(t, what, p)
			tc.Name = "a"
			if tc.NumTypes == 2 {
				_ = noPanic(t, what, func() error { return p.UpdateTenant(tc) })
			}
			checkShares(t, what, p)
			dispatchT(p, 1, 4)
		}
	}
	// A deadline of 2562047h and its like: refused.
	if _, err := New(NameDARC, Config{Workers: 2, NumTypes: 2, Deadlines: []int64{0, math.MaxInt64}}); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("deadline MaxInt64: %v", err)
	}
	if _, err := New(NameDARC, Config{Workers: 2, NumTypes: 2, DeadlineFloor: math.MaxInt64}); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("deadline floor MaxInt64: %v", err)
	}
	if _, err := New(NameDARC, Config{Workers: 2, NumTypes: 2, DeadlineFactor: 1e300}); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("deadline factor 1e300: %v", err)
	}
}

// TestAddPreparedAllocatesLittle: a 1,024-type
// tenant's own policy is built by PrepareTenant, on its caller's goroutine;
// AddPrepared, on the goroutine running the policy (the dispatcher's),
// allocates a small fraction of what AddTenant does. (Its queues took
// about 100 MB when each had a buffer of its own; they take slots of the
// policy's arena now, and AddTenant about 0.5 MB.)
func TestAddPreparedAllocatesLittle(t *testing.T) {
	cfg := Config{Workers: 4, Pool: 1 << 16, MinSamples: 50}
	tc := func(name string) TenantConfig { return TenantConfig{Name: name, NumTypes: 1024} }
	p, err := NewTenants(NameDARC, cfg)
	if err != nil {
		t.Fatal(err)
	}
	whole := allocatedBy(func() {
		if _, err := p.AddTenant(tc("a")); err != nil {
			t.Fatal(err)
		}
	})
	pt, err := p.PrepareTenant(tc("b"))
	if err != nil {
		t.Fatal(err)
	}
	onLoop := allocatedBy(func() {
		if _, err := p.AddPrepared(pt); err != nil {
			t.Fatal(err)
		}
	})
	t.Logf("AddTenant of 1,024 types: %d bytes; AddPrepared: %d bytes", whole, onLoop)
	if onLoop*4 > whole {
		t.Errorf("AddPrepared allocated %d bytes, AddTenant %d: want at most a quarter", onLoop, whole)
	}
	if _, err := p.AddPrepared(pt); err == nil {
		t.Error("a PreparedTenant added twice")
	}
	checkShares(t, "prepared", p)
}

// TestRemovedTenantReclaimed (the policy's part): a
// removed tenant's queues are freed once it holds nothing; adding and
// removing a 1,024-type tenant does not grow the heap by its queues each
// time. (Its type ids go back once its driver retires it:
// TestRetireReusesTypeIDs.)
func TestRemovedTenantReclaimed(t *testing.T) {
	p, err := NewTenants(NameDARC, Config{Workers: 4, Pool: 1 << 16, MinSamples: 50})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.AddTenant(TenantConfig{Name: "a", NumTypes: 2}); err != nil {
		t.Fatal(err)
	}
	heap := func() uint64 {
		var ms runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&ms)
		return ms.HeapInuse
	}
	const cycles = 20
	var first uint64
	for i := range cycles {
		base, err := p.AddTenant(TenantConfig{Name: "big", NumTypes: 1024})
		if err != nil {
			t.Fatal(err)
		}
		// A queued request and a running one when it is removed.
		p.Enqueue(Request{Handle: 1, Type: base + 1}, 1)
		p.Enqueue(Request{Handle: 2, Type: base + 1}, 1)
		out := make([]Assignment, 8)
		n := p.Dispatch(2, out)
		var running []Assignment
		for _, a := range out[:n] {
			if a.Worker >= 0 {
				running = append(running, a)
			}
		}
		if err := p.RemoveTenant("big"); err != nil {
			t.Fatal(err)
		}
		p.Dispatch(3, out) // the queued one comes out, removed
		for _, a := range running {
			p.Complete(a.Worker, a.Request.Type, 1000, 4)
		}
		checkShares(t, "reclaim", p)
		if i == 0 {
			first = heap()
		}
	}
	last := heap()
	runtime.KeepAlive(p)
	t.Logf("heap in use after 1 add/remove of a 1,024-type tenant: %d MiB; after %d: %d MiB", first>>20, cycles, last>>20)
	if last > first+32<<20 {
		t.Errorf("heap grew from %d to %d MiB over %d add/remove cycles", first>>20, last>>20, cycles)
	}
}
