package dispatcher

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/persephone-go/psp/app"
	"github.com/persephone-go/psp/darc"
	"github.com/persephone-go/psp/nic"
	"github.com/persephone-go/psp/wire"
)

// injectChain queues payloads as one request with the others chained to
// it (nic.Buffer.Next), as a stream dataplane hands out a connection's
// requests that must run one after another; it reports false when the
// pool is short.
func (dp *fakeDataplane) injectChain(payloads [][]byte, port uint16) bool {
	dp.mu.Lock()
	defer dp.mu.Unlock()
	if len(dp.pool) < len(payloads) {
		return false
	}
	var head, tail *nic.Buffer
	for _, p := range payloads {
		b := dp.pool[len(dp.pool)-1]
		dp.pool = dp.pool[:len(dp.pool)-1]
		n := copy(b.Data, p)
		b.Len, b.WireLen, b.DstPort = n, len(p), port
		if tail == nil {
			head = b
		} else {
			tail.Next = b
		}
		tail = b
	}
	dp.inbox = append(dp.inbox, head)
	select {
	case dp.notify <- struct{}{}:
	default:
	}
	return true
}

// chainChecker is an application that checks a chain's requests (header
// ID: chain<<8 | position) run one at a time, in order; type 3 is refused
// and type 4 panics, as echo does.
type chainChecker struct {
	mu      sync.Mutex
	running map[uint32]bool
	last    map[uint32]int
	errs    []string
	handled int
}

func (c *chainChecker) Handle(w int, typ darc.Type, b *nic.Buffer) bool {
	h, _ := wire.Decode(b.Payload())
	chain, pos := h.ID>>8, int(h.ID&0xff)
	c.mu.Lock()
	if c.running[chain] {
		c.errs = append(c.errs, fmt.Sprintf("chain %d: %d started beside another of its requests", chain, pos))
	}
	if last, ok := c.last[chain]; ok && pos <= last {
		c.errs = append(c.errs, fmt.Sprintf("chain %d: %d started after %d", chain, pos, last))
	}
	c.running[chain], c.last[chain] = true, pos
	c.handled++
	c.mu.Unlock()
	time.Sleep(time.Duration(1+pos%3) * 100 * time.Microsecond)
	c.mu.Lock()
	c.running[chain] = false
	c.mu.Unlock()
	return echo(w, typ, b)
}

// TestChainedRequestsRunOneAfterAnother: requests chained to one another
// run one at a time, in their order, on any worker or in place; a
// chain's request that is dropped (a runt, refused, panicking) does not
// hold the rest back; every request is counted once.
func TestChainedRequestsRunOneAfterAnother(t *testing.T) {
	for _, inPlace := range []time.Duration{-1, time.Millisecond} {
		t.Run(fmt.Sprintf("in-place=%v", inPlace), func(t *testing.T) {
			const workers, chains, length = 3, 60, 8
			dp := newFakeDataplane(workers, 1024, 64)
			c := &chainChecker{running: map[uint32]bool{}, last: map[uint32]int{}}
			d, stop := runHeader(t, Spec{Workers: workers, MinPayload: wire.HeaderLen, InPlaceLimit: inPlace, StatsInterval: time.Millisecond}, dp, 1024, c)
			want, dropped := 0, 0
			for k := range chains {
				var payloads [][]byte
				for pos := range length {
					typ := uint32(1 + (k+pos)%2)
					switch {
					case k%7 == 0 && pos == 0:
						payloads = append(payloads, []byte{1, 2, 3}) // a runt
						dropped++
						continue
					case k%5 == 0 && pos == 3:
						typ = 3 // refused
					case k%11 == 0 && pos == 5:
						typ = 4 // panics
					}
					payloads = append(payloads, header(uint32(k<<8|pos), typ, 100))
					if typ >= 3 {
						dropped++
					} else {
						want++
					}
				}
				for !dp.injectChain(payloads, 6789) {
					time.Sleep(50 * time.Microsecond)
				}
				if k%2 == 1 {
					// Two chains at a time, on three workers: a request
					// let out early would find a worker free.
					waitFor(t, "replies", func() bool { return dp.replyCount() == want })
				}
			}
			waitFor(t, "replies", func() bool { return dp.replyCount() == want })
			if err := stop(); err != nil {
				t.Fatalf("Run: %v", err)
			}
			c.mu.Lock()
			defer c.mu.Unlock()
			for _, e := range c.errs {
				t.Error(e)
			}
			s := d.Stats()
			checkAccounting(t, s)
			if s.Received != chains*length || s.Answered != uint64(want) || s.Dropped != uint64(dropped) {
				t.Errorf("received %d answered %d dropped %d, want %d, %d, %d", s.Received, s.Answered, s.Dropped, chains*length, want, dropped)
			}
			if got := dp.poolSize(); got != 1024 {
				t.Errorf("pool holds %d buffers after shutdown, want 1024 (leak)", got)
			}
		})
	}
}

// TestChainedRequestsAtShutdown: the requests chained to one still running
// when the drain times out are counted as received and dropped at
// shutdown, and their buffers go back.
func TestChainedRequestsAtShutdown(t *testing.T) {
	dp := newFakeDataplane(1, 64, 64)
	g := &gate{open: make(chan struct{})}
	d, stop := runHeader(t, Spec{Workers: 1, DrainTimeout: 10 * time.Millisecond}, dp, 64, g)
	var payloads [][]byte
	for i := range 5 {
		payloads = append(payloads, header(uint32(i), 2, 0))
	}
	dp.injectChain(payloads, 1)
	waitFor(t, "the worker to block", func() bool { return g.count() == 1 })
	go func() { time.Sleep(50 * time.Millisecond); close(g.open) }()
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	s := d.Stats()
	checkAccounting(t, s)
	if s.Received != 5 || s.Answered != 1 || s.Drops.Shutdown != 4 || s.InFlight != 0 {
		t.Errorf("received %d, answered %d, shutdown drops %d, in flight %d; want 5, 1, 4, 0", s.Received, s.Answered, s.Drops.Shutdown, s.InFlight)
	}
	if got := dp.poolSize(); got != 64 {
		t.Errorf("pool holds %d buffers, want 64", got)
	}
}

var _ app.Handler = (*chainChecker)(nil)
