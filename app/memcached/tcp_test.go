package memcached

import (
	"bytes"
	"context"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/persephone-go/psp/app/memcached/memcachedtest"
	"github.com/persephone-go/psp/darc"
	"github.com/persephone-go/psp/dispatcher"
	"github.com/persephone-go/psp/nic/tcp"
)

// serveTCP serves srv over TCP on a free port, as psp serve does: the TCP
// dataplane and its framer, the native classifier, DARC and a dispatcher
// with srv's workers, but for the last when srv has several (a test may
// then call the handler directly as that one). srv must be closed after
// the dispatcher stops (t.Cleanup runs in reverse: open srv first).
func serveTCP(t testing.TB, srv *Server) string {
	t.Helper()
	return serveTCPConns(t, srv, 0)
}

// serveTCPConns is serveTCP with at most maxConns connections at once (0:
// nic/tcp's default).
func serveTCPConns(t testing.TB, srv *Server, maxConns int) string {
	t.Helper()
	workers := max(srv.Config().Workers-1, 1)
	dp, err := tcp.Open(tcp.Config{Addr: "127.0.0.1:0", Protocol: srv.Protocol(), Workers: workers + 1,
		MaxRequest: srv.Config().MaxItemSize + srv.Config().MaxLine + 4, MaxConns: maxConns})
	if err != nil {
		t.Fatal(err)
	}
	// No queue deadlines: these tests are about the protocol, and under
	// the race detector a 30,000-key get runs longer than the 200 ms
	// floor, so the command queued behind it would be shed.
	policy, err := darc.New(darc.NameDARC, darc.Config{Workers: workers, NumTypes: int(NumTypes), DeadlineFactor: -1})
	if err != nil {
		t.Fatal(err)
	}
	d, err := dispatcher.New(dispatcher.Spec{Workers: workers, StatsInterval: time.Millisecond}, dp, Classifier{}, policy, srv)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("dispatcher: %v", err)
		}
		dp.Close()
	})
	return dp.Addr().String()
}

// TestTCPConformanceWithMemcached sends the conformance sequences over TCP
// (one connection per request) to memcached and to psp and compares the
// byte streams.
func TestTCPConformanceWithMemcached(t *testing.T) {
	mc := memcachedtest.StartMemcached(t, false)
	psp := serveTCP(t, openServer(t, Config{}))
	for _, c := range memcachedtest.Cases {
		for i, r := range c.Requests {
			if r.Raw != nil || (r.Total != 0 && r.Total != 1) || !strings.HasSuffix(r.Body, "\n") {
				continue // about UDP framing, or a datagram cut mid-line
			}
			want, err := memcachedtest.ExchangeTCP(mc, r.Body, 5*time.Second)
			if err != nil {
				t.Fatalf("%s, request %d: memcached: %v", c.Name, i, err)
			}
			got, err := memcachedtest.ExchangeTCP(psp, r.Body, 5*time.Second)
			if err != nil {
				t.Fatalf("%s, request %d: psp: %v", c.Name, i, err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s, request %d %.80q:\npsp:       %.300q\nmemcached: %.300q", c.Name, i, r.Body, got, want)
			}
		}
	}
}

// TestTCPTransmitsBeforeWaiting: a command sent in parts gets, after each
// part, what memcached has sent by then: the replies of a get or mn before
// it waits for a value's data, every pending reply before it waits for the
// rest of a line (and so a later get of a key too long no longer discards
// them), none of the others, nor any when the line is too long.
func TestTCPTransmitsBeforeWaiting(t *testing.T) {
	long := strings.Repeat("k", 251)
	parts := [][]string{
		{"set a 0 0 1\r\nx\r\nget a\r\nset b 0 0 10\r\nab", "cdefghij\r\n"},
		{"mn\r\nset b 0 0 10\r\nab", "cdefghij\r\n"},
		{"mn\r\nset b 0 0 2000000 noreply\r\nab"},
		{"version\r\nset b 0 0 10\r\nab", "cdefghij\r\n"},
		{"version\r\nget", " a\r\n"},
		{"version\r\nset a 0 0 1\r\nx\r\nget", " " + long + "\r\n"},
		{"version\r\nset a 0 0 1\r\nx\r\nget " + long + "\r\n"},
		{"set a 0 0 1\r\nx\r\nxx " + strings.Repeat("k ", 1500)}, // closed, nothing sent
		// a value read from the connection, not all from what was
		// buffered, leaves memcached's buffer empty: it transmits
		{"version\r\nset a 0 0 10\r\nab", "cdefghij\r\nget " + long + "\r\n"},
		{"version\r\nset a 0 0 2000000\r\nab", strings.Repeat("x", 2000000) + "\r\nget " + long + "\r\n"},
	}
	exchange := func(addr string, parts []string) []string {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		var got []string
		buf := make([]byte, 4096)
		for _, p := range parts {
			c.Write([]byte(p))
			var b []byte
			c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
			for {
				n, err := c.Read(buf)
				b = append(b, buf[:n]...)
				if err != nil {
					break
				}
			}
			got = append(got, string(b))
		}
		return got
	}
	mc := memcachedtest.StartMemcached(t, false)
	psp := serveTCP(t, openServer(t, Config{}))
	for _, p := range parts {
		want := exchange(mc, p)
		if got := exchange(psp, p); !slices.Equal(got, want) {
			t.Errorf("%.80q:\npsp:       %q\nmemcached: %q", p, got, want)
		}
	}
}

// TestTCPLargeValuesAndLimits: over TCP, values up to the item size limit
// go through; a larger one is refused, its data skipped, and the
// connection goes on.
func TestTCPLargeValuesAndLimits(t *testing.T) {
	srv := openServer(t, Config{})
	addr := serveTCP(t, srv)
	big := strings.Repeat("b", 1048516)
	got, err := memcachedtest.ExchangeTCP(addr, "set a 0 0 1048516\r\n"+big+"\r\nget a\r\n", 10*time.Second)
	if err != nil || string(got) != "STORED\r\nVALUE a 0 1048516\r\n"+big+"\r\nEND\r\n" {
		t.Fatalf("1 MiB value: %v, %d bytes back", err, len(got))
	}
	huge := strings.Repeat("h", 3<<20)
	got, err = memcachedtest.ExchangeTCP(addr, "set a 0 0 "+strconv.Itoa(len(huge))+"\r\n"+huge+"\r\nget a\r\n", 10*time.Second)
	if err != nil || string(got) != "SERVER_ERROR object too large for cache\r\nEND\r\n" {
		t.Fatalf("3 MiB value: %v, %.100q", err, got)
	}
	// A line of more than 2048 bytes without a line end closes the
	// connection, as memcached does; a long get does not, up to
	// Config.MaxLine (64 KiB by default).
	got, err = memcachedtest.ExchangeTCP(addr, "get "+strings.Repeat("k ", 30000)+"\r\n", 10*time.Second)
	if err != nil || string(got) != "END\r\n" {
		t.Fatalf("60 kB get line: %v, %.100q", err, got)
	}
	got, err = memcachedtest.ExchangeTCP(addr, "get "+strings.Repeat("k ", 40000)+"\r\nget k\r\n", 10*time.Second)
	if err != nil || string(got) != "CLIENT_ERROR line too long\r\n" {
		t.Fatalf("80 kB get line: %v, %.100q", err, got)
	}
	got, err = memcachedtest.ExchangeTCP(addr, "set p 0 0 1\r\nx\r\nget "+strings.Repeat("k ", 40000)+"\r\n", 10*time.Second)
	if err != nil || string(got) != "STORED\r\nCLIENT_ERROR line too long\r\n" {
		t.Fatalf("a set, then an 80 kB get line: %v, %.100q", err, got)
	}
	wide := openServer(t, Config{MaxLine: 1 << 20})
	got, err = memcachedtest.ExchangeTCP(serveTCP(t, wide), "get "+strings.Repeat("k ", 400000)+"\r\n", 10*time.Second)
	if err != nil || string(got) != "END\r\n" {
		t.Fatalf("800 kB get line, max line 1 MiB: %v, %.100q", err, got)
	}
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write([]byte(strings.Repeat("x", 100000)))
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := c.Read(make([]byte, 10)); err == nil {
		t.Errorf("connection open after 100 kB without a line end (%d bytes read)", n)
	}
}

// TestTCPMemoryBound: a value past Config.TCPMemory is answered
// memcached's out of memory line, its data skipped (the connection goes
// on), and a set's old value deleted, as memcached does; one within it is
// stored, and the memory is given back after each command.
func TestTCPMemoryBound(t *testing.T) {
	srv := openServer(t, Config{TCPMemory: 40000})
	addr := serveTCP(t, srv)
	v30 := strings.Repeat("a", 30000)
	v50 := strings.Repeat("b", 50000)
	got, err := memcachedtest.ExchangeTCP(addr, "set k 0 0 30000\r\n"+v30+"\r\nset k 0 0 30000\r\n"+v30+"\r\nget k\r\n"+
		"set k 0 0 50000\r\n"+v50+"\r\nget k\r\nset small 0 0 3\r\nabc\r\nget small\r\n", 10*time.Second)
	want := "STORED\r\nSTORED\r\nVALUE k 0 30000\r\n" + v30 + "\r\nEND\r\n" +
		"SERVER_ERROR out of memory storing object\r\nEND\r\nSTORED\r\nVALUE small 0 3\r\nabc\r\nEND\r\n"
	if err != nil || string(got) != want {
		t.Fatalf("%v: %.200q", err, got)
	}
	if n := srv.guards.memRefused.Load(); n != 1 {
		t.Errorf("memory refusals %d, want 1", n)
	}
	if n := srv.guards.memHeld.Load(); n != 0 {
		t.Errorf("%d bytes of TCP memory held after the commands", n)
	}
}
