package redis

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/persephone-go/psp/app/redis/redistest"
	"github.com/persephone-go/psp/nic"
)

// sentinel follows each protocol case's input: its reply ends the
// exchange unless the server closed the connection first.
const (
	sentinel      = "PING sentinel\r\n"
	sentinelReply = "$8\r\nsentinel\r\n"
)

// protocolCases are raw byte streams, as clients (or attackers) send
// them: inline commands, quoting, pipelining, and the protocol errors
// after which redis-server closes the connection.
var protocolCases = []struct {
	name string
	in   string
	// alone: send no sentinel (the input is cut short, or its size
	// decides).
	alone bool
}{
	{"inline", "PING\r\n", false},
	{"inline with a line feed only", "ping\n", false},
	{"inline with spaces", "  PING   \r\n", false},
	{"empty lines", "\r\n\n\r\nPING\r\n", false},
	{"inline quoting", "SET k \"a b\"\r\nGET k\r\nECHO \"\\x41\\n\\t\\\\\\\"\"\r\nECHO 'it\\'s'\r\n", false},
	{"inline unbalanced quotes", "SET k \"ab\r\n", false},
	{"inline closing quote then a letter", "SET k \"a\"b\r\n", false},
	{"inline single quote unbalanced", "ECHO 'a\r\n", false},
	{"inline bad hex escape", "ECHO \"\\xZZ\"\r\n", false},
	{"pipelined inline", "PING\r\nPING\r\nECHO a\r\nSET x 1\r\nINCR x\r\n", false},
	{"multibulk", "*1\r\n$4\r\nPING\r\n", false},
	{"multibulk pipelined", "*1\r\n$4\r\nPING\r\n*2\r\n$4\r\nECHO\r\n$2\r\nhi\r\nPING\r\n", false},
	{"multibulk runs of one command", "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\n1\r\n*2\r\n$3\r\nSET\r\n$1\r\nk\r\n*2\r\n$4\r\nINCR\r\n$1\r\nk\r\n" +
		"*2\r\n$4\r\nINCR\r\n$1\r\nk\r\n*2\r\n$4\r\nincr\r\n$1\r\nk\r\n*2\r\n$4\r\nLPOP\r\n$1\r\nk\r\n*2\r\n$3\r\nGET\r\n$1\r\nk\r\n*2\r\n$3\r\nGET\r\n$1\r\nk\r\n", false},
	{"a run then a protocol error", "*2\r\n$3\r\nGET\r\n$1\r\nk\r\n*2\r\n$3\r\nGET\r\n$1\r\nk\r\n*1\r\n$x\r\n", false},
	{"multibulk lowercase", "*2\r\n$4\r\necho\r\n$0\r\n\r\n", false},
	{"multibulk zero count", "*0\r\n*1\r\n$4\r\nPING\r\n", false},
	{"multibulk negative count", "*-1\r\n*1\r\n$4\r\nPING\r\n", false},
	{"multibulk bad count", "*abc\r\n", false},
	{"multibulk count over INT_MAX", "*2147483648\r\n", false},
	{"multibulk count with a plus", "*+1\r\n$4\r\nPING\r\n", false},
	{"multibulk count with a leading zero", "*01\r\n$4\r\nPING\r\n", false},
	{"negative bulk length", "*1\r\n$-1\r\n", false},
	{"bulk length over 512 MB", "*1\r\n$536870913\r\n", false},
	{"bulk length not a number", "*1\r\n$x\r\n", false},
	{"expected dollar", "*1\r\nX4\r\nPING\r\n", false},
	{"nested array", "*1\r\n*1\r\n$4\r\nPING\r\n", false},
	{"bulk length that lies, too long", "*1\r\n$4\r\nPINGxx*1\r\n$4\r\nPING\r\n", false},
	{"bulk length that lies, too short", "*1\r\n$2\r\nPING\r\n", false},
	{"binary argument", "*3\r\n$3\r\nSET\r\n$3\r\nb\r\n\r\n$5\r\n\r\n\x00\r\n\r\n*2\r\n$3\r\nGET\r\n$3\r\nb\r\n\r\n", false},
	{"count line without line feed", "*1\rX$4\r\nPING\r\n", false},
	{"quit", "PING\r\nQUIT\r\nPING\r\n", false},
	{"http", "POST / HTTP/1.1\r\nHost: x\r\n\r\n", false},
	{"host header", "Host: x\r\nPING\r\n", false},
	{"http after pipelined commands", "PING\r\nECHO a\r\nPOST / HTTP/1.1\r\nHost: x\r\n\r\n", false},
	{"host header after a multibulk request", "*1\r\n$4\r\nPING\r\nhost: x\r\n", false},
	{"error then more", "*1\r\n$-5\r\nPING\r\n", false},
	{"too big inline", strings.Repeat("a", 100000), true},
	// redis-server reads 16 KiB at a time and refuses an inline line
	// without its line end once it holds more than 64 KiB: a line end at
	// byte 81920 or later is never reached.
	{"inline line ending before 80 KiB", "ECHO " + strings.Repeat("q", 81900) + "\r\n", false},
	{"inline line ending past 80 KiB", "ECHO " + strings.Repeat("q", 82000) + "\r\n", false},
	{"inline line of 70000 bytes", strings.Repeat("z", 70000) + "\r\n", false},
	{"count line ending past 80 KiB", "*" + strings.Repeat("1", 82000) + "\r\n", false},
	{"count line of 70000 bytes", "*" + strings.Repeat("1", 70000) + "\r\n", false},
	{"too big count string", "*" + strings.Repeat("1", 70000), true},
	{"too big bulk count string", "*1\r\n$" + strings.Repeat("1", 70000), true},
}

// exchange sends in and the sentinel, and returns what the server sent
// until the sentinel's reply or the connection's end.
func exchange(t *testing.T, addr, in string, alone bool) []byte {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if !alone {
		in += sentinel
	}
	go func() {
		_, _ = c.Write([]byte(in))
	}()
	var got []byte
	buf := make([]byte, 1<<16)
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	for !bytes.HasSuffix(got, []byte(sentinelReply)) {
		n, err := c.Read(buf)
		got = append(got, buf[:n]...)
		if err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || isReset(err) {
				return append(got, "<closed>"...)
			}
			t.Fatalf("after %q: %v", got, err)
		}
	}
	return got
}

func isReset(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && errors.Is(op.Err, os.ErrDeadlineExceeded) == false && strings.Contains(op.Err.Error(), "reset")
}

// TestProtocolWithRedis sends each raw stream to redis-server and to psp
// and compares everything they send back, and whether they close.
func TestProtocolWithRedis(t *testing.T) {
	real := redistest.StartRedis(t)
	psp := serveTest(t, openTest(t, Config{}))
	for _, c := range protocolCases {
		t.Run(c.name, func(t *testing.T) {
			want := exchange(t, real, c.in, c.alone)
			got := exchange(t, psp, c.in, c.alone)
			if !bytes.Equal(got, want) {
				t.Errorf("%.80q:\npsp:          %.300q\nredis-server: %.300q", c.in, got, want)
			}
		})
	}
}

// TestFrameRefusesPastMax: requests that cannot fit the dataplane's
// longest request are refused as soon as that is known, with
// redis-server's errors, where redis-server (limits of 512 MB per argument
// and 1 GB per connection) would wait for more: a count of arguments, a
// bulk length, the sum of the lengths.
func TestFrameRefusesPastMax(t *testing.T) {
	s := openTest(t, Config{})
	for _, c := range []struct {
		in   string
		max  int
		want []byte
	}{
		{"*2147483647\r\n", 1 << 20, errInvalidMbulk},
		{"*1000\r\n", 1000, errInvalidMbulk},
		{"*1\r\n$2147483647\r\n", 1 << 20, errInvalidBulk},
		{"*1\r\n$2000\r\n", 1000, errInvalidBulk},
		{"*2\r\n$500\r\n" + strings.Repeat("x", 502) + "$500\r\n", 1000, errInvalidBulk},
		{"GET " + strings.Repeat("k", 100), 50, errTooBigInline},
	} {
		fr := s.NewConn(1, netipAddrPort()).Frame([]byte(c.in), c.max)
		if fr.Kind != nic.FrameClose || !bytes.Equal(fr.Reply, c.want) {
			t.Errorf("%.40q (max %d): %v %q, want a close with %q", c.in, c.max, fr.Kind, fr.Reply, c.want)
		}
	}
	// Under the limit, the same heads wait for more.
	for _, in := range []string{"*1000\r\n", "*1\r\n$2000\r\n", "GET k"} {
		if fr := s.NewConn(1, netipAddrPort()).Frame([]byte(in), 1<<20); fr.Kind != nic.FrameMore {
			t.Errorf("%q: %v, want FrameMore", in, fr.Kind)
		}
	}
}

func netipAddrPort() netip.AddrPort { return netip.MustParseAddrPort("127.0.0.1:1") }

// TestFrameResumes: a request arriving in pieces is framed as it would be
// whole, whatever the cuts, and an argument count in the millions is not
// parsed again from its start at every read.
func TestFrameResumes(t *testing.T) {
	s := openTest(t, Config{})
	req := []byte(redistest.Command("MSET", "a", "1", "bb", strings.Repeat("v", 300), "c", ""))
	req = append(req, "PING\r\n"...)
	whole := s.NewConn(1, netipAddrPort()).Frame(req, 1<<20)
	if whole.Kind != nic.FrameRequest {
		t.Fatalf("whole: %v", whole.Kind)
	}
	for cut := 1; cut < len(req); cut++ {
		f := s.NewConn(1, netipAddrPort())
		for n := cut; ; n = min(n+cut, len(req)) {
			fr := f.Frame(req[:n], 1<<20)
			if fr.Kind == nic.FrameMore && n < len(req) {
				continue
			}
			if fr.Kind != whole.Kind || fr.Len != whole.Len {
				t.Fatalf("cut every %d bytes, at %d: %+v, want %+v", cut, n, fr, whole)
			}
			break
		}
	}
	// A million empty arguments, fed 64 KiB at a time: each byte is
	// parsed once.
	const args = 1 << 20
	big := []byte("*" + strconv.Itoa(args) + "\r\n" + strings.Repeat("$0\r\n\r\n", args))
	f := s.NewConn(2, netipAddrPort())
	start := time.Now()
	var fr nic.Frame
	for n := 64 << 10; ; n = min(n+64<<10, len(big)) {
		fr = f.Frame(big[:n], 16<<20)
		if fr.Kind != nic.FrameMore || n == len(big) {
			break
		}
	}
	if fr.Kind != nic.FrameRequest || fr.Len != len(big) {
		t.Fatalf("%+v, want the whole %d bytes", fr, len(big))
	}
	t.Logf("framed %d arguments in %d reads in %v", args, len(big)>>16, time.Since(start))
}
