package dispatcher

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/persephone-go/psp/darc"
	"github.com/persephone-go/psp/nic"
	"github.com/persephone-go/psp/wire"
)

// spinFor keeps the calling thread busy for d.
func spinFor(d time.Duration) {
	for end := time.Now().Add(d); time.Now().Before(end); {
	}
}

// inPlaceApp answers every request; type 2 (LONG) takes longLen. It
// counts the requests it ran on the worker ids the policy chose.
type inPlaceApp struct {
	longLen time.Duration
	badID   atomic.Int64 // requests run with a worker id out of range
	workers int
}

func (a *inPlaceApp) Handle(w int, typ darc.Type, b *nic.Buffer) bool {
	if w < 0 || w >= a.workers {
		a.badID.Add(1)
	}
	if typ == 2 {
		spinFor(a.longLen)
	}
	return true
}

// oneByOne sends n requests of type typ, each once the previous one was
// answered and the workers had time to park.
func oneByOne(t *testing.T, dp *fakeDataplane, typ uint32, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		before := dp.replyCount()
		for !dp.inject(header(uint32(i), typ, 0), 6789) {
			time.Sleep(10 * time.Microsecond)
		}
		waitFor(t, "a reply", func() bool { return dp.replyCount() > before })
		time.Sleep(200 * time.Microsecond) // the workers park (Spin is negative)
	}
}

func TestInPlaceServesShortTypesOfParkedWorkers(t *testing.T) {
	for _, tc := range []struct {
		name  string
		limit time.Duration
	}{{"on", 50 * time.Microsecond}, {"off", -1}} {
		t.Run(tc.name, func(t *testing.T) {
			const workers, n = 2, 40
			dp := newFakeDataplane(workers+1, 64, 64)
			app := &inPlaceApp{longLen: 400 * time.Microsecond, workers: workers}
			d, stop := runHeader(t, Spec{Workers: workers, Spin: -1, InPlaceLimit: tc.limit, MinPayload: wire.HeaderLen, StatsInterval: time.Millisecond}, dp, 64, app)
			oneByOne(t, dp, 1, n) // SHORT
			oneByOne(t, dp, 2, n) // LONG: 400µs, over the limit
			if err := stop(); err != nil {
				t.Fatal(err)
			}
			s := d.Stats()
			checkAccounting(t, s)
			checkStages(t, d, s)
			if s.Answered != 2*n {
				t.Fatalf("answered %d, want %d", s.Answered, 2*n)
			}
			if app.badID.Load() != 0 {
				t.Errorf("%d requests ran with a worker id the policy does not have", app.badID.Load())
			}
			short, long := s.Types[1], s.Types[2]
			if long.InPlace != 0 {
				t.Errorf("%d LONG requests (400µs, limit %v) served in place, want 0", long.InPlace, tc.limit)
			}
			if tc.limit < 0 {
				if short.InPlace != 0 || short.HandOffs.Total() != 0 || s.InPlaceLimitNs != 0 {
					t.Errorf("off: SHORT in place %d, hand-offs %+v, limit %d; want none", short.InPlace, short.HandOffs, s.InPlaceLimitNs)
				}
				return
			}
			// Each type's first services are measured on a worker thread;
			// from then on a SHORT request to a parked worker runs in place.
			if short.InPlace < n-darc.ServiceEstimateSamples-5 {
				t.Errorf("SHORT served in place %d of %d (hand-offs %+v), want >= %d", short.InPlace, n, short.HandOffs, n-darc.ServiceEstimateSamples-5)
			}
			if long.HandOffs.Long < n-darc.ServiceEstimateSamples-5 {
				t.Errorf("LONG handed off as long %d of %d (hand-offs %+v, expected %v)", long.HandOffs.Long, n, long.HandOffs, time.Duration(long.ExpectedServiceNs))
			}
			if long.ExpectedServiceNs < int64(300*time.Microsecond) {
				t.Errorf("LONG expected service %v, want about 400µs", time.Duration(long.ExpectedServiceNs))
			}
		})
	}
}

// TestInPlaceNotForAwakeWorkers: under busy-poll no worker parks, so no
// request is served in place.
func TestInPlaceNotForAwakeWorkers(t *testing.T) {
	const workers = 2
	dp := newFakeDataplane(workers, 64, 64)
	d, stop := runHeader(t, Spec{Workers: workers, Idle: IdleBusyPoll, MinPayload: wire.HeaderLen, StatsInterval: time.Millisecond}, dp, 64, echo)
	oneByOne(t, dp, 1, 20)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if s := d.Stats(); s.Types[1].InPlace != 0 || s.InPlaceLimitNs != 0 {
		t.Errorf("busy-poll: %d served in place (limit %d), want 0", s.Types[1].InPlace, s.InPlaceLimitNs)
	}
}

func TestInPlaceStepNoAlloc(t *testing.T) {
	const workers = 4
	dp := newFakeDataplane(workers+1, 256, 64)
	dp.keep = false
	d, err := New(Spec{Workers: workers}, dp, HeaderClassifier{}, newFakePolicy(workers, HeaderNumTypes, 256), echo)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range d.workers {
		w.parked.Store(true) // no worker goroutine runs: every worker is parked
	}
	pkts := [][]byte{header(1, 1, 0), header(2, 2, 0), header(3, 0, 0)}
	iteration := handStepper(t, d, dp, pkts) // the workers take the hand-offs of unprofiled types
	iteration()                              // warm up: profiles the types
	if allocs := testing.AllocsPerRun(50, iteration); allocs != 0 {
		t.Errorf("per-burst step serving in place allocates %.1f times, want 0", allocs)
	}
	var inPlace uint64
	for i := range d.counters {
		inPlace += d.counters[i].inPlace
	}
	if inPlace < 50*32/2 {
		t.Errorf("served in place %d of %d, want most", inPlace, 50*32)
	}
	if d.queued != 0 || d.busy != 0 {
		t.Errorf("after the bursts: queued %d busy %d, want 0 0", d.queued, d.busy)
	}
}

// TestInPlaceTransmitFailures: replies of requests served in place are
// sent together at the end of the dispatch round; when the dataplane
// cannot send them, the requests count as transmit errors, not answers,
// and every buffer goes back to the pool.
func TestInPlaceTransmitFailures(t *testing.T) {
	const workers, n = 2, 30
	dp := newFakeDataplane(workers+1, 64, 64)
	d, stop := runHeader(t, Spec{Workers: workers, Spin: -1, InPlaceLimit: time.Millisecond, MinPayload: wire.HeaderLen, StatsInterval: time.Millisecond}, dp, 64, echo)
	oneByOne(t, dp, 1, n) // profiled, then served in place
	dp.mu.Lock()
	dp.failTx = true
	dp.mu.Unlock()
	for i := 0; i < n; i++ {
		for !dp.inject(header(uint32(i), 1, 0), 6789) {
			time.Sleep(10 * time.Microsecond)
		}
		waitFor(t, "the request's completion", func() bool {
			s := d.Stats()
			return s.Received == uint64(n+i+1) && s.InFlight == 0
		})
		time.Sleep(200 * time.Microsecond)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	s := d.Stats()
	checkAccounting(t, s)
	short := s.Types[1]
	if short.InPlace < n {
		t.Fatalf("served in place %d, want >= %d", short.InPlace, n)
	}
	if s.Answered != n || s.Drops.TxError != n || short.Drops.TxError != n {
		t.Errorf("answered %d, transmit errors %d (SHORT %d); want %d and %d", s.Answered, s.Drops.TxError, short.Drops.TxError, n, n)
	}
	if got := dp.poolSize(); got != 64 {
		t.Errorf("pool holds %d buffers after shutdown, want 64", got)
	}
}
