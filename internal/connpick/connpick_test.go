package connpick

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// reference is Pool by its definition, one linear scan a pick.
type reference struct {
	inFlight []int
	idle     []int // most recently freed last
}

func (r *reference) pick() int {
	if n := len(r.idle); n > 0 {
		c := r.idle[n-1]
		r.idle = r.idle[:n-1]
		r.inFlight[c]++
		return c
	}
	best := 0
	for c, f := range r.inFlight {
		if f < r.inFlight[best] {
			best = c
		}
	}
	r.inFlight[best]++
	return best
}

func (r *reference) done(c int) {
	if r.inFlight[c] == 0 {
		return
	}
	r.inFlight[c]--
	if r.inFlight[c] == 0 {
		r.idle = append(r.idle, c)
	}
}

func TestPoolMatchesDefinition(t *testing.T) {
	for _, n := range []int{1, 2, 3, 7, 20} {
		k, err := New(Pool, n)
		if err != nil {
			t.Fatal(err)
		}
		ref := &reference{inFlight: make([]int, n)}
		for c := n - 1; c >= 0; c-- {
			ref.idle = append(ref.idle, c)
		}
		rng := rand.New(rand.NewPCG(uint64(n), 1))
		for step := range 20000 {
			// Picks outnumber answers at times, so every connection
			// fills and the fewest-in-flight rule is exercised.
			if rng.IntN(100) < 55 {
				got, want := k.Pick(), ref.pick()
				if got != want {
					t.Fatalf("%d connections, step %d: picked %d, want %d (in flight %v)", n, step, got, want, ref.inFlight)
				}
			} else {
				c := rng.IntN(n)
				k.Done(c)
				ref.done(c)
			}
			for c := range n {
				if k.InFlight(c) != ref.inFlight[c] {
					t.Fatalf("%d connections, step %d: connection %d has %d in flight, want %d", n, step, c, k.InFlight(c), ref.inFlight[c])
				}
			}
		}
	}
}

func TestPoolSendsOnIdleConnection(t *testing.T) {
	k, _ := New(Pool, 3)
	// Three requests take the three connections; the second's reply
	// frees connection 1, which the next request takes, although 0 and
	// 2 come first in turn.
	for want := range 3 {
		if got := k.Pick(); got != want {
			t.Fatalf("pick %d: connection %d, want %d", want, got, want)
		}
	}
	k.Done(1)
	if got := k.Pick(); got != 1 {
		t.Fatalf("after connection 1 answered: picked %d, want 1", got)
	}
	// All busy: the fewest in flight, then the lowest number.
	k.Done(2)
	k.Pick() // 2, idle
	k.Pick() // all have 1: connection 0
	if got := k.Pick(); got != 1 {
		t.Fatalf("connections 1 and 2 with 1 in flight, 0 with 2: picked %d, want 1", got)
	}
}

func TestRoundRobin(t *testing.T) {
	k, err := New(RoundRobin, 4)
	if err != nil {
		t.Fatal(err)
	}
	var got []int
	for range 6 {
		got = append(got, k.Pick())
	}
	k.Done(0)
	got = append(got, k.Pick())
	if want := []int{0, 1, 2, 3, 0, 1, 2}; !slices.Equal(got, want) {
		t.Fatalf("round robin picked %v, want %v", got, want)
	}
	if k.InFlight(0) != 1 || k.InFlight(2) != 2 {
		t.Fatalf("in flight %d on 0 and %d on 2, want 1 and 2", k.InFlight(0), k.InFlight(2))
	}
}

func TestParse(t *testing.T) {
	if p, err := Parse(""); err != nil || p != Pool {
		t.Fatalf(`Parse("") = %q, %v; want pool`, p, err)
	}
	if p, err := Parse("round-robin"); err != nil || p != RoundRobin {
		t.Fatalf(`Parse("round-robin") = %q, %v`, p, err)
	}
	if _, err := Parse("random"); err == nil {
		t.Fatal(`Parse("random"): no error`)
	}
	if _, err := New(Pool, 0); err == nil {
		t.Fatal("New with 0 connections: no error")
	}
}

func TestPickAllocatesNothing(t *testing.T) {
	k, _ := New(Pool, 16)
	c := 0
	if a := testing.AllocsPerRun(1000, func() {
		c = k.Pick()
		k.Pick()
		k.Done(c)
	}); a != 0 {
		t.Fatalf("Pick and Done allocate %.1f times a run, want 0", a)
	}
}
