package dispatcher

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/persephone-go/psp/app"
	"github.com/persephone-go/psp/darc"
	"github.com/persephone-go/psp/nic"
	"github.com/persephone-go/psp/nic/memnic"
	"github.com/persephone-go/psp/wire"
)

// blocker is an application whose LONG requests block until released, with
// an "overloaded" reply (the header with its reserved field set to 0xdead)
// and a service cap: type 3 requests are refused as over the cap.
type blocker struct {
	mu      sync.Mutex
	open    chan struct{}
	running int
	reply   bool
}

func (g *blocker) Handle(w int, typ darc.Type, b *nic.Buffer) bool {
	return g.Serve(w, typ, b) == app.Answer
}

func (g *blocker) Serve(w int, typ darc.Type, b *nic.Buffer) app.Outcome {
	switch typ {
	case 2:
		g.mu.Lock()
		g.running++
		g.mu.Unlock()
		<-g.open
	case 3:
		return app.RefuseOverCap
	}
	b.Len = wire.HeaderLen
	return app.Answer
}

func (g *blocker) ReplyOverloaded(typ darc.Type, b *nic.Buffer) bool {
	if !g.reply || b.Len < wire.HeaderLen {
		return false
	}
	h, _ := wire.Decode(b.Payload())
	h.Reserved = 0xdead0000
	h.Encode(b.Data)
	b.Len = wire.HeaderLen
	return true
}

func (g *blocker) count() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.running
}

func realPolicy(t *testing.T, cfg darc.Config) darc.Policy {
	t.Helper()
	p, err := darc.New("darc", cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// A type over its budget drops its own arrivals (reason budget), requests
// past their deadline are dropped before service (reason expired), both
// answered "overloaded" on the dispatcher's own TX queue, and every buffer
// comes back.
func TestBudgetsDeadlinesAndOverloadReplies(t *testing.T) {
	const workers = 2
	dp := newFakeDataplane(workers+1, 256, 64) // one TX queue for the dispatcher
	g := &blocker{open: make(chan struct{}), reply: true}
	policy := realPolicy(t, darc.Config{Workers: workers, NumTypes: HeaderNumTypes, Pool: 200,
		Deadlines: []int64{0, int64(time.Hour), int64(50 * time.Millisecond)}, MinSamples: 1000})
	var snap darc.Snapshot
	policy.Snapshot(&snap)
	longBudget := snap.Types[2].Budget
	d, err := New(Spec{Workers: workers, StatsInterval: time.Millisecond}, dp, HeaderClassifier{}, policy, g)
	if err != nil {
		t.Fatal(err)
	}
	stop := run(t, d)
	// Two LONG requests take both workers; more LONG fill its budget.
	for i := range longBudget + 10 {
		dp.inject(header(uint32(i), 2, 0), 1)
	}
	waitFor(t, "LONG received", func() bool { return d.Stats().Received == uint64(longBudget+10) })
	s := d.Stats()
	if s.Drops.Budget != 10 || s.Types[2].Drops.Budget != 10 {
		t.Fatalf("budget drops %d (LONG %d), want 10: %+v", s.Drops.Budget, s.Types[2].Drops.Budget, s.Drops)
	}
	// SHORT is still accepted: its own budget is untouched.
	dp.inject(header(5000, 1, 0), 1)
	waitFor(t, "SHORT received", func() bool { return d.Stats().Types[1].Received == 1 })
	if s := d.Stats(); s.Types[1].Dropped != 0 {
		t.Fatalf("SHORT dropped during the LONG flood: %+v", s.Types[1])
	}
	// The queued LONG requests pass their 50 ms deadline while both workers
	// block: they expire without any worker freeing up.
	waitFor(t, "LONG expired", func() bool { return d.Stats().Drops.Expired == uint64(longBudget-2) })
	s = d.Stats()
	checkAccounting(t, s)
	if !s.Overloaded || s.ShedRate <= 0 || s.Types[2].ShedRate <= 0 {
		t.Errorf("overloaded %v shed rate %v (LONG %v), want shedding", s.Overloaded, s.ShedRate, s.Types[2].ShedRate)
	}
	close(g.open)
	waitFor(t, "drained", func() bool { s := d.Stats(); return s.InFlight == 0 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	s = d.Stats()
	checkAccounting(t, s)
	shed := s.Drops.Budget + s.Drops.Expired
	if s.OverloadReplies != shed {
		t.Errorf("%d overload replies for %d shed requests", s.OverloadReplies, shed)
	}
	var marked int
	for _, r := range dp.replies {
		if h, _ := wire.Decode(r); h.Reserved>>16 == 0xdead {
			marked++
		}
	}
	if uint64(marked) != shed || s.Answered != 3 {
		t.Errorf("%d overloaded replies and %d answers, want %d and 3 (2 LONG, 1 SHORT)", marked, s.Answered, shed)
	}
	if got := dp.poolSize(); got != 256 {
		t.Errorf("pool holds %d buffers, want 256", got)
	}
}

// Without its own TX queue the dispatcher releases shed requests silently.
func TestShedWithoutReplyQueue(t *testing.T) {
	dp := newFakeDataplane(1, 64, 64)
	g := &blocker{open: make(chan struct{}), reply: true}
	d, err := New(Spec{Workers: 1}, dp, HeaderClassifier{}, realPolicy(t, darc.Config{Workers: 1, NumTypes: HeaderNumTypes, Pool: 90, Budgets: []int{0, 0, 10}}), g)
	if err != nil {
		t.Fatal(err)
	}
	stop := run(t, d)
	for i := range 30 {
		dp.inject(header(uint32(i), 2, 0), 1)
	}
	waitFor(t, "received", func() bool { return d.Stats().Received == 30 })
	close(g.open)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	s := d.Stats()
	checkAccounting(t, s)
	if s.Drops.Budget == 0 || s.OverloadReplies != 0 || uint64(dp.replyCount()) != s.Answered {
		t.Errorf("budget drops %d, overload replies %d, replies %d for %d answered", s.Drops.Budget, s.OverloadReplies, dp.replyCount(), s.Answered)
	}
}

// The drain is a bound: with a handler that never returns, Run returns
// within DrainTimeout plus the stop grace, counting the running and the
// queued requests as shutdown drops.
func TestDrainIsABound(t *testing.T) {
	dp := newFakeDataplane(2, 64, 64)
	g := &blocker{open: make(chan struct{})}
	defer close(g.open) // let the abandoned worker go at the end
	const drain = 50 * time.Millisecond
	d, err := New(Spec{Workers: 2, DrainTimeout: drain}, dp, HeaderClassifier{},
		realPolicy(t, darc.Config{Workers: 2, NumTypes: HeaderNumTypes, Deadlines: []int64{-1, -1, -1}}), g)
	if err != nil {
		t.Fatal(err)
	}
	stop := run(t, d)
	dp.inject(header(9, 3, 0), 1) // over the cap: refused
	waitFor(t, "refusal", func() bool { return d.Stats().Drops.ServiceCap == 1 })
	for i := range 5 {
		dp.inject(header(uint32(i), 2, 0), 1) // 2 block the workers, 3 wait
	}
	waitFor(t, "workers blocked", func() bool { return g.count() == 2 && d.Stats().Received == 6 })
	start := time.Now()
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el > drain+stopGrace+time.Second {
		t.Errorf("Run took %v to return after cancel, drain timeout %v", el, drain)
	}
	s := d.Stats()
	checkAccounting(t, s)
	if s.Drops.Shutdown != 5 || s.Abandoned != 2 || s.Drops.ServiceCap != 1 || s.InFlight != 0 || s.Types[2].Drops.Shutdown != 5 {
		t.Errorf("shutdown drops %d (LONG %d), abandoned %d, service cap %d, in flight %d; want 5, 5, 2, 1, 0",
			s.Drops.Shutdown, s.Types[2].Drops.Shutdown, s.Abandoned, s.Drops.ServiceCap, s.InFlight)
	}
	if got := dp.poolSize(); got != 62 {
		t.Errorf("pool holds %d buffers, want 62 (2 with the abandoned handlers)", got)
	}
}

// New refuses budgets larger than what the dataplane can lend.
func TestNewRefusesBudgetsOverThePool(t *testing.T) {
	dp := memnic.New(memnic.Config{Workers: 1, Buffers: 64})
	defer dp.Close()
	_, err := New(Spec{Workers: 1}, dp, HeaderClassifier{}, realPolicy(t, darc.Config{Workers: 1, NumTypes: 2, Pool: 64}), echo)
	if !errors.Is(err, ErrSpec) {
		t.Fatalf("a pool of 64 on a dataplane lending %d: %v, want ErrSpec", dp.RequestBuffers(), err)
	}
	if _, err := New(Spec{Workers: 1}, dp, HeaderClassifier{}, realPolicy(t, darc.Config{Workers: 1, NumTypes: 2, Pool: dp.RequestBuffers()}), echo); err != nil {
		t.Fatal(err)
	}
}

// Shedding (budget drops, expiry and overloaded replies) allocates nothing.
func TestShedStepNoAlloc(t *testing.T) {
	const workers = 2
	dp := newFakeDataplane(workers+1, 512, 64)
	dp.keep = false
	g := &blocker{reply: true}
	policy := realPolicy(t, darc.Config{Workers: workers, NumTypes: HeaderNumTypes, Pool: 120, Deadlines: []int64{0, 1, 1}})
	d, err := New(Spec{Workers: workers}, dp, HeaderClassifier{}, policy, g)
	if err != nil {
		t.Fatal(err)
	}
	pkts := [][]byte{header(1, 1, 0), header(2, 1, 0), header(3, 0, 0)}
	iteration := func() {
		for i := 0; i < 32; i++ {
			dp.inject(pkts[i%len(pkts)], 1)
		}
		for k := 0; k < 4; k++ {
			if _, err := d.step(0); err != nil {
				t.Fatal(err)
			}
		}
	}
	iteration()
	if allocs := testing.AllocsPerRun(50, iteration); allocs != 0 {
		t.Errorf("a shedding step allocates %.1f times, want 0", allocs)
	}
	if d.drops.Expired == 0 || d.drops.Budget == 0 || d.replied == 0 {
		t.Errorf("shedding not exercised: %+v, %d replies", d.drops, d.replied)
	}
}

// gatekeeper refuses type 5 at the door (over its cap) and runts of type 6.
type gatekeeper struct{ served sync.Map }

func (g *gatekeeper) Handle(w int, typ darc.Type, b *nic.Buffer) bool {
	g.served.Store(typ, true)
	b.Len = wire.HeaderLen
	return true
}

func (g *gatekeeper) Admit(typ darc.Type, b *nic.Buffer) app.Outcome {
	switch typ {
	case 5:
		return app.RefuseOverCap
	case 6:
		return app.Refuse
	case 7:
		panic("admit")
	}
	return app.Answer
}

// An app.Admitter's refusals are dropped before the policy sees them: no worker
// runs them and they are counted by reason under their type.
func TestAdmitterRefusesAtTheDoor(t *testing.T) {
	dp := newFakeDataplane(2, 64, 64)
	g := &gatekeeper{}
	policy := realPolicy(t, darc.Config{Workers: 2, NumTypes: HeaderNumTypes})
	d, err := New(Spec{Workers: 2}, dp, HeaderClassifier{}, policy, g)
	if err != nil {
		t.Fatal(err)
	}
	stop := run(t, d)
	for i, typ := range []uint32{5, 5, 6, 7, 1} {
		dp.inject(header(uint32(i), typ, 0), 1)
	}
	waitFor(t, "one reply", func() bool { return dp.replyCount() == 1 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	s := d.Stats()
	checkAccounting(t, s)
	if s.Drops.ServiceCap != 2 || s.Drops.App != 2 || s.Types[5].Drops.ServiceCap != 2 || s.Types[6].Drops.App != 1 || s.Types[7].Drops.App != 1 {
		t.Errorf("drops %+v", s.Drops)
	}
	for _, typ := range []darc.Type{5, 6, 7} {
		if _, ok := g.served.Load(typ); ok {
			t.Errorf("type %d reached a worker", typ)
		}
		if s.Policy.Types[typ].Enqueued != 0 {
			t.Errorf("type %d entered the policy", typ)
		}
	}
}
