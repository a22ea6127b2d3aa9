package darc

import (
	"errors"
	"slices"
	"testing"
)

// dispatchAll runs one Dispatch with room for every worker.
func dispatchAll(t *testing.T, p Policy, now int64) []Assignment {
	t.Helper()
	out := make([]Assignment, 256)
	n := p.Dispatch(now, out)
	return out[:n]
}

// expectDispatch runs one Dispatch at now and fails the test unless it
// makes exactly the assignments want.
func expectDispatch(t *testing.T, p Policy, now int64, want []Assignment) {
	t.Helper()
	if got := dispatchAll(t, p, now); !slices.Equal(got, want) {
		t.Fatalf("dispatch = %v, want %v", got, want)
	}
}

func req(h uint64, t Type) Request { return Request{Handle: h, Type: t} }

func TestNewNames(t *testing.T) {
	cfg := Config{Workers: 4, NumTypes: 3}
	for _, name := range PolicyNames() {
		p, err := New(name, cfg)
		if err != nil {
			t.Fatalf("New(%q): %v", name, err)
		}
		if p.Name() != name {
			t.Errorf("New(%q).Name() = %q", name, p.Name())
		}
	}
	_, err := New("sjf", cfg)
	if !errors.Is(err, ErrUnknownPolicy) {
		t.Fatalf("New(sjf) error = %v, want ErrUnknownPolicy", err)
	}
}

func TestCFCFSFIFO(t *testing.T) {
	p, err := NewCFCFS(Config{Workers: 3, NumTypes: 3})
	if err != nil {
		t.Fatal(err)
	}
	types := []Type{2, 1, 0, 2, 1}
	for i, ty := range types {
		if p.Enqueue(req(uint64(i), ty), int64(10*i)) != Accepted {
			t.Fatalf("enqueue %d refused", i)
		}
	}
	expectDispatch(t, p, 100, []Assignment{
		{Worker: 0, Request: req(0, 2), Enqueued: 0},
		{Worker: 1, Request: req(1, 1), Enqueued: 10},
		{Worker: 2, Request: req(2, 0), Enqueued: 20},
	})
	// Worker 1 frees up: it takes the next in arrival order.
	p.Complete(1, 1, 50, 150)
	expectDispatch(t, p, 150, []Assignment{{Worker: 1, Request: req(3, 2), Enqueued: 30}})
	if n := len(dispatchAll(t, p, 160)); n != 0 {
		t.Fatalf("dispatch with no idle worker returned %d assignments", n)
	}
}

func TestDispatchRespectsOutLength(t *testing.T) {
	for _, name := range PolicyNames() {
		p, _ := New(name, Config{Workers: 4, NumTypes: 2, Spillway: 4})
		for i := range 4 {
			p.Enqueue(req(uint64(i), 1), 0)
		}
		out := make([]Assignment, 3)
		if n := p.Dispatch(0, out[:1]); n != 1 {
			t.Errorf("%s: dispatch into 1 slot = %d", name, n)
		}
		if n := p.Dispatch(0, out); n != 3 {
			t.Errorf("%s: dispatch into 3 slots = %d", name, n)
		}
	}
}

func TestQueueFullDropsPerType(t *testing.T) {
	for _, name := range []string{NameCFCFS, NameFP, NameDARC, NameDARCStatic} {
		p, err := New(name, Config{Workers: 1, NumTypes: 3, QueueCapacity: 2})
		if err != nil {
			t.Fatal(err)
		}
		ok := []Verdict{
			p.Enqueue(req(1, 1), 0), p.Enqueue(req(2, 1), 0), p.Enqueue(req(3, 1), 0),
			p.Enqueue(req(4, 2), 0), p.Enqueue(req(5, 2), 0),
		}
		if !slices.Equal(ok, []Verdict{Accepted, Accepted, QueueFull, Accepted, Accepted}) {
			t.Errorf("%s: accepted = %v", name, ok)
		}
		var s Snapshot
		p.Snapshot(&s)
		if s.Types[1].Dropped != 1 || s.Types[1].QueueFull != 1 || s.Types[2].Dropped != 0 || s.Types[1].Enqueued != 2 || s.Types[2].Queued != 2 {
			t.Errorf("%s: type states %+v", name, s.Types)
		}
	}
}

func TestDFCFSRoundRobin(t *testing.T) {
	p, err := NewDFCFS(Config{Workers: 3, NumTypes: 2, QueueCapacity: 1})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		accepted := p.Enqueue(req(uint64(i), 1), int64(i)) == Accepted
		if want := i < 3; accepted != want { // the 4th lands on worker 0's full queue
			t.Fatalf("enqueue %d accepted = %v, want %v", i, accepted, want)
		}
	}
	// Worker 1 busy with request 1; worker 0's queue holds request 0 only.
	expectDispatch(t, p, 10, []Assignment{
		{Worker: 0, Request: req(0, 1), Enqueued: 0},
		{Worker: 1, Request: req(1, 1), Enqueued: 1},
		{Worker: 2, Request: req(2, 1), Enqueued: 2},
	})
	// Requests 4 and 5 go to workers 1 and 2 (the round robin continues); only
	// worker 0 is idle, so nothing is dispatched: no stealing.
	p.Enqueue(req(4, 1), 20)
	p.Enqueue(req(5, 1), 20)
	p.Complete(0, 1, 5, 20)
	if got := dispatchAll(t, p, 20); len(got) != 0 {
		t.Fatalf("d-FCFS stole work: %v", got)
	}
	p.Complete(2, 1, 5, 30)
	expectDispatch(t, p, 30, []Assignment{{Worker: 2, Request: req(5, 1), Enqueued: 20}})
	var s Snapshot
	p.Snapshot(&s)
	if s.Types[1].Dropped != 1 || s.Types[1].Queued != 1 || s.IdleWorkers != 1 {
		t.Fatalf("snapshot %+v", s)
	}
}

func TestFPOrder(t *testing.T) {
	// Profile: type 2 shortest, then 3, then 1.
	p, err := NewFP(Config{Workers: 2, NumTypes: 4, MinSamples: 4, Profile: []TypeProfile{
		{Type: 1, MeanNs: 300, Ratio: 1}, {Type: 2, MeanNs: 100, Ratio: 1}, {Type: 3, MeanNs: 200, Ratio: 1},
	}})
	if err != nil {
		t.Fatal(err)
	}
	p.Enqueue(req(0, Unknown), 0)
	p.Enqueue(req(1, 1), 0)
	p.Enqueue(req(2, 3), 0)
	p.Enqueue(req(3, 2), 0)
	p.Enqueue(req(4, 2), 0)
	expectDispatch(t, p, 0, []Assignment{{Worker: 0, Request: req(3, 2)}, {Worker: 1, Request: req(4, 2)}})
	p.Complete(1, 2, 100, 1)
	expectDispatch(t, p, 1, []Assignment{{Worker: 1, Request: req(2, 3)}})
	// Profiling reverses types 1 and 3: after MinSamples completions, type 1
	// (now 50 ns) goes before Unknown and type 3.
	p.Complete(0, 1, 50, 2)
	p.Complete(1, 1, 50, 2)
	p.Complete(0, 3, 900, 2)
	if !slices.Equal(p.order, []Type{1, 2, 3}) {
		t.Fatalf("order after profiling = %v, want [1 2 3]", p.order)
	}
	p.Enqueue(req(5, 3), 3)
	p.Enqueue(req(6, 1), 3)
	expectDispatch(t, p, 3, []Assignment{{Worker: 0, Request: req(1, 1)}, {Worker: 1, Request: req(6, 1), Enqueued: 3}})
}
