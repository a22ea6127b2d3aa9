package memcached

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/persephone-go/psp/app/memcached/memcachedtest"
)

// recorder is an app.Reply that keeps the datagrams.
type recorder struct{ dgs [][]byte }

func (r *recorder) Send(p []byte) error { r.dgs = append(r.dgs, bytes.Clone(p)); return nil }
func (r *recorder) Room() int           { return 65535 }
func (r *recorder) NoReply()            {}
func (r *recorder) Park(time.Duration)  {}

// handle serves one request datagram as the dispatcher does, as the
// server's last worker (serveTCP's dispatcher runs the others), and
// returns every datagram of its reply, the held one last.
func handle(srv *Server, datagram []byte) [][]byte {
	b := shedBuffer(datagram, 65535)
	var r recorder
	if srv.HandleMulti(len(srv.sessions)-1, 0, b, &r) {
		r.dgs = append(r.dgs, bytes.Clone(b.Payload()))
	}
	return r.dgs
}

// replyBytes is the UDP payload bytes of a reply.
func replyBytes(dgs [][]byte) int {
	n := 0
	for _, d := range dgs {
		n += len(d)
	}
	return n
}

// wholeMessages reports whether every message of a reply is whole: its
// datagrams numbered 0..total-1 in order.
func wholeMessages(dgs [][]byte) bool {
	want, total := 0, 0
	for _, d := range dgs {
		h, _ := ParseFrameHeader(d)
		if want == 0 {
			total = int(h.Total)
		}
		if int(h.Seq) != want || int(h.Total) != total {
			return false
		}
		want++
		if want >= total {
			want = 0
		}
	}
	return want == 0
}

// TestUDPReplyBounded: no UDP request, whatever its commands, makes the
// server send more than Config.UDPReplyRatio times its own bytes (or one
// full datagram): gets of one large value many times, of many large
// values, of values spanning many datagrams, with cas, with touch, tiny
// requests, stats, mixes. A cut reply is whole messages then the cut
// line, and stops the request's work; replies within the bound are
// whole.
func TestUDPReplyBounded(t *testing.T) {
	srv := openServer(t, Config{Workers: 2})
	addr := serveTCP(t, srv)
	// Large values go in over TCP (a UDP request is at most 64 KiB).
	var sets strings.Builder
	big := strings.Repeat("x", 1<<20-100)
	fmt.Fprintf(&sets, "set k 0 0 %d\r\n%s\r\n", len(big), big)
	for i := range 50 {
		v := strings.Repeat("y", 100<<10)
		fmt.Fprintf(&sets, "set m%d 0 0 %d\r\n%s\r\n", i, len(v), v)
	}
	for i := range 200 {
		fmt.Fprintf(&sets, "set s%d 0 0 64\r\n%s\r\n", i, strings.Repeat("s", 64))
	}
	fmt.Fprintf(&sets, "set mid 0 0 10000\r\n%s\r\n", strings.Repeat("z", 10000))
	fmt.Fprintf(&sets, "set twenty 0 0 20000\r\n%s\r\n", strings.Repeat("t", 20000))
	if err := tcpExchange(addr, sets.String(), 252); err != nil {
		t.Fatal(err)
	}
	many := func(cmd, key string, n int) string {
		return cmd + strings.Repeat(" "+key, n) + "\r\n"
	}
	var distinct strings.Builder
	distinct.WriteString("get")
	for i := range 50 {
		fmt.Fprintf(&distinct, " m%d", i)
	}
	distinct.WriteString("\r\n")
	for _, c := range []struct {
		name, body string
		cut        bool
	}{
		{"get of one 1 MB value 698 times", many("get", "k", 698), true},
		{"gets", many("gets", "k", 698), true},
		{"gat", many("gat 0", "k", 698), true},
		{"gats", many("gats 0", "k", 698), true},
		{"bget", many("bget", "k", 300), true},
		{"tiny get", "get k\r\n", true},
		{"distinct large keys", distinct.String(), true},
		{"repeated commands", strings.Repeat("get m1\r\n", 500), true},
		{"hits among misses", many("get", "nope", 300) + many("get", "m2", 20), true},
		{"stats many times", strings.Repeat("stats\r\n", 9000), true},
		{"stats settings many times", strings.Repeat("stats settings\r\n", 4000), false},
		{"version many times", strings.Repeat("version\r\n", 7000), false},
		{"mn many times", strings.Repeat("mn\r\n", 16000), false},
		{"small multi-get", many("get", "s1", 100), false},
		{"single get of 10 kB", "get mid\r\n", false},
		{"single get of 20 kB", "get twenty\r\n", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			req := AppendRequest(nil, 7, []byte(c.body))
			hitsBefore := srv.sumStats().getHits + srv.sumStats().touchHits
			cutBefore := srv.guards.udpCut.Load()
			dgs := handle(srv, req)
			got := replyBytes(dgs)
			limit := max(DefaultUDPReplyFloor, DefaultUDPReplyRatio*len(req))
			t.Logf("request %d bytes: %d datagrams, %d bytes (%.1fx)", len(req), len(dgs), got, float64(got)/float64(len(req)))
			if got > limit {
				t.Errorf("%d bytes sent for a request of %d, want at most %d", got, len(req), limit)
			}
			if len(dgs) == 0 {
				t.Fatal("no reply")
			}
			last := string(dgs[len(dgs)-1][UDPHeaderLen:])
			cut := last == string(msgUDPCut)+"\r\n"
			if cut != c.cut {
				t.Errorf("cut %v, want %v (last datagram %.60q)", cut, c.cut, last)
			}
			if n := srv.guards.udpCut.Load() - cutBefore; n != map[bool]uint64{true: 1}[c.cut] {
				t.Errorf("cut counter +%d", n)
			}
			if !wholeMessages(dgs) {
				t.Error("a message is sent in part")
			}
			if c.cut {
				// The request's work stops at the cut: at most a few
				// lookups past what was sent.
				hits := srv.sumStats().getHits + srv.sumStats().touchHits - hitsBefore
				if sent := uint64(got/1400 + 2); hits > sent {
					t.Errorf("%d hits looked up for %d bytes sent", hits, got)
				}
			}
		})
	}
	// A gat cut before its value is sent does not touch the item (here:
	// expire it).
	if dgs := handle(srv, AppendRequest(nil, 1, []byte("gat -1 m5\r\n"))); len(dgs) != 1 {
		t.Errorf("gat past the bound: %d datagrams", len(dgs))
	}
	if got, err := memcachedtest.ExchangeTCP(addr, "get m5\r\n", 10*time.Second); err != nil || !strings.HasPrefix(string(got), "VALUE m5 ") {
		t.Errorf("gat past the bound touched the item: %.40q, %v", got, err)
	}
	// A floor of one datagram: a get of 10 kB is cut, the cut line fits.
	srv1 := openServer(t, Config{UDPReplyFloor: UDPMaxPayload})
	preload(t, srv1, 1, 10000)
	if dgs := handle(srv1, AppendRequest(nil, 1, []byte("get k0\r\n"))); len(dgs) != 1 || string(dgs[0][UDPHeaderLen:]) != string(msgUDPCut)+"\r\n" {
		t.Errorf("floor of one datagram: %d datagrams, %.60q", len(dgs), dgs[0])
	}
	// Negative: unbounded, as memcached.
	srv2 := openServer(t, Config{UDPReplyRatio: -1})
	preload(t, srv2, 30, 50<<10)
	req := AppendRequest(nil, 1, multiGet(30))
	if got := replyBytes(handle(srv2, req)); got < 30*50<<10 {
		t.Errorf("unbounded: %d bytes, want all %d", got, 30*50<<10)
	}
}

// tcpExchange sends body on a new connection and reads n reply lines.
func tcpExchange(addr, body string, n int) error {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	go io.WriteString(c, body)
	r := bufio.NewReader(c)
	for range n {
		line, err := r.ReadString('\n')
		if err != nil {
			return err
		}
		if line != "STORED\r\n" {
			return fmt.Errorf("reply %q", line)
		}
	}
	return nil
}
