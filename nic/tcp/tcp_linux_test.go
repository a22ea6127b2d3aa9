//go:build linux

package tcp_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/persephone-go/psp/nic"
	"github.com/persephone-go/psp/nic/tcp"
)

// lines is a test protocol: one request per line ("\n" included). A line
// "close <text>" closes the connection after answering <text>; "skip <n>"
// discards the next n bytes and answers "skipped"; a line longer than max
// is refused with "too long" and the connection closed.
type lines struct{ conns sync.Map }

type lineConn struct {
	id   uint64
	name string
}

func (l *lines) NewConn(id uint64, _ netip.AddrPort) nic.Framer { return &lineConn{id: id} }
func (l *lines) TooManyConns() []byte                         { return []byte("busy\n") }

func (c *lineConn) Frame(in []byte, max int) nic.Frame {
	i := bytes.IndexByte(in, '\n')
	if i < 0 {
		if len(in) >= max {
			return nic.Frame{Kind: nic.FrameClose, Reply: []byte("too long\n")}
		}
		return nic.Frame{Kind: nic.FrameMore}
	}
	line := in[:i]
	switch {
	case bytes.HasPrefix(line, []byte("close ")):
		return nic.Frame{Kind: nic.FrameClose, Reply: append(bytes.Clone(line[6:]), '\n')}
	case bytes.HasPrefix(line, []byte("skip ")):
		n, _ := strconv.Atoi(string(line[5:]))
		return nic.Frame{Kind: nic.FrameSkip, Len: i + 1 + n, Reply: []byte("skipped\n")}
	}
	return nic.Frame{Kind: nic.FrameRequest, Len: i + 1}
}

// open opens a dataplane on a free loopback port.
func open(t testing.TB, cfg tcp.Config) *tcp.Dataplane {
	t.Helper()
	if cfg.Addr == "" {
		cfg.Addr = "127.0.0.1:0"
	}
	if cfg.Protocol == nil {
		cfg.Protocol = &lines{}
	}
	dp, err := tcp.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dp.Close() })
	return dp
}

// server runs a dispatcher-like loop: it receives requests and hands each
// to one of workers goroutines, which run handle and send the reply (a
// false return releases the request unanswered).
type server struct {
	dp      *tcp.Dataplane
	handle  func(w int, b *nic.Buffer) bool
	cancel  context.CancelFunc
	done    sync.WaitGroup
	served  sync.WaitGroup
	workers []chan *nic.Buffer
	busy    []atomic.Int32
}

func serve(t testing.TB, dp *tcp.Dataplane, workers int, handle func(w int, b *nic.Buffer) bool) *server {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s := &server{dp: dp, handle: handle, cancel: cancel, busy: make([]atomic.Int32, workers)}
	for w := range workers {
		ch := make(chan *nic.Buffer, 1024)
		s.workers = append(s.workers, ch)
		s.done.Add(1)
		go func() {
			defer s.done.Done()
			tx := dp.TxQueue(w)
			for b := range ch {
				if s.handle(w, b) {
					tx.Send([]*nic.Buffer{b})
				} else {
					dp.Release(b)
				}
				s.served.Done()
				s.busy[w].Add(-1)
			}
		}()
	}
	s.done.Add(1)
	go func() {
		defer s.done.Done()
		bufs := make([]*nic.Buffer, 32)
		r := rand.New(rand.NewPCG(1, 2))
		for ctx.Err() == nil {
			n, err := dp.Recv(bufs, 5*time.Millisecond)
			if err != nil {
				break
			}
			for _, b := range bufs[:n] {
				s.served.Add(1)
				w := r.IntN(len(s.workers))
				for i := range s.busy { // an idle worker first
					if s.busy[i].Load() == 0 {
						w = i
						break
					}
				}
				s.busy[w].Add(1)
				s.workers[w] <- b
			}
		}
		for _, ch := range s.workers {
			close(ch)
		}
	}()
	t.Cleanup(s.stop)
	return s
}

func (s *server) stop() {
	s.cancel()
	s.done.Wait()
}

// echo answers each line with itself, after sleeping for the number of
// milliseconds the line starts with, if it does.
func echo(_ int, b *nic.Buffer) bool {
	p := b.Payload()
	if ms, err := strconv.Atoi(string(bytes.Fields(p)[0])); err == nil {
		time.Sleep(time.Duration(ms) * time.Millisecond)
	}
	return true
}

func dial(t testing.TB, dp *tcp.Dataplane) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", dp.Addr().String(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	return c
}

func readLines(t testing.TB, r *bufio.Reader, n int) []string {
	t.Helper()
	var out []string
	for range n {
		l, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("after %d lines %q: %v", len(out), out, err)
		}
		out = append(out, l)
	}
	return out
}

// TestRepliesInRequestOrder: requests of one connection run on several
// workers and finish in another order; their replies come back in the
// order they were sent, and a slow request on one connection does not
// hold up another connection.
func TestRepliesInRequestOrder(t *testing.T) {
	dp := open(t, tcp.Config{Workers: 8})
	serve(t, dp, 8, echo) // more workers than requests: none waits for one
	a, b := dial(t, dp), dial(t, dp)
	// a: a slow request then fast ones, pipelined.
	fmt.Fprint(a, "300 slow\n0 one\n0 two\n0 three\n")
	start := time.Now()
	fmt.Fprint(b, "0 other\n")
	if got := readLines(t, bufio.NewReader(b), 1); got[0] != "0 other\n" {
		t.Fatalf("b got %q", got)
	}
	if el := time.Since(start); el > 200*time.Millisecond {
		t.Errorf("b waited %v behind a's slow request", el)
	}
	got := readLines(t, bufio.NewReader(a), 4)
	if want := []string{"300 slow\n", "0 one\n", "0 two\n", "0 three\n"}; strings.Join(got, "") != strings.Join(want, "") {
		t.Fatalf("a got %q, want %q", got, want)
	}
}

// TestManyPipelinedInOrder hammers one connection's order with thousands
// of pipelined requests over several workers, with other connections
// doing the same.
func TestManyPipelinedInOrder(t *testing.T) {
	dp := open(t, tcp.Config{Workers: 4, MaxPipeline: 64})
	serve(t, dp, 4, func(w int, b *nic.Buffer) bool {
		if rand.IntN(8) == 0 {
			time.Sleep(time.Duration(rand.IntN(200)) * time.Microsecond)
		}
		return true
	})
	const conns, per = 8, 3000
	var wg sync.WaitGroup
	for c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cn := dial(t, dp)
			go func() {
				w := bufio.NewWriter(cn)
				for i := range per {
					fmt.Fprintf(w, "c%d-%d\n", c, i)
				}
				w.Flush()
			}()
			r := bufio.NewReader(cn)
			for i := range per {
				l, err := r.ReadString('\n')
				if want := fmt.Sprintf("c%d-%d\n", c, i); err != nil || l != want {
					t.Errorf("conn %d reply %d = %q, %v; want %q", c, i, l, err, want)
					return
				}
			}
		}()
	}
	wg.Wait()
	waitFor(t, "buffers back", func() bool { return dp.FreeBuffers() == dp.Config().Buffers })
}

func waitFor(t testing.TB, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestFramerVerdicts: skip and close reply in their turn, after the
// replies of the requests before them.
func TestFramerVerdicts(t *testing.T) {
	dp := open(t, tcp.Config{Workers: 2})
	serve(t, dp, 2, echo)
	c := dial(t, dp)
	fmt.Fprint(c, "50 first\nskip 5\nxxxxx0 after\nclose bye\n0 never\n")
	all, err := io.ReadAll(c)
	if err != nil {
		t.Fatal(err)
	}
	if want := "50 first\nskipped\n0 after\nbye\n"; string(all) != want {
		t.Fatalf("got %q, want %q", all, want)
	}
	waitFor(t, "closed counted", func() bool { return dp.ConnStats().Closed.Protocol == 1 })
}

// TestSkipAcrossReads: the bytes to skip arrive after the skip line.
func TestSkipAcrossReads(t *testing.T) {
	dp := open(t, tcp.Config{})
	serve(t, dp, 1, echo)
	c := dial(t, dp)
	r := bufio.NewReader(c)
	fmt.Fprint(c, "skip 100000\n")
	if got := readLines(t, r, 1); got[0] != "skipped\n" {
		t.Fatalf("got %q", got)
	}
	for range 10 {
		c.Write(bytes.Repeat([]byte("y"), 10000))
	}
	fmt.Fprint(c, "0 done\n")
	if got := readLines(t, r, 1); got[0] != "0 done\n" {
		t.Fatalf("got %q", got)
	}
}

// TestHoldAndDiscard: held replies wait for a reply that is not held, and
// a reply that discards the held ones drops them.
func TestHoldAndDiscard(t *testing.T) {
	dp := open(t, tcp.Config{Workers: 2})
	serve(t, dp, 2, func(w int, b *nic.Buffer) bool {
		switch {
		case bytes.HasPrefix(b.Payload(), []byte("hold")):
			b.Flags |= nic.ReplyHold
		case bytes.HasPrefix(b.Payload(), []byte("cull")):
			b.Flags |= nic.ReplyDiscardHeld
		case bytes.HasPrefix(b.Payload(), []byte("quit")):
			b.Flags |= nic.ReplyClose
		}
		return true
	})
	c := dial(t, dp)
	r := bufio.NewReader(c)
	fmt.Fprint(c, "hold 1\nhold 2\n")
	c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	if l, err := r.ReadString('\n'); err == nil {
		t.Fatalf("a held reply was sent: %q", l)
	}
	c.SetDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprint(c, "go\n")
	if got := strings.Join(readLines(t, r, 3), ""); got != "hold 1\nhold 2\ngo\n" {
		t.Fatalf("got %q", got)
	}
	fmt.Fprint(c, "hold 3\ncull\nquit\nnever\n")
	rest, _ := io.ReadAll(r)
	if string(rest) != "cull\nquit\n" {
		t.Fatalf("got %q, want the held reply dropped and nothing after quit", rest)
	}
}

// TestReleaseAnswersNothing: a request released unanswered (a drop) sends
// nothing in its turn and does not hold up the next.
func TestReleaseAnswersNothing(t *testing.T) {
	dp := open(t, tcp.Config{Workers: 2})
	serve(t, dp, 2, func(w int, b *nic.Buffer) bool {
		return !bytes.HasPrefix(b.Payload(), []byte("drop"))
	})
	c := dial(t, dp)
	fmt.Fprint(c, "a\ndrop\nb\n")
	if got := strings.Join(readLines(t, bufio.NewReader(c), 2), ""); got != "a\nb\n" {
		t.Fatalf("got %q", got)
	}
}

// TestLongRepliesInParts: a reply sent in parts from AllocReply buffers
// (nic.Reply's path) arrives whole and in order, and a long request gets a
// buffer of its own.
func TestLongRepliesInParts(t *testing.T) {
	dp := open(t, tcp.Config{Workers: 2, BufSize: 1024})
	serve(t, dp, 2, func(w int, b *nic.Buffer) bool {
		n, err := strconv.Atoi(strings.TrimSpace(string(b.Payload())))
		if err != nil {
			return true // echo
		}
		var parts []*nic.Buffer
		for i := range n {
			p := dp.AllocReply(b)
			p.Len = copy(p.Data, fmt.Sprintf("%d.%d ", n, i))
			parts = append(parts, p)
		}
		dp.TxQueue(w).Send(parts)
		b.Len = copy(b.Data, "end\n")
		return true
	})
	c := dial(t, dp)
	long := strings.Repeat("z", 100000) + "\n"
	fmt.Fprint(c, "3\n"+long+"200\n")
	r := bufio.NewReader(c)
	got := readLines(t, r, 3)
	if got[0] != "3.0 3.1 3.2 end\n" || got[1] != long || !strings.HasPrefix(got[2], "200.0 200.1 ") || !strings.HasSuffix(got[2], "200.199 end\n") {
		t.Fatalf("got %.100q", got)
	}
}
