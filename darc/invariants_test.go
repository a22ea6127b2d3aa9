package darc

import (
	"math/rand/v2"
	"testing"
)

// TestRandomInvariants drives every policy with random arrivals and
// completions and checks what must always hold: a dispatched worker was idle,
// every accepted request is dispatched exactly once, counters add up,
// Unknown runs only on the spillway under DARC, and per-type FIFO order.
func TestRandomInvariants(t *testing.T) {
	for _, name := range PolicyNames() {
		for _, cfg := range []Config{
			{Workers: 5, NumTypes: 4, QueueCapacity: 8, MinSamples: 50},
			{Workers: 3, NumTypes: 6, QueueCapacity: 4, MinSamples: 20, Spillway: 2, StaticReserved: 1},
			{Workers: 70, NumTypes: 3, QueueCapacity: 64, MinSamples: 100, Profile: bimodal},
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
	var accepted, dispatched, handle uint64
	now := int64(0)
	spill := cfg.Spillway
	if spill == 0 {
		spill = 1
	}
	for step := range 20000 {
		now += int64(rng.IntN(2000))
		switch rng.IntN(3) {
		case 0, 1:
			handle++
			typ := Type(rng.IntN(cfg.NumTypes + 1)) // includes one out-of-range id
			if p.Enqueue(Request{Handle: handle, Type: typ}, now) {
				accepted++
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
		for _, a := range out[:n] {
			if busy[a.Worker] {
				t.Fatalf("%s step %d: worker %d dispatched while busy", name, step, a.Worker)
			}
			if seen[a.Request.Handle] {
				t.Fatalf("%s step %d: request %d dispatched twice", name, step, a.Request.Handle)
			}
			if int(a.Request.Type) >= cfg.NumTypes {
				t.Fatalf("%s: out-of-range type %d not mapped to Unknown", name, a.Request.Type)
			}
			if name != NameDFCFS && a.Request.Handle < lastHandle[a.Request.Type] {
				t.Fatalf("%s: type %d out of FIFO order", name, a.Request.Type)
			}
			lastHandle[a.Request.Type] = a.Request.Handle
			if (name == NameDARC || name == NameDARCStatic) && a.Request.Type == Unknown && a.Worker < cfg.Workers-spill {
				t.Fatalf("%s: Unknown on non-spillway worker %d", name, a.Worker)
			}
			seen[a.Request.Handle] = true
			busy[a.Worker] = true
			running[a.Worker] = a.Request
			dispatched++
		}
	}
	var s Snapshot
	p.Snapshot(&s)
	var enq, disp, queued uint64
	idle := 0
	for w, b := range busy {
		if b != s.Busy[w] {
			t.Fatalf("%s: worker %d busy = %v, snapshot says %v", name, w, b, s.Busy[w])
		}
		if !b {
			idle++
		}
	}
	for _, ts := range s.Types {
		enq += ts.Enqueued
		disp += ts.Dispatched
		queued += uint64(ts.Queued)
		if ts.Enqueued != ts.Dispatched+uint64(ts.Queued) {
			t.Fatalf("%s: type %d: enqueued %d != dispatched %d + queued %d", name, ts.Type, ts.Enqueued, ts.Dispatched, ts.Queued)
		}
	}
	if enq != accepted || disp != dispatched || idle != s.IdleWorkers {
		t.Fatalf("%s: snapshot enqueued %d dispatched %d idle %d, driver saw %d %d %d", name, enq, disp, s.IdleWorkers, accepted, dispatched, idle)
	}
	if (name == NameDARC || name == NameDARCStatic) && (s.Phase != "darc" || s.Reservations < 2) {
		t.Fatalf("%s: phase %q after %d reservations: updates not exercised", name, s.Phase, s.Reservations)
	}
	if dispatched == 0 || queued == 0 {
		t.Fatalf("%s: degenerate run: dispatched %d queued %d", name, dispatched, queued)
	}
	// Drain: with every worker completing, everything queued is dispatched
	// (Unknown included, through the spillway).
	for range 100000 {
		for w := range busy {
			if busy[w] {
				busy[w] = false
				p.Complete(w, running[w].Type, 1000, now)
			}
		}
		n := p.Dispatch(now, out)
		for _, a := range out[:n] {
			busy[a.Worker] = true
			running[a.Worker] = a.Request
			dispatched++
		}
		if n == 0 {
			break
		}
	}
	if dispatched != accepted {
		t.Fatalf("%s: %d accepted, %d dispatched after draining", name, accepted, dispatched)
	}
}
