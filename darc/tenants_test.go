package darc

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// twoTenants is a config of 14 workers shared by tenants a (4 workers by
// count) and b and c (the other 10 by weight 1:2), each with the bimodal
// types (1 SHORT, 2 LONG).
func threeTenants() Config {
	return Config{Workers: 14, MinSamples: 50, Tenants: []TenantConfig{
		{Name: "a", NumTypes: 3, TypeNames: []string{"UNKNOWN", "SHORT", "LONG"}, Workers: 4, Profile: bimodal},
		{Name: "b", NumTypes: 3, Weight: 1},
		{Name: "c", NumTypes: 3, Weight: 2},
	}}
}

func newTenantsT(t *testing.T, cfg Config) *Tenants {
	t.Helper()
	p, err := New(NameDARC, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p.(*Tenants)
}

func tenantState(t *testing.T, p *Tenants, name string) TenantState {
	t.Helper()
	var s Snapshot
	p.Snapshot(&s)
	for _, ts := range s.Tenants {
		if ts.Name == name && !ts.Removed {
			return ts
		}
	}
	t.Fatalf("no tenant %q", name)
	return TenantState{}
}

func TestTenantHomesAndTypes(t *testing.T) {
	p := newTenantsT(t, threeTenants())
	var s Snapshot
	p.Snapshot(&s)
	want := map[string][]int{"a": {0, 1, 2, 3}, "b": {4, 5, 6}, "c": {7, 8, 9, 10, 11, 12, 13}}
	for _, ts := range s.Tenants {
		if !slices.Equal(ts.Home, want[ts.Name]) {
			t.Errorf("tenant %s home %v, want %v", ts.Name, ts.Home, want[ts.Name])
		}
	}
	if len(s.Types) != 10 || s.Types[1].Name != "a/UNKNOWN" || s.Types[2].Name != "a/SHORT" || s.Types[4].Name != "b/UNKNOWN" || s.Types[9].Name != "c/type2" {
		t.Errorf("types %v", typeNamesOf(s.Types))
	}
	// a reserved from its nominal profile, within its home: SHORT one
	// worker, LONG the rest plus its spillway.
	if len(s.Groups) != 2 || s.Groups[0].Tenant != "a" || !slices.Equal(s.Groups[0].Reserved, []int{0}) ||
		!slices.Equal(s.Groups[1].Reserved, []int{1, 2, 3}) || !slices.Equal(s.Groups[0].Types, []Type{2}) {
		t.Errorf("groups %+v", s.Groups)
	}
	if s.Phase != "startup" { // b and c still profile
		t.Errorf("phase %q", s.Phase)
	}
}

func typeNamesOf(ts []TypeState) []string {
	var n []string
	for _, t := range ts {
		n = append(n, t.Name)
	}
	return n
}

// dispatchAll runs Dispatch and returns the assignments.
func dispatchT(p Policy, now int64, workers int) []Assignment {
	out := make([]Assignment, workers)
	n := p.Dispatch(now, out)
	return out[:n]
}

func TestTenantLendsIdleWorkersAndTakesThemBack(t *testing.T) {
	p := newTenantsT(t, Config{Workers: 4, MinSamples: 1 << 20, Tenants: []TenantConfig{
		{Name: "a", NumTypes: 2, Workers: 2},
		{Name: "b", NumTypes: 2, Workers: 2},
	}})
	aType, _ := p.Base("a")
	bType, _ := p.Base("b")
	aType++
	bType++
	for h := range 5 {
		if v := p.Enqueue(Request{Handle: uint64(100 + h), Type: bType}, 0); v != Accepted {
			t.Fatal(v)
		}
	}
	as := dispatchT(p, 1, 4)
	workersOf := func(as []Assignment) []int {
		var ws []int
		for _, a := range as {
			ws = append(ws, a.Worker)
		}
		slices.Sort(ws)
		return ws
	}
	if got := workersOf(as); !slices.Equal(got, []int{0, 1, 2, 3}) {
		t.Fatalf("b's five requests went to workers %v, want all four (its own and a's idle ones)", got)
	}
	for _, a := range as {
		if a.Request.Type != bType {
			t.Fatalf("assignment %+v: type %d, want b's %d", a, a.Request.Type, bType)
		}
	}
	if st := tenantState(t, p, "b"); st.Busy != 4 || st.Borrowed != 2 {
		t.Fatalf("b: %+v", st)
	}
	if st := tenantState(t, p, "a"); st.Lent != 2 {
		t.Fatalf("a: %+v", st)
	}
	// a's request waits for one of its workers: the next one b's request
	// on it completes (b's fifth request waits, a comes first).
	if v := p.Enqueue(Request{Handle: 1, Type: aType}, 2); v != Accepted {
		t.Fatal(v)
	}
	if as := dispatchT(p, 3, 4); len(as) != 0 {
		t.Fatalf("dispatched %+v with every worker busy", as)
	}
	p.Complete(1, bType, 10, 4) // b's request on worker 1, a's, lent
	as = dispatchT(p, 5, 4)
	if len(as) != 1 || as[0].Worker != 1 || as[0].Request.Handle != 1 {
		t.Fatalf("after a lent worker came back: %+v, want a's request on it (before b's waiting one)", as)
	}
	if st := tenantState(t, p, "a"); st.Busy != 1 || st.Borrowed != 0 || st.Lent != 1 {
		t.Fatalf("a: %+v", st)
	}
	// b's own worker frees: b's fifth request takes it.
	p.Complete(3, bType, 10, 6)
	as = dispatchT(p, 7, 4)
	if len(as) != 1 || as[0].Request.Handle != 104 || as[0].Worker != 3 {
		t.Fatalf("%+v, want b's fifth request on worker 3", as)
	}
}

func TestTenantCeiling(t *testing.T) {
	p := newTenantsT(t, Config{Workers: 6, MinSamples: 1 << 20, Tenants: []TenantConfig{
		{Name: "a", NumTypes: 2, Workers: 4},
		{Name: "b", NumTypes: 2, Workers: 2, MaxWorkers: 3},
	}})
	b, _ := p.Base("b")
	for h := range 10 {
		p.Enqueue(Request{Handle: uint64(h), Type: b + 1}, 0)
	}
	if as := dispatchT(p, 1, 6); len(as) != 3 {
		t.Fatalf("b ran %d requests with a ceiling of 3: %+v", len(as), as)
	}
	if st := tenantState(t, p, "b"); st.Busy != 3 || st.Queued != 7 {
		t.Fatalf("b: %+v", st)
	}
}

// TestTenantPool: a tenant flooding the pool takes its guarantee and the
// tenants' shared part, never another tenant's guarantee.
func TestTenantPool(t *testing.T) {
	p := newTenantsT(t, Config{Workers: 2, Pool: 200, MinSamples: 1 << 20, Tenants: []TenantConfig{
		{Name: "a", NumTypes: 3},
		{Name: "b", NumTypes: 3},
	}})
	var s Snapshot
	p.Snapshot(&s)
	if s.Tenants[0].Guarantee != 50 || s.Tenants[1].Guarantee != 50 || s.Shared != 100 || s.Tenants[1].Budget != 150 {
		t.Fatalf("pool split: %+v shared %d", s.Tenants, s.Shared)
	}
	a, _ := p.Base("a")
	b, _ := p.Base("b")
	accepted := func(typ Type, n int) int {
		k := 0
		for range n {
			if p.Enqueue(Request{Handle: 1, Type: typ}, 0) == Accepted {
				k++
			}
		}
		return k
	}
	// One type of b: its guarantee, b's shared part and the tenants'
	// (8 + 32 + 100), leaving b's other types their guarantees.
	if got := accepted(b+1, 1000); got != 140 {
		t.Fatalf("b's flood: %d accepted, want 140", got)
	}
	// a keeps its whole guarantee, spread over its types: each type its
	// own guarantee, then a's shared part, not more (b took the tenants').
	got := accepted(a+1, 1000) + accepted(a+2, 1000) + accepted(a, 1000)
	if got != 50 {
		t.Fatalf("a accepted %d while b flooded, want its guarantee of 50", got)
	}
	p.Snapshot(&s)
	held := 0
	for _, ts := range s.Types {
		held += ts.Held
	}
	if held != 190 || s.Borrowed != 100 {
		t.Fatalf("held %d of 200, borrowed %d of 100", held, s.Borrowed)
	}
	// b's other type still has its guarantee.
	if got := accepted(b+2, 1000); got != 8 {
		t.Fatalf("b's second type: %d accepted, want its guarantee of 8", got)
	}
}

func TestTenantLifecycle(t *testing.T) {
	p := newTenantsT(t, Config{Workers: 6, Pool: 600, MinSamples: 1 << 20, Tenants: []TenantConfig{
		{Name: "a", NumTypes: 2},
		{Name: "b", NumTypes: 2},
	}})
	b, _ := p.Base("b")
	for h := range 10 {
		if v := p.Enqueue(Request{Handle: uint64(h), Type: b + 1}, 0); v != Accepted {
			t.Fatal(v)
		}
	}
	if as := dispatchT(p, 1, 6); len(as) != 6 {
		t.Fatalf("b ran %d", len(as))
	}
	c, err := p.AddTenant(TenantConfig{Name: "c", NumTypes: 4, Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	if c != 5 || p.NumTypes() != 9 {
		t.Fatalf("c's base %d, %d types", c, p.NumTypes())
	}
	if st := tenantState(t, p, "c"); !slices.Equal(st.Home, []int{4, 5}) || st.Lent != 2 {
		t.Fatalf("c: %+v (its home runs b's requests)", st)
	}
	if _, err := p.AddTenant(TenantConfig{Name: "c", NumTypes: 1}); err == nil {
		t.Fatal("a second tenant c was added")
	}
	if _, err := p.AddTenant(TenantConfig{Name: "d", NumTypes: 1, Workers: 6}); err == nil {
		t.Fatal("a tenant claiming every worker was added beside three others")
	}
	if err := p.RemoveTenant("b"); err != nil {
		t.Fatal(err)
	}
	if v := p.Enqueue(Request{Handle: 99, Type: b + 1}, 2); v != NoTenant {
		t.Fatalf("arrival for removed b: %v", v)
	}
	as := dispatchT(p, 3, 6)
	if len(as) != 4 {
		t.Fatalf("b's 4 queued requests: %+v", as)
	}
	for _, a := range as {
		if a.Worker != Removed || a.Request.Type != b+1 {
			t.Fatalf("%+v, want b's queued requests removed", a)
		}
	}
	// b's running requests complete; its workers go to a and c.
	for w := range 6 {
		p.Complete(w, b+1, 10, 4)
	}
	var s Snapshot
	p.Snapshot(&s)
	if s.IdleWorkers != 6 || len(s.Tenants) != 3 || !s.Tenants[1].Removed || s.Tenants[1].Held != 0 || s.Tenants[1].Busy != 0 {
		t.Fatalf("after draining b: idle %d, %+v", s.IdleWorkers, s.Tenants)
	}
	if st := tenantState(t, p, "a"); len(st.Home) != 4 {
		t.Fatalf("a: %+v", st)
	}
	if err := p.UpdateTenant(TenantConfig{Name: "a", NumTypes: 2, Workers: 3, MaxWorkers: 3}); err != nil {
		t.Fatal(err)
	}
	if st := tenantState(t, p, "a"); len(st.Home) != 3 || st.MaxWorkers != 3 {
		t.Fatalf("a after update: %+v", st)
	}
	if err := p.RemoveTenant("b"); !errors.Is(err, ErrUnknownTenant) {
		t.Fatalf("removing b twice: %v", err)
	}
	if _, ok := p.Base("b"); ok {
		t.Fatal("removed b has a base")
	}
	// A new b gets new type ids.
	nb, err := p.AddTenant(TenantConfig{Name: "b", NumTypes: 2})
	if err != nil || nb != 9 {
		t.Fatalf("new b: base %d, %v", nb, err)
	}
}

func TestTenantConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"types at top level", Config{Workers: 4, NumTypes: 3, Tenants: []TenantConfig{{Name: "a", NumTypes: 2}}}},
		{"no name", Config{Workers: 4, Tenants: []TenantConfig{{NumTypes: 2}}}},
		{"no types", Config{Workers: 4, Tenants: []TenantConfig{{Name: "a"}}}},
		{"duplicate", Config{Workers: 4, Tenants: []TenantConfig{{Name: "a", NumTypes: 2}, {Name: "a", NumTypes: 2}}}},
		{"too many workers", Config{Workers: 4, Tenants: []TenantConfig{{Name: "a", NumTypes: 2, Workers: 3}, {Name: "b", NumTypes: 2, Workers: 2}}}},
		{"no worker left", Config{Workers: 2, Tenants: []TenantConfig{{Name: "a", NumTypes: 2, Workers: 2}, {Name: "b", NumTypes: 2}}}},
		{"ceiling below home", Config{Workers: 4, Tenants: []TenantConfig{{Name: "a", NumTypes: 2, Workers: 3, MaxWorkers: 2}}}},
		{"buffers without pool", Config{Workers: 4, Tenants: []TenantConfig{{Name: "a", NumTypes: 2, Buffers: 10}}}},
		{"buffers over pool", Config{Workers: 4, Pool: 100, Tenants: []TenantConfig{{Name: "a", NumTypes: 2, Buffers: 80}, {Name: "b", NumTypes: 2, Buffers: 80}}}},
		{"pool too small", Config{Workers: 4, Pool: 10, Tenants: []TenantConfig{{Name: "a", NumTypes: 20}}}},
		{"negative weight", Config{Workers: 4, Tenants: []TenantConfig{{Name: "a", NumTypes: 2, Weight: -1}}}},
	} {
		if _, err := New(NameDARC, tc.cfg); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: err = %v, want ErrInvalidConfig", tc.name, err)
		}
	}
	if _, err := New(NameCFCFS, Config{Workers: 4, Tenants: []TenantConfig{{Name: "a", NumTypes: 2}}}); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("cfcfs with tenants: %v", err)
	}
}

// TestTenantRandomInvariants drives the multi-tenant policy with random
// arrivals, completions and lifecycle changes and checks what must always
// hold: a dispatched worker was idle; each request leaves once (dispatched,
// expired or removed) and with its own tenant's type; within a tenant,
// per-type FIFO order; a tenant's UNKNOWN runs on its own spillway; no
// tenant above its ceiling; pool budgets at both levels; a tenant's idle
// home worker is never left idle while it has a request the worker could
// take... checked as DARC itself is (see runInvariants); and the counters
// add up after a drain.
func TestTenantRandomInvariants(t *testing.T) {
	for _, name := range []string{NameDARC, NameDARCStatic} {
		for seed := range uint64(3) {
			cfg := Config{Workers: 9, Pool: 400, MinSamples: 40, DeadlineFactor: 3, DeadlineFloor: 1, StaticReserved: 1,
				Tenants: []TenantConfig{
					{Name: "a", NumTypes: 3, Workers: 3, Profile: bimodal},
					{Name: "b", NumTypes: 4, Weight: 2, MaxWorkers: 6},
					{Name: "c", NumTypes: 2, Buffers: 20},
				}}
			runTenantInvariants(t, name, cfg, seed)
		}
	}
}

func runTenantInvariants(t *testing.T, name string, cfg Config, seed uint64) {
	t.Helper()
	pol, err := New(name, cfg)
	if err != nil {
		t.Fatal(err)
	}
	p := pol.(*Tenants)
	rng := rand.New(rand.NewPCG(seed, 7))
	workers := cfg.Workers
	running := make([]Request, workers)
	busy := make([]bool, workers)
	left := map[uint64]bool{}
	typeOf := map[uint64]Type{}
	lastHandle := map[Type]uint64{}
	out := make([]Assignment, workers)
	var accepted, dispatched, expired, removed, handle, lent uint64
	now := int64(0)
	var s Snapshot
	tenantOf := func(typ Type) *TenantState {
		for i := range s.Tenants {
			ts := &s.Tenants[i]
			if typ >= ts.Base && typ < ts.Base+Type(ts.NumTypes) {
				return ts
			}
		}
		return nil
	}
	added := 0
	for step := range 30000 {
		now += int64(rng.IntN(2000))
		switch r := rng.IntN(200); {
		case r < 120:
			handle++
			typ := Type(rng.IntN(p.NumTypes() + 1))
			if p.Enqueue(Request{Handle: handle, Type: typ}, now) == Accepted {
				accepted++
				typeOf[handle] = typ
			}
		case r < 198:
			w := rng.IntN(workers)
			if busy[w] {
				busy[w] = false
				r := running[w]
				p.Complete(w, r.Type, int64(1000*(1+int(r.Type)%3*10)), now)
			}
		}
		switch {
		case step%5000 == 2500:
			added++
			tc := TenantConfig{Name: "n" + string(rune('0'+added)), NumTypes: 1 + rng.IntN(3)}
			if _, err := p.AddTenant(tc); err != nil {
				t.Fatalf("step %d: add: %v", step, err)
			}
		case step%7000 == 3500:
			p.Snapshot(&s)
			var live []string
			for _, ts := range s.Tenants {
				if !ts.Removed {
					live = append(live, ts.Name)
				}
			}
			if len(live) > 1 {
				if err := p.RemoveTenant(live[rng.IntN(len(live))]); err != nil {
					t.Fatalf("step %d: remove: %v", step, err)
				}
			}
		}
		n := p.Dispatch(now, out[:rng.IntN(workers)+1])
		p.Snapshot(&s)
		for _, a := range out[:n] {
			h := a.Request.Handle
			if left[h] {
				t.Fatalf("%s step %d: request %d left twice", name, step, h)
			}
			left[h] = true
			if a.Request.Type != typeOf[h] {
				t.Fatalf("%s step %d: request %d left as type %d, enqueued as %d", name, step, h, a.Request.Type, typeOf[h])
			}
			switch a.Worker {
			case Expired:
				expired++
				continue
			case Removed:
				if ts := tenantOf(a.Request.Type); ts == nil || !ts.Removed {
					t.Fatalf("%s step %d: request %d removed, its tenant %+v was not", name, step, h, ts)
				}
				removed++
				continue
			}
			if busy[a.Worker] {
				t.Fatalf("%s step %d: worker %d dispatched while busy", name, step, a.Worker)
			}
			if h < lastHandle[a.Request.Type] {
				t.Fatalf("%s step %d: type %d out of FIFO order", name, step, a.Request.Type)
			}
			lastHandle[a.Request.Type] = h
			ts := tenantOf(a.Request.Type)
			if !slices.Contains(ts.Home, a.Worker) {
				lent++
			}
			if a.Request.Type == ts.Base && !slices.Contains(ts.Home, a.Worker) {
				t.Fatalf("%s step %d: tenant %s's UNKNOWN on worker %d, outside its home %v", name, step, ts.Name, a.Worker, ts.Home)
			}
			busy[a.Worker] = true
			running[a.Worker] = a.Request
			dispatched++
		}
		held := 0
		for _, ts := range s.Types {
			held += ts.Held
			if ts.Budget > 0 && ts.Held > ts.Budget {
				t.Fatalf("%s step %d: type %d holds %d, budget %d", name, step, ts.Type, ts.Held, ts.Budget)
			}
		}
		if held > cfg.Pool || s.Borrowed > s.Shared {
			t.Fatalf("%s step %d: %d held of a pool of %d, borrowed %d of %d", name, step, held, cfg.Pool, s.Borrowed, s.Shared)
		}
		busyN := 0
		for _, ts := range s.Tenants {
			busyN += ts.Busy
			if ts.MaxWorkers > 0 && ts.Busy > ts.MaxWorkers {
				t.Fatalf("%s step %d: tenant %s runs %d requests, ceiling %d", name, step, ts.Name, ts.Busy, ts.MaxWorkers)
			}
			if !ts.Removed && ts.Budget > 0 && ts.Held > ts.Budget {
				t.Fatalf("%s step %d: tenant %s holds %d, budget %d", name, step, ts.Name, ts.Held, ts.Budget)
			}
		}
		idle := 0
		for w, b := range busy {
			if b != s.Busy[w] {
				t.Fatalf("%s step %d: worker %d busy = %v, snapshot says %v", name, step, w, b, s.Busy[w])
			}
			if !b {
				idle++
			}
		}
		if idle != s.IdleWorkers || busyN != workers-idle {
			t.Fatalf("%s step %d: %d idle (snapshot %d), tenants busy %d", name, step, idle, s.IdleWorkers, busyN)
		}
	}
	if dispatched == 0 || expired == 0 || lent == 0 || removed == 0 || added == 0 || s.Reservations < 4 {
		t.Fatalf("%s: degenerate run: dispatched %d expired %d lent %d removed %d, %d tenants added, %d reservations",
			name, dispatched, expired, lent, removed, added, s.Reservations)
	}
	// Drain.
	d, e, r := drainAll(p, now, busy, running, out)
	dispatched, expired, removed = dispatched+d, expired+e, removed+r
	if dispatched+expired+removed != accepted {
		t.Fatalf("%s: %d accepted, %d dispatched + %d expired + %d removed after draining", name, accepted, dispatched, expired, removed)
	}
	p.Snapshot(&s)
	for _, ts := range s.Types {
		if ts.Held != 0 || ts.Queued != 0 {
			t.Fatalf("%s: type %d holds %d (queued %d) after draining", name, ts.Type, ts.Held, ts.Queued)
		}
	}
}

func TestTenantNoAlloc(t *testing.T) {
	p := newTenantsT(t, Config{Workers: 8, Pool: 800, MinSamples: 100, Tenants: []TenantConfig{
		{Name: "a", NumTypes: 3, Profile: bimodal},
		{Name: "b", NumTypes: 3},
	}})
	out := make([]Assignment, 8)
	running := make([]Type, 8)
	busy := make([]bool, 8)
	now := int64(0)
	h := uint64(0)
	step := func() {
		now += 1000
		for i := range 4 {
			h++
			p.Enqueue(Request{Handle: h, Type: Type(2 + i)}, now)
		}
		n := p.Dispatch(now, out)
		for _, a := range out[:n] {
			if a.Worker >= 0 {
				busy[a.Worker], running[a.Worker] = true, a.Request.Type
			}
		}
		for w := range busy {
			if busy[w] {
				busy[w] = false
				p.Complete(w, running[w], 1000, now)
			}
		}
	}
	for range 1000 {
		step()
	}
	if n := testing.AllocsPerRun(1000, step); n != 0 {
		t.Fatalf("%v allocations per step", n)
	}
}

// TestTenantKeepsShortWorkers: a tenant keeps its short group's workers
// for requests ten times shorter than its own short ones, and one spare
// of its long group (unless LendAll); its long group's other workers go
// to any request.
func TestTenantKeepsShortWorkers(t *testing.T) {
	// a: SHORT (10 us, 90%) on workers 0-1, LONG (100 us) on 2-3.
	aProfile := []TypeProfile{{Type: 1, MeanNs: 10000, Ratio: 0.9}, {Type: 2, MeanNs: 100000, Ratio: 0.1}}
	for _, c := range []struct {
		name    string
		bMean   float64 // b's requests' profiled mean (0: not profiled)
		lendAll bool
		want    []int
	}{
		{"b unprofiled", 0, false, []int{3, 4, 5}}, // 2 is a's spare
		{"b long", 50000, false, []int{3, 4, 5}},
		{"b as short as a's SHORT", 10000, false, []int{3, 4, 5}},
		{"b ten times shorter", 1000, false, []int{0, 1, 3, 4, 5}},
		{"LendAll", 50000, true, []int{0, 1, 2, 3, 4, 5}},
	} {
		bt := TenantConfig{Name: "b", NumTypes: 2, Workers: 2}
		if c.bMean > 0 {
			bt.Profile = []TypeProfile{{Type: 1, MeanNs: c.bMean, Ratio: 1}}
		}
		p := newTenantsT(t, Config{Workers: 6, MinSamples: 1 << 20, LendAll: c.lendAll, Tenants: []TenantConfig{
			{Name: "a", NumTypes: 3, Workers: 4, Profile: aProfile}, bt}})
		var s Snapshot
		p.Snapshot(&s)
		if g := s.Groups[0]; !slices.Equal(g.Reserved, []int{0, 1}) {
			t.Fatalf("a's groups %+v", s.Groups)
		}
		b, _ := p.Base("b")
		for h := range 10 {
			p.Enqueue(Request{Handle: uint64(h), Type: b + 1}, 0)
		}
		var ws []int
		for _, a := range dispatchT(p, 1, 6) {
			ws = append(ws, a.Worker)
		}
		slices.Sort(ws)
		if !slices.Equal(ws, c.want) {
			t.Errorf("%s: b ran on %v, want %v", c.name, ws, c.want)
		}
	}
}

func TestTenantsStartEmpty(t *testing.T) {
	p, err := NewTenants(NameDARC, Config{Workers: 4, Pool: 100})
	if err != nil {
		t.Fatal(err)
	}
	if v := p.Enqueue(Request{Handle: 1, Type: 1}, 0); v != NoTenant {
		t.Fatalf("enqueue with no tenant: %v", v)
	}
	if n := p.Dispatch(0, make([]Assignment, 4)); n != 0 {
		t.Fatalf("dispatched %d", n)
	}
	base, err := p.AddTenant(TenantConfig{Name: "a", NumTypes: 2})
	if err != nil || base != 1 {
		t.Fatalf("first tenant: base %d, %v", base, err)
	}
	if v := p.Enqueue(Request{Handle: 1, Type: base + 1}, 0); v != Accepted {
		t.Fatalf("enqueue: %v", v)
	}
}

// TestRetireReusesTypeIDs: a removed tenant that holds nothing can be
// retired; its slot and type ids go to the next tenant, so that adding
// and removing a 1,024-type tenant again and again neither grows the type
// space nor runs out of it (65,536 ids: 64 such tenants without reuse).
func TestRetireReusesTypeIDs(t *testing.T) {
	p, err := NewTenants(NameDARC, Config{Workers: 4, QueueCapacity: 16, Tenants: []TenantConfig{{Name: "a", NumTypes: 3}}})
	if err != nil {
		t.Fatal(err)
	}
	base, err := p.AddTenant(TenantConfig{Name: "big", NumTypes: 1024})
	if err != nil {
		t.Fatal(err)
	}
	if v := p.Enqueue(Request{Handle: 1, Type: base + 1}, 0); v != Accepted {
		t.Fatalf("enqueue: %v", v)
	}
	if err := p.RemoveTenant("big"); err != nil {
		t.Fatal(err)
	}
	if err := p.Retire(base); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("retire while it holds a request: %v", err)
	}
	out := make([]Assignment, 4)
	if n := p.Dispatch(1, out); n != 1 || out[0].Worker != Removed {
		t.Fatalf("dispatch after removal: %d %+v", n, out[:n])
	}
	if err := p.Retire(base); err != nil {
		t.Fatal(err)
	}
	if err := p.Retire(base); !errors.Is(err, ErrUnknownTenant) {
		t.Fatalf("retire twice: %v", err)
	}
	types := p.NumTypes()
	for i := range 200 { // 200 x 1,024 ids: three times the type space
		name := fmt.Sprintf("big%d", i)
		b, err := p.AddTenant(TenantConfig{Name: name, NumTypes: 1024})
		if err != nil {
			t.Fatalf("cycle %d: %v", i, err)
		}
		if b != base {
			t.Fatalf("cycle %d: base %d, want the retired range at %d", i, b, base)
		}
		if v := p.Enqueue(Request{Handle: 2, Type: b + 5}, 0); v != Accepted {
			t.Fatalf("cycle %d: enqueue %v", i, v)
		}
		if n := p.Dispatch(2, out); n != 1 || out[0].Worker < 0 {
			t.Fatalf("cycle %d: dispatch %d %+v", i, n, out[:n])
		}
		p.Complete(out[0].Worker, out[0].Request.Type, 10, 3)
		if err := p.RemoveTenant(name); err != nil {
			t.Fatal(err)
		}
		if err := p.Retire(b); err != nil {
			t.Fatalf("cycle %d: %v", i, err)
		}
	}
	var s Snapshot
	p.Snapshot(&s)
	if p.NumTypes() != types || len(p.tenants) != 2 || len(s.Tenants) != 1 || s.Tenants[0].Name != "a" {
		t.Fatalf("after 200 cycles: %d types (was %d), %d slots, tenants %+v", p.NumTypes(), types, len(p.tenants), s.Tenants)
	}
	if v := p.Enqueue(Request{Handle: 3, Type: base + 1}, 0); v != NoTenant {
		t.Fatalf("a retired range's type: %v, want NoTenant", v)
	}
	// A smaller tenant takes the front of a free range, a larger one a new range.
	small, _ := p.AddTenant(TenantConfig{Name: "small", NumTypes: 10})
	large, _ := p.AddTenant(TenantConfig{Name: "large", NumTypes: 2000})
	if small != base || int(large) != types {
		t.Fatalf("small at %d (want %d), large at %d (want %d)", small, base, large, types)
	}
}
