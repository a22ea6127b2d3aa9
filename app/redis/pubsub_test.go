package redis

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/persephone-go/psp/nic"
)

// countPusher is a nic.Pusher that keeps the last push in a buffer of its
// own (no allocation once it is large enough) and counts them.
type countPusher struct {
	mu     sync.Mutex
	n      int
	last   []byte
	closed bool
}

func (p *countPusher) Push(b []byte) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nic.ErrConnClosed
	}
	p.n++
	p.last = append(p.last[:0], b...)
	return nil
}

func (p *countPusher) get() (int, string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.n, string(p.last)
}

// subscriber returns a caller whose connection takes pushes.
func subscriber(s *Server, w int) (*caller, *countPusher) {
	c := newCaller(s, w)
	p := &countPusher{last: make([]byte, 0, 256)}
	c.conn.TakePusher(p)
	return c, p
}

// TestPublishFormatsPerProtocol: PUBLISH sends each receiver the message
// in its protocol (RESP2's array, RESP3's push), once per pattern that
// matched, counts the receivers, and allocates nothing.
func TestPublishFormatsPerProtocol(t *testing.T) {
	s := openTest(t, Config{Workers: 3})
	a, pa := subscriber(s, 0)
	b, pb := subscriber(s, 1)
	pub := newCaller(s, 2)
	if r := a.do("SUBSCRIBE", "ch"); r != "*3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n" {
		t.Fatalf("SUBSCRIBE: %q", r)
	}
	b.do("HELLO", "3")
	if r := b.do("PSUBSCRIBE", "c*"); r != ">3\r\n$10\r\npsubscribe\r\n$2\r\nc*\r\n:1\r\n" {
		t.Fatalf("PSUBSCRIBE in RESP3: %q", r)
	}
	if r := b.do("CLIENT", "INFO"); !strings.Contains(r, " flags=P db=0 sub=0 psub=1 ") {
		t.Errorf("CLIENT INFO of a pattern subscriber: %q", r)
	}
	if r := pub.do("CLIENT", "INFO"); !strings.Contains(r, " flags=N db=0 sub=0 psub=0 ") {
		t.Errorf("CLIENT INFO of a publisher: %q", r)
	}
	if r := pub.do("CLIENT", "LIST", "TYPE", "pubsub"); strings.Count(r, "flags=P") != 2 || strings.Contains(r, fmt.Sprintf("id=%d ", pub.conn.id)) {
		t.Errorf("CLIENT LIST TYPE pubsub: %q, want the two subscribers", r)
	}
	if r := pub.do("CLIENT", "LIST", "TYPE", "normal"); strings.Contains(r, "flags=P") || !strings.Contains(r, fmt.Sprintf("id=%d ", pub.conn.id)) {
		t.Errorf("CLIENT LIST TYPE normal: %q, want the publisher alone", r)
	}
	if r := pub.do("PUBLISH", "ch", "hi"); r != ":2\r\n" {
		t.Fatalf("PUBLISH: %q", r)
	}
	if n, m := pa.get(); n != 1 || m != "*3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$2\r\nhi\r\n" {
		t.Errorf("RESP2 subscriber: %d pushes, last %q", n, m)
	}
	if n, m := pb.get(); n != 1 || m != ">4\r\n$8\r\npmessage\r\n$2\r\nc*\r\n$2\r\nch\r\n$2\r\nhi\r\n" {
		t.Errorf("RESP3 pattern subscriber: %d pushes, last %q", n, m)
	}
	checkNoAllocs(t, pub, [][]string{{"PUBLISH", "ch", "hello"}, {"PUBLISH", "nobody", "hello"}})
	// RESP2's subscribed context; RESET leaves it.
	if r := a.do("GET", "k"); r != "-ERR Can't execute 'get': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context\r\n" {
		t.Errorf("GET while subscribed: %q", r)
	}
	if r := a.do("PING"); r != "*2\r\n$4\r\npong\r\n$0\r\n\r\n" {
		t.Errorf("PING while subscribed: %q", r)
	}
	if r := a.do("RESET"); r != "+RESET\r\n" {
		t.Errorf("RESET: %q", r)
	}
	if r := pub.do("PUBLISH", "ch", "x"); r != ":1\r\n" {
		t.Errorf("PUBLISH after RESET: %q, want the pattern subscriber alone", r)
	}
	// A closed connection leaves its patterns.
	b.conn.ConnClosed()
	if r := pub.do("PUBSUB", "NUMPAT"); r != ":0\r\n" {
		t.Errorf("PUBSUB NUMPAT after the close: %q", r)
	}
}

// TestPubSubChurn: connections subscribing, unsubscribing and closing on
// some workers while others publish: every PUBLISH counts what it sent,
// and once every connection has left, nothing is registered. Run with
// -race.
func TestPubSubChurn(t *testing.T) {
	const subs, pubs, rounds = 4, 2, 300
	s := openTest(t, Config{Workers: subs + pubs})
	var wg sync.WaitGroup
	var pushed, counted atomic.Int64
	pushers := make([]*countPusher, subs)
	for w := range subs {
		c, p := subscriber(s, w)
		pushers[w] = p
		wg.Go(func() {
			for i := range rounds {
				c.do("SUBSCRIBE", "ch", fmt.Sprint("c", i%3))
				c.do("PSUBSCRIBE", "c*")
				if i%2 == 0 {
					c.do("UNSUBSCRIBE")
				}
				c.do("PUNSUBSCRIBE", "c*")
				if i%50 == 49 {
					c.conn.ConnClosed()
					p.mu.Lock()
					p.closed = true
					p.mu.Unlock()
					c, p = subscriber(s, w)
					pushers[w] = p
				}
			}
			c.do("RESET")
		})
	}
	for w := subs; w < subs+pubs; w++ {
		c := newCaller(s, w)
		wg.Go(func() {
			for range rounds {
				r := c.do("PUBLISH", "ch", "m")
				var n int64
				if _, err := fmt.Sscanf(r, ":%d\r\n", &n); err != nil {
					t.Errorf("PUBLISH: %q", r)
					return
				}
				counted.Add(n)
			}
		})
	}
	wg.Wait()
	for _, p := range pushers {
		n, _ := p.get()
		pushed.Add(int64(n))
	}
	if counted.Load() < pushed.Load() {
		t.Errorf("PUBLISH counted %d receivers, the live pushers took %d", counted.Load(), pushed.Load())
	}
	r := &s.pubsub
	r.mu.RLock()
	defer r.mu.RUnlock()
	if len(r.channels) != 0 || len(r.patterns) != 0 || len(r.pats) != 0 {
		t.Errorf("left registered: %d channels, %d patterns (%d listed)", len(r.channels), len(r.patterns), len(r.pats))
	}
}
