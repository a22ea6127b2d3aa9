package dispatcher

import (
	"sync"
	"testing"
	"time"

	"github.com/persephone-go/psp/nic"
)

// recvLog is a fakeDataplane that records how the dispatcher calls Recv:
// polls (no wait) and parks (a wait), and when it first parked after the
// test last asked.
type recvLog struct {
	*fakeDataplane
	mu        sync.Mutex
	polls     int
	parks     int
	firstPark time.Time // the first park since reset
}

func (r *recvLog) Recv(bufs []*nic.Buffer, wait time.Duration) (int, error) {
	r.mu.Lock()
	if wait > 0 {
		r.parks++
		if r.firstPark.IsZero() {
			r.firstPark = time.Now()
		}
	} else {
		r.polls++
	}
	r.mu.Unlock()
	return r.fakeDataplane.Recv(bufs, wait)
}

// reset zeroes the counts and returns the time it did so.
func (r *recvLog) reset() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.polls, r.parks, r.firstPark = 0, 0, time.Time{}
	return time.Now()
}

func (r *recvLog) counts() (polls, parks int, firstPark time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.polls, r.parks, r.firstPark
}

// TestDispatcherPollsThenParks checks Spec.DispatcherSpin: after its last
// work the dispatcher polls the dataplane (Recv without a wait) for
// DispatcherSpin, then parks in Recv; a negative spin parks after Spin (here
// at once), and a request arriving while it polls or while it is parked is
// answered.
func TestDispatcherPollsThenParks(t *testing.T) {
	const spin = 40 * time.Millisecond
	for _, tc := range []struct {
		name string
		spin time.Duration
	}{{"spin", spin}, {"park-at-once", -1}} {
		t.Run(tc.name, func(t *testing.T) {
			dp := &recvLog{fakeDataplane: newFakeDataplane(1, 16, 64)}
			d, err := New(Spec{Workers: 1, Spin: -1, DispatcherSpin: tc.spin}, dp, HeaderClassifier{}, newFakePolicy(1, HeaderNumTypes, 16), echo)
			if err != nil {
				t.Fatal(err)
			}
			stop := run(t, d)
			// The first request finds the dispatcher parked since its
			// start, the second polling or parked: both are answered. The
			// dispatcher's last work comes after the second's arrival.
			dp.inject(header(1, 1, 0), 1)
			waitFor(t, "the first reply", func() bool { return dp.replyCount() == 1 })
			arrived := dp.reset()
			dp.inject(header(2, 1, 0), 1)
			waitFor(t, "the second reply", func() bool { return dp.replyCount() == 2 })
			waitFor(t, "the dispatcher to park", func() bool { _, parks, _ := dp.counts(); return parks > 0 })
			polls, _, firstPark := dp.counts()
			idle := firstPark.Sub(arrived)
			switch {
			case tc.spin > 0 && idle < spin:
				t.Errorf("parked %v after the last request arrived, want at least DispatcherSpin %v", idle, spin)
			case tc.spin > 0 && polls < 10:
				t.Errorf("%d polls in %v before parking, want it to keep polling", polls, idle)
			case tc.spin < 0 && firstPark.Sub(dp.lastReply()) >= DefaultDispatcherSpin:
				// Timed from the reply, the dispatcher's last work but
				// for taking the worker's completion: a spin of the
				// default window would park at least that long after it,
				// while the request's own time on a loaded machine (a CI
				// run under -race took 10 ms from its arrival) does not
				// count. Not a count of polls: the dispatcher polls while
				// the request runs, and a CI run under load counted 21
				// before its worker's completion came back.
				t.Errorf("parked %v after the last reply (%v after the request arrived, %d polls) with a negative DispatcherSpin, want at once",
					firstPark.Sub(dp.lastReply()), idle, polls)
			}
			waitFor(t, "stats counting the park", func() bool { return d.Stats().DispatcherParks >= 1 })
			if got, want := d.Stats().DispatcherSpinNs, max(int64(tc.spin), 0); got != want {
				t.Errorf("Stats.DispatcherSpinNs %d, want %d", got, want)
			}
			if err := stop(); err != nil {
				t.Fatal(err)
			}
		})
	}
}
