package darc

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestSplitPool(t *testing.T) {
	// The psp-header type space on the UDP dataplane's default pool: half
	// of it guaranteed, UNKNOWN one part, each of the 11 known types four;
	// the rest shared, which any type may borrow.
	sh, err := splitPool(8160, 0.5, nil, nil, 12)
	if err != nil {
		t.Fatal(err)
	}
	if sh.guarantee[0] != 90 || sh.guarantee[1] != 360 || sh.guarantee[11] != 360 || slicesSum(sh.guarantee)+sh.shared != 8160 {
		t.Fatalf("guarantees %v, shared %d", sh.guarantee, sh.shared)
	}
	if sh.shared != 8160-90-11*360 || sh.budget[1] != 360+sh.shared || sh.budget[0] != 90+sh.shared {
		t.Fatalf("shared %d, budgets %v", sh.shared, sh.budget)
	}
	// Fixed guarantees come first; fixed budgets cap the guarantees.
	sh, err = splitPool(100, 0.5, []int{0, 30}, []int{0, 0, 5}, 3)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(sh.guarantee, []int{4, 30, 5}) || sh.shared != 61 || !slices.Equal(sh.budget, []int{65, 91, 5}) {
		t.Fatalf("guarantees %v budgets %v shared %d", sh.guarantee, sh.budget, sh.shared)
	}
	for _, tt := range []struct {
		pool       int
		guarantees []int
		budgets    []int
		n          int
		substr     string
	}{
		{100, []int{0, 60, 50}, nil, 3, "guarantees add up to 110"},
		{16, nil, nil, 3, "cannot guarantee each of 3 types"},
		{100, []int{0, -1}, nil, 2, "guarantee of type 1 is -1"},
		{100, nil, []int{0, 101}, 2, "budget of type 1 is 101"},
		{100, []int{0, 20}, []int{0, 10}, 2, "guarantee 20 above its budget 10"},
	} {
		if _, err := splitPool(tt.pool, 0.5, tt.guarantees, tt.budgets, tt.n); err == nil || !strings.Contains(err.Error(), tt.substr) {
			t.Errorf("splitPool(%d, %v, %v, %d) = %v, want an error with %q", tt.pool, tt.guarantees, tt.budgets, tt.n, err, tt.substr)
		}
	}
}

func TestPoolConfigRefused(t *testing.T) {
	for _, tt := range []struct {
		cfg    Config
		substr string
	}{
		// Today's defaults on the UDP pool: 12 queues of 4096 cannot fit.
		{Config{Workers: 14, NumTypes: 12, Pool: 8160, QueueCapacity: 4096}, "more than the pool's 8160 buffers (use a queue capacity of at most 680"},
		{Config{Workers: 2, NumTypes: 3, Pool: 100, Guarantees: []int{0, 90, 20}}, "add up to 110"},
		{Config{Workers: 2, NumTypes: 3, Budgets: []int{0, 1}}, "need a pool"},
		{Config{Workers: 2, NumTypes: 3, Pool: 100, Deadlines: []int64{1, 2, 3, 4}}, "4 deadlines for 3 types"},
		{Config{Workers: 2, NumTypes: 300, Pool: 1000}, "cannot guarantee each of 300 types"},
		{Config{Workers: 2, NumTypes: 3, Pool: 100, Guaranteed: 1.5}, "guaranteed share = 1.5"},
	} {
		err := tt.cfg.Validate()
		if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tt.substr) {
			t.Errorf("%v: %v, want an error with %q", tt.cfg, err, tt.substr)
		}
	}
	// Unset, each queue holds its type's budget.
	p, err := NewDARC(Config{Workers: 14, NumTypes: 12, Pool: 8160})
	if err != nil {
		t.Fatal(err)
	}
	var s Snapshot
	p.Snapshot(&s)
	if s.Types[1].Guarantee != 360 || s.Types[1].Budget != 360+s.Shared || s.Types[1].Capacity != s.Types[1].Budget || s.Types[0].Guarantee != 90 || s.Pool != 8160 {
		t.Fatalf("pool %d shared %d, type states %+v", s.Pool, s.Shared, s.Types[:2])
	}
}

// A type that floods takes the shared part and is then refused with
// OverBudget (queued and running requests both count); the other types keep
// their guarantees, and a completion gives its own type room again.
func TestBudgetDropsOwnTypeOnly(t *testing.T) {
	for _, name := range PolicyNames() {
		// Pool 18, half guaranteed: UNKNOWN 1, SHORT 4, LONG 4; 9 shared.
		p, err := New(name, Config{Workers: 2, NumTypes: 3, Pool: 18, Spillway: 1, MinSamples: 1000})
		if err != nil {
			t.Fatal(err)
		}
		var verdicts []Verdict
		for i := range 15 {
			verdicts = append(verdicts, p.Enqueue(req(uint64(i), 2), 0))
		}
		want := slices.Repeat([]Verdict{Accepted}, 13)
		want = append(want, OverBudget, OverBudget)
		if !slices.Equal(verdicts, want) {
			t.Errorf("%s: LONG flood verdicts %v, want 13 accepted (4 guaranteed + 9 shared)", name, verdicts)
		}
		// Dispatching does not give budget back: running requests count.
		out := dispatchAll(t, p, 1)
		if len(out) == 0 {
			t.Fatalf("%s: nothing dispatched", name)
		}
		if v := p.Enqueue(req(20, 2), 1); v != OverBudget {
			t.Errorf("%s: LONG with %d running and the rest queued: %v, want over_budget", name, len(out), v)
		}
		for i := range 4 {
			if v := p.Enqueue(req(uint64(30+i), 1), 1); v != Accepted {
				t.Errorf("%s: SHORT %d during the LONG flood: %v (its guarantee is 4)", name, i, v)
			}
		}
		if v := p.Enqueue(req(40, 1), 1); v != OverBudget {
			t.Errorf("%s: fifth SHORT with the shared part taken: %v, want over_budget", name, v)
		}
		if v := p.Enqueue(req(41, Unknown), 1); v != Accepted {
			t.Errorf("%s: UNKNOWN within its guarantee: %v", name, v)
		}
		// A LONG completion returns a shared unit: LONG may take it again.
		p.Complete(out[0].Worker, out[0].Request.Type, 1000, 2)
		if v := p.Enqueue(req(21, 2), 2); v != Accepted {
			t.Errorf("%s: LONG after a LONG completion: %v", name, v)
		}
		var s Snapshot
		p.Snapshot(&s)
		if s.Types[2].OverBudget != 3 || s.Types[1].OverBudget != 1 || s.Types[2].Held != 13 || s.Types[1].Held != 4 || s.Borrowed != 9 || s.Shared != 9 {
			t.Errorf("%s: borrowed %d of %d, type states %+v", name, s.Borrowed, s.Shared, s.Types)
		}
	}
}

// A fixed budget caps a type below the shared part.
func TestFixedBudget(t *testing.T) {
	p, err := New(NameCFCFS, Config{Workers: 1, NumTypes: 3, Pool: 100, Budgets: []int{0, 0, 6}})
	if err != nil {
		t.Fatal(err)
	}
	accepted := 0
	for i := range 20 {
		if p.Enqueue(req(uint64(i), 2), 0) == Accepted {
			accepted++
		}
	}
	if accepted != 6 {
		t.Fatalf("%d LONG accepted with a budget of 6", accepted)
	}
}

// A request that waited past its type's deadline leaves through Dispatch as
// Expired, even when no worker is idle, and is never dispatched.
func TestDeadlineExpires(t *testing.T) {
	for _, name := range PolicyNames() {
		p, err := New(name, Config{Workers: 1, NumTypes: 3, MinSamples: 1000, Deadlines: []int64{0, 100, 1000}})
		if err != nil {
			t.Fatal(err)
		}
		p.Enqueue(req(1, 2), 0) // runs
		if out := dispatchAll(t, p, 0); len(out) != 1 || out[0].Worker != 0 {
			t.Fatalf("%s: first dispatch %v", name, out)
		}
		p.Enqueue(req(2, 1), 10)  // SHORT, deadline 100
		p.Enqueue(req(3, 2), 20)  // LONG, deadline 1000
		p.Enqueue(req(4, 1), 150) // SHORT
		// At 200 the worker is still busy: SHORT 2 has waited 190 > 100.
		out := dispatchAll(t, p, 200)
		if len(out) != 1 || out[0].Worker != Expired || out[0].Request.Handle != 2 || out[0].Enqueued != 10 {
			t.Fatalf("%s: dispatch at 200 = %v, want request 2 expired", name, out)
		}
		// At 1021 LONG 3 has waited 1001; SHORT 4 871: both expired; the
		// worker frees up at 1021 and finds nothing fresh.
		p.Complete(0, 2, 1000, 1021)
		out = dispatchAll(t, p, 1021)
		if got := handlesOf(out); len(out) != 2 || out[0].Worker != Expired || out[1].Worker != Expired || !slices.Contains(got, 3) || !slices.Contains(got, 4) {
			t.Fatalf("%s: dispatch at 1021 = %v, want 3 and 4 expired", name, out)
		}
		var s Snapshot
		p.Snapshot(&s)
		if s.Types[1].Expired != 2 || s.Types[2].Expired != 1 || s.Types[1].Held != 0 || s.Types[2].Held != 0 || s.Types[1].DeadlineNs != 100 {
			t.Errorf("%s: type states %+v", name, s.Types)
		}
		// Unknown has an automatic deadline, none until every type that had
		// requests is profiled.
		if s.Types[0].DeadlineNs != 0 {
			t.Errorf("%s: UNKNOWN deadline %d with SHORT seen but never profiled, want none", name, s.Types[0].DeadlineNs)
		}
		p.Complete(0, 1, 10, 1022)
		p.Snapshot(&s)
		if s.Types[0].DeadlineNs != DefaultDeadlineFloor {
			t.Errorf("%s: UNKNOWN deadline %d after a profiled completion, want the floor", name, s.Types[0].DeadlineNs)
		}
	}
}

// Automatic deadlines: DeadlineFactor times the longest mean service time
// of the types that can hold up a type's workers, at least the floor; none
// before any profile.
func TestAutomaticDeadlines(t *testing.T) {
	for _, name := range []string{NameCFCFS, NameFP, NameDFCFS, NameDARC} {
		p, err := New(name, Config{Workers: 4, NumTypes: 4, MinSamples: 8, DeadlineFloor: 5000})
		if err != nil {
			t.Fatal(err)
		}
		var s Snapshot
		p.Snapshot(&s)
		for _, ts := range s.Types {
			if ts.DeadlineNs != 0 {
				t.Fatalf("%s: type %d has deadline %d before any profile", name, ts.Type, ts.DeadlineNs)
			}
		}
		// A type that has had requests but no completion yet keeps the
		// deadlines off: nobody knows how long others wait behind it.
		p.Enqueue(req(1, 2), 0)
		p.Complete(0, 1, 100, 1)
		p.Snapshot(&s)
		if s.Types[1].DeadlineNs != 0 {
			t.Fatalf("%s: deadline %d with type 2 never profiled, want none", name, s.Types[1].DeadlineNs)
		}
		p.Complete(0, 2, 100000, 1)
		for range 3 {
			p.Complete(0, 1, 100, 2)
			p.Complete(0, 2, 100000, 2)
		}
		p.Snapshot(&s)
		// Everyone waits behind the 100 µs type (DARC: in its startup
		// phase, then in the reservation below).
		if name != NameDARC {
			for _, ts := range s.Types {
				if ts.DeadlineNs != 1000000 {
					t.Fatalf("%s: type %d deadline %d, want 10 x 100 µs", name, ts.Type, ts.DeadlineNs)
				}
			}
			continue
		}
		// DARC reserved: SHORT waits only for SHORT's workers (10 x 100 ns,
		// under the floor), LONG and UNKNOWN for LONG's.
		if s.Phase != "darc" {
			t.Fatalf("DARC phase %q", s.Phase)
		}
		if s.Types[1].DeadlineNs != 5000 || s.Types[2].DeadlineNs != 1000000 || s.Types[0].DeadlineNs != 1000000 || s.Types[3].DeadlineNs != 1000000 {
			t.Fatalf("DARC deadlines %+v", s.Types)
		}
	}
	p, err := New(NameCFCFS, Config{Workers: 1, NumTypes: 2, DeadlineFactor: -1, DeadlineFloor: 1})
	if err != nil {
		t.Fatal(err)
	}
	p.Complete(0, 1, 100, 1)
	var s Snapshot
	p.Snapshot(&s)
	if s.Types[1].DeadlineNs != 0 {
		t.Fatalf("deadline %d with automatic deadlines off", s.Types[1].DeadlineNs)
	}
}

// Budgets and deadlines cost no allocation: a flood that keeps its type over
// budget and expires requests at every dispatch.
func TestOverloadNoAlloc(t *testing.T) {
	for _, name := range PolicyNames() {
		p, err := New(name, Config{Workers: 4, NumTypes: 3, Pool: 64, MinSamples: 100, Profile: bimodal,
			StaticReserved: 1, Deadlines: []int64{0, 2000, 2000}})
		if err != nil {
			t.Fatal(err)
		}
		out := make([]Assignment, 4)
		now := int64(0)
		var h uint64
		allocs := testing.AllocsPerRun(2000, func() {
			now += 500
			for range 8 {
				h++
				p.Enqueue(Request{Handle: h, Type: Type(1 + h%2)}, now)
			}
			n := p.Dispatch(now, out)
			for _, a := range out[:n] {
				if a.Worker != Expired && h%3 == 0 {
					p.Complete(a.Worker, a.Request.Type, 1000, now)
				}
			}
		})
		if allocs != 0 {
			t.Errorf("%s: %v allocs per overloaded step", name, allocs)
		}
		var s Snapshot
		p.Snapshot(&s)
		if s.Types[1].Expired+s.Types[2].Expired == 0 || s.Types[1].OverBudget+s.Types[2].OverBudget == 0 {
			t.Errorf("%s: overload not exercised: %+v", name, s.Types)
		}
	}
}

// A reservation update that shortens a deadline applies to the dispatch it
// happens in: a request past the new deadline is expired, not dispatched.
func TestDeadlineShortenedByUpdate(t *testing.T) {
	p := newTestDARC(t, Config{Workers: 2, NumTypes: 3, Profile: bimodal, MinSamples: 4, DeadlineFloor: 1})
	p.Enqueue(req(1, 2), 0)
	if out := dispatchAll(t, p, 0); len(out) != 1 || out[0].Worker != 1 {
		t.Fatalf("dispatch %v, want LONG on worker 1", out)
	}
	p.Enqueue(req(2, 2), 0)
	p.Enqueue(req(3, 2), 0)
	var s Snapshot
	p.Snapshot(&s)
	if s.Types[2].DeadlineNs != 1000000 {
		t.Fatalf("LONG deadline %d, want 10 x 100 µs", s.Types[2].DeadlineNs)
	}
	for range 4 { // LONG now takes 10 µs: its deadline will be 100 µs
		p.Complete(1, 2, 10000, 400000)
	}
	out := dispatchAll(t, p, 500000)
	p.Snapshot(&s)
	if s.Types[2].DeadlineNs != 100000 || s.Reservations < 2 {
		t.Fatalf("after the update: LONG deadline %d, %d reservations", s.Types[2].DeadlineNs, s.Reservations)
	}
	for _, a := range out {
		if a.Worker != Expired {
			t.Errorf("request %d dispatched after waiting %d ns, deadline %d", a.Request.Handle, 500000-a.Enqueued, s.Types[2].DeadlineNs)
		}
	}
	if len(out) != 2 {
		t.Errorf("dispatch %v, want requests 2 and 3 expired", out)
	}
}

// An automatic deadline does not follow the profile's noise: a mean that
// moves by less than deadlineHysteresis keeps the deadline in force (the one
// status pages show is the one applied), a larger move changes it.
func TestAutomaticDeadlineHysteresis(t *testing.T) {
	p, err := New(NameCFCFS, Config{Workers: 1, NumTypes: 2, DeadlineFloor: 1})
	if err != nil {
		t.Fatal(err)
	}
	var s Snapshot
	deadline := func() int64 { p.Snapshot(&s); return s.Types[1].DeadlineNs }
	complete := func(n int, service int64) {
		for range n {
			p.Complete(0, 1, service, 1)
		}
	}
	complete(1, 100000)
	if d := deadline(); d != 1000000 {
		t.Fatalf("first deadline %d, want 10 x 100 µs", d)
	}
	// 15% slower: within the hysteresis, the deadline stays.
	complete(4*refreshEvery, 115000)
	if d := deadline(); d != 1000000 {
		t.Fatalf("deadline %d after a 15%% move of the mean, want it kept at 1000000", d)
	}
	// Much slower: the deadline follows the profile (the window's mean
	// mixes both speeds).
	complete(8*refreshEvery, 300000)
	if d := deadline(); d <= 1250000 {
		t.Fatalf("deadline %d after the mean more than doubled, want it moved past 1250000", d)
	}
}

func slicesSum(xs []int) int {
	s := 0
	for _, x := range xs {
		s += x
	}
	return s
}
