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
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/persephone-go/psp/internal/testenv"
	"github.com/persephone-go/psp/nic"
	"github.com/persephone-go/psp/nic/tcp"
)

// lines is a test protocol: one request per line ("\n" included), each
// ReadOnly but those starting with "w". A line "close <text>" closes the
// connection after answering <text>; "skip <n>" discards the next n bytes
// and answers "skipped"; a line longer than max is refused with "too long"
// and the connection closed.
type lines struct{ conns sync.Map }

type lineConn struct {
	id   uint64
	name string
}

func (l *lines) NewConn(id uint64, _ netip.AddrPort) nic.Framer { return &lineConn{id: id} }
func (l *lines) TooManyConns() []byte                           { return []byte("busy\n") }

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
	return nic.Frame{Kind: nic.FrameRequest, Len: i + 1, ReadOnly: line[0] != 'w'}
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
	running atomic.Int64 // requests received and not yet answered
	workers []chan *nic.Buffer
	busy    []atomic.Int32
	// followOns carries the requests chained to completed ones
	// (Config.Chain) back to the receive loop, which hands them out as
	// received.
	followOns chan *nic.Buffer
}

func serve(t testing.TB, dp *tcp.Dataplane, workers int, handle func(w int, b *nic.Buffer) bool) *server {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s := &server{dp: dp, handle: handle, cancel: cancel, busy: make([]atomic.Int32, workers),
		followOns: make(chan *nic.Buffer, 1<<16)}
	for w := range workers {
		ch := make(chan *nic.Buffer, 1024)
		s.workers = append(s.workers, ch)
		s.done.Add(1)
		go func() {
			defer s.done.Done()
			tx := dp.TxQueue(w)
			for b := range ch {
				next := b.Next
				b.Next = nil
				if s.handle(w, b) {
					tx.Send([]*nic.Buffer{b})
				} else {
					dp.Release(b)
				}
				if next != nil {
					s.followOns <- next
				}
				s.running.Add(-1)
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
			wait := 5 * time.Millisecond
			if s.running.Load() > 0 {
				wait = time.Millisecond // follow-ons may come from the workers
			}
			n, err := dp.Recv(bufs, wait)
			if err != nil {
				break
			}
		follow:
			for n < len(bufs) {
				select {
				case b := <-s.followOns:
					bufs[n] = b
					n++
				default:
					break follow
				}
			}
			for _, b := range bufs[:n] {
				s.running.Add(1)
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
// milliseconds of its first numeric word, if it has one.
func echo(_ int, b *nic.Buffer) bool {
	for _, f := range bytes.Fields(b.Payload()) {
		if ms, err := strconv.Atoi(string(f)); err == nil {
			time.Sleep(time.Duration(ms) * time.Millisecond)
			break
		}
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
	testenv.WaitFor(t, what, 5*time.Second, ok)
}

// TestRequestsRunInOrder: a connection's request that is not ReadOnly
// starts once every earlier one has finished, and later ones wait for it;
// reads in a row run at once.
func TestRequestsRunInOrder(t *testing.T) {
	dp := open(t, tcp.Config{Workers: 8})
	var mu sync.Mutex
	var events []string
	serve(t, dp, 8, func(w int, b *nic.Buffer) bool {
		line := strings.TrimSpace(string(b.Payload()))
		mu.Lock()
		events = append(events, "start "+line)
		mu.Unlock()
		echo(w, b)
		mu.Lock()
		events = append(events, "end "+line)
		mu.Unlock()
		return true
	})
	c := dial(t, dp)
	fmt.Fprint(c, "100 r1\n50 r2\nw 0\n0 r3\n0 r4\n")
	readLines(t, bufio.NewReader(c), 5)
	mu.Lock()
	defer mu.Unlock()
	at := func(e string) int { return slices.Index(events, e) }
	switch {
	case at("start 50 r2") > at("end 100 r1"):
		t.Errorf("reads in a row did not run at once: %q", events)
	case at("start w 0") < at("end 100 r1") || at("start w 0") < at("end 50 r2"):
		t.Errorf("the write started before the reads before it ended: %q", events)
	case at("start 0 r3") < at("end w 0") || at("start 0 r4") < at("end w 0"):
		t.Errorf("a read after the write started before it ended: %q", events)
	}
}

// TestRandomPipelinesRunInOrder: random pipelines of reads and writes
// of random length on several connections, with and without chaining
// (Config.Chain), on eight workers: no request runs beside a write of
// its connection, each starts after every earlier write of its
// connection ended, and the replies come back in order.
func TestRandomPipelinesRunInOrder(t *testing.T) {
	for _, chain := range []bool{false, true} {
		t.Run(fmt.Sprintf("chain=%v", chain), func(t *testing.T) {
			dp := open(t, tcp.Config{Workers: 8, Chain: chain})
			type span struct{ start, end int64 }
			var mu sync.Mutex
			spans := map[string]*span{} // by line
			var clock atomic.Int64
			serve(t, dp, 8, func(w int, b *nic.Buffer) bool {
				line := strings.TrimSpace(string(b.Payload()))
				mu.Lock()
				spans[line] = &span{start: clock.Add(1)}
				mu.Unlock()
				echo(w, b)
				mu.Lock()
				spans[line].end = clock.Add(1)
				mu.Unlock()
				return true
			})
			r := rand.New(rand.NewPCG(7, 9))
			var wg sync.WaitGroup
			sent := make([][]string, 4)
			for k := range sent {
				var lines []string
				for i := range 60 {
					kind := "r"
					if r.IntN(3) == 0 {
						kind = "w"
					}
					ms := 0
					if r.IntN(8) == 0 {
						ms = 1 + r.IntN(3)
					}
					lines = append(lines, fmt.Sprintf("%s %d c%d-%d", kind, ms, k, i))
				}
				sent[k] = lines
			}
			for k, lines := range sent {
				c := dial(t, dp)
				cr := rand.New(rand.NewPCG(uint64(k), 3))
				wg.Go(func() {
					br := bufio.NewReader(c)
					for i := 0; i < len(lines); {
						n := 1 + cr.IntN(20)
						n = min(n, len(lines)-i)
						fmt.Fprint(c, strings.Join(lines[i:i+n], "\n")+"\n")
						got := readLines(t, br, n)
						for j, l := range got {
							if strings.TrimSpace(l) != lines[i+j] {
								t.Errorf("connection %d: reply %d is %q, want %q", k, i+j, l, lines[i+j])
							}
						}
						i += n
					}
				})
			}
			wg.Wait()
			mu.Lock()
			defer mu.Unlock()
			for k, lines := range sent {
				for i, li := range lines {
					si := spans[li]
					for _, lj := range lines[:i] {
						sj := spans[lj]
						if (li[0] == 'w' || lj[0] == 'w') && si.start < sj.end {
							t.Fatalf("connection %d: %q started before %q, sent before it, ended", k, li, lj)
						}
					}
				}
			}
		})
	}
}

// TestChainedWritesTakeOneReceive: with Config.Chain, a connection's
// pipelined writes come out of one Recv as one request with the others
// chained to it, counted against the burst; answered in the chain's
// order, their replies come back in order.
func TestChainedWritesTakeOneReceive(t *testing.T) {
	dp := open(t, tcp.Config{Workers: 1, Chain: true})
	c := dial(t, dp)
	var want strings.Builder
	for i := range 10 {
		fmt.Fprintf(&want, "w %d\n", i)
	}
	fmt.Fprint(c, want.String())
	bufs := make([]*nic.Buffer, 4)
	tx := dp.TxQueue(0)
	var got []string
	deadline := time.Now().Add(5 * time.Second)
	for len(got) < 10 && time.Now().Before(deadline) {
		n, err := dp.Recv(bufs, 10*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		if n > 1 {
			t.Fatalf("Recv returned %d requests of one connection's writes, want one with the others chained", n)
		}
		if n == 0 {
			continue
		}
		chained := 0
		for b := bufs[0]; b != nil; {
			next := b.Next
			b.Next = nil
			got = append(got, string(b.Payload()))
			tx.Send([]*nic.Buffer{b})
			b = next
			chained++
		}
		if chained > len(bufs) {
			t.Fatalf("one Recv of a burst of %d chained %d requests", len(bufs), chained)
		}
	}
	if strings.Join(got, "") != want.String() {
		t.Fatalf("requests %q, want %q", got, want.String())
	}
	readLines(t, bufio.NewReader(c), 10)
}

// holdLines is lines whose framer flushes the replies held (nic.ReplyHold)
// when the input runs out, as memcached's does.
type holdLines struct{ lines }

type holdLineConn struct{ lineConn }

func (h *holdLines) NewConn(id uint64, _ netip.AddrPort) nic.Framer {
	return &holdLineConn{lineConn{id: id}}
}

func (c *holdLineConn) Frame(in []byte, max int) nic.Frame {
	f := c.lineConn.Frame(in, max)
	if f.Kind == nic.FrameMore {
		f.Flush = true
	}
	return f
}

// TestHeldRepliesFlushedAfterPipelinePause: a connection whose pipeline
// filled up just as its input ran out, whose replies are all held, gets
// them once it is answered, even when the receive that resumes it has no
// room for its requests: the end of its input is still framed later.
func TestHeldRepliesFlushedAfterPipelinePause(t *testing.T) {
	dp := open(t, tcp.Config{Workers: 1, Chain: true, MaxPipeline: 4, Protocol: &holdLines{}})
	c := dial(t, dp)
	fmt.Fprint(c, "w 1\nw 2\nw 3\nw 4\n")
	bufs := make([]*nic.Buffer, 4)
	tx := dp.TxQueue(0)
	var got int
	deadline := time.Now().Add(5 * time.Second)
	for got < 4 && time.Now().Before(deadline) {
		n, err := dp.Recv(bufs, 10*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range bufs[:n] {
			for b != nil {
				next := b.Next
				b.Next = nil
				b.Flags |= nic.ReplyHold
				tx.Send([]*nic.Buffer{b})
				got++
				b = next
			}
		}
	}
	if got != 4 {
		t.Fatalf("received %d requests, want 4", got)
	}
	dp.Recv(bufs[:0], 0) // a receive with no room: the connection must stay due
	for range 5 {
		dp.Recv(bufs, 10*time.Millisecond)
	}
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	readLines(t, bufio.NewReader(c), 4)
}

// TestReleasedChainIsNotLost: a receiver that releases or answers a
// request without taking what is chained to it loses nothing: the chained
// requests come out of a later Recv.
func TestReleasedChainIsNotLost(t *testing.T) {
	for _, how := range []string{"release", "send"} {
		t.Run(how, func(t *testing.T) {
			dp := open(t, tcp.Config{Workers: 1, Chain: true})
			c := dial(t, dp)
			fmt.Fprint(c, "w 1\nw 2\nw 3\n")
			bufs := make([]*nic.Buffer, 8)
			var got []string
			deadline := time.Now().Add(5 * time.Second)
			for len(got) < 3 && time.Now().Before(deadline) {
				n, err := dp.Recv(bufs, 10*time.Millisecond)
				if err != nil {
					t.Fatal(err)
				}
				for _, b := range bufs[:n] {
					got = append(got, string(b.Payload()))
					if how == "release" && len(got) == 1 {
						dp.Release(b) // its chain still on it
						continue
					}
					dp.TxQueue(0).Send([]*nic.Buffer{b})
				}
			}
			if strings.Join(got, "") != "w 1\nw 2\nw 3\n" {
				t.Fatalf("requests %q, want the three in order", got)
			}
			n := 3
			if how == "release" {
				n = 2
			}
			readLines(t, bufio.NewReader(c), n)
		})
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

// TestHeldRepliesBounded: replies held for a flush that does not come are
// written anyway once they grow large, in order.
func TestHeldRepliesBounded(t *testing.T) {
	dp := open(t, tcp.Config{Workers: 2})
	serve(t, dp, 2, func(w int, b *nic.Buffer) bool {
		b.Flags |= nic.ReplyHold
		return true
	})
	c := dial(t, dp)
	line := "hold " + strings.Repeat("x", 994) + "\n" // 1,000 bytes
	const n = 200
	go fmt.Fprint(c, strings.Repeat(line, n))
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	got, err := io.ReadAll(io.LimitReader(c, 100<<10))
	if err != nil || len(got) < 100<<10 {
		t.Fatalf("read %d bytes of %d held replies (%v): held replies past the bound were not written", len(got), n, err)
	}
	if !bytes.Equal(got, []byte(strings.Repeat(line, n))[:len(got)]) {
		t.Fatal("held replies written out of order")
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

// TestConnectionLimit: past MaxConns a connection is sent the protocol's
// refusal and closed, counted; the open ones keep being served.
func TestConnectionLimit(t *testing.T) {
	dp := open(t, tcp.Config{MaxConns: 3})
	serve(t, dp, 1, echo)
	var open []net.Conn
	for range 3 {
		c := dial(t, dp)
		fmt.Fprint(c, "0 hi\n")
		readLines(t, bufio.NewReader(c), 1)
		open = append(open, c)
	}
	extra := dial(t, dp)
	if got, _ := io.ReadAll(extra); string(got) != "busy\n" {
		t.Fatalf("connection over the limit got %q", got)
	}
	if s := dp.ConnStats(); s.Rejected != 1 || s.Current != 3 {
		t.Fatalf("rejected %d current %d, want 1 and 3", s.Rejected, s.Current)
	}
	fmt.Fprint(open[0], "0 still\n")
	readLines(t, bufio.NewReader(open[0]), 1)
	open[1].Close()
	waitFor(t, "a slot free", func() bool { return dp.ConnStats().Current == 2 })
	c := dial(t, dp)
	fmt.Fprint(c, "0 in\n")
	readLines(t, bufio.NewReader(c), 1)
}

// TestClientThatNeverReads: a client that pipelines without reading is
// read no further than MaxPipeline unanswered requests, then closed once
// MaxOutput bytes wait for it; other connections are served throughout
// and the memory comes back.
func TestClientThatNeverReads(t *testing.T) {
	dp := open(t, tcp.Config{MaxPipeline: 16, MaxOutput: 1 << 20, Workers: 2})
	serve(t, dp, 2, func(_ int, b *nic.Buffer) bool {
		b.Len = copy(b.Data, strings.Repeat("r", 1000)+"\n")
		return true
	})
	hog := dial(t, dp)
	go func() {
		line := []byte("get\n")
		for {
			if _, err := hog.Write(bytes.Repeat(line, 1000)); err != nil {
				return
			}
		}
	}()
	other := dial(t, dp)
	r := bufio.NewReader(other)
	for range 50 {
		fmt.Fprint(other, "x\n")
		readLines(t, r, 1)
	}
	waitFor(t, "the hog closed for its output", func() bool { return dp.ConnStats().Closed.OutputLimit == 1 })
	if s := dp.ConnStats(); s.PipelinePauses == 0 {
		t.Errorf("no pipeline pause counted: %+v", s)
	}
	other.Close()
	waitFor(t, "memory back", func() bool { s := dp.ConnStats(); return s.Current == 0 && s.MemoryUsed == 0 })
	waitFor(t, "buffers back", func() bool { return dp.FreeBuffers() == dp.Config().Buffers })
}

// TestRequestTooLong: a request longer than MaxRequest without an end is
// refused by the framer (here: a reply and a close); a connection sending
// without end to a framer that keeps asking for more is closed, counted.
func TestRequestTooLong(t *testing.T) {
	dp := open(t, tcp.Config{MaxRequest: 64 << 10})
	serve(t, dp, 1, echo)
	c := dial(t, dp)
	go c.Write(bytes.Repeat([]byte("a"), 1<<20))
	got, _ := io.ReadAll(c)
	if string(got) != "too long\n" {
		t.Fatalf("got %q", got)
	}
	waitFor(t, "closed", func() bool { return dp.ConnStats().Closed.Protocol == 1 })

	dp2 := open(t, tcp.Config{MaxRequest: 64 << 10, Protocol: greedy{}})
	serve(t, dp2, 1, echo)
	c2 := dial(t, dp2)
	go c2.Write(bytes.Repeat([]byte("a"), 1<<20))
	io.ReadAll(c2)
	waitFor(t, "closed as too long", func() bool { return dp2.ConnStats().Closed.RequestTooLong == 1 })
	waitFor(t, "memory back", func() bool { return dp2.ConnStats().MemoryUsed == 0 })
}

// greedy never finds a request.
type greedy struct{}

func (greedy) NewConn(uint64, netip.AddrPort) nic.Framer { return greedy{} }
func (greedy) TooManyConns() []byte                      { return nil }
func (greedy) Frame([]byte, int) nic.Frame               { return nic.Frame{Kind: nic.FrameMore} }

// TestTimeouts: a partial request held too long (slowloris) and an idle
// connection are closed, each counted; a connection that keeps working is
// not.
func TestTimeouts(t *testing.T) {
	dp := open(t, tcp.Config{PartialTimeout: 300 * time.Millisecond, IdleTimeout: 600 * time.Millisecond})
	serve(t, dp, 1, echo)
	slow := dial(t, dp)
	fmt.Fprint(slow, "half a requ")
	idle := dial(t, dp)
	busy := dial(t, dp)
	r := bufio.NewReader(busy)
	stop := time.Now().Add(1500 * time.Millisecond)
	for time.Now().Before(stop) {
		fmt.Fprint(busy, "0 ping\n")
		readLines(t, r, 1)
		slow.Write([]byte("x")) // trickles: still one partial request
		time.Sleep(50 * time.Millisecond)
	}
	s := dp.ConnStats()
	if s.Closed.Partial != 1 || s.Closed.Idle != 1 || s.Current != 1 {
		t.Fatalf("closed %+v, current %d; want one partial, one idle, the busy one open", s.Closed, s.Current)
	}
	for _, c := range []net.Conn{slow, idle} {
		c.SetReadDeadline(time.Now().Add(time.Second))
		if _, err := c.Read(make([]byte, 1)); err != io.EOF {
			t.Errorf("read on a timed-out connection: %v, want EOF", err)
		}
	}
}

// TestPeerGoesAway: a client that sends requests and shuts down its side
// gets its replies, then the connection closes; one that resets while its
// requests run leaks nothing.
func TestPeerGoesAway(t *testing.T) {
	dp := open(t, tcp.Config{Workers: 2})
	srv := serve(t, dp, 2, echo)
	c := dial(t, dp).(*net.TCPConn)
	fmt.Fprint(c, "100 a\n0 b\n")
	c.CloseWrite()
	got, err := io.ReadAll(c)
	if err != nil || string(got) != "100 a\n0 b\n" {
		t.Fatalf("after a half close: %q, %v", got, err)
	}
	waitFor(t, "closed as peer", func() bool { return dp.ConnStats().Closed.Peer == 1 })

	r := dial(t, dp).(*net.TCPConn)
	fmt.Fprint(r, "200 slow\n200 slow\n")
	time.Sleep(50 * time.Millisecond)
	r.SetLinger(0)
	r.Close() // a reset
	waitFor(t, "requests served", func() bool { return srv.running.Load() == 0 })
	waitFor(t, "everything back", func() bool {
		s := dp.ConnStats()
		return s.Current == 0 && s.MemoryUsed == 0 && dp.FreeBuffers() == dp.Config().Buffers
	})
	if s := dp.ConnStats(); s.RepliesDropped != 2 {
		t.Errorf("replies dropped %d, want 2", s.RepliesDropped)
	}
	// A request queued behind a write when its connection goes: dropped
	// unrun, counted.
	q := dial(t, dp).(*net.TCPConn)
	fmt.Fprint(q, "w 200\n0 queued\n")
	time.Sleep(50 * time.Millisecond)
	q.SetLinger(0)
	q.Close()
	waitFor(t, "the queued request counted", func() bool { return dp.ConnStats().RequestsDropped == 1 })
	waitFor(t, "everything back", func() bool {
		return dp.ConnStats().MemoryUsed == 0 && dp.FreeBuffers() == dp.Config().Buffers
	})
}

// TestOneBytePerWrite: a request trickled in one byte per write is framed
// once it is whole.
func TestOneBytePerWrite(t *testing.T) {
	dp := open(t, tcp.Config{})
	serve(t, dp, 1, echo)
	c := dial(t, dp)
	c.(*net.TCPConn).SetNoDelay(true)
	for _, ch := range []byte("0 trickled\n0 second\n") {
		c.Write([]byte{ch})
		time.Sleep(time.Millisecond)
	}
	if got := strings.Join(readLines(t, bufio.NewReader(c), 2), ""); got != "0 trickled\n0 second\n" {
		t.Fatalf("got %q", got)
	}
}

// TestRecvSendAllocateNothing: a request received, answered and sent
// allocates nothing once the connection is open.
func TestRecvSendAllocateNothing(t *testing.T) {
	dp := open(t, tcp.Config{})
	c := dial(t, dp)
	bufs := make([]*nic.Buffer, 8)
	tx := dp.TxQueue(0)
	reply := make([]byte, 64)
	ping := []byte("ping\n")
	round := func() {
		c.Write(ping)
		n := 0
		for n == 0 {
			k, err := dp.Recv(bufs, 100*time.Millisecond)
			if err != nil {
				t.Fatal(err)
			}
			n = k
		}
		tx.Send(bufs[:n])
		io.ReadFull(c, reply[:5*n])
	}
	round()
	if a := testing.AllocsPerRun(200, round); a != 0 {
		t.Fatalf("%v allocations per request", a)
	}
}

// TestCloseWithConnections: Close closes every connection (counted as
// shutdown) and unblocks a waiting Recv.
func TestCloseWithConnections(t *testing.T) {
	dp := open(t, tcp.Config{})
	c := dial(t, dp)
	fmt.Fprint(c, "x\n")
	bufs := make([]*nic.Buffer, 4)
	n := 0
	for n == 0 {
		n, _ = dp.Recv(bufs, time.Second)
	}
	done := make(chan error, 1)
	go func() {
		for {
			if _, err := dp.Recv(bufs[n:], time.Second); err != nil {
				done <- err
				return
			}
		}
	}()
	time.Sleep(20 * time.Millisecond)
	dp.Close()
	if err := <-done; err != nic.ErrClosed {
		t.Fatalf("Recv after Close: %v", err)
	}
	if s := dp.ConnStats(); s.Closed.Shutdown != 1 {
		t.Fatalf("closed %+v", s.Closed)
	}
	dp.TxQueue(0).Send(bufs[:n]) // a reply after Close goes nowhere, buffers back
	if dp.FreeBuffers() != dp.Config().Buffers {
		t.Fatalf("free %d of %d", dp.FreeBuffers(), dp.Config().Buffers)
	}
}

// TestAcceptOutOfDescriptors: when accept fails for want of file
// descriptors, the dataplane pauses that listener, counts and logs the
// burst once, keeps serving its open connections, and accepts the waiting
// connections once descriptors are back.
func TestAcceptOutOfDescriptors(t *testing.T) {
	var log testenv.SyncBuffer
	dp := open(t, tcp.Config{Log: &log})
	bufs := make([]*nic.Buffer, 8)
	// step receives what is there and echoes it.
	step := func() {
		n, err := dp.Recv(bufs, 10*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		dp.TxQueue(0).Send(bufs[:n])
	}
	exchange := func(c net.Conn, line string) {
		t.Helper()
		fmt.Fprint(c, line)
		r := bufio.NewReader(c)
		got := make(chan string, 1)
		go func() { l, _ := r.ReadString('\n'); got <- l }()
		for deadline := time.Now().Add(5 * time.Second); ; step() {
			select {
			case l := <-got:
				if l != line {
					t.Fatalf("got %q, want %q", l, line)
				}
				return
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("no reply to %q", line)
			}
		}
	}
	served := dial(t, dp)
	exchange(served, "0 first\n")
	var clients []net.Conn
	for range 3 { // connected by the kernel, waiting in the backlog
		clients = append(clients, dial(t, dp))
	}
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	// The lowest free descriptor is the next one open(2) or accept(2)
	// would take: a limit there fails every one.
	low := lim
	low.Cur = uint64(lowestFreeFd(t))
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		t.Skipf("cannot lower RLIMIT_NOFILE: %v", err)
	}
	restored := false
	restore := func() {
		if !restored {
			syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim)
			restored = true
		}
	}
	defer restore()
	for range 5 {
		step()
	}
	if s := dp.ConnStats(); s.AcceptErrors == 0 || s.Current != 1 {
		restore()
		t.Fatalf("accept errors %d, connections %d: want errors counted and the one connection", s.AcceptErrors, s.Current)
	}
	exchange(served, "0 still served\n")
	restore()
	time.Sleep(20 * time.Millisecond) // past the listener's first pause
	for i, c := range clients {
		exchange(c, fmt.Sprintf("0 late %d\n", i))
	}
	if s := log.String(); strings.Count(s, "retrying") != 1 || !strings.Contains(s, "recovered") {
		t.Errorf("log %q: want one line when the burst starts, one when it ends", s)
	}
}

// lowestFreeFd returns the lowest descriptor number not open: dup(2)
// takes it.
func lowestFreeFd(t *testing.T) int {
	fd, err := syscall.Dup(0)
	if err != nil {
		t.Fatal(err)
	}
	syscall.Close(fd)
	return fd
}

// TestEndOfStreamAfterRequests: a client that sends many requests and
// shuts down its side at once gets every reply, even when the pipeline
// limit holds some of its requests back until the first are answered.
func TestEndOfStreamAfterRequests(t *testing.T) {
	dp := open(t, tcp.Config{MaxPipeline: 4, Workers: 2})
	serve(t, dp, 2, echo)
	c := dial(t, dp).(*net.TCPConn)
	var want strings.Builder
	for i := range 100 {
		fmt.Fprintf(&want, "w %d\n", i%3)
	}
	c.Write([]byte(want.String() + "half a line"))
	c.CloseWrite()
	got, err := io.ReadAll(c)
	if err != nil || string(got) != want.String() {
		t.Fatalf("got %d bytes (%v), want the %d of every reply", len(got), err, want.Len())
	}
	waitFor(t, "closed as peer", func() bool { return dp.ConnStats().Closed.Peer == 1 })
}
