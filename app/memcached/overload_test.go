package memcached

import (
	"bytes"
	"net/netip"
	"strings"
	"testing"

	"github.com/persephone-go/psp/app/memcached/memcachedtest"
	"github.com/persephone-go/psp/nic"
)

// shedBuffer is a request datagram in a dataplane-sized buffer, as the
// dispatcher hands it to ReplyOverloaded.
func shedBuffer(datagram []byte, size int) *nic.Buffer {
	b := &nic.Buffer{Data: make([]byte, size), Peer: netip.MustParseAddrPort("127.0.0.1:5000")}
	b.Len = copy(b.Data, datagram)
	b.WireLen = b.Len
	return b
}

func frame(id, seq, total, reserved uint16, body string) []byte {
	d := make([]byte, UDPHeaderLen, UDPHeaderLen+len(body))
	FrameHeader{RequestID: id, Seq: seq, Total: total, Reserved: reserved}.Put(d)
	return append(d, body...)
}

// shedReply is the datagram a shed request with this id gets.
func shedReply(id uint16, stores bool) []byte {
	return frame(id, 0, 1, 0, ShedLine(stores))
}

// shedCases are request datagrams, whether the shed request is answered
// (with shedReply of its id) and whether it stores a value.
var shedCases = []struct {
	name     string
	datagram []byte
	reply    bool
	stores   bool
}{
	{"get", frame(0x1234, 0, 1, 0, "get k1\r\n"), true, false},
	{"multi-get", frame(0xbeef, 0, 1, 0, "get k1 k2 k3 k4 k5\r\n"), true, false},
	{"multi-get gets", frame(7, 0, 1, 0, "gets "+strings.Repeat("key ", 60)+"\r\n"), true, false},
	{"gat", frame(8, 0, 1, 0, "gat 100 a b\r\n"), true, false},
	{"bget", frame(9, 0, 1, 0, "bget a\r\n"), true, false},
	{"set", frame(0xffff, 0, 1, 0, "set k 0 0 5\r\nhello\r\n"), true, true},
	{"cas", frame(1, 0, 1, 0, "cas k 0 0 1 99\r\nx\r\n"), true, true},
	{"seq and reserved not echoed", frame(77, 3, 1, 9, "get k\r\n"), true, false},
	{"request id 0", frame(0, 0, 1, 0, "get k\r\n"), true, false},
	{"a line end without CR", frame(3, 0, 1, 0, "get k\n"), true, false},
	{"incr", frame(4, 0, 1, 0, "incr n 1\r\n"), true, false},
	{"delete of the key noreply", frame(5, 0, 1, 0, "delete noreply\r\n"), true, false},
	{"get of the key noreply", frame(6, 0, 1, 0, "get noreply\r\n"), true, false},
	{"noreply that is not the last word", frame(6, 0, 1, 0, "incr n 1 noreply 2\r\n"), true, false}, // ERROR
	{"unknown command", frame(10, 0, 1, 0, "hello\r\n"), true, false},                               // ERROR
	{"empty line", frame(10, 0, 1, 0, "\r\n"), true, false},                                         // ERROR
	{"version, stats, mn", frame(11, 0, 1, 0, "version\r\nstats\r\nmn\r\n"), true, false},
	{"noreply set then a get", frame(12, 0, 1, 0, "set a 0 0 1 noreply\r\nx\r\nget a\r\n"), true, true},
	{"a get then a value cut short", frame(12, 0, 1, 0, "get a\r\nset b 0 0 9\r\nab"), true, false},
	{"quit after a get", frame(13, 0, 1, 0, "get a\r\nquit\r\nget b\r\n"), true, false},
	{"noreply with a bad data chunk, then set", frame(14, 0, 1, 0, "set a 0 0 1 noreply\r\nxyz\r\nset b 0 0 1\r\nx\r\n"), true, true},

	{"set noreply", frame(20, 0, 1, 0, "set k 0 0 5 noreply\r\nhello\r\n"), false, false},
	{"cas noreply", frame(20, 0, 1, 0, "cas k 0 0 1 99 noreply\r\nx\r\n"), false, false},
	{"every write noreply", frame(21, 0, 1, 0, "add a 0 0 1 noreply\r\nx\r\nappend a 0 0 1 noreply\r\ny\r\n"+
		"prepend a 0 0 1 noreply\r\nw\r\nreplace a 0 0 1 noreply\r\nz\r\nincr n 1 noreply\r\ndecr n 1 noreply\r\n"+
		"touch a 10 noreply\r\ndelete a noreply\r\ndelete a 0 noreply\r\nflush_all noreply\r\nflush_all 10 noreply\r\nverbosity 1 noreply\r\n"), false, false},
	{"noreply with a bad line", frame(22, 0, 1, 0, "set a x 0 1 noreply\r\n"), false, false},
	{"quit", frame(23, 0, 1, 0, "quit\r\n"), false, false},
	{"quit then a get", frame(23, 0, 1, 0, "quit\r\nget a\r\n"), false, false},
	{"value cut short", frame(24, 0, 1, 0, "set k 0 0 5\r\nhel"), false, false},
	{"a set, then a value cut short", frame(24, 0, 1, 0, "set a 0 0 1\r\nx\r\nset b 0 0 5\r\nab"), false, false},
	{"no line end", frame(25, 0, 1, 0, "get k"), false, false},
	{"an HTTP request", frame(26, 0, 1, 0, "GET / HTTP/1.1\r\n"), false, false},
	{"a long line that never ends", frame(27, 0, 1, 0, "set "+strings.Repeat("k", 3000)), false, false},

	{"header only", frame(30, 0, 1, 0, ""), false, false},
	{"shorter than a header", []byte{0, 1, 0, 0, 0, 1}, false, false},
	{"empty", nil, false, false},
	{"two datagrams announced", frame(31, 0, 2, 0, "get k\r\n"), false, false},
	{"total 0", frame(32, 0, 0, 0, "get k\r\n"), false, false},
	{"no frame header", []byte("get k\r\n"), false, false},
}

// TestReplyOverloaded checks the reply of every shed request, byte for
// byte, and that no reply leaves the buffer touched.
func TestReplyOverloaded(t *testing.T) {
	srv := openServer(t, Config{})
	for _, c := range shedCases {
		b := shedBuffer(c.datagram, 65535)
		peer := b.Peer
		got := srv.ReplyOverloaded(TypeGet, b)
		switch {
		case got != c.reply:
			t.Errorf("%s: replied %v, want %v", c.name, got, c.reply)
		case !got && !bytes.Equal(b.Payload(), c.datagram):
			t.Errorf("%s: no reply, but the buffer changed to %q", c.name, b.Payload())
		case got:
			id := uint16(0)
			if len(c.datagram) >= 2 {
				id = uint16(c.datagram[0])<<8 | uint16(c.datagram[1])
			}
			if want := shedReply(id, c.stores); !bytes.Equal(b.Payload(), want) || b.Peer != peer {
				t.Errorf("%s: reply %q to %v, want %q to %v", c.name, b.Payload(), b.Peer, want, peer)
			}
		}
	}
	// The exact bytes, once spelled out.
	b := shedBuffer(frame(0x1234, 5, 1, 6, "get a b c\r\n"), 2048)
	want := "\x12\x34\x00\x00\x00\x01\x00\x00SERVER_ERROR busy, request shed: try again\r\n"
	if !srv.ReplyOverloaded(TypeMultiGet, b) || string(b.Payload()) != want {
		t.Errorf("multi-get shed: %q, want %q", b.Payload(), want)
	}
	b = shedBuffer(frame(0x1234, 5, 1, 6, "set a 0 0 1\r\nx\r\n"), 2048)
	want = "\x12\x34\x00\x00\x00\x01\x00\x00SERVER_ERROR out of memory storing object\r\n"
	if !srv.ReplyOverloaded(TypeWrite, b) || string(b.Payload()) != want {
		t.Errorf("set shed: %q, want %q", b.Payload(), want)
	}
	// A buffer too small for the reply: no reply, nothing written.
	small := frame(1, 0, 1, 0, "get k\r\n")
	b = shedBuffer(small, len(small))
	if srv.ReplyOverloaded(TypeGet, b) || !bytes.Equal(b.Payload(), small) {
		t.Errorf("a %d-byte buffer: replied %q", len(small), b.Payload())
	}
}

// TestReplyOverloadedReadsABoundedPrefix: past shedScan bytes of command
// lines, the commands already read decide.
func TestReplyOverloadedReadsABoundedPrefix(t *testing.T) {
	srv := openServer(t, Config{})
	silent := strings.Repeat("delete k noreply\r\n", 65000/18)
	for _, c := range []struct {
		body  string
		reply bool
	}{
		{"get a\r\n" + silent, true},
		{silent, false},
		{silent + "get a\r\n", false}, // served, the get would answer
		{"set a 0 0 60000 noreply\r\n" + strings.Repeat("x", 60000) + "\r\nget a\r\n", true}, // a value is skipped, not read
		{"get " + strings.Repeat("k", 250) + strings.Repeat(" k", 30000) + "\r\n", true},
	} {
		if got := srv.ReplyOverloaded(TypeGet, shedBuffer(frame(1, 0, 1, 0, c.body), 65535)); got != c.reply {
			t.Errorf("%.60q... (%d bytes): replied %v, want %v", c.body, len(c.body), got, c.reply)
		}
	}
}

// TestShedWriteStoresNothing: a shed set, answered overloaded, leaves the
// store as it was.
func TestShedWriteStoresNothing(t *testing.T) {
	srv := openServer(t, Config{})
	expect(t, srv, "set k 0 0 3\r\nold\r\n", "STORED\r\n")
	for _, body := range []string{"set k 0 0 3\r\nnew\r\nset fresh 0 0 1\r\nx\r\n", "delete k\r\n", "append k 0 0 1\r\nx\r\n", "flush_all\r\n"} {
		if !srv.ReplyOverloaded(TypeWrite, shedBuffer(frame(1, 0, 1, 0, body), 2048)) {
			t.Errorf("%q: no overloaded reply", body)
		}
	}
	expect(t, srv, "get k fresh\r\n", "VALUE k 0 3\r\nold\r\nEND\r\n")
}

// TestReplyOverloadedAgreesWithServe: a shed request gets a reply exactly
// when serving it would have answered something (a datagram that is not
// empty), for the conformance sequences and the cases above.
func TestReplyOverloadedAgreesWithServe(t *testing.T) {
	srv := openServer(t, Config{MaxItemSize: 4096})
	var bodies []string
	for _, c := range memcachedtest.Cases {
		for _, r := range c.Requests {
			bodies = append(bodies, r.Body)
		}
	}
	for _, c := range shedCases {
		if len(c.datagram) > UDPHeaderLen {
			bodies = append(bodies, string(c.datagram[UDPHeaderLen:]))
		}
	}
	for _, body := range bodies {
		checkAgreement(t, srv, []byte(body))
	}
}

// checkAgreement fails t when wantsReply and the server disagree on body.
func checkAgreement(t *testing.T, srv *Server, body []byte) {
	t.Helper()
	want := answered(exchange(srv, 0, string(body)))
	if got := wantsReply(body); got != want {
		t.Errorf("%.200q: shed reply %v, served reply %v", body, got, want)
	}
}

// answered reports whether a datagram of dgs carries a response.
func answered(dgs [][]byte) bool {
	for _, d := range dgs {
		if len(d) > UDPHeaderLen {
			return true
		}
	}
	return false
}

func TestReplyOverloadedAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not meaningful under the race detector")
	}
	srv := openServer(t, Config{})
	for _, c := range shedCases {
		b := shedBuffer(c.datagram, 2048)
		if n := testing.AllocsPerRun(100, func() {
			b.Len = copy(b.Data, c.datagram)
			srv.ReplyOverloaded(TypeGet, b)
		}); n != 0 {
			t.Errorf("%s: %.1f allocations per shed request, want 0", c.name, n)
		}
	}
}

// BenchmarkReplyOverloaded: the dispatcher's cost per shed request, for a
// get and for a worst case (a 64 KiB datagram of noreply deletes, all of it
// read to find that none wants a reply).
func BenchmarkReplyOverloaded(b *testing.B) {
	srv := openServer(b, Config{})
	for _, bc := range []struct {
		name string
		body string
	}{
		{"Get", "get k123\r\n"},
		{"MultiGet100", string(multiGet(100))},
		{"NoreplyDeletes64KiB", strings.Repeat("delete k noreply\r\n", 65000/18)},
	} {
		d := frame(1, 0, 1, 0, bc.body)
		buf := shedBuffer(d, 65535)
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				if srv.ReplyOverloaded(TypeGet, buf) {
					buf.Len = copy(buf.Data, d) // the reply overwrote it
				}
			}
		})
	}
}

// TestReplyOverloadedStream: a command cut from a TCP stream and shed is
// answered its line alone (no frame header), in its turn: the busy line
// for a read or any other command, the out of memory line for a store; a
// noreply command gets nothing; a quit still closes the connection.
func TestReplyOverloadedStream(t *testing.T) {
	srv := openServer(t, Config{})
	for _, c := range []struct {
		cmd   string
		reply bool
		want  string
		flags nic.Flags
	}{
		{"get a\r\n", true, BusyLine, 0},
		{"gets a b c\r\n", true, BusyLine, 0},
		{"incr n 1\r\n", true, BusyLine, 0},
		{"delete a\r\n", true, BusyLine, 0},
		{"set a 0 0 1\r\nx\r\n", true, OverloadedLine, 0},
		{"cas a 0 0 1 5\r\nx\r\n", true, OverloadedLine, 0},
		{"set a 0 0 1 noreply\r\nx\r\n", false, "", 0},
		{"quit\r\n", true, "", nic.ReplyClose},
	} {
		b := &nic.Buffer{Data: make([]byte, 4096), Flags: nic.FromStream}
		b.Len = copy(b.Data, c.cmd)
		got := srv.ReplyOverloaded(TypeGet, b)
		if got != c.reply || (got && (string(b.Payload()) != c.want || b.Flags != c.flags)) {
			t.Errorf("%q: replied %v %q flags %v; want %v %q flags %v", c.cmd, got, b.Payload(), b.Flags, c.reply, c.want, c.flags)
		}
	}
}
