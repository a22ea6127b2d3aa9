package darc

import (
	"math/rand/v2"
	"testing"
)

// TestRandomInvariants drives every policy with random arrivals and
// completions and checks what must always hold: a dispatched worker was idle,
// every accepted request leaves exactly once (dispatched or expired),
// counters add up, Unknown runs only on the spillway under DARC, per-type
// FIFO order, no type holds more than its budget, and no request is
// dispatched after waiting past its deadline.
func TestRandomInvariants(t *testing.T) {
	for _, name := range PolicyNames() {
		for _, cfg := range []Config{
			{Workers: 5, NumTypes: 4, QueueCapacity: 8, MinSamples: 50},
			{Workers: 3, NumTypes: 6, QueueCapacity: 4, MinSamples: 20, Spillway: 2, StaticReserved: 1},
			{Workers: 70, NumTypes: 3, QueueCapacity: 64, MinSamples: 100, Profile: bimodal},
			// Budgets and deadlines that bind: a pool of 30 requests and
			// automatic deadlines of a few mean service times.
			{Workers: 5, NumTypes: 4, Pool: 30, MinSamples: 50, DeadlineFactor: 3, DeadlineFloor: 1},
			// Fixed budgets and deadlines, one type without any deadline.
			{Workers: 4, NumTypes: 3, Pool: 40, Budgets: []int{2, 0, 20}, QueueCapacity: 10, MinSamples: 30,
				Deadlines: []int64{5000, -1, 20000}},
		} {
			runInvariants(t, name, cfg)
		}
	}
}

func runInvariants(t *testing.T, name string, cfg Config) {
	t.Helper()
	p, err := New(name, cfg)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, uint64(cfg.Workers)))
	running := make([]Request, cfg.Workers)
	busy := make([]bool, cfg.Workers)
	seen := map[uint64]bool{}
	lastHandle := make([]uint64, cfg.NumTypes+1) // per type: FIFO within a type
	out := make([]Assignment, cfg.Workers)
	var accepted, dispatched, expired, overBudget, handle uint64
	now := int64(0)
	spill := cfg.Spillway
	if spill == 0 {
		spill = 1
	}
	var s Snapshot
	check := func(step int) {
		p.Snapshot(&s)
		held, borrowed := 0, 0
		for _, ts := range s.Types {
			held += ts.Held
			borrowed += max(ts.Held-ts.Guarantee, 0)
		}
		if s.Pool > 0 && (held > s.Pool || borrowed != s.Borrowed || borrowed > s.Shared) {
			t.Fatalf("%s step %d: %d held of a pool of %d, borrowed %d (snapshot %d) of %d shared", name, step, held, s.Pool, borrowed, s.Borrowed, s.Shared)
		}
		for _, ts := range s.Types {
			if ts.Budget > 0 && ts.Held > ts.Budget {
				t.Fatalf("%s step %d: type %d holds %d, budget %d", name, step, ts.Type, ts.Held, ts.Budget)
			}
			if ts.Queued > ts.Capacity {
				t.Fatalf("%s step %d: type %d queues %d, capacity %d", name, step, ts.Type, ts.Queued, ts.Capacity)
			}
		}
	}
	for step := range 20000 {
		now += int64(rng.IntN(2000))
		switch rng.IntN(3) {
		case 0, 1:
			handle++
			typ := Type(rng.IntN(cfg.NumTypes + 1)) // includes one out-of-range id
			switch p.Enqueue(Request{Handle: handle, Type: typ}, now) {
			case Accepted:
				accepted++
			case OverBudget:
				overBudget++
			}
		case 2:
			w := rng.IntN(cfg.Workers)
			if busy[w] {
				busy[w] = false
				r := running[w]
				p.Complete(w, r.Type, int64(1000*(1+int(r.Type)*int(r.Type))), now)
			}
		}
		n := p.Dispatch(now, out[:rng.IntN(cfg.Workers)+1])
		p.Snapshot(&s)
		for _, a := range out[:n] {
			if seen[a.Request.Handle] {
				t.Fatalf("%s step %d: request %d left twice", name, step, a.Request.Handle)
			}
			seen[a.Request.Handle] = true
			if int(a.Request.Type) >= cfg.NumTypes {
				t.Fatalf("%s: out-of-range type %d not mapped to Unknown", name, a.Request.Type)
			}
			deadline := s.Types[a.Request.Type].DeadlineNs
			if a.Worker == Expired {
				if deadline == 0 || now-a.Enqueued <= deadline {
					t.Fatalf("%s step %d: request %d expired after %d ns, deadline %d", name, step, a.Request.Handle, now-a.Enqueued, deadline)
				}
				expired++
				continue
			}
			if deadline > 0 && now-a.Enqueued > deadline {
				t.Fatalf("%s step %d: request %d dispatched after waiting %d ns, deadline %d", name, step, a.Request.Handle, now-a.Enqueued, deadline)
			}
			if busy[a.Worker] {
				t.Fatalf("%s step %d: worker %d dispatched while busy", name, step, a.Worker)
			}
			if name != NameDFCFS && a.Request.Handle < lastHandle[a.Request.Type] {
				t.Fatalf("%s: type %d out of FIFO order", name, a.Request.Type)
			}
			lastHandle[a.Request.Type] = a.Request.Handle
			if (name == NameDARC || name == NameDARCStatic) && a.Request.Type == Unknown && a.Worker < cfg.Workers-spill {
				t.Fatalf("%s: Unknown on non-spillway worker %d", name, a.Worker)
			}
			busy[a.Worker] = true
			running[a.Worker] = a.Request
			dispatched++
		}
		check(step)
	}
	p.Snapshot(&s)
	var enq, disp, queued, exp, held, over uint64
	idle := 0
	for w, b := range busy {
		if b != s.Busy[w] {
			t.Fatalf("%s: worker %d busy = %v, snapshot says %v", name, w, b, s.Busy[w])
		}
		if !b {
			idle++
		}
	}
	runningOf := make([]int, cfg.NumTypes)
	for w, b := range busy {
		if b {
			runningOf[running[w].Type]++
		}
	}
	for _, ts := range s.Types {
		enq += ts.Enqueued
		disp += ts.Dispatched
		queued += uint64(ts.Queued)
		exp += ts.Expired
		held += uint64(ts.Held)
		over += ts.OverBudget
		if ts.Enqueued != ts.Dispatched+ts.Expired+uint64(ts.Queued) {
			t.Fatalf("%s: type %d: enqueued %d != dispatched %d + expired %d + queued %d", name, ts.Type, ts.Enqueued, ts.Dispatched, ts.Expired, ts.Queued)
		}
		if ts.Held != ts.Queued+runningOf[ts.Type] {
			t.Fatalf("%s: type %d holds %d, queued %d + running %d", name, ts.Type, ts.Held, ts.Queued, runningOf[ts.Type])
		}
		if ts.Dropped != ts.QueueFull+ts.OverBudget {
			t.Fatalf("%s: type %d: dropped %d != queue full %d + over budget %d", name, ts.Type, ts.Dropped, ts.QueueFull, ts.OverBudget)
		}
	}
	if enq != accepted || disp != dispatched || exp != expired || over != overBudget || idle != s.IdleWorkers {
		t.Fatalf("%s: snapshot enqueued %d dispatched %d expired %d over budget %d idle %d, driver saw %d %d %d %d %d",
			name, enq, disp, exp, over, s.IdleWorkers, accepted, dispatched, expired, overBudget, idle)
	}
	if (name == NameDARC || name == NameDARCStatic) && (s.Phase != "darc" || s.Reservations < 2) {
		t.Fatalf("%s: phase %q after %d reservations: updates not exercised", name, s.Phase, s.Reservations)
	}
	if dispatched == 0 || queued == 0 {
		t.Fatalf("%s: degenerate run: dispatched %d queued %d", name, dispatched, queued)
	}
	binding := cfg.Pool > 0
	if binding && (expired == 0 || overBudget == 0) {
		t.Fatalf("%s %v: budgets and deadlines not exercised: %d expired, %d over budget", name, cfg, expired, overBudget)
	}
	// Drain: with every worker completing, everything queued leaves
	// (Unknown included, through the spillway).
	d, e, _ := drainAll(p, now, busy, running, out)
	dispatched, expired = dispatched+d, expired+e
	if dispatched+expired != accepted {
		t.Fatalf("%s: %d accepted, %d dispatched + %d expired after draining", name, accepted, dispatched, expired)
	}
	p.Snapshot(&s)
	for _, ts := range s.Types {
		if ts.Held != 0 || ts.Queued != 0 {
			t.Fatalf("%s: type %d holds %d (queued %d) after draining", name, ts.Type, ts.Held, ts.Queued)
		}
	}
}

// drainAll completes the request of every busy worker and dispatches until
// nothing more leaves, counting what leaves by where it goes.
func drainAll(p Policy, now int64, busy []bool, running []Request, out []Assignment) (dispatched, expired, removed uint64) {
	for range 100000 {
		for w := range busy {
			if busy[w] {
				busy[w] = false
				p.Complete(w, running[w].Type, 1000, now)
			}
		}
		n := p.Dispatch(now, out)
		for _, a := range out[:n] {
			switch a.Worker {
			case Expired:
				expired++
			case Removed:
				removed++
			default:
				busy[a.Worker] = true
				running[a.Worker] = a.Request
				dispatched++
			}
		}
		if n == 0 {
			break
		}
	}
	return dispatched, expired, removed
}
