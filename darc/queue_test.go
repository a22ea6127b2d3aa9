package darc

import (
	"math/rand/v2"
	"runtime"
	"testing"
)

// TestQueuesAgainstSlices: random pushes and pops on queues sharing an
// arena (past its first chunks, up to its limit) leave each queue holding
// what a slice per queue holds, in order, and refuse a push exactly when
// the queue is at its capacity or the arena is out of slots.
func TestQueuesAgainstSlices(t *testing.T) {
	for _, tc := range []struct {
		name             string
		limit, queues, n int
		roomy            bool // every queue may hold the arena's limit
	}{
		{"one slab", 100, 7, 50_000, false},
		{"grows past the eager slots", 1<<24 + 1, 5, 400_000, false},
		{"grows up to its limit", eagerSlots + 1000, 3, 600_000, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, uint64(tc.limit)))
			a := newArena(tc.limit)
			caps := make([]int, tc.queues)
			for i := range caps {
				caps[i] = 1 + rng.IntN(tc.limit)
				if tc.roomy {
					caps[i] = tc.limit
				}
			}
			qs := newQueues(a, caps)
			want := make([][]int64, tc.queues)
			held := 0
			for step := range tc.n {
				k := rng.IntN(tc.queues)
				q := &qs[k]
				// Fill mostly, so the arena's limit is met now and then.
				if rng.IntN(10) < 6 {
					_, ok := q.push(entry{req: Request{Handle: uint64(step), Type: Type(k)}, enq: int64(step)})
					if room := len(want[k]) < caps[k] && held < tc.limit; ok != room {
						t.Fatalf("step %d: push on queue %d (%d of %d, arena %d of %d) = %v", step, k, len(want[k]), caps[k], held, tc.limit, ok)
					}
					if ok {
						want[k] = append(want[k], int64(step))
						held++
					}
				} else if len(want[k]) > 0 {
					if len(want[k]) > 1 && q.at(1).enq != want[k][1] {
						t.Fatalf("step %d: queue %d's second = %d, want %d", step, k, q.at(1).enq, want[k][1])
					}
					if e := q.pop(); e.enq != want[k][0] || e.req.Type != Type(k) {
						t.Fatalf("step %d: pop on queue %d = %+v, want enq %d", step, k, e, want[k][0])
					}
					want[k] = want[k][1:]
					held--
				}
				if q.n != len(want[k]) {
					t.Fatalf("step %d: queue %d holds %d, want %d", step, k, q.n, len(want[k]))
				}
			}
			if len(a.slots) > tc.limit {
				t.Errorf("arena of limit %d allocated %d slots", tc.limit, len(a.slots))
			}
			t.Logf("arena: %d slots allocated, %d of them used", len(a.slots), a.fresh)
		})
	}
}

// TestArrivalOrderFollowsPushes: the startup order through the slots
// gives the types in the order their requests came, across queues.
func TestArrivalOrderFollowsPushes(t *testing.T) {
	a := newArena(64)
	qs := newQueues(a, []int{8, 8, 8})
	o := newArrivalOrder(a)
	types := []Type{2, 1, 2, 2, 0, 1}
	for k, typ := range types {
		i, ok := qs[typ].push(entry{req: Request{Type: typ}, enq: int64(k)})
		if !ok {
			t.Fatal("push refused")
		}
		o.push(i)
	}
	for k, typ := range types {
		if got := o.peek(); got != typ {
			t.Fatalf("arrival %d: peek = %d, want %d", k, got, typ)
		}
		if got := o.pop(); got != typ {
			t.Fatalf("arrival %d: pop = %d, want %d", k, got, typ)
		}
		if e := qs[typ].pop(); e.enq != int64(k) {
			t.Fatalf("arrival %d: queue %d's head enq = %d, want %d", k, typ, e.enq, k)
		}
	}
	if o.n != 0 {
		t.Errorf("order holds %d after every pop", o.n)
	}
}

// TestQueuesFollowThePool: a policy's queues take memory for its pool, not
// for each type's budget times the number of types. With 8,192 types and a
// pool of 1 Mi requests, building DARC allocated 768 MB of queues when each
// queue had a buffer of its own (a multi-tenant policy with 65,535 types:
// 7 GB).
func TestQueuesFollowThePool(t *testing.T) {
	const types, pool = 8192, 1 << 20
	for _, name := range PolicyNames() {
		var p Policy
		bytes := allocatedBy(func() {
			var err error
			if p, err = New(name, Config{Workers: 4, NumTypes: types, Pool: pool, StaticReserved: 1}); err != nil {
				t.Fatal(err)
			}
		})
		t.Logf("%s: %d types, pool %d: %.1f MB", name, types, pool, float64(bytes)/1e6)
		if bytes > 64<<20 {
			t.Errorf("%s: building the policy allocated %d bytes, want under 64 MiB", name, bytes)
		}
		runtime.KeepAlive(p)
	}
	tp, err := NewTenants(NameDARC, Config{Workers: 4, Pool: pool})
	if err != nil {
		t.Fatal(err)
	}
	bytes := allocatedBy(func() {
		for _, name := range []string{"a", "b", "c", "d"} {
			if _, err := tp.AddTenant(TenantConfig{Name: name, NumTypes: types}); err != nil {
				t.Fatal(err)
			}
		}
	})
	t.Logf("4 tenants of %d types, pool %d: %.1f MB", types, pool, float64(bytes)/1e6)
	if bytes > 64<<20 {
		t.Errorf("adding 4 tenants of %d types allocated %d bytes, want under 64 MiB", types, bytes)
	}
}

// TestBitsetNext: next finds the lowest id at or above i, across words.
func TestBitsetNext(t *testing.T) {
	b := make(bitset, 3)
	ids := []int{0, 5, 63, 64, 130, 191}
	for _, i := range ids {
		b.set(i)
	}
	for i := -1; i <= 192; i++ {
		want := -1
		for _, id := range ids {
			if id >= max(i, 0) && i >= 0 {
				want = id
				break
			}
		}
		if got := b.next(i); got != want {
			t.Errorf("next(%d) = %d, want %d", i, got, want)
		}
	}
}

// TestSparseSetAgainstMap: random sets and clears over 70,000 ids; next
// agrees with a map at every step's probe, and reset empties the set.
func TestSparseSetAgainstMap(t *testing.T) {
	const n = 70_000
	rng := rand.New(rand.NewPCG(3, 4))
	s := newSparseSet(n)
	in := map[int]bool{}
	for step := range 20_000 {
		i := rng.IntN(n)
		if rng.IntN(3) == 0 {
			s.clear(i)
			delete(in, i)
		} else {
			s.set(i)
			in[i] = true
		}
		from := rng.IntN(n + 64)
		want := -1
		for j := from; j < n; j++ {
			if in[j] {
				want = j
				break
			}
		}
		if step%50 == 0 || want-from < 5000 {
			if got := s.next(from); got != want {
				t.Fatalf("step %d: next(%d) = %d, want %d", step, from, got, want)
			}
		}
	}
	s.reset()
	if got := s.next(0); got != -1 {
		t.Errorf("after reset: next(0) = %d", got)
	}
	for k, w := range s.summary {
		if w != 0 {
			t.Errorf("after reset: summary word %d = %x", k, w)
		}
	}
}

// allocatedBy returns the bytes f allocates.
func allocatedBy(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestTenantsShareAGrowingArena: a multi-tenant policy without a pool
// gives its tenants' queues one arena with no bound; more requests than its
// first slots wait across two tenants, the arena grows, and every request
// comes out once.
func TestTenantsShareAGrowingArena(t *testing.T) {
	p := newTenantsT(t, Config{Workers: 2, MinSamples: 50, QueueCapacity: 1 << 17,
		Tenants: []TenantConfig{{Name: "a", NumTypes: 3}, {Name: "b", NumTypes: 3}}})
	a, _ := p.Base("a")
	b, _ := p.Base("b")
	const n = eagerSlots + 5000
	for i := range n {
		base := a
		if i%2 == 1 {
			base = b
		}
		if v := p.Enqueue(Request{Handle: uint64(i), Type: base + Type(1+i%2)}, int64(i)); v != Accepted {
			t.Fatalf("request %d: %v", i, v)
		}
	}
	if got := len(p.slots.slots); got <= eagerSlots {
		t.Fatalf("arena of %d slots with %d requests queued", got, n)
	}
	seen := make([]bool, n)
	out := make([]Assignment, 2)
	for done := 0; done < n; {
		k := p.Dispatch(int64(n), out)
		if k == 0 {
			t.Fatalf("%d of %d dispatched, then nothing", done, n)
		}
		for _, as := range out[:k] {
			if seen[as.Request.Handle] {
				t.Fatalf("request %d dispatched twice", as.Request.Handle)
			}
			seen[as.Request.Handle] = true
			p.Complete(as.Worker, as.Request.Type, 1000, int64(n))
			done++
		}
	}
}
