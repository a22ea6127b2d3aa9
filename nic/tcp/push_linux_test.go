//go:build linux

package tcp_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/persephone-go/psp/nic"
	"github.com/persephone-go/psp/nic/tcp"
)

// pushProto is the lines protocol whose connections take a pusher: each
// connection's pusher is sent on pushers as the dataplane hands it over.
type pushProto struct {
	lines
	pushers chan nic.Pusher
}

// pushTaker is a lines connection that takes a pusher, and waits for
// pushes (nic.PushWaiter) once it was sent "wait\n".
type pushTaker struct {
	*lineConn
	to      chan nic.Pusher
	waiting *atomic.Bool
}

func (t pushTaker) TakePusher(p nic.Pusher) { t.to <- p }
func (t pushTaker) WaitsForPush() bool      { return t.waiting.Load() }

func (t pushTaker) Frame(in []byte, max int) nic.Frame {
	if bytes.HasPrefix(in, []byte("wait\n")) {
		t.waiting.Store(true)
	}
	return t.lineConn.Frame(in, max)
}

func (p *pushProto) NewConn(id uint64, _ netip.AddrPort) nic.Framer {
	return pushTaker{&lineConn{id: id}, p.pushers, new(atomic.Bool)}
}

// openPush opens a dataplane of the push protocol; the pushers of its
// connections come on the returned channel, in the order they connect.
func openPush(t *testing.T, cfg tcp.Config) (*tcp.Dataplane, chan nic.Pusher) {
	ch := make(chan nic.Pusher, 64)
	cfg.Protocol = &pushProto{pushers: ch}
	return open(t, cfg), ch
}

// dialPush connects to dp and returns the connection and its pusher.
func dialPush(t *testing.T, dp *tcp.Dataplane, pushers chan nic.Pusher) (net.Conn, nic.Pusher) {
	t.Helper()
	c := dial(t, dp)
	select {
	case p := <-pushers:
		return c, p
	case <-time.After(5 * time.Second):
		t.Fatal("no pusher handed over")
		return nil, nil
	}
}

// TestPushAfterInFlightReplies: a push goes after the replies of the
// requests framed before it, even when they finish later, and before those
// framed after it; a push to an idle connection is sent at once.
func TestPushAfterInFlightReplies(t *testing.T) {
	dp, pushers := openPush(t, tcp.Config{Workers: 2})
	serve(t, dp, 2, echo)
	c, p := dialPush(t, dp, pushers)
	r := bufio.NewReader(c)
	if err := p.Push([]byte("idle\n")); err != nil {
		t.Fatal(err)
	}
	if got := readLines(t, r, 1); got[0] != "idle\n" {
		t.Fatalf("push to an idle connection: got %q", got)
	}
	fmt.Fprint(c, "300 slow\n")
	waitFor(t, "the slow request framed", func() bool {
		cs := dp.Conns()
		return len(cs) == 1 && cs[0].Outstanding == 1
	})
	for _, m := range []string{"one\n", "two\n"} {
		if err := p.Push([]byte(m)); err != nil {
			t.Fatal(err)
		}
	}
	fmt.Fprint(c, "0 later\n")
	got := strings.Join(readLines(t, r, 4), "")
	if want := "300 slow\none\ntwo\n0 later\n"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	if s := dp.ConnStats(); s.Pushes != 3 || s.PushesRefused != 0 {
		t.Errorf("pushes %d refused %d, want 3 and 0", s.Pushes, s.PushesRefused)
	}
}

// TestPushesBetweenPipelinedRequests: a short pipeline bound (a reply
// ring of 8 turns) with many pushes landing between pipelined requests:
// none is refused, both kinds keep their order, and every byte of memory
// and every buffer comes back.
func TestPushesBetweenPipelinedRequests(t *testing.T) {
	dp, pushers := openPush(t, tcp.Config{Workers: 2, MaxPipeline: 2})
	serve(t, dp, 2, echo)
	c, p := dialPush(t, dp, pushers)
	const reqs, pushes = 200, 600
	done := make(chan error, 1)
	go func() {
		for i := range pushes {
			if err := p.Push([]byte(fmt.Sprintf("p%d\n", i))); err != nil {
				done <- err
				return
			}
			if i%8 == 0 {
				time.Sleep(100 * time.Microsecond)
			}
		}
		done <- nil
	}()
	go func() {
		for i := range reqs {
			fmt.Fprintf(c, "%d r%d\n", i%2, i)
		}
	}()
	got := readLines(t, bufio.NewReader(c), reqs+pushes)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	nr, np := 0, 0
	for _, l := range got {
		switch {
		case strings.HasPrefix(l, "p"):
			if l != fmt.Sprintf("p%d\n", np) {
				t.Fatalf("push %d: got %q", np, l)
			}
			np++
		default:
			if l != fmt.Sprintf("%d r%d\n", nr%2, nr) {
				t.Fatalf("reply %d: got %q", nr, l)
			}
			nr++
		}
	}
	if s := dp.ConnStats(); s.PushesRefused != 0 || s.Pushes != pushes {
		t.Errorf("pushes %d refused %d, want %d and 0", s.Pushes, s.PushesRefused, pushes)
	}
	c.Close()
	waitFor(t, "memory back", func() bool { s := dp.ConnStats(); return s.Current == 0 && s.MemoryUsed == 0 })
	waitFor(t, "buffers back", func() bool { return dp.FreeBuffers() == dp.Config().Buffers })
}

// TestPushToClosedConnection: a push to a connection closed by its client,
// or closing after its last reply, is refused with nic.ErrConnClosed and
// counted; nothing is kept for it.
func TestPushToClosedConnection(t *testing.T) {
	dp, pushers := openPush(t, tcp.Config{Workers: 1})
	serve(t, dp, 1, echo)
	a, pa := dialPush(t, dp, pushers)
	a.Close()
	waitFor(t, "a closed", func() bool { return dp.ConnStats().Closed.Peer == 1 })
	if err := pa.Push([]byte("late\n")); !errors.Is(err, nic.ErrConnClosed) {
		t.Errorf("push to a closed connection: %v, want ErrConnClosed", err)
	}
	b, pb := dialPush(t, dp, pushers)
	fmt.Fprint(b, "close bye\n")
	if got := readLines(t, bufio.NewReader(b), 1); got[0] != "bye\n" {
		t.Fatalf("got %q", got)
	}
	if err := pb.Push([]byte("late\n")); !errors.Is(err, nic.ErrConnClosed) {
		t.Errorf("push after the closing reply: %v, want ErrConnClosed", err)
	}
	if s := dp.ConnStats(); s.PushesRefused != 2 || s.Pushes != 0 {
		t.Errorf("pushes %d refused %d, want 0 and 2", s.Pushes, s.PushesRefused)
	}
	waitFor(t, "memory back", func() bool { s := dp.ConnStats(); return s.Current == 0 && s.MemoryUsed == 0 })
}

// TestSubscriberThatNeverReads: pushes to a client that reads nothing
// pile up to MaxOutput (beyond what its socket took), then a push fails
// and the connection is closed for its output,
// while another connection is served throughout; its memory comes back.
func TestSubscriberThatNeverReads(t *testing.T) {
	const maxOutput = 1 << 20
	dp, pushers := openPush(t, tcp.Config{Workers: 2, MaxOutput: maxOutput})
	serve(t, dp, 2, echo)
	_, sub := dialPush(t, dp, pushers)
	other, _ := dialPush(t, dp, pushers)
	r := bufio.NewReader(other)
	msg := []byte(strings.Repeat("m", 999) + "\n")
	var err error
	pushed := 0
	for ; pushed < 1<<20 && err == nil; pushed++ {
		err = sub.Push(msg)
		if pushed%1000 == 0 {
			fmt.Fprint(other, "0 x\n")
			readLines(t, r, 1)
		}
	}
	// The push past the bound fails with ErrOutputFull; or the write of
	// the pushes before it, which the socket did not take, passed it
	// first, and the connection was closing already.
	if !errors.Is(err, nic.ErrOutputFull) && !errors.Is(err, nic.ErrConnClosed) {
		t.Fatalf("after %d pushes: %v, want ErrOutputFull or ErrConnClosed", pushed, err)
	}
	if bytes := pushed * len(msg); bytes < maxOutput {
		t.Errorf("refused after %d bytes, below MaxOutput", bytes)
	}
	waitFor(t, "the subscriber closed for its output", func() bool { return dp.ConnStats().Closed.OutputLimit == 1 })
	if err := sub.Push(msg); !errors.Is(err, nic.ErrConnClosed) {
		t.Errorf("push after the close: %v, want ErrConnClosed", err)
	}
	fmt.Fprint(other, "0 still\n")
	if got := readLines(t, r, 1); got[0] != "0 still\n" {
		t.Fatalf("other got %q", got)
	}
	other.Close()
	waitFor(t, "memory back", func() bool { s := dp.ConnStats(); return s.Current == 0 && s.MemoryUsed == 0 })
}

// TestWaitingForPushesIsNotIdle: past IdleTimeout, a quiet connection is
// closed unless its framer waits for pushes (nic.PushWaiter), as a Redis
// subscriber; that one still takes pushes.
func TestWaitingForPushesIsNotIdle(t *testing.T) {
	dp, pushers := openPush(t, tcp.Config{Workers: 1, IdleTimeout: 100 * time.Millisecond})
	serve(t, dp, 1, echo)
	quiet, _ := dialPush(t, dp, pushers)
	sub, p := dialPush(t, dp, pushers)
	fmt.Fprint(sub, "wait\n")
	r := bufio.NewReader(sub)
	readLines(t, r, 1)
	fmt.Fprint(quiet, "x\n")
	readLines(t, bufio.NewReader(quiet), 1)
	waitFor(t, "the quiet connection closed as idle", func() bool { return dp.ConnStats().Closed.Idle == 1 })
	time.Sleep(300 * time.Millisecond)
	if err := p.Push([]byte("still\n")); err != nil {
		t.Fatalf("push to the waiting connection: %v", err)
	}
	if got := readLines(t, r, 1); got[0] != "still\n" {
		t.Fatalf("got %q", got)
	}
	if s := dp.ConnStats(); s.Closed.Idle != 1 || s.Current != 1 {
		t.Errorf("closed idle %d, open %d; want 1 and 1", s.Closed.Idle, s.Current)
	}
}

// TestSubscribersOverMemory: with the dataplane's memory used up, a push
// to a client that leaves bytes unread in its socket closes it, long
// before its own output bound; the memory comes back.
func TestSubscribersOverMemory(t *testing.T) {
	const memory = 2 << 20
	dp, pushers := openPush(t, tcp.Config{Workers: 1, MaxOutput: 256 << 20, Memory: memory, MaxRequest: 64 << 10})
	serve(t, dp, 1, echo)
	_, sub := dialPush(t, dp, pushers)
	msg := []byte(strings.Repeat("m", 999) + "\n")
	var err error
	pushed := 0
	for ; pushed < 256<<10 && err == nil; pushed++ {
		err = sub.Push(msg)
		// Over the bound by one push, and the 64 KiB the dataplane
		// lets gather before it writes them itself, at most.
		if used := dp.ConnStats().MemoryUsed; used > memory+int64(len(msg))+64<<10 {
			t.Fatalf("memory used %d, over the bound %d by more than what gathers before a write", used, memory)
		}
	}
	if err == nil {
		t.Fatalf("%d bytes pushed to a client that reads nothing, not refused", pushed*len(msg))
	}
	waitFor(t, "closed for its output", func() bool { return dp.ConnStats().Closed.OutputLimit == 1 })
	t.Logf("closed after %d KiB pushed (memory bound %d KiB)", pushed*len(msg)>>10, memory>>10)
	waitFor(t, "memory back", func() bool { s := dp.ConnStats(); return s.Current == 0 && s.MemoryUsed == 0 })
}
