package dispatcher

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/persephone-go/psp/app"
	"github.com/persephone-go/psp/darc"
	"github.com/persephone-go/psp/internal/affinity"
	"github.com/persephone-go/psp/internal/testenv"
	"github.com/persephone-go/psp/nic"
	"github.com/persephone-go/psp/wire"
)

func TestHeaderClassifier(t *testing.T) {
	payloads := [][]byte{
		header(1, wire.TypeShort, 0),
		header(2, wire.TypeLong, 0),
		header(3, wire.TypeScan, 0),
		header(4, 12, 0),         // out of range
		header(5, 0xffffffff, 0), // garbage
		{1, 2, 3},                // runt
		nil,
	}
	want := []darc.Type{1, 2, 11, 0, 0, 0, 0}
	out := make([]darc.Type, len(payloads))
	HeaderClassifier{}.ClassifyBatch(payloads, out)
	for i := range want {
		if out[i] != want[i] {
			t.Errorf("payload %d: type %d, want %d", i, out[i], want[i])
		}
	}
	if n := len(HeaderTypeNames()); n != HeaderNumTypes {
		t.Errorf("HeaderTypeNames has %d names, want %d", n, HeaderNumTypes)
	}
}

func TestSpecValidate(t *testing.T) {
	if err := (Spec{}).Validate(); err != nil {
		t.Fatalf("zero Spec: %v", err)
	}
	for _, s := range []Spec{
		{Workers: -1},
		{Idle: "sleep"},
		{Burst: -3},
		{Burst: 5000},
		{RingCapacity: 1},
		{MaxRequests: 4, Burst: 32},
		{CPUs: []int{-1}},
		{StatsInterval: time.Microsecond},
	} {
		err := s.Validate()
		if !errors.Is(err, ErrSpec) {
			t.Errorf("%+v: Validate = %v, want ErrSpec", s, err)
		}
	}
}

func TestNewRefusesMismatches(t *testing.T) {
	dp := newFakeDataplane(2, 8, 64)
	if _, err := New(Spec{Workers: 2}, dp, HeaderClassifier{}, newFakePolicy(3, 12, 8), echo); !errors.Is(err, ErrSpec) {
		t.Errorf("policy with 3 workers for a 2-worker spec: %v, want ErrSpec", err)
	}
	if _, err := New(Spec{Workers: 3}, dp, HeaderClassifier{}, newFakePolicy(3, 12, 8), echo); !errors.Is(err, ErrSpec) {
		t.Errorf("dataplane with 2 TX queues for 3 workers: %v, want ErrSpec", err)
	}
	if _, err := New(Spec{Workers: 2, CPUs: []int{0, 1 << 20}}, dp, HeaderClassifier{}, newFakePolicy(2, 12, 8), echo); err == nil {
		t.Errorf("cpu 1<<20 accepted")
	}
}

// checkAccounting asserts that every received request is accounted for.
func checkAccounting(t *testing.T, s *Stats) {
	t.Helper()
	if s.Received != s.Answered+s.Dropped+s.InFlight {
		t.Errorf("received %d != answered %d + dropped %d + in flight %d", s.Received, s.Answered, s.Dropped, s.InFlight)
	}
	if s.Dropped != s.Drops.Total() {
		t.Errorf("dropped %d != sum of drops %+v", s.Dropped, s.Drops)
	}
	var typed uint64
	for _, ts := range s.Types {
		if ts.Received != ts.Answered+ts.Dropped+uint64(ts.Queued)+uint64(ts.Parked) && s.Busy == 0 {
			t.Errorf("type %d: received %d != answered %d + dropped %d + queued %d + parked %d", ts.Type, ts.Received, ts.Answered, ts.Dropped, ts.Queued, ts.Parked)
		}
		typed += ts.Received
	}
	if typed != s.Received-s.Drops.Runt-s.Drops.Truncated {
		t.Errorf("per-type received %d != received %d - runts %d - truncated %d", typed, s.Received, s.Drops.Runt, s.Drops.Truncated)
	}
}

// waitFor polls cond for up to 10 s.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	testenv.WaitFor(t, what, 10*time.Second, cond)
}

// runHeader runs a dispatcher of spec on dp with the header classifier, a
// fake policy of queue slots and application h; stop ends it.
func runHeader(t *testing.T, spec Spec, dp nic.Dataplane, queue int, h app.Handler) (d *Dispatcher, stop func() error) {
	t.Helper()
	d, err := New(spec, dp, HeaderClassifier{}, newFakePolicy(spec.Workers, HeaderNumTypes, queue), h)
	if err != nil {
		t.Fatal(err)
	}
	return d, run(t, d)
}

func run(t *testing.T, d *Dispatcher) (cancel func() error) {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- d.Run(ctx) }()
	return func() error {
		stop()
		return testenv.Await(t, errc, 20*time.Second, "Run to return after cancel")
	}
}

func TestRunAnswersEveryRequestAndCountsDrops(t *testing.T) {
	for _, idle := range []string{IdleSpinThenPark, IdleBusyPoll} {
		t.Run(idle, func(t *testing.T) {
			const workers = 3
			dp := newFakeDataplane(workers, 512, 64)
			d, stop := runHeader(t, Spec{Workers: workers, Idle: idle, MinPayload: wire.HeaderLen, StatsInterval: time.Millisecond}, dp, 1024, echo)
			const good = 300
			for i := 0; i < good; i++ {
				typ := uint32(1 + i%2)
				if i%10 == 0 {
					typ = 99 // unknown type: served (echo), counted as UNKNOWN
				}
				for !dp.inject(header(uint32(i), typ, 100), 6789) {
					time.Sleep(10 * time.Microsecond)
				}
			}
			dp.inject([]byte{1, 2, 3}, 6789)    // runt
			dp.inject(make([]byte, 100), 6789)  // truncated to 64 bytes
			dp.inject(header(1000, 3, 0), 6789) // refused by the app
			dp.inject(header(1001, 4, 0), 6789) // the app panics
			waitFor(t, "replies", func() bool { return dp.replyCount() == good })
			if err := stop(); err != nil {
				t.Fatalf("Run: %v", err)
			}
			s := d.Stats()
			checkAccounting(t, s)
			if s.Received != good+4 || s.Answered != good || s.InFlight != 0 {
				t.Errorf("received %d answered %d in flight %d, want %d, %d, 0", s.Received, s.Answered, s.InFlight, good+4, good)
			}
			if s.Drops.Runt != 1 || s.Drops.Truncated != 1 || s.Drops.App != 1 || s.Drops.Panic != 1 {
				t.Errorf("drops %+v, want one runt, one truncated, one app, one panic", s.Drops)
			}
			if got := s.Types[0].Answered; got != good/10 {
				t.Errorf("UNKNOWN answered %d, want %d", got, good/10)
			}
			if s.Running {
				t.Errorf("final stats say running")
			}
			if got := dp.poolSize(); got != 512 {
				t.Errorf("pool holds %d buffers after shutdown, want 512 (leak)", got)
			}
			checkStages(t, d, s)
		})
	}
}

// checkStages checks the workers' stage histograms against the final
// stats: every request a worker ran has its stages up to service, every
// answered one its transmit and latency, and a request's latency is the sum
// of its stages.
func checkStages(t *testing.T, d *Dispatcher, s *Stats) {
	t.Helper()
	stages := d.Stages()
	for typ, ts := range s.Types {
		h := stages[typ]
		if ts.Completed == 0 {
			if h != nil {
				t.Errorf("type %d: stages %+v for a type no worker ran", typ, h[StageService])
			}
			continue
		}
		if h == nil {
			t.Errorf("type %d: no stages, %d completed", typ, ts.Completed)
			continue
		}
		for _, st := range []Stage{StageReceive, StageQueueing, StageHandoff, StageService} {
			if h[st].Count != ts.Completed {
				t.Errorf("type %d %v: count %d, want %d completed", typ, st, h[st].Count, ts.Completed)
			}
		}
		if h[StageService].SumNs != ts.ServiceNsSum {
			t.Errorf("type %d: service sum %d, want the dispatcher's %d", typ, h[StageService].SumNs, ts.ServiceNsSum)
		}
		if h[StageTransmit].Count != ts.Answered || h[StageLatency].Count != ts.Answered {
			t.Errorf("type %d: transmit %d latency %d, want %d answered", typ, h[StageTransmit].Count, h[StageLatency].Count, ts.Answered)
		}
		if ts.Answered == ts.Completed {
			var sum uint64
			for st := StageReceive; st < StageLatency; st++ {
				sum += h[st].SumNs
			}
			if sum != h[StageLatency].SumNs {
				t.Errorf("type %d: stages sum to %d ns, latency %d ns", typ, sum, h[StageLatency].SumNs)
			}
		}
	}
}

// gate is an application whose requests of type 2 block until released.
type gate struct {
	mu      sync.Mutex
	open    chan struct{}
	running int
}

func (g *gate) Handle(w int, typ darc.Type, b *nic.Buffer) bool {
	if typ == 2 {
		g.mu.Lock()
		g.running++
		g.mu.Unlock()
		<-g.open
	}
	return true
}

func (g *gate) count() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.running
}

func TestQueueFullDropsOnlyThatType(t *testing.T) {
	dp := newFakeDataplane(1, 64, 64)
	g := &gate{open: make(chan struct{})}
	d, stop := runHeader(t, Spec{Workers: 1, StatsInterval: time.Millisecond}, dp, 4, g)
	dp.inject(header(0, 2, 0), 1)
	waitFor(t, "the worker to block", func() bool { return g.count() == 1 })
	for i := 1; i <= 10; i++ {
		dp.inject(header(uint32(i), 2, 0), 1) // 4 fit the LONG queue, 6 are dropped
	}
	for i := 11; i <= 13; i++ {
		dp.inject(header(uint32(i), 1, 0), 1) // SHORT still fits
	}
	waitFor(t, "13 more requests received", func() bool { return d.Stats().Received == 14 })
	s := d.Stats()
	if s.Drops.QueueFull != 6 || s.Types[2].Dropped != 6 || s.Types[1].Dropped != 0 {
		t.Errorf("queue-full drops %d (LONG %d, SHORT %d), want 6 (6, 0)", s.Drops.QueueFull, s.Types[2].Dropped, s.Types[1].Dropped)
	}
	checkAccounting(t, s)
	close(g.open)
	waitFor(t, "replies", func() bool { return dp.replyCount() == 8 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	s = d.Stats()
	checkAccounting(t, s)
	if s.Types[1].Answered != 3 || s.Types[2].Answered != 5 {
		t.Errorf("answered SHORT %d LONG %d, want 3 and 5", s.Types[1].Answered, s.Types[2].Answered)
	}
}

func TestShutdownDrainsQueuedRequests(t *testing.T) {
	dp := newFakeDataplane(2, 128, 64)
	slow := app.HandlerFunc(func(int, darc.Type, *nic.Buffer) bool { time.Sleep(200 * time.Microsecond); return true })
	d, stop := runHeader(t, Spec{Workers: 2}, dp, 128, slow)
	for i := 0; i < 100; i++ {
		dp.inject(header(uint32(i), 1, 0), 1)
	}
	waitFor(t, "all received", func() bool { return d.Stats().Received == 100 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	s := d.Stats()
	checkAccounting(t, s)
	if s.Answered != 100 || dp.replyCount() != 100 {
		t.Errorf("answered %d (replies %d), want all 100 drained", s.Answered, dp.replyCount())
	}
}

func TestShutdownTimeoutCountsLeftovers(t *testing.T) {
	dp := newFakeDataplane(1, 64, 64)
	g := &gate{open: make(chan struct{})}
	d, stop := runHeader(t, Spec{Workers: 1, DrainTimeout: 10 * time.Millisecond}, dp, 64, g)
	for i := 0; i < 5; i++ {
		dp.inject(header(uint32(i), 2, 0), 1)
	}
	waitFor(t, "the worker to block", func() bool { return g.count() == 1 && d.Stats().Received == 5 })
	// The blocked request finishes once the drain is over (Run is
	// stopping its workers), within the workers' stopGrace: it is
	// answered, the four behind it are not.
	go func() {
		for !d.stop.Load() {
			time.Sleep(time.Millisecond)
		}
		close(g.open)
	}()
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	s := d.Stats()
	checkAccounting(t, s)
	if s.Answered != 1 || s.Drops.Shutdown != 4 || s.InFlight != 0 {
		t.Errorf("answered %d, shutdown drops %d, in flight %d; want 1, 4, 0", s.Answered, s.Drops.Shutdown, s.InFlight)
	}
	if got := dp.poolSize(); got != 64 {
		t.Errorf("pool holds %d buffers, want 64", got)
	}
}

func TestRunStopsWhenDataplaneCloses(t *testing.T) {
	dp := newFakeDataplane(1, 8, 64)
	d, err := New(Spec{Workers: 1}, dp, HeaderClassifier{}, newFakePolicy(1, HeaderNumTypes, 8), echo)
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { errc <- d.Run(context.Background()) }()
	dp.Close()
	if err := testenv.Await(t, errc, 10*time.Second, "Run to return after the dataplane closed"); err != nil {
		t.Errorf("Run after Close: %v, want nil", err)
	}
	if err := d.Run(context.Background()); !errors.Is(err, ErrRunning) {
		t.Errorf("second Run: %v, want ErrRunning", err)
	}
}

// TestStepNoAlloc drives the dispatcher's per-burst step by hand (the test
// plays the workers) and checks it allocates nothing.
func TestStepNoAlloc(t *testing.T) {
	const workers = 4
	dp := newFakeDataplane(workers, 256, 64)
	dp.keep = false
	d, err := New(Spec{Workers: workers}, dp, HeaderClassifier{}, newFakePolicy(workers, HeaderNumTypes, 256), echo)
	if err != nil {
		t.Fatal(err)
	}
	pkts := [][]byte{header(1, 1, 0), header(2, 2, 0), header(3, 0, 0), {9}}
	iteration := handStepper(t, d, dp, pkts)
	iteration() // warm up
	if allocs := testing.AllocsPerRun(50, iteration); allocs != 0 {
		t.Errorf("per-burst step allocates %.1f times, want 0", allocs)
	}
	if d.queued != 0 || d.busy != 0 {
		t.Errorf("after the bursts: queued %d busy %d, want 0 0", d.queued, d.busy)
	}
}

func TestRunPinned(t *testing.T) {
	cpus, err := affinity.Available()
	if err != nil {
		testenv.Skip(t, "cannot read the CPU affinity: %v", err)
	}
	dp := newFakeDataplane(2, 16, 64)
	_, stop := runHeader(t, Spec{Workers: 2, CPUs: []int{cpus[0], cpus[len(cpus)-1]}}, dp, 16, echo)
	for i := 0; i < 10; i++ {
		dp.inject(header(uint32(i), 1, 0), 1)
	}
	waitFor(t, "replies", func() bool { return dp.replyCount() == 10 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

// handStepper returns one iteration of driving d by hand: inject 32 of
// pkts in turn, then 16 steps, after each of which the test plays the
// workers (each sends the request it was handed back and reports it
// done).
func handStepper(t *testing.T, d *Dispatcher, dp *fakeDataplane, pkts [][]byte) func() {
	one := make([]*nic.Buffer, 1)
	return func() {
		for i := 0; i < 32; i++ {
			dp.inject(pkts[i%len(pkts)], 1)
		}
		for k := 0; k < 16; k++ {
			if _, err := d.step(0); err != nil {
				t.Fatal(err)
			}
			for _, w := range d.workers {
				if tk, ok := w.in.Pop(); ok {
					one[0] = tk.buf
					w.tx.Send(one)
					w.out.Push(completion{typ: tk.typ, start: 1, end: 2})
				}
			}
		}
	}
}
