package darc

import (
	"fmt"
	"testing"
)

// cycleConfig is a High Bimodal setup on 16 workers with a profile, so DARC
// starts in its DARC phase.
func cycleConfig() Config {
	return Config{Workers: 16, NumTypes: 3, MinSamples: 1000, Profile: bimodal}
}

// cycle runs one request through p: enqueue, dispatch, complete. Types
// alternate; out has room for every worker.
type cycler struct {
	p   Policy
	out []Assignment
	i   uint64
	now int64
}

func newCycler(tb testing.TB, name string) *cycler {
	p, err := New(name, cycleConfig())
	if err != nil {
		tb.Fatal(err)
	}
	return &cycler{p: p, out: make([]Assignment, 16)}
}

func (c *cycler) step() {
	c.i++
	c.now += 1000
	typ := Type(1 + c.i&1)
	c.p.Enqueue(Request{Handle: c.i, Type: typ}, c.now)
	n := c.p.Dispatch(c.now, c.out)
	for _, a := range c.out[:n] {
		c.p.Complete(a.Worker, a.Request.Type, 1000*int64(a.Request.Type), c.now+500)
	}
}

func TestDispatchNoAlloc(t *testing.T) {
	for _, name := range PolicyNames() {
		c := newCycler(t, name)
		if allocs := testing.AllocsPerRun(10000, c.step); allocs != 0 {
			t.Errorf("%s: %v allocs per enqueue+dispatch+complete", name, allocs)
		}
	}
}

func TestCompleteNoAlloc(t *testing.T) {
	for _, name := range PolicyNames() {
		p, _ := New(name, cycleConfig())
		i := int64(0)
		allocs := testing.AllocsPerRun(10000, func() {
			i++
			p.Complete(int(i%16), Type(1+i%2), 1000*(1+i%2), i)
		})
		if allocs != 0 {
			t.Errorf("%s: %v allocs per complete", name, allocs)
		}
	}
}

// The startup phase (and its switch to DARC) and reservation updates also
// allocate nothing.
func TestReservationUpdateNoAlloc(t *testing.T) {
	p, err := NewDARC(Config{Workers: 16, NumTypes: 3, MinSamples: 10})
	if err != nil {
		t.Fatal(err)
	}
	out := make([]Assignment, 16)
	now := int64(0)
	allocs := testing.AllocsPerRun(1000, func() {
		forceUpdate(p, &now, out)
	})
	if allocs != 0 {
		t.Errorf("%v allocs per reservation update", allocs)
	}
	if p.reservations < 1000 {
		t.Errorf("%d reservations, want at least 1000", p.reservations)
	}
}

// Updates held by the hysteresis (re-placing the same counts) allocate nothing
// either.
func TestHysteresisUpdateNoAlloc(t *testing.T) {
	p := newHysteresisDARC(t, 0)
	out := make([]Assignment, 16)
	now := int64(0)
	allocs := testing.AllocsPerRun(1000, func() {
		now += 1e7
		long := int64(297800) // SHORT demand 2.3 workers
		if p.reservations%2 == 0 {
			long = 246300 // 2.7
		}
		for range 100 {
			p.Complete(0, 1, 500, now)
		}
		p.Complete(0, 2, long, now)
		p.Enqueue(Request{Type: 1}, now-1e6)
		p.Enqueue(Request{Type: 1}, now-1e6)
		p.Dispatch(now, out)
	})
	if allocs != 0 {
		t.Errorf("%v allocs per held reservation update", allocs)
	}
	if p.reservations < 1000 || p.cur.alloc[0] != 3 {
		t.Errorf("%d reservations, SHORT holds %d workers: want at least 1000 updates held at 3", p.reservations, p.cur.alloc[0])
	}
}

// forceUpdate feeds a window whose SHORT mean alternates between 1 µs and
// 20 µs and backlogs SHORT, so that the next Dispatch re-reserves.
func forceUpdate(p *DARC, now *int64, out []Assignment) {
	*now += 1e6
	short := int64(1000)
	if p.reservations%2 == 0 {
		short = 20000
	}
	for w := range p.cfg.Workers {
		p.Complete(w, 1, short, *now)
	}
	for w := range p.cfg.Workers {
		p.Complete(w, 2, 100000, *now)
	}
	p.Enqueue(Request{Type: 1}, *now-1e6)
	p.Enqueue(Request{Type: 1}, *now-1e6)
	p.Dispatch(*now, out[:0])
	for p.queues[1].n > 0 { // drop the backlog without dispatching it
		p.queues[1].pop()
		p.lim[1].queued--
		p.total--
		p.lim[1].held--
	}
}

func BenchmarkCycle(b *testing.B) {
	for _, name := range PolicyNames() {
		b.Run(name, func(b *testing.B) {
			c := newCycler(b, name)
			b.ReportAllocs()
			for b.Loop() {
				c.step()
			}
		})
	}
}

// BenchmarkBurst enqueues 32 requests, then dispatches and completes them on
// 16 workers: the dispatcher's batched pattern.
func BenchmarkBurst(b *testing.B) {
	for _, name := range PolicyNames() {
		b.Run(name, func(b *testing.B) {
			runBursts(b, newPolicyB(b, name, cycleConfig()), func(i int) Type { return Type(1 + i&1) })
		})
	}
}

func BenchmarkComplete(b *testing.B) {
	for _, name := range []string{NameCFCFS, NameDARC} {
		b.Run(name, func(b *testing.B) {
			p, _ := New(name, cycleConfig())
			i := int64(0)
			b.ReportAllocs()
			for b.Loop() {
				i++
				p.Complete(int(i&15), Type(1+i&1), 1000, i)
			}
		})
	}
}

// BenchmarkReservationUpdate measures the cost of computing and adopting a
// reservation (Algorithm 2 plus the derived dispatch tables), for 2 and 16
// types on 16 workers.
func BenchmarkReservationUpdate(b *testing.B) {
	for _, types := range []int{2, 16} {
		b.Run(fmt.Sprintf("types=%d", types), func(b *testing.B) {
			p, err := NewDARC(Config{Workers: 16, NumTypes: types + 1, MinSamples: 1})
			if err != nil {
				b.Fatal(err)
			}
			for t := 1; t <= types; t++ {
				p.win.sum[t] = int64(t * t * 1000)
				p.win.count[t] = 1
				p.win.total++
			}
			b.ReportAllocs()
			for b.Loop() {
				p.planWindow()
				p.adopt()
			}
		})
	}
}

// A snapshot into a reused Snapshot allocates nothing.
func TestSnapshotReuseNoAlloc(t *testing.T) {
	for _, name := range PolicyNames() {
		p, _ := New(name, cycleConfig())
		var s Snapshot
		p.Snapshot(&s)
		if allocs := testing.AllocsPerRun(100, func() { p.Snapshot(&s) }); allocs != 0 {
			t.Errorf("%s: %v allocs per reused snapshot", name, allocs)
		}
	}
}

// BenchmarkDispatchEmpty is a Dispatch call with nothing queued, 12 types
// and a full profiling window: the common case of a simulator or a lightly
// loaded dispatcher.
func BenchmarkDispatchEmpty(b *testing.B) {
	for _, name := range PolicyNames() {
		b.Run(name, func(b *testing.B) {
			p, err := New(name, Config{Workers: 16, NumTypes: 12, MinSamples: 10, Profile: bimodal})
			if err != nil {
				b.Fatal(err)
			}
			for i := range 20 {
				p.Complete(0, Type(1+i%11), 1000, 0)
			}
			out := make([]Assignment, 16)
			b.ReportAllocs()
			for b.Loop() {
				p.Dispatch(1, out)
			}
		})
	}
}
