package darc

import (
	"math"
	"slices"
	"testing"
)

// bimodal is a High Bimodal profile: SHORT (1) 1 µs and LONG (2) 100 µs,
// half each.
var bimodal = []TypeProfile{{Type: 1, MeanNs: 1000, Ratio: 0.5}, {Type: 2, MeanNs: 100000, Ratio: 0.5}}

func newTestDARC(t *testing.T, cfg Config) *DARC {
	t.Helper()
	p, err := NewDARC(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func workersOf(as []Assignment) []int {
	var ws []int
	for _, a := range as {
		ws = append(ws, a.Worker)
	}
	return ws
}

func handlesOf(as []Assignment) []uint64 {
	var hs []uint64
	for _, a := range as {
		hs = append(hs, a.Request.Handle)
	}
	return hs
}

// Algorithm 1 on 4 workers: SHORT has worker 0, LONG workers 1-3 (3 is the
// spillway).
func TestDARCWorkerSelection(t *testing.T) {
	p := newTestDARC(t, Config{Workers: 4, NumTypes: 3, Profile: bimodal})
	var s Snapshot
	p.Snapshot(&s)
	if s.Phase != "darc" || len(s.Groups) != 2 || !slices.Equal(s.Groups[0].Reserved, []int{0}) ||
		!slices.Equal(s.Groups[1].Reserved, []int{1, 2, 3}) {
		t.Fatalf("reservation %+v", s.Groups)
	}
	// Long requests arrive first, but short ones are served first: the first
	// on its reserved worker, the second stolen from LONG's worker 1.
	for i := range 3 {
		p.Enqueue(req(uint64(10+i), 2), 0)
	}
	p.Enqueue(req(1, 1), 1)
	p.Enqueue(req(2, 1), 1)
	p.Enqueue(req(99, Unknown), 1)
	got := dispatchAll(t, p, 2)
	if !slices.Equal(workersOf(got), []int{0, 1, 2, 3}) || !slices.Equal(handlesOf(got), []uint64{1, 2, 10, 11}) {
		t.Fatalf("dispatch = %v", got)
	}
	// Worker 0 frees up: LONG never steals SHORT's worker, Unknown never
	// leaves the spillway worker.
	p.Complete(0, 1, 1000, 3)
	if got := dispatchAll(t, p, 3); len(got) != 0 {
		t.Fatalf("long or unknown took the short type's worker: %v", got)
	}
	// A new short request takes its reserved worker.
	p.Enqueue(req(3, 1), 4)
	if got := dispatchAll(t, p, 4); !slices.Equal(workersOf(got), []int{0}) || got[0].Request.Handle != 3 {
		t.Fatalf("dispatch = %v", got)
	}
	// Worker 1 frees up: the waiting LONG request takes it.
	p.Complete(1, 1, 1000, 5)
	if got := dispatchAll(t, p, 5); !slices.Equal(handlesOf(got), []uint64{12}) || got[0].Worker != 1 {
		t.Fatalf("dispatch = %v", got)
	}
	// The spillway worker frees up: no known request waits, Unknown runs.
	p.Complete(3, 2, 100000, 6)
	if got := dispatchAll(t, p, 6); !slices.Equal(handlesOf(got), []uint64{99}) || got[0].Worker != 3 {
		t.Fatalf("dispatch = %v", got)
	}
}

// Known types take precedence over Unknown even on the spillway worker.
func TestDARCUnknownLowestPriority(t *testing.T) {
	p := newTestDARC(t, Config{Workers: 2, NumTypes: 3, Profile: bimodal})
	p.Enqueue(req(99, Unknown), 0)
	p.Enqueue(req(1, 2), 1)
	p.Enqueue(req(2, 2), 1)
	got := dispatchAll(t, p, 2)
	// LONG holds worker 1 (the spillway) and steals nothing; worker 0 is
	// SHORT's: the second LONG request and Unknown both wait.
	if !slices.Equal(handlesOf(got), []uint64{1}) || got[0].Worker != 1 {
		t.Fatalf("dispatch = %v", got)
	}
	p.Complete(1, 2, 100000, 3)
	if got := dispatchAll(t, p, 3); !slices.Equal(handlesOf(got), []uint64{2}) {
		t.Fatalf("dispatch = %v", got)
	}
}

// The startup phase is c-FCFS (arrival order, lowest idle worker) over known
// types, Unknown on the spillway only, until MinSamples completions.
func TestDARCStartup(t *testing.T) {
	p := newTestDARC(t, Config{Workers: 3, NumTypes: 3, MinSamples: 4})
	p.Enqueue(req(99, Unknown), 0)
	p.Enqueue(req(1, 2), 1)
	p.Enqueue(req(2, 1), 2)
	p.Enqueue(req(3, 2), 3)
	p.Enqueue(req(4, 1), 4)
	got := dispatchAll(t, p, 5)
	if !slices.Equal(handlesOf(got), []uint64{1, 2, 3}) || !slices.Equal(workersOf(got), []int{0, 1, 2}) {
		t.Fatalf("startup dispatch = %v", got)
	}
	var s Snapshot
	p.Snapshot(&s)
	if s.Phase != "startup" || s.Reservations != 0 || len(s.Groups) != 0 {
		t.Fatalf("snapshot in startup: %+v", s)
	}
	p.Complete(0, 2, 100000, 6) // worker 0 idle: FIFO gives it request 4
	if got := dispatchAll(t, p, 6); !slices.Equal(handlesOf(got), []uint64{4}) {
		t.Fatalf("dispatch = %v", got)
	}
	p.Complete(2, 2, 100000, 7) // the spillway is idle: Unknown runs
	if got := dispatchAll(t, p, 7); !slices.Equal(handlesOf(got), []uint64{99}) || got[0].Worker != 2 {
		t.Fatalf("dispatch = %v", got)
	}
	p.Complete(1, 1, 1000, 8)
	p.Complete(2, Unknown, 5000, 8) // Unknown is not profiled
	p.Snapshot(&s)
	if s.Phase != "startup" {
		t.Fatalf("left startup after 3 known completions")
	}
	p.Complete(0, 1, 1000, 9)
	p.Snapshot(&s)
	if s.Phase != "darc" || s.Reservations != 1 {
		t.Fatalf("phase %q reservations %d after MinSamples", s.Phase, s.Reservations)
	}
	// 2 SHORT at 1 µs, 2 LONG at 100 µs: SHORT demand 3*0.0099 -> worker 0.
	checkGroups(t, s.Groups, []wantGroup{
		{[]Type{1}, 3 * 1000.0 / 101000, []int{0}, []int{1, 2}, false},
		{[]Type{2}, 3 * 100000.0 / 101000, []int{1, 2}, nil, true},
	})
	if s.Types[1].MeanService != 1000 || s.Types[2].MeanService != 100000 || s.Types[1].Ratio != 0.5 || s.Types[1].Count != 0 {
		t.Fatalf("types after startup: %+v", s.Types)
	}
}

// feed records n completions of type typ lasting service ns each.
func feed(p Policy, typ Type, n int, service int64) {
	for range n {
		p.Complete(0, typ, service, 0)
	}
}

// backlog enqueues two requests of type typ at time at: the second-oldest
// waits from then on.
func backlog(p Policy, typ Type, at int64) {
	p.Enqueue(req(1000, typ), at)
	p.Enqueue(req(1001, typ), at)
}

func TestDARCUpdateRules(t *testing.T) {
	const minSamples = 100
	tests := []struct {
		name      string
		window    func(p *DARC) // completions fed in the window
		wantCheck bool
		wantNew   bool // a new reservation is adopted
		wantTypes [][]Type
		wantRes   [][]int
	}{{
		name:      "demand within 10%: no update",
		window:    func(p *DARC) { feed(p, 1, 52, 1000); feed(p, 2, 48, 100000) },
		wantCheck: true,
		wantTypes: [][]Type{{1}, {2}},
		wantRes:   [][]int{{0}, ids(1, 14)},
	}, {
		name:      "demand beyond 10%: update",
		window:    func(p *DARC) { feed(p, 1, 50, 20000); feed(p, 2, 50, 100000) },
		wantCheck: true,
		wantNew:   true,
		wantTypes: [][]Type{{1}, {2}},
		wantRes:   [][]int{{0, 1}, ids(2, 14)},
	}, {
		name:      "new type: update",
		window:    func(p *DARC) { feed(p, 1, 50, 1000); feed(p, 2, 49, 100000); feed(p, 3, 1, 50000) },
		wantCheck: true,
		wantNew:   true,
		wantTypes: [][]Type{{1}, {3}, {2}},
		wantRes:   [][]int{{0}, {1}, ids(2, 14)},
	}, {
		name:      "type absent: update, it keeps its order but no group",
		window:    func(p *DARC) { feed(p, 2, 100, 100000) },
		wantCheck: true,
		wantNew:   true,
		wantTypes: [][]Type{{2}},
		wantRes:   [][]int{ids(0, 14)},
	}, {
		name:      "fewer than MinSamples: no check",
		window:    func(p *DARC) { feed(p, 1, 50, 20000); feed(p, 2, 49, 100000) },
		wantTypes: [][]Type{{1}, {2}},
		wantRes:   [][]int{{0}, ids(1, 14)},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newTestDARC(t, Config{Workers: 14, NumTypes: 4, MinSamples: minSamples, DelayFactor: 1, Profile: bimodal})
			// All workers busy so the backlog stays queued.
			for i := range 13 {
				p.Enqueue(req(uint64(i), 2), 0)
			}
			p.Enqueue(req(13, 1), 0)
			if n := len(dispatchAll(t, p, 0)); n != 14 {
				t.Fatalf("%d dispatched, want 14", n)
			}
			tt.window(p)
			backlog(p, 1, 10)
			dispatchAll(t, p, 10+1001) // SHORT's second request waited 1001 ns > 1x 1000 ns
			if got := p.checks == 1; got != tt.wantCheck {
				t.Fatalf("checked = %v, want %v", got, tt.wantCheck)
			}
			var s Snapshot
			p.Snapshot(&s)
			if want := uint64(1) + map[bool]uint64{true: 1}[tt.wantNew]; s.Reservations != want {
				t.Errorf("reservations = %d, want %d", s.Reservations, want)
			}
			if len(s.Groups) != len(tt.wantTypes) {
				t.Fatalf("groups %+v", s.Groups)
			}
			for g := range s.Groups {
				if !slices.Equal(s.Groups[g].Types, tt.wantTypes[g]) || !slices.Equal(s.Groups[g].Reserved, tt.wantRes[g]) {
					t.Errorf("group %d = %+v, want types %v reserved %v", g, s.Groups[g], tt.wantTypes[g], tt.wantRes[g])
				}
			}
			if tt.wantCheck && s.Types[1].Count+s.Types[2].Count != 0 {
				t.Errorf("window not reset after the check: %+v", s.Types)
			}
			if !tt.wantCheck && s.Types[2].Count == 0 {
				t.Errorf("window reset without a check")
			}
		})
	}
}

// A type absent from the window keeps its mean for the dispatch order and
// runs on the longest group's workers.
func TestDARCAbsentTypeDispatch(t *testing.T) {
	p := newTestDARC(t, Config{Workers: 4, NumTypes: 3, MinSamples: 10, DelayFactor: 1, Profile: bimodal})
	for i := range 3 {
		p.Enqueue(req(uint64(i), 2), 0)
	}
	p.Enqueue(req(3, 1), 0)
	dispatchAll(t, p, 0) // every worker busy
	feed(p, 2, 10, 100000)
	backlog(p, 2, 1)
	dispatchAll(t, p, 1+100001)
	if !slices.Equal(p.order, []Type{1, 2}) || p.cur.groupOf[1] != -1 || !slices.Equal(p.res[1], p.res[2]) {
		t.Fatalf("order %v, SHORT group %d", p.order, p.cur.groupOf[1])
	}
	// SHORT (absent) and LONG now share workers 0-3; SHORT still goes first.
	p.Complete(2, 2, 100000, 2e5)
	p.Enqueue(req(7, 1), 2e5)
	got := dispatchAll(t, p, 2e5)
	if !slices.Equal(handlesOf(got), []uint64{7}) || got[0].Worker != 2 {
		t.Fatalf("dispatch = %v", got)
	}
}

func TestDARCDelayFactor(t *testing.T) {
	for _, tt := range []struct {
		factor float64
		wait   int64
		want   uint64
	}{{1, 1000, 0}, {1, 1001, 1}, {10, 5000, 0}, {10, 10001, 1}} {
		p := newTestDARC(t, Config{Workers: 2, NumTypes: 3, MinSamples: 10, DelayFactor: tt.factor, Profile: bimodal})
		p.Enqueue(req(0, 1), 0)
		p.Enqueue(req(1, 2), 0)
		dispatchAll(t, p, 0) // both workers busy
		feed(p, 1, 5, 1000)
		feed(p, 2, 5, 100000)
		p.Enqueue(req(1, 1), 0) // the oldest may wait any time: not a backlog
		backlog(p, 1, 100)
		dispatchAll(t, p, 100+tt.wait)
		if p.checks != tt.want {
			t.Errorf("factor %v, wait %d: %d checks, want %d", tt.factor, tt.wait, p.checks, tt.want)
		}
	}
}

func TestDARCStatic(t *testing.T) {
	for _, tt := range []struct {
		reserved int
		want     []wantGroup
	}{
		{0, []wantGroup{{[]Type{1}, 0.04, nil, ids(0, 4), false}, {[]Type{2}, 3.96, ids(0, 4), nil, false}}},
		{2, []wantGroup{{[]Type{1}, 0.04, []int{0, 1}, []int{2, 3}, false}, {[]Type{2}, 3.96, []int{2, 3}, nil, false}}},
		{4, []wantGroup{{[]Type{1}, 0.04, ids(0, 4), nil, false}, {[]Type{2}, 3.96, []int{3}, nil, true}}},
	} {
		p, err := NewDARCStatic(Config{Workers: 4, NumTypes: 3, StaticReserved: tt.reserved, Profile: bimodal})
		if err != nil {
			t.Fatal(err)
		}
		var s Snapshot
		p.Snapshot(&s)
		if s.Policy != NameDARCStatic {
			t.Errorf("policy %q", s.Policy)
		}
		checkGroups(t, s.Groups, tt.want)
	}
}

func TestSnapshot(t *testing.T) {
	p := newTestDARC(t, Config{Workers: 3, TypeNames: []string{"UNKNOWN", "SHORT", "LONG"}, Profile: bimodal})
	p.Enqueue(req(1, 2), 0)
	p.Enqueue(req(2, 2), 0)
	p.Enqueue(req(3, 7), 0) // out of range: Unknown
	dispatchAll(t, p, 0)
	s := Snapshot{Busy: make([]bool, 10), Types: make([]TypeState, 10)}
	p.Snapshot(&s)
	if s.Policy != "darc" || s.Workers != 3 || s.IdleWorkers != 1 || !slices.Equal(s.Busy, []bool{false, true, true}) {
		t.Fatalf("snapshot %+v", s)
	}
	if len(s.Types) != 3 {
		t.Fatalf("%d type states, want 3", len(s.Types))
	}
	want := []TypeState{
		{Type: 0, Name: "UNKNOWN", Queued: 1, Held: 1, Enqueued: 1, Capacity: 4096, DeadlineNs: DefaultDeadlineFloor},
		{Type: 1, Name: "SHORT", MeanService: 1000, Ratio: 0.5, Capacity: 4096, DeadlineNs: DefaultDeadlineFloor},
		{Type: 2, Name: "LONG", MeanService: 100000, Ratio: 0.5, Held: 2, Enqueued: 2, Dispatched: 2, Capacity: 4096, DeadlineNs: DefaultDeadlineFloor},
	}
	if !slices.Equal(s.Types, want) {
		t.Fatalf("types = %+v\nwant %+v", s.Types, want)
	}
	// Reusing the snapshot keeps the group slices.
	before := &s.Groups[0].Reserved[0]
	p.Snapshot(&s)
	if &s.Groups[0].Reserved[0] != before {
		t.Errorf("snapshot did not reuse its group slices")
	}
}

func TestConfigValidate(t *testing.T) {
	good := Config{Workers: 4, NumTypes: 3}
	if err := good.Validate(); err != nil {
		t.Fatalf("valid config: %v", err)
	}
	for _, h := range []float64{-1, 0.5} { // off; widest band
		if err := (Config{Workers: 4, NumTypes: 3, Hysteresis: h}).Validate(); err != nil {
			t.Errorf("hysteresis %v: %v", h, err)
		}
	}
	for _, tt := range []struct {
		name string
		cfg  Config
	}{
		{"no workers", Config{NumTypes: 2}},
		{"no types", Config{Workers: 2}},
		{"negative queue", Config{Workers: 2, NumTypes: 2, QueueCapacity: -1}},
		{"negative delta", Config{Workers: 2, NumTypes: 2, Delta: -0.1}},
		{"spillway > workers", Config{Workers: 2, NumTypes: 2, Spillway: 3}},
		{"static > workers", Config{Workers: 2, NumTypes: 2, StaticReserved: 3}},
		{"hysteresis > 0.5", Config{Workers: 2, NumTypes: 2, Hysteresis: 0.6}},
		{"hysteresis NaN", Config{Workers: 2, NumTypes: 2, Hysteresis: math.NaN()}},
		{"too many names", Config{Workers: 2, NumTypes: 2, TypeNames: []string{"a", "b", "c"}}},
		{"profile type out of range", Config{Workers: 2, NumTypes: 2, Profile: []TypeProfile{{2, 1, 1}}}},
	} {
		if err := tt.cfg.Validate(); err == nil {
			t.Errorf("%s: no error", tt.name)
		}
		if _, err := NewDARC(tt.cfg); err == nil {
			t.Errorf("%s: NewDARC accepted it", tt.name)
		}
	}
	if got := (Config{Workers: 4, NumTypes: 3}).String(); got != "workers=4 types=3 queue=4096 delta=0.2 spillway=1 min-samples=50000 max-window=100000 delay-factor=1 demand-deviation=0.1 hysteresis=0.25 static-reserved=0 pool=0 guaranteed=0.5 deadline-factor=10 deadline-floor=200000000ns" {
		t.Errorf("String() = %q", got)
	}
}

// Without a profile DARC-static profiles first, then reserves for the type
// found shortest.
func TestDARCStaticProfiles(t *testing.T) {
	p, err := NewDARCStatic(Config{Workers: 4, NumTypes: 4, StaticReserved: 1, MinSamples: 4})
	if err != nil {
		t.Fatal(err)
	}
	feed(p, 1, 2, 50000)
	feed(p, 3, 1, 2000)
	var s Snapshot
	p.Snapshot(&s)
	if s.Phase != "startup" {
		t.Fatalf("phase %q before MinSamples", s.Phase)
	}
	feed(p, 2, 1, 9000)
	p.Snapshot(&s)
	checkGroups(t, s.Groups, []wantGroup{
		{[]Type{3}, 4 * 2000.0 / 111000, []int{0}, []int{1, 2, 3}, false},
		{[]Type{2, 1}, 4 * 109000.0 / 111000, []int{1, 2, 3}, nil, false},
	})
}

// More than 64 workers: the worker sets span several words.
func TestDARCManyWorkers(t *testing.T) {
	const workers = 130
	p := newTestDARC(t, Config{Workers: workers, NumTypes: 3, Profile: bimodal})
	var s Snapshot
	p.Snapshot(&s)
	// SHORT demand 130*0.0099 = 1.29 -> 1; LONG 128.7 -> 129 = all that is left.
	checkGroups(t, s.Groups, []wantGroup{
		{[]Type{1}, 1.287, []int{0}, ids(1, workers), false},
		{[]Type{2}, 128.713, ids(1, workers), nil, false},
	})
	for i := range workers {
		p.Enqueue(req(uint64(i), 2), 0)
	}
	out := make([]Assignment, 2*workers)
	n := p.Dispatch(0, out)
	if n != workers-1 || out[0].Worker != 1 || out[n-1].Worker != workers-1 {
		t.Fatalf("%d dispatched, first on %d, last on %d", n, out[0].Worker, out[n-1].Worker)
	}
	p.Complete(100, 2, 100000, 1)
	p.Enqueue(req(1000, 1), 1)
	n = p.Dispatch(1, out)
	if n != 2 || out[0].Request.Handle != 1000 || out[0].Worker != 0 || out[1].Worker != 100 {
		t.Fatalf("dispatch = %v", out[:n])
	}
}

// shortDemandWindow feeds DARC (16 workers, SHORT type 1 at 500 ns, LONG
// type 2) one window whose SHORT demand is d workers, then backlogs SHORT so
// that the next Dispatch checks the reservation. It returns the workers
// reserved for SHORT after the check.
func shortDemandWindow(t *testing.T, p *DARC, now int64, d float64) int {
	t.Helper()
	const nShort, nLong, short = 1000, 10, 500
	long := int64(math.Round(nShort * short * (16/d - 1) / nLong))
	feed(p, 1, nShort, short)
	feed(p, 2, nLong, long)
	for i := range 3 {
		p.Enqueue(req(uint64(i), 1), now)
	}
	checks := p.checks
	dispatchAll(t, p, now+1e6)
	if p.checks != checks+1 {
		t.Fatalf("window with demand %v: no check", d)
	}
	var s Snapshot
	p.Snapshot(&s)
	if len(s.Groups) != 2 || !slices.Equal(s.Groups[0].Types, []Type{1}) {
		t.Fatalf("groups %+v", s.Groups)
	}
	return len(s.Groups[0].Reserved)
}

// newHysteresisDARC returns a 16-worker DARC whose profile puts the SHORT
// type's demand at 2.65 workers (3 reserved), every worker busy.
func newHysteresisDARC(t *testing.T, hysteresis float64) *DARC {
	t.Helper()
	p := newTestDARC(t, Config{Workers: 16, NumTypes: 3, MinSamples: 100, Hysteresis: hysteresis,
		Profile: []TypeProfile{{Type: 1, MeanNs: 500, Ratio: 0.995}, {Type: 2, MeanNs: 500000, Ratio: 0.005}}})
	for i := range 16 {
		p.Enqueue(req(uint64(100+i), Type(1+min(i/13, 1))), 0) // 13 LONG, 3 SHORT
	}
	if n := len(dispatchAll(t, p, 0)); n != 16 {
		t.Fatalf("%d dispatched, want 16", n)
	}
	var s Snapshot
	p.Snapshot(&s)
	if got := len(s.Groups[0].Reserved); got != 3 {
		t.Fatalf("SHORT reserved %d workers at start, want 3", got)
	}
	return p
}

// Window noise around the 2.5 boundary moves SHORT's demand by more than
// DemandDeviation, so each window re-reserves; with hysteresis SHORT keeps its
// 3 workers, without it the count flips with every window.
func TestDARCHysteresisHoldsOnNoise(t *testing.T) {
	noise := []float64{2.3, 2.7, 2.35, 2.75, 2.3, 2.65}
	for _, tt := range []struct {
		hysteresis float64
		want       []int
	}{
		{0, []int{3, 3, 3, 3, 3, 3}}, // default 0.25
		{-1, []int{2, 3, 2, 3, 2, 3}},
	} {
		p := newHysteresisDARC(t, tt.hysteresis)
		var got []int
		for i, d := range noise {
			got = append(got, shortDemandWindow(t, p, int64(i+1)*1e7, d))
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("hysteresis %v: SHORT workers %v over demands %v, want %v", tt.hysteresis, got, noise, tt.want)
		}
		var s Snapshot
		p.Snapshot(&s)
		if s.Reservations != uint64(1+len(noise)) {
			t.Errorf("hysteresis %v: %d reservations, want %d (every window deviates)", tt.hysteresis, s.Reservations, 1+len(noise))
		}
	}
}

// A move beyond the band changes the count, in both directions; inside the
// band of the new count it stays.
func TestDARCHysteresisFollowsRealMoves(t *testing.T) {
	p := newHysteresisDARC(t, 0.25)
	for i, step := range []struct {
		demand float64
		want   int
	}{
		{2.2, 2},   // below 3-0.75: down to 2
		{2.6, 2},   // rounds to 3 but within 2+0.75: held
		{2.8, 3},   // beyond 2+0.75: up to 3
		{4.4, 4},   // far off: Algorithm 2's rounding
		{3.3, 4},   // within 4-0.75: held
		{1.4, 1},   // far below: down by 3
		{12.4, 12}, // far off again
	} {
		if got := shortDemandWindow(t, p, int64(i+1)*1e7, step.demand); got != step.want {
			t.Fatalf("step %d: demand %v: SHORT has %d workers, want %d", i, step.demand, got, step.want)
		}
	}
}

// Types of one group share their workers and are served as one class, in
// arrival order: a group of similar types (or types a classifier cannot
// tell apart) is c-FCFS among themselves, not a priority order.
func TestDARCGroupServedOldestFirst(t *testing.T) {
	// Types 1 and 2 within Delta of each other: one group; type 3 alone.
	alike := []TypeProfile{{Type: 1, MeanNs: 10000, Ratio: 0.45}, {Type: 2, MeanNs: 11000, Ratio: 0.45}, {Type: 3, MeanNs: 500000, Ratio: 0.1}}
	p := newTestDARC(t, Config{Workers: 4, NumTypes: 4, MinSamples: 1 << 20, Profile: alike})
	var s Snapshot
	p.Snapshot(&s)
	if len(s.Groups) != 2 || !slices.Equal(s.Groups[0].Types, []Type{1, 2}) {
		t.Fatalf("groups %+v, want {1,2} then {3}", s.Groups)
	}
	// Keep every worker busy, queue type 2 before type 1, then free the
	// workers one by one: the older requests go first, whatever the type.
	for h := range uint64(4) {
		p.Enqueue(req(h, 3), 0)
	}
	dispatchAll(t, p, 0)
	p.Enqueue(req(10, 2), 1)
	p.Enqueue(req(11, 1), 2)
	p.Enqueue(req(12, 2), 3)
	p.Enqueue(req(13, 1), 4)
	var got []uint64
	for w := range 4 {
		p.Complete(w, 3, 500000, 10)
		got = append(got, handlesOf(dispatchAll(t, p, 10))...)
	}
	if !slices.Equal(got, []uint64{10, 11, 12, 13}) {
		t.Fatalf("dispatch order %v, want arrival order 10 11 12 13", got)
	}
}
