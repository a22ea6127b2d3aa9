package dispatcher

import (
	"testing"
	"time"

	"github.com/persephone-go/psp/darc"
)

// faultsOnLong classifies by header, answering darc.Faulted for LONG (type
// 2): a fail-closed tenant whose classifier faults on that type.
type faultsOnLong struct{ HeaderClassifier }

func (c faultsOnLong) ClassifyBatch(payloads [][]byte, out []darc.Type) {
	c.HeaderClassifier.ClassifyBatch(payloads, out)
	for i, t := range out[:len(payloads)] {
		if t == 2 {
			out[i] = darc.Faulted
		}
	}
}

// TestFaultedRequestsDropped: requests a fail-closed classifier failed on
// are dropped, counted as classifier_fault under UNKNOWN, and answered
// "overloaded"; the others are served.
func TestFaultedRequestsDropped(t *testing.T) {
	const workers = 2
	dp := newFakeDataplane(workers+1, 256, 64)
	g := &blocker{open: make(chan struct{}), reply: true}
	close(g.open)
	policy := realPolicy(t, darc.Config{Workers: workers, NumTypes: HeaderNumTypes, Pool: 200, MinSamples: 1000})
	d, err := New(Spec{Workers: workers, StatsInterval: time.Millisecond}, dp, faultsOnLong{}, policy, g)
	if err != nil {
		t.Fatal(err)
	}
	stop := run(t, d)
	for i := range 10 {
		dp.inject(header(uint32(i), uint32(1+i%2), 0), 1)
	}
	waitFor(t, "all answered or dropped", func() bool { s := d.Stats(); return s.Answered+s.Dropped == 10 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	s := d.Stats()
	checkAccounting(t, s)
	if s.Drops.ClassifierFault != 5 || s.Types[0].Drops.ClassifierFault != 5 || s.Types[0].Received != 5 {
		t.Fatalf("classifier_fault drops %d (UNKNOWN %d of %d received), want 5", s.Drops.ClassifierFault, s.Types[0].Drops.ClassifierFault, s.Types[0].Received)
	}
	if s.Answered != 5 || s.Types[1].Answered != 5 || s.Types[2].Received != 0 {
		t.Fatalf("answered %d (SHORT %d, LONG received %d), want the 5 SHORT", s.Answered, s.Types[1].Answered, s.Types[2].Received)
	}
	if s.OverloadReplies != 5 || dp.replyCount() != 10 {
		t.Fatalf("overload replies %d, replies sent %d: want 5 and 10", s.OverloadReplies, dp.replyCount())
	}
}
