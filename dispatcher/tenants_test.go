package dispatcher

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/persephone-go/psp/app"
	"github.com/persephone-go/psp/darc"
	"github.com/persephone-go/psp/nic"
	"github.com/persephone-go/psp/wire"
)

// gateClassifier is the psp-header classifier that blocks, on a type-9
// payload, until its gate opens: a classifier stuck in a long call.
type gateClassifier struct {
	gate    chan struct{}
	blocked atomic.Int32
}

func (g *gateClassifier) ClassifyBatch(payloads [][]byte, out []darc.Type) {
	for _, p := range payloads {
		if wire.TypeOf(p) == 9 {
			g.blocked.Add(1)
			<-g.gate
		}
	}
	HeaderClassifier{}.ClassifyBatch(payloads, out)
}

const (
	portA = 1000
	portB = 2000
)

// tenantPolicy is a darc multi-tenant policy with tenants a and b (the
// psp-header type space each), on workers workers.
func tenantPolicy(t testing.TB, workers int, pool int) *darc.Tenants {
	t.Helper()
	p, err := darc.New(darc.NameDARC, darc.Config{Workers: workers, Pool: pool, MinSamples: 1 << 20, DeadlineFactor: -1, Tenants: []darc.TenantConfig{
		{Name: "a", NumTypes: HeaderNumTypes, TypeNames: HeaderTypeNames()},
		{Name: "b", NumTypes: HeaderNumTypes, TypeNames: HeaderTypeNames()},
	}})
	if err != nil {
		t.Fatal(err)
	}
	return p.(*darc.Tenants)
}

// runTenants runs d until the returned stop is called; stop returns Run's
// error and the final stats.
func runTenants(t testing.TB, d *Dispatcher) func() (*Stats, error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- d.Run(ctx) }()
	var once sync.Once
	var err error
	stop := func() (*Stats, error) {
		once.Do(func() {
			cancel()
			err = <-errc
		})
		return d.Stats(), err
	}
	t.Cleanup(func() { stop() })
	return stop
}

// checkTenantAccounting asserts the per-tenant identity.
func checkTenantAccounting(t testing.TB, s *Stats) {
	t.Helper()
	if s.Received != s.Answered+s.Dropped+s.InFlight {
		t.Errorf("received %d != answered %d + dropped %d + in flight %d", s.Received, s.Answered, s.Dropped, s.InFlight)
	}
	for _, ts := range s.Tenants {
		if got := ts.Answered + ts.Dropped + uint64(ts.Queued+ts.Running+ts.Classifying); ts.Received != got {
			t.Errorf("tenant %s: received %d != answered %d + dropped %d + queued %d + running %d + classifying %d",
				ts.Name, ts.Received, ts.Answered, ts.Dropped, ts.Queued, ts.Running, ts.Classifying)
		}
	}
}

func tenantStat(t testing.TB, s *Stats, name string) TenantStats {
	t.Helper()
	for _, ts := range s.Tenants {
		if ts.Name == name && !ts.Removed {
			return ts
		}
	}
	t.Fatalf("no tenant %q in %+v", name, s.Tenants)
	return TenantStats{}
}

// TestTenantRoutingAndIsolation: packets go to the tenant of their port
// (none: dropped, no_tenant), each classified on its own lane; while b's
// classifier is stuck in a call, a's packets are answered.
func TestTenantRoutingAndIsolation(t *testing.T) {
	dp := newFakeDataplane(4, 512, 64)
	gate := &gateClassifier{gate: make(chan struct{})}
	d, err := New(Spec{Workers: 4, Spin: -1, LaneCapacity: 24, StatsInterval: time.Millisecond,
		Tenants: []TenantSpec{
			{Name: "a", Ports: []uint16{portA}, Classifier: HeaderClassifier{}, Isolation: IsolateLane},
			{Name: "b", Ports: []uint16{portB}, Classifier: gate, Isolation: IsolateLane},
		}}, dp, nil, tenantPolicy(t, 4, 0), echo)
	if err != nil {
		t.Fatal(err)
	}
	stop := runTenants(t, d)
	dp.inject(header(1, 9, 0), portB) // b's classifier blocks on it
	waitFor(t, "b's classifier to block", func() bool { return gate.blocked.Load() == 1 })
	for i := range 30 {
		if i < 20 {
			dp.inject(header(uint32(10+i), wire.TypeShort, 0), portA)
		}
		dp.inject(header(uint32(100+i), wire.TypeShort, 0), portB)
	}
	dp.inject(header(7, wire.TypeShort, 0), 3000) // nobody's
	waitFor(t, "a's 20 answers", func() bool { return dp.replyCount() >= 20 })
	time.Sleep(20 * time.Millisecond)
	s := d.Stats()
	a, b := tenantStat(t, s, "a"), tenantStat(t, s, "b")
	if a.Answered != 20 || b.Answered != 0 {
		t.Fatalf("while b's classifier is stuck: a answered %d, b %d", a.Answered, b.Answered)
	}
	// b's lane holds 24: the stuck batch's packet and 23 more; the rest
	// were dropped before classification.
	if b.Classifying != 24 || b.Drops.ClassifierBusy != 7 || s.Drops.NoTenant != 1 {
		t.Fatalf("b: classifying %d, classifier busy %d; no tenant %d", b.Classifying, b.Drops.ClassifierBusy, s.Drops.NoTenant)
	}
	checkTenantAccounting(t, s)
	close(gate.gate)
	waitFor(t, "b's answers", func() bool { return tenantStat(t, d.Stats(), "b").Answered == 24 })
	s, err = stop()
	if err != nil {
		t.Fatal(err)
	}
	checkTenantAccounting(t, s)
	if s.InFlight != 0 || dp.poolSize() != 512 {
		t.Fatalf("after the drain: in flight %d, %d of 512 buffers back", s.InFlight, dp.poolSize())
	}
	if a := tenantStat(t, s, "a"); a.Received != 20 || a.Policy.Name != "a" || len(a.Policy.Home) != 2 {
		t.Fatalf("a: %+v", a)
	}
}

// TestTenantLifecycle adds a tenant, updates and removes one while
// requests flow; every packet stays accounted for.
func TestTenantLifecycle(t *testing.T) {
	dp := newFakeDataplane(4, 1024, 64)
	slowApp := app.HandlerFunc(func(w int, typ darc.Type, b *nic.Buffer) bool {
		time.Sleep(2 * time.Millisecond)
		return true
	})
	d, err := New(Spec{Workers: 4, Spin: -1, StatsInterval: time.Millisecond,
		Tenants: []TenantSpec{
			{Name: "a", Ports: []uint16{portA}, Classifier: HeaderClassifier{}},
			{Name: "b", Ports: []uint16{portB}, Classifier: HeaderClassifier{}, Isolation: IsolateInline},
		}}, dp, nil, tenantPolicy(t, 4, 0), slowApp)
	if err != nil {
		t.Fatal(err)
	}
	stop := runTenants(t, d)
	ctx := context.Background()
	var sent atomic.Int32
	feed := func(port uint16, n int) {
		for range n {
			if dp.inject(header(uint32(sent.Add(1)), wire.TypeShort, 0), port) {
				continue
			}
			time.Sleep(time.Millisecond)
		}
	}
	feed(portA, 50)
	feed(portB, 50)
	waitFor(t, "some of b's answers", func() bool { s := d.Stats(); return len(s.Tenants) > 1 && s.Tenants[1].Answered > 0 })
	c := TenantSpec{Name: "c", Ports: []uint16{3000}, Classifier: HeaderClassifier{},
		Share: darc.TenantConfig{NumTypes: HeaderNumTypes, TypeNames: HeaderTypeNames(), Workers: 1}}
	base, err := d.AddTenant(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if base != 2*HeaderNumTypes+1 {
		t.Fatalf("c's base %d", base)
	}
	if _, err := d.AddTenant(ctx, TenantSpec{Name: "d", Ports: []uint16{portA}, Classifier: HeaderClassifier{},
		Share: darc.TenantConfig{NumTypes: 2}}); !errors.Is(err, ErrTenant) {
		t.Fatalf("a tenant on a's port: %v", err)
	}
	feed(3000, 30)
	if err := d.UpdateTenant(ctx, TenantSpec{Name: "a", Ports: []uint16{portA, 1001},
		Share: darc.TenantConfig{NumTypes: HeaderNumTypes, Workers: 2}}); err != nil {
		t.Fatal(err)
	}
	feed(1001, 10)
	feed(portB, 100) // queued behind a slow application: some are still queued when b goes
	waitFor(t, "b's packets to arrive", func() bool { return d.Stats().Received == uint64(sent.Load()) })
	if err := d.RemoveTenant(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	if err := d.RemoveTenant(ctx, "b"); !errors.Is(err, ErrTenant) {
		t.Fatalf("removing b twice: %v", err)
	}
	feed(portB, 5) // nobody's now
	waitFor(t, "the queues to drain", func() bool { s := d.Stats(); return s.InFlight == 0 && s.Received == uint64(sent.Load()) })
	s, err := stop()
	if err != nil {
		t.Fatal(err)
	}
	checkTenantAccounting(t, s)
	var b, removedB TenantStats
	for _, ts := range s.Tenants {
		if ts.Name == "b" {
			b, removedB = ts, ts
		}
	}
	if !removedB.Removed || b.Drops.Removed == 0 || b.Answered == 0 || b.Received != 150 || s.Drops.NoTenant != 5 {
		t.Fatalf("b: %+v; no tenant %d", b, s.Drops.NoTenant)
	}
	if a := tenantStat(t, s, "a"); a.Received != 60 || a.Answered != 60 || len(a.Policy.Home) != 2 {
		t.Fatalf("a: %+v", a)
	}
	if c := tenantStat(t, s, "c"); c.Received != 30 || c.Answered != 30 || c.Base != base {
		t.Fatalf("c: %+v", c)
	}
	if len(s.Types) != 3*HeaderNumTypes+1 || s.Types[base+1].Name != "c/SHORT" {
		t.Fatalf("%d types; c's SHORT named %q", len(s.Types), s.Types[base+1].Name)
	}
	// The workers' stage histograms grew with the type space.
	if st := d.Stages(); len(st) != 3*HeaderNumTypes+1 || st[base+1] == nil || st[base+1][StageService].Count != 30 {
		t.Fatalf("stages of %d types; c's SHORT: %v", len(st), st[min(int(base)+1, len(st)-1)])
	}
	if err := d.RemoveTenant(ctx, "a"); !errors.Is(err, ErrStopped) {
		t.Fatalf("a lifecycle change after Run: %v", err)
	}
}

// TestTenantLanesDrainAtShutdown: packets on a lane when the drain
// times out are counted as shutdown drops.
func TestTenantLanesDrainAtShutdown(t *testing.T) {
	dp := newFakeDataplane(2, 64, 64)
	gate := &gateClassifier{gate: make(chan struct{})}
	d, err := New(Spec{Workers: 2, Spin: -1, DrainTimeout: 20 * time.Millisecond,
		Tenants: []TenantSpec{{Name: "a", Classifier: gate, Isolation: IsolateLane}}}, dp, nil, tenantPolicyOne(t), echo)
	if err != nil {
		t.Fatal(err)
	}
	stop := runTenants(t, d)
	dp.inject(header(1, 9, 0), portA)
	dp.inject(header(2, 1, 0), portA)
	waitFor(t, "the classifier to block", func() bool { return gate.blocked.Load() == 1 })
	go func() { time.Sleep(300 * time.Millisecond); close(gate.gate) }()
	s, err := stop()
	if err != nil {
		t.Fatal(err)
	}
	checkTenantAccounting(t, s)
	if s.Drops.Shutdown != 2 || s.InFlight != 0 {
		t.Fatalf("shutdown drops %d, in flight %d", s.Drops.Shutdown, s.InFlight)
	}
}

func tenantPolicyOne(t testing.TB) *darc.Tenants {
	t.Helper()
	p, err := darc.New(darc.NameDARC, darc.Config{Workers: 2, DeadlineFactor: -1, Tenants: []darc.TenantConfig{{Name: "a", NumTypes: HeaderNumTypes}}})
	if err != nil {
		t.Fatal(err)
	}
	return p.(*darc.Tenants)
}

// TestTenantStepNoAlloc: routing, inline classification, the lanes' rings
// and the tenant policy allocate nothing per burst.
func TestTenantStepNoAlloc(t *testing.T) {
	dp := newFakeDataplane(32, 256, 64)
	dp.keep = false
	d, err := New(Spec{Workers: 32, Tenants: []TenantSpec{
		{Name: "a", Ports: []uint16{portA}, Classifier: HeaderClassifier{}, Isolation: IsolateInline},
		{Name: "b", Ports: []uint16{portB}, Classifier: HeaderClassifier{}, Isolation: IsolateLane},
	}}, dp, nil, tenantPolicy(t, 32, 0), echo)
	if err != nil {
		t.Fatal(err)
	}
	short, long := header(1, wire.TypeShort, 0), header(2, wire.TypeLong, 1000)
	one := make([]*nic.Buffer, 1)
	bl := d.mt.tenants[1].lane // played here, with the workers
	step := func() {
		for range 16 {
			dp.inject(short, portA)
			dp.inject(long, portB)
		}
		d.step(0)
		for {
			b, ok := bl.in.Pop()
			if !ok {
				break
			}
			bl.out.Push(classified{buf: b, typ: darc.Type(wire.TypeOf(b.Payload()))})
		}
		d.step(0)
		for _, w := range d.workers {
			for {
				tk, ok := w.in.Pop()
				if !ok {
					break
				}
				one[0] = tk.buf
				w.tx.Send(one)
				w.out.Push(completion{typ: tk.typ, end: 1000})
			}
		}
		d.step(0)
	}
	for range 200 {
		step()
	}
	if n := testing.AllocsPerRun(200, step); n != 0 {
		t.Fatalf("%v allocations per step", n)
	}
	s := d.Stats()
	_ = s
	if a := d.counters[1+wire.TypeShort].answered; a == 0 {
		t.Fatal("a answered nothing")
	}
	if b := d.counters[HeaderNumTypes+1+wire.TypeLong].answered; b == 0 {
		t.Fatal("b answered nothing")
	}
}

// faultyClassifier is the psp-header classifier that counts a fault on a
// type-9 payload and is slow (2 ms) on a type-8 one.
type faultyClassifier struct{ faults uint64 }

func (f *faultyClassifier) ClassifyBatch(payloads [][]byte, out []darc.Type) {
	for _, p := range payloads {
		switch wire.TypeOf(p) {
		case 9:
			f.faults++
		case 8:
			time.Sleep(2 * time.Millisecond)
		}
	}
	HeaderClassifier{}.ClassifyBatch(payloads, out)
}

func (f *faultyClassifier) FaultTotal() uint64 { return f.faults }

// TestTenantAutoIsolation: an IsolateAuto tenant is classified inline until
// a call faults or is slow, then on its lane, and inline again after
// LaneProbation clean calls there.
func TestTenantAutoIsolation(t *testing.T) {
	dp := newFakeDataplane(4, 512, 64)
	d, err := New(Spec{Workers: 4, Spin: -1, StatsInterval: time.Millisecond, LaneProbation: 3,
		Tenants: []TenantSpec{
			{Name: "a", Ports: []uint16{portA}, Classifier: HeaderClassifier{}},
			{Name: "b", Ports: []uint16{portB}, Classifier: &faultyClassifier{}},
		}}, dp, nil, tenantPolicy(t, 4, 0), echo)
	if err != nil {
		t.Fatal(err)
	}
	runTenants(t, d)
	b := func() TenantStats { return tenantStat(t, d.Stats(), "b") }
	send := func(typ uint32) {
		before := b().Answered
		dp.inject(header(1, typ, 0), portB)
		waitFor(t, "b's answer", func() bool { return b().Answered == before+1 })
	}
	for _, c := range []struct {
		typ         uint32
		onLane      bool
		escalations uint64
	}{
		{wire.TypeShort, false, 0},
		{9, true, 1}, // a fault: to the lane
		{wire.TypeShort, true, 1},
		{wire.TypeShort, true, 1},
		{wire.TypeShort, false, 1}, // the third clean call on the lane brings it back inline
		{wire.TypeShort, false, 1},
		{8, true, 2}, // slow: to the lane again
	} {
		send(c.typ)
		time.Sleep(3 * time.Millisecond) // a stats interval
		if s := b(); s.OnLane != c.onLane || s.Escalations != c.escalations {
			t.Fatalf("after a type-%d packet: on lane %v, escalations %d; want %v, %d", c.typ, s.OnLane, s.Escalations, c.onLane, c.escalations)
		}
	}
	if a := tenantStat(t, d.Stats(), "a"); a.OnLane || a.Escalations != 0 {
		t.Fatalf("a: %+v", a)
	}
}

// TestLaneProbationGrows: a tenant escalated again soon after it came
// back inline needs twice the clean lane calls each time (up to a cap),
// and starts over once it behaved for laneProbationReset.
func TestLaneProbationGrows(t *testing.T) {
	tr := &routedTenant{lane: &lane{}}
	const base = 64
	want := []uint64{64, 128, 256, 512}
	for i, w := range want {
		tr.escalate(base, int64(i)*1e9)
		if tr.probation != w || !tr.onLane {
			t.Fatalf("escalation %d: probation %d on lane %v, want %d", i+1, tr.probation, tr.onLane, w)
		}
	}
	for i := 0; i < 20; i++ {
		tr.escalate(base, int64(4+i)*1e9)
	}
	if tr.probation != base<<maxProbationDoublings {
		t.Errorf("after many escalations: probation %d, want the cap %d", tr.probation, base<<maxProbationDoublings)
	}
	tr.escalate(base, 24e9+laneProbationReset+1)
	if tr.probation != base {
		t.Errorf("after a clean period: probation %d, want %d", tr.probation, base)
	}
	if tr.escalations != 25 {
		t.Errorf("escalations %d, want 25", tr.escalations)
	}
}

// TestLaneParksUnderBusyPoll: a tenant's lane parks once idle for Spin
// even under busy-poll (the server's thread budget counts a core per worker
// and the dispatcher, not one per tenant), and a packet still wakes it.
func TestLaneParksUnderBusyPoll(t *testing.T) {
	start := time.Now()
	now := func() int64 { return int64(time.Since(start)) }
	spec := Spec{Idle: IdleBusyPoll, Spin: 100 * time.Microsecond}.withDefaults()
	l := newLane(HeaderClassifier{}, 8, 4, spec, now)
	var wg sync.WaitGroup
	l.start(&wg, func() {})
	defer func() { l.halt(); wg.Wait() }()
	waitFor(t, "the idle lane to park", l.parked.Load)
	b := &nic.Buffer{Data: header(1, 1, 0), Len: wire.HeaderLen}
	if !l.push(b) {
		t.Fatal("push refused")
	}
	l.kick()
	waitFor(t, "the lane to classify the packet", func() bool { return l.out.Len() == 1 })
}
