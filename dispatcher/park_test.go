package dispatcher

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/persephone-go/psp/app"
	"github.com/persephone-go/psp/darc"
	"github.com/persephone-go/psp/nic"
	"github.com/persephone-go/psp/wire"
)

// parkingApp echoes requests as echo does, but parks those of type 2 (a
// BLPOP on an empty list) for after: run again, such a request answers
// once open is set, or at once when after is set (its time limit passed).
type parkingApp struct {
	after   time.Duration
	open    atomic.Bool
	epoch   atomic.Uint64
	resumed atomic.Int32 // runs with nic.Resumed set
	order   chan uint32  // the ids answered, in order
}

func newParkingApp(after time.Duration) *parkingApp {
	return &parkingApp{after: after, order: make(chan uint32, 64)}
}

func (a *parkingApp) Handle(w int, typ darc.Type, b *nic.Buffer) bool {
	return echo.Handle(w, typ, b)
}

func (a *parkingApp) HandleMulti(w int, typ darc.Type, b *nic.Buffer, r app.Reply) bool {
	resumed := b.Flags&nic.Resumed != 0
	if resumed {
		a.resumed.Add(1)
	}
	if typ == 2 && !(resumed && (a.open.Load() || a.after > 0)) {
		r.Park(a.after)
		return false
	}
	h, _ := wire.Decode(b.Payload())
	a.order <- h.ID
	return echo.Handle(w, typ, b)
}

// signal lets the parked requests run: Unpark answers yes from now on,
// and the epoch moves after it, as app.Parker asks.
func (a *parkingApp) signal() {
	a.open.Store(true)
	a.epoch.Add(1)
}

func (a *parkingApp) ParkEpoch() uint64         { return a.epoch.Load() }
func (a *parkingApp) Unpark(b *nic.Buffer) bool { return a.open.Load() }

// TestParkedRequestHoldsNoWorker: a parked request leaves its worker free
// for others, waits in no queue, and runs again, flagged Resumed, once the
// application signals; the request chained behind it waits with it.
func TestParkedRequestHoldsNoWorker(t *testing.T) {
	dp := newFakeDataplane(2, 16, 64)
	a := newParkingApp(0)
	d, stop := runHeader(t, Spec{Workers: 1}, dp, 16, a)
	if !dp.injectChain([][]byte{header(1, 2, 0), header(2, 1, 0)}, 1) {
		t.Fatal("pool short")
	}
	waitFor(t, "the request to park", func() bool { return d.Stats().Parked == 1 })
	// One worker: the other connection's request is served meanwhile.
	dp.inject(header(3, 1, 0), 1)
	waitFor(t, "the other request's reply", func() bool { return dp.replyCount() == 1 })
	time.Sleep(20 * time.Millisecond) // room for a wrong wake-up or a chained request run early
	s := d.Stats()
	// The request chained to the parked one is not received yet.
	if s.Parked != 1 || s.InFlight != 1 || s.Busy != 0 || s.Queued != 0 || dp.replyCount() != 1 {
		t.Fatalf("parked %d, in flight %d, busy %d, queued %d, replies %d; want 1, 1, 0, 0, 1",
			s.Parked, s.InFlight, s.Busy, s.Queued, dp.replyCount())
	}
	if s.Types[2].Parked != 1 {
		t.Errorf("type 2 parked %d, want 1", s.Types[2].Parked)
	}
	a.signal()
	waitFor(t, "the parked request and the one chained to it", func() bool { return dp.replyCount() == 3 })
	if got := [3]uint32{<-a.order, <-a.order, <-a.order}; got != [3]uint32{3, 1, 2} {
		t.Errorf("answered %v, want [3 1 2]", got)
	}
	if n := a.resumed.Load(); n != 1 {
		t.Errorf("%d runs flagged Resumed, want 1", n)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	s = d.Stats()
	checkAccounting(t, s)
	if s.Answered != 3 || s.Parked != 0 || s.Dropped != 0 {
		t.Errorf("answered %d, parked %d, dropped %d; want 3, 0, 0", s.Answered, s.Parked, s.Dropped)
	}
}

// TestParkTimeLimit: a parked request runs again once its time limit has
// passed, with no signal from the application, and never before it.
func TestParkTimeLimit(t *testing.T) {
	const after = 30 * time.Millisecond
	dp := newFakeDataplane(1, 16, 64)
	a := newParkingApp(after)
	d, stop := runHeader(t, Spec{Workers: 1}, dp, 16, a)
	start := time.Now()
	dp.inject(header(1, 2, 0), 1)
	waitFor(t, "the reply after the time limit", func() bool { return dp.replyCount() == 1 })
	if took := dp.lastReply().Sub(start); took < after {
		t.Errorf("answered %v after the request, before its time limit %v", took, after)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	s := d.Stats()
	checkAccounting(t, s)
	if s.Answered != 1 || a.resumed.Load() != 1 {
		t.Errorf("answered %d, resumed %d; want 1, 1", s.Answered, a.resumed.Load())
	}
}

// TestParkedDroppedAtShutdown: shutdown drops the parked requests,
// counted, and runs the requests chained to them as it runs those of any
// dropped request; every buffer is back in the pool.
func TestParkedDroppedAtShutdown(t *testing.T) {
	dp := newFakeDataplane(1, 16, 64)
	a := newParkingApp(0)
	d, stop := runHeader(t, Spec{Workers: 1}, dp, 16, a)
	dp.injectChain([][]byte{header(1, 2, 0), header(2, 1, 0)}, 1)
	dp.inject(header(3, 2, 0), 1)
	waitFor(t, "two requests to park", func() bool { return d.Stats().Parked == 2 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	s := d.Stats()
	checkAccounting(t, s)
	if s.Drops.Shutdown != 2 || s.Answered != 1 || s.Parked != 0 || s.InFlight != 0 {
		t.Errorf("shutdown drops %d, answered %d, parked %d, in flight %d; want 2, 1, 0, 0", s.Drops.Shutdown, s.Answered, s.Parked, s.InFlight)
	}
	if got := dp.poolSize(); got != 16 {
		t.Errorf("pool holds %d buffers, want 16", got)
	}
}

// parkingNoParker parks as parkingApp does but is no app.Parker: nothing
// would run its parked requests again, so they are dropped.
type parkingNoParker struct{ a *parkingApp }

func (p parkingNoParker) Handle(w int, typ darc.Type, b *nic.Buffer) bool {
	return p.a.Handle(w, typ, b)
}

func (p parkingNoParker) HandleMulti(w int, typ darc.Type, b *nic.Buffer, r app.Reply) bool {
	return p.a.HandleMulti(w, typ, b, r)
}

func TestParkWithoutParkerDrops(t *testing.T) {
	dp := newFakeDataplane(1, 16, 64)
	d, stop := runHeader(t, Spec{Workers: 1}, dp, 16, parkingNoParker{newParkingApp(0)})
	dp.inject(header(1, 2, 0), 1)
	waitFor(t, "the request to be dropped", func() bool { return d.Stats().Drops.App == 1 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	s := d.Stats()
	checkAccounting(t, s)
	if s.Parked != 0 || dp.poolSize() != 16 {
		t.Errorf("parked %d, pool %d; want 0, 16", s.Parked, dp.poolSize())
	}
}
