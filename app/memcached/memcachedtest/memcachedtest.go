// Package memcachedtest holds what psp's memcached tests share: a UDP client
// that collects every datagram of a reply, a TCP exchange, a launcher of
// Debian's memcached, a pymemcache script, and the command sequences the
// conformance tests send to psp and to a real memcached to compare their
// replies byte for byte.
package memcachedtest

import (
	"bytes"
	_ "embed"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/persephone-go/psp/internal/testenv"
)

// sentinelID is the request id of the "version" request the client sends
// after each request: its reply marks the end of the previous reply (the
// servers under test answer in order: one memcached thread, one psp
// worker).
const sentinelID = 0xfff0

// Client is a UDP client to one server.
type Client struct {
	conn *net.UDPConn
	buf  []byte
	// Timeout bounds the wait for each reply (default 5s).
	Timeout time.Duration
}

// Dial connects a client to addr (host:port).
func Dial(addr string) (*Client, error) {
	ua, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return nil, err
	}
	c, err := net.DialUDP("udp", nil, ua)
	if err != nil {
		return nil, err
	}
	_ = c.SetReadBuffer(4 << 20)
	return &Client{conn: c, buf: make([]byte, 65536), Timeout: 5 * time.Second}, nil
}

// Close closes the client's socket.
func (c *Client) Close() error { return c.conn.Close() }

// Exchange sends one datagram (frame header included) and returns every
// datagram the server answers it with, in arrival order, by sending a
// sentinel request after it and reading up to the sentinel's reply.
func (c *Client) Exchange(datagram []byte) ([][]byte, error) {
	if _, err := c.conn.Write(datagram); err != nil {
		return nil, err
	}
	var sentinel [8 + 9]byte
	binary.BigEndian.PutUint16(sentinel[0:], sentinelID)
	binary.BigEndian.PutUint16(sentinel[4:], 1)
	copy(sentinel[8:], "version\r\n")
	if _, err := c.conn.Write(sentinel[:]); err != nil {
		return nil, err
	}
	var out [][]byte
	deadline := time.Now().Add(c.Timeout)
	for {
		_ = c.conn.SetReadDeadline(deadline)
		n, err := c.conn.Read(c.buf)
		if err != nil {
			return out, fmt.Errorf("after %d datagrams: %w", len(out), err)
		}
		p := c.buf[:n]
		if n >= 8 && binary.BigEndian.Uint16(p) == sentinelID {
			return out, nil
		}
		out = append(out, bytes.Clone(p))
	}
}

// Request is one datagram of a case.
type Request struct {
	// ID is the request id (default: a running number).
	ID uint16
	// Seq, Total and Reserved fill the rest of the frame header (Total
	// defaults to 1).
	Seq, Total, Reserved uint16
	// Raw, when set, is sent as is (no frame header is added).
	Raw []byte
	// Body follows the frame header.
	Body string
}

// Datagram encodes r with the given default id.
func (r Request) Datagram(id uint16) []byte {
	if r.Raw != nil {
		return r.Raw
	}
	if r.ID != 0 {
		id = r.ID
	}
	total := r.Total
	if total == 0 {
		total = 1
	}
	var h [8]byte
	binary.BigEndian.PutUint16(h[0:], id)
	binary.BigEndian.PutUint16(h[2:], r.Seq)
	binary.BigEndian.PutUint16(h[4:], total)
	binary.BigEndian.PutUint16(h[6:], r.Reserved)
	return append(h[:], r.Body...)
}

// Case is a named sequence of requests.
type Case struct {
	Name     string
	Requests []Request
}

// CompareUDP sends every request of Cases, ids from 101 on, to memcached
// and to psp and reports each whose reply datagrams differ.
func CompareUDP(t testing.TB, psp, memcached *Client) {
	t.Helper()
	id := uint16(100)
	for _, c := range Cases {
		for i, r := range c.Requests {
			id++
			d := r.Datagram(id)
			want, err := memcached.Exchange(d)
			if err != nil {
				t.Fatalf("%s, request %d: memcached: %v", c.Name, i, err)
			}
			got, err := psp.Exchange(d)
			if err != nil {
				t.Fatalf("%s, request %d: psp: %v", c.Name, i, err)
			}
			if !slices.EqualFunc(got, want, bytes.Equal) {
				t.Errorf("%s, request %d %.80q:\npsp:%s\nmemcached:%s", c.Name, i, d, Describe(got), Describe(want))
			}
		}
	}
}

// Describe renders datagrams for a test failure: header fields, then the
// body quoted (long bodies cut).
func Describe(dgs [][]byte) string {
	var b strings.Builder
	for i, d := range dgs {
		if len(d) < 8 {
			fmt.Fprintf(&b, "\n  %d: runt %q", i, d)
			continue
		}
		body := d[8:]
		q := fmt.Sprintf("%q", body)
		if len(q) > 160 {
			q = q[:80] + "..." + q[len(q)-60:] + fmt.Sprintf(" (%d bytes)", len(body))
		}
		fmt.Fprintf(&b, "\n  %d: id %d seq %d total %d res %d %s", i,
			binary.BigEndian.Uint16(d[0:]), binary.BigEndian.Uint16(d[2:]), binary.BigEndian.Uint16(d[4:]), binary.BigEndian.Uint16(d[6:]), q)
	}
	if len(dgs) == 0 {
		return " (no datagram)"
	}
	return b.String()
}

func body(s ...string) Request { return Request{Body: strings.Join(s, "")} }

func rep(s string, n int) string { return strings.Repeat(s, n) }

// Cases are the conformance sequences, to be sent in order to a fresh
// server (CAS ids count every store since the start). They leave out what
// makes memcached carry state from one datagram to the next (a storage
// command whose data block does not end in the datagram: memcached reads
// the next datagram, header and all, as the rest of the value); psp treats
// every datagram on its own and answers nothing to such a command.
var Cases = []Case{
	{"version", []Request{body("version\r\n")}},
	{"get miss and hit", []Request{
		body("get foo\r\n"),
		body("set foo 5 0 3\r\nbar\r\n"),
		body("get foo\r\n"),
		body("gets foo\r\n"),
		body("bget foo\r\n"),
	}},
	{"frame header", []Request{
		{ID: 7, Seq: 1, Body: "get foo\r\n"},
		{ID: 8, Reserved: 1, Body: "get foo\r\n"},
		{ID: 9, Total: 2, Body: "get foo\r\n"},         // multi-datagram request: dropped
		{ID: 10, Raw: []byte{0, 10, 0, 0, 0, 1, 0, 0}}, // header only: dropped
		{ID: 11, Raw: []byte{0, 11, 0, 0}},             // runt: dropped
		{ID: 0xffff, Body: "get foo\r\n"},
	}},
	{"line ends", []Request{
		body("get foo\n"),
		body("get foo"),
		body("get foo\r\nget foo\r\n"),
		body("  get   foo  \r\n"),
		body("get foo\x00bar\r\n"),
		body("\r\n"),
		body("\n"),
		body("x\r\n"),
		body("xx\r\n"),
		body("GET foo\r\n"),
		body("get\r\n"),
	}},
	{"multi-get framing", []Request{
		body("set a 0 0 1\r\nx\r\nset b 0 0 1\r\ny\r\n"),
		body("get a b\r\n"),
		body("get a missing\r\n"),
		body("get missing a\r\n"),
		body("get missing\r\n"),
		body("get m1 m2 a m3\r\n"),
		body("get m1 m2 m3 a\r\nget m1 a m2 m3 b\r\nget a m1 m2 b\r\nget a b m1\r\n"),
		body("get a m1 b m2\r\nget m1 m2 m3\r\nget m1 m2 a\r\ngets m1 a\r\n"),
		body("set c 0 0 1 noreply\r\nz\r\nget missing a\r\n"),
		body("set c 0 0 1 noreply\r\nz\r\nget a missing\r\n"),
		body("get ", rep("a ", 22), "  \r\n"),
		body("get ", rep("a ", 30), "missing ", rep("b ", 30), "\r\n"),
	}},
	{"large values", []Request{
		body("set big 0 0 3000\r\n", rep("x", 3000), "\r\nget big\r\n"),
		body("set v1 0 0 1000\r\n", rep("a", 1000), "\r\nset v2 0 0 1000\r\n", rep("b", 1000), "\r\nget v1 v2\r\n"),
		body("set exact 0 0 1371\r\n", rep("e", 1371), "\r\n"), // VALUE line 21 + 1371 + 2 ... near 1392
		body("get exact\r\n"),
		body("gets big exact v1 missing\r\n"),
		body("set huge 0 0 20000\r\n", rep("h", 20000), "\r\nget huge\r\n"),
	}},
	{"key length", []Request{
		body("get ", rep("k", 250), "\r\n"),
		body("get ", rep("k", 251), "\r\n"),
		body("set ", rep("k", 251), " 0 0 1\r\nx\r\n"),
		body("set ", rep("k", 250), " 0 0 1\r\nx\r\nget ", rep("k", 250), "\r\n"),
		body("set a 0 0 1\r\nx\r\nget a a ", rep("k", 251), " a\r\n"),
		body("set a 0 0 1\r\nx\r\nget ", rep("k", 251), "\r\nget missing a\r\n"),
		// memcached transmits after the 21st command it has read, and after
		// every 20 more: a key too long discards only what came since (not
		// version: ExchangeTCP would take a chunk ending in VERSION for the
		// end of the reply)
		body(rep("verbosity 0\r\n", 25), "get ", rep("k", 251), "\r\n"),
		body(rep("mn\r\n", 44), "get a ", rep("k", 251), "\r\n"),
		body("delete ", rep("k", 251), "\r\nincr ", rep("k", 251), " 1\r\ntouch ", rep("k", 251), " 1\r\n"),
	}},
	{"storage errors", []Request{
		body("set a 0 0 3\r\nabcd\r\n"),
		body("set a 0 0 x\r\nabc\r\n"),
		body("set a 0 0\r\nabc\r\n"),
		body("set a 0 0 -1\r\nabc\r\n"),
		body("set a x 0 3\r\nabc\r\n"),
		body("set a -1 0 3\r\nabc\r\n"),
		body("set a 4294967296 0 3\r\nabc\r\n"),
		body("set a 4294967295 0 3\r\nabc\r\nget a\r\n"),
		body("set a 0 0 4294967299\r\nabc\r\n"),
		body("set a 0 0 +2\r\nab\r\nset a 0 0 \t2\r\nab\r\nget a\r\n"),
		body("set a 0 0 3 noreply\r\nabcd\r\n"),
		body("set a 0 0 x noreply\r\nabc\r\n"),
		body("set a 0 0 1 garbage\r\nz\r\n"),
		body("set a 0 0 1 noreply extra\r\nz\r\n"),
		body("set a 0 0 0\r\n\r\nget a\r\n"),
		body("SET a 0 0 3\r\nabc\r\n"),
		body("set a 0 0 1\r\nx\r\n", rep("y", 3000)),      // no line end for 3000 bytes: nothing
		body("set a 0 0 1\r\nw\r\nget ", rep("k ", 1500)), // a long get without line end
		body("get a\r\n"),
		body("set a 0 0 2\r\nabc\r\n"),
	}},
	{"add replace append prepend cas", []Request{
		body("add n 0 0 1\r\n1\r\nadd n 0 0 1\r\n2\r\nget n\r\n"),
		body("replace n 3 0 1\r\n3\r\nreplace nope 0 0 1\r\n3\r\ngets n\r\n"),
		body("append n 9 0 2\r\n45\r\nprepend n 9 0 2\r\n12\r\ngets n\r\n"),
		body("append nope 0 0 1\r\nx\r\nprepend nope 0 0 1\r\nx\r\n"),
		body("gets n\r\ncas n 0 0 1 99\r\nz\r\ncas nope 0 0 1 1\r\nz\r\n"),
		body("cas n 0 0 1 noreply\r\nz\r\ncas n 0 0 1\r\nz\r\ncas n 0 0 1 x\r\nz\r\n"),
		body("gets n\r\n"),
	}},
	{"cas round trip", []Request{
		body("set c 0 0 1\r\nx\r\ngets c\r\n"),
	}},
	{"incr decr", []Request{
		body("set a 0 0 2\r\n10\r\ndecr a 5\r\nget a\r\nincr a 100\r\nget a\r\n"),
		body("incr a 18446744073709551615\r\nget a\r\n"),
		body("decr a abc\r\nincr a -1\r\nincr missing 1\r\ndecr a 1000\r\nget a\r\n"),
		body("set s 0 0 2\r\nab\r\nincr s 1\r\nset e 0 0 0\r\n\r\nincr e 1\r\n"),
		body("set sp 0 0 3\r\n 7 \r\nincr sp 1\r\nget sp\r\n"),
		body("set big 0 0 20\r\n18446744073709551615\r\nincr big 1\r\nset over 0 0 20\r\n18446744073709551616\r\nincr over 1\r\n"),
		body("set neg 0 0 2\r\n-5\r\nincr neg 1\r\nset plus 0 0 2\r\n+5\r\nincr plus 1\r\n"),
		body("incr a 1 noreply\r\nget a\r\nincr a\r\nincr a 1 2 3\r\n"),
		body("gets a s sp\r\n"),
	}},
	{"delete touch gat", []Request{
		body("set a 0 0 1\r\nx\r\ndelete a 0\r\ndelete a 1\r\ndelete a noreply\r\ndelete a 0 noreply\r\ndelete a 0 0\r\ndelete a b c d\r\ndelete\r\n"),
		body("set a 0 0 1\r\nx\r\ntouch a 10\r\ntouch b 10\r\ntouch a x\r\ntouch a\r\ngat 10 a\r\ngat x a\r\ngats 0 a b\r\ngat 10\r\n"),
		body("touch a 10 noreply\r\ndelete a\r\ndelete a\r\n"),
		body("set t 0 -1 1\r\nx\r\nget t\r\nadd t 0 0 1\r\ny\r\nget t\r\n"),
		body("set t 0 100 1\r\nx\r\nget t\r\ntouch t -1\r\nget t\r\n"),
		body("set t 0 0 1\r\nx\r\ngat -1 t\r\nget t\r\n"),
		// a key too long fails the gat, after the keys before it are touched
		body("set t 0 0 1\r\nx\r\nset u 0 0 1\r\ny\r\ngat -1 t ", rep("k", 251), " u\r\nget t u\r\n"),
	}},
	{"misc commands", []Request{
		body("verbosity 1\r\nverbosity\r\nverbosity x\r\nverbosity 1 noreply\r\n"),
		body("stats reset\r\nstats bogus\r\nshutdown\r\nmn\r\nxx\r\n"),
		body("set h 0 0 1\r\nx\r\nGET / HTTP/1.1\r\nget h\r\n"),
		body("POST /x HTTP/1.0\r\n"),
		body("get / HTTP/1.1\r\n"),
		body("dx HTTP/1.1\r\n"),
	}},
	{"flush_all", []Request{
		body("set f1 0 0 1\r\nx\r\nset f2 0 0 1\r\ny\r\n"),
		body("flush_all\r\nget f1 f2\r\nset f1 0 0 1\r\nz\r\ngets f1\r\n"),
		body("flush_all 0\r\nflush_all x\r\nflush_all noreply\r\nflush_all 1 2\r\nflush_all 1 2 3\r\n"),
		body("flush_all -1\r\nget f1\r\nset f3 0 0 1\r\nw\r\ngets f3\r\n"),
		// a time before the server started flushes nothing (and spends a CAS id)
		body("flush_all 1000000000\r\ngets f3\r\nset f4 0 0 1\r\nv\r\ngets f4\r\n"),
	}},
	// stats detail counts gets, hits, sets and deletes per key prefix (up
	// to ':') while on, and dumps them in memcached's order (its prefix
	// hash table's); stats reset clears them.
	{"stats detail", []Request{
		body("stats detail dump\r\nstats detail\r\nstats detail bogus\r\n"),
		body("stats detail on\r\nset user:1 0 0 1\r\nx\r\nget user:1 user:2 nocolon\r\n"),
		body("set page:a 0 0 1\r\ny\r\nappend page:a 0 0 1\r\nz\r\ndelete page:a\r\ndelete user:9\r\nget :x a:b:c\r\n"),
		body("set ", rep("p", 200), ":k 0 0 1\r\nx\r\nset x: 0 0 1\r\nx\r\nstats detail dump\r\n"),
		body("stats detail off\r\nget user:1\r\nstats detail dump\r\n"),
		body("stats reset\r\nstats detail dump\r\n"),
	}},
	// Last: after a quit over UDP, memcached 1.6.18 stops every later
	// datagram at its first get (the connection keeps its "close after
	// write" flag), which psp does not imitate.
	{"quit", []Request{
		body("set q 0 0 1\r\nx\r\nquit\r\nget q\r\n"),
		body("quit\r\n"),
	}},
}

// StatCase is a sequence of requests after which the named general
// statistics (of "stats") must be the same on both servers: what stats
// count, where their whole output (pid, time, CPU) cannot be compared.
type StatCase struct {
	Name     string
	Requests []string
	Stats    []string
}

// itemStats are the statistics every StatCase compares.
var itemStats = []string{"curr_items", "total_items", "bytes", "cmd_get", "cmd_set", "get_hits", "get_misses",
	"get_expired", "get_flushed", "store_too_large", "store_no_memory", "evictions", "reclaimed",
	"expired_unfetched", "evicted_unfetched", "cmd_touch", "touch_hits", "touch_misses", "delete_hits",
	"delete_misses", "incr_hits", "incr_misses", "cas_hits", "cas_misses", "cas_badval"}

// StatCases are sent, each to a fresh pair of servers, one request per
// exchange; then the servers' stats are compared (Stats and itemStats).
var StatCases = []StatCase{
	{"items stored, replaced and deleted", []string{
		"set a 0 0 3\r\nabc\r\nset b 5 0 300\r\n" + rep("x", 300) + "\r\n",
		"add a 0 0 1\r\nz\r\nadd c 0 0 1\r\nz\r\nreplace d 0 0 1\r\nz\r\nreplace c 0 0 2\r\nzz\r\n",
		"append a 0 0 2\r\nde\r\nprepend a 0 0 1\r\n_\r\nappend nope 0 0 1\r\nx\r\n",
		"gets a\r\n",
		"cas a 0 0 1 1\r\nq\r\ncas nope 0 0 1 1\r\nq\r\n",
		"set n 0 0 2\r\n10\r\nincr n 5\r\nincr n 100\r\ndecr n 1\r\nincr nope 1\r\n",
		"touch a 100\r\ntouch nope 100\r\ngat 100 b nope\r\n",
		"delete b\r\ndelete nope\r\nget a b c n\r\n",
		"set a 0 0 1\r\nx\r\nset a 0 0 10\r\n0123456789\r\n",
	}, nil},
	{"expired items", []string{
		"set e1 0 -1 1\r\nx\r\nset e2 0 -1 1\r\nx\r\nset e3 0 -1 1\r\nx\r\nset live 0 0 1\r\nx\r\n",
		"get e1\r\n",
		"touch e2 100\r\ndelete e3\r\nget e1 live\r\n",
		"add e2 0 0 1\r\ny\r\n",
	}, nil},
	{"flushed items", []string{
		"set f1 0 0 1\r\nx\r\nset f2 0 0 1\r\nx\r\nset f3 0 0 1\r\nx\r\n",
		"flush_all\r\n",
		"get f1\r\nincr f2 1\r\nset f4 0 0 1\r\nx\r\nget f4\r\n",
	}, nil},
	{"too large", []string{
		"set big 0 0 1048577\r\n" + rep("b", 1048577) + "\r\nset ok 0 0 1\r\nx\r\n",
		"set big 0 0 2000000 noreply\r\n" + rep("b", 2000000) + "\r\n",
		"append ok 0 0 2000000\r\n" + rep("b", 2000000) + "\r\n",
	}, nil},
	{"stats reset", []string{
		"set a 0 0 1\r\nx\r\nget a nope\r\nset big 0 0 1048577\r\n" + rep("b", 1048577) + "\r\n",
		"stats reset\r\n",
		"get a\r\n",
	}, nil},
}

// ParseStats reads the STAT lines of a reply into a map.
func ParseStats(reply []byte) map[string]string {
	m := map[string]string{}
	for _, line := range strings.Split(string(reply), "\r\n") {
		f := strings.Fields(line)
		if len(f) == 3 && f[0] == "STAT" {
			m[f[1]] = f[2]
		}
	}
	return m
}

// CompareStats returns what differs between two stats replies in the
// named statistics and those every StatCase compares.
func CompareStats(got, want []byte, names ...string) []string {
	g, w := ParseStats(got), ParseStats(want)
	var diffs []string
	for _, n := range append(append([]string(nil), itemStats...), names...) {
		if g[n] != w[n] {
			diffs = append(diffs, fmt.Sprintf("%s: %q, want %q", n, g[n], w[n]))
		}
	}
	return diffs
}

// ExchangeTCP sends one request body over a new TCP connection to addr and
// returns what the server writes back before the reply to a sentinel
// "version" (or before it closes the connection).
func ExchangeTCP(addr, body string, timeout time.Duration) ([]byte, error) {
	c, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(timeout))
	if _, err := c.Write([]byte(body + "version\r\n")); err != nil {
		return nil, err
	}
	var out []byte
	buf := make([]byte, 65536)
	for {
		n, err := c.Read(buf)
		out = append(out, buf[:n]...)
		if i := bytes.LastIndex(out, []byte("VERSION ")); i >= 0 && bytes.HasSuffix(out, []byte("\r\n")) && !bytes.Contains(out[i:len(out)-2], []byte("\r\n")) {
			return out[:i], nil
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil // the server closed the connection
			}
			return out, err
		}
	}
}

// StartMemcached starts Debian's memcached on 127.0.0.1 for the test (it
// is killed when the test ends) and returns its address: serving UDP only
// with udp set (one thread: replies in request order), TCP only otherwise.
// extra adds command-line arguments. Without a memcached binary the test is
// skipped, or fails in CI.
func StartMemcached(t testing.TB, udp bool, extra ...string) string {
	t.Helper()
	bin := testenv.RequireTool(t, "memcached")
	for attempt := 0; ; attempt++ {
		var port int
		if udp {
			c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
			if err != nil {
				t.Fatal(err)
			}
			port = c.LocalAddr().(*net.UDPAddr).Port
			c.Close()
		} else {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			port = ln.Addr().(*net.TCPAddr).Port
			ln.Close()
		}
		args := []string{"-U", strconv.Itoa(port), "-p", "0", "-l", "127.0.0.1", "-t", "1"}
		if !udp {
			args = []string{"-p", strconv.Itoa(port), "-U", "0", "-l", "127.0.0.1", "-t", "1"}
		}
		args = append(args, extra...)
		if os.Geteuid() == 0 {
			args = append(args, "-u", "nobody")
		}
		cmd := exec.Command(bin, args...)
		if err := cmd.Start(); err != nil {
			t.Fatalf("start memcached: %v", err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		if waitMemcached(addr, udp) {
			return addr
		}
		if attempt == 2 {
			t.Fatalf("memcached on %s does not answer", addr)
		}
	}
}

// waitMemcached waits up to about a second for memcached to answer.
func waitMemcached(addr string, udp bool) bool {
	for i := 0; i < 50; i++ {
		if udp {
			if c, err := Dial(addr); err == nil {
				c.Timeout = 200 * time.Millisecond
				_, err = c.Exchange(Request{Body: "version\r\n"}.Datagram(1))
				c.Close()
				if err == nil {
					return true
				}
			}
		} else if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
}

// Pymemcache is a short script run by Debian's python3 with
// python3-pymemcache: set, get, get_many, gets and cas, incr and decr,
// touch, delete, add, append and prepend, a 500 KB value, 200 keys set and
// read at once, version and stats, each checked (python3 - HOST PORT).
//
//go:embed pymemcache.py
var Pymemcache []byte

// RunPymemcache runs Pymemcache against addr (host:port, TCP) with
// /usr/bin/python3 (the interpreter python3-pymemcache is installed for)
// and fails the test unless every check passes; it skips (fails in CI)
// without python3-pymemcache.
func RunPymemcache(tb testing.TB, addr string) {
	tb.Helper()
	out, err := testenv.DebianPython(tb, "python3-pymemcache", "pymemcache", Pymemcache, addr)
	if err != nil || !bytes.HasPrefix(out, []byte("ok: ")) {
		tb.Fatalf("pymemcache against %s: %v\n%s", addr, err, out)
	}
	tb.Logf("pymemcache against %s: %s", addr, bytes.TrimSpace(out))
}
