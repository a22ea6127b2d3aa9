// Package redistest holds what psp's Redis tests share: a launcher of
// Debian's redis-server, a reader of whole RESP replies, and the command
// sequences the conformance tests send to psp and to redis-server to
// compare their replies byte for byte.
package redistest

import (
	"bufio"
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"net"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/persephone-go/psp/internal/testenv"
)

// StartRedis starts redis-server on a free loopback port, configured as
// psp serves (one database, no persistence), and returns its address; the
// server is stopped when the test ends. The test is skipped (failed in
// CI) without redis-server.
func StartRedis(tb testing.TB, args ...string) string {
	tb.Helper()
	return StartRedisOn(tb, "", args...)
}

// StartRedisOn is StartRedis with redis-server running on the given CPUs
// only (taskset -c, a list in the kernel's format; "": any CPU).
func StartRedisOn(tb testing.TB, cpus string, args ...string) string {
	tb.Helper()
	bin := testenv.RequireTool(tb, "redis-server")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	argv := append([]string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "",
		"--appendonly", "no", "--databases", "1", "--daemonize", "no", "--loglevel", "warning"}, args...)
	cmd := exec.Command(bin, argv...)
	if cpus != "" {
		cmd = exec.Command(testenv.RequireTool(tb, "taskset"), append([]string{"-c", cpus, bin}, argv...)...)
	}
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Start(); err != nil {
		tb.Fatalf("redis-server: %v", err)
	}
	tb.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	deadline := time.Now().Add(10 * time.Second)
	for {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			return addr
		}
		if time.Now().After(deadline) {
			tb.Fatalf("redis-server did not start on %s: %s", addr, stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// ReadReply reads one whole RESP2 reply (an array with all its elements)
// and returns its bytes as sent.
func ReadReply(r *bufio.Reader) ([]byte, error) {
	var out []byte
	err := readReply(r, &out, 0)
	return out, err
}

func readReply(r *bufio.Reader, out *[]byte, depth int) error {
	if depth > 64 {
		return errors.New("redistest: reply nested too deep")
	}
	line, err := r.ReadBytes('\n')
	*out = append(*out, line...)
	if err != nil {
		return err
	}
	if len(line) < 3 || line[len(line)-2] != '\r' {
		return fmt.Errorf("redistest: bad reply line %q", line)
	}
	body := line[1 : len(line)-2]
	switch line[0] {
	case '+', '-', ':', '_', ',', '#', '(':
		return nil
	case '$', '=', '!':
		n, err := strconv.Atoi(string(body))
		if err != nil {
			return fmt.Errorf("redistest: bad bulk length %q", line)
		}
		if n < 0 {
			return nil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return err
		}
		*out = append(*out, buf...)
		return nil
	case '*', '~', '>', '%', '|':
		n, err := strconv.Atoi(string(body))
		if err != nil {
			return fmt.Errorf("redistest: bad array length %q", line)
		}
		if line[0] == '%' || line[0] == '|' {
			n *= 2 // a map's (an attribute's) keys and values
		}
		for i := 0; i < n; i++ {
			if err := readReply(r, out, depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("redistest: unknown reply type %q", line)
}

// Command encodes args as a RESP multibulk request.
func Command(args ...string) []byte {
	b := []byte("*" + strconv.Itoa(len(args)) + "\r\n")
	for _, a := range args {
		b = append(b, "$"+strconv.Itoa(len(a))+"\r\n"...)
		b = append(append(b, a...), "\r\n"...)
	}
	return b
}

// Conn is a client connection that sends raw requests and reads whole
// replies.
type Conn struct {
	c net.Conn
	r *bufio.Reader
	// Timeout bounds each exchange (default 5s).
	Timeout time.Duration
}

// Dial connects to addr.
func Dial(addr string) (*Conn, error) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	return &Conn{c: c, r: bufio.NewReaderSize(c, 1<<16), Timeout: 5 * time.Second}, nil
}

// Close closes the connection.
func (c *Conn) Close() error { return c.c.Close() }

// CloseWrite closes the connection's sending half: the server reads its
// end.
func (c *Conn) CloseWrite() error { return c.c.(*net.TCPConn).CloseWrite() }

// Send writes raw bytes.
func (c *Conn) Send(p []byte) error {
	_ = c.c.SetWriteDeadline(time.Now().Add(c.Timeout))
	_, err := c.c.Write(p)
	return err
}

// Read reads n whole replies and returns their bytes, concatenated.
func (c *Conn) Read(n int) ([]byte, error) {
	_ = c.c.SetReadDeadline(time.Now().Add(c.Timeout))
	var all []byte
	for i := 0; i < n; i++ {
		b, err := ReadReply(c.r)
		all = append(all, b...)
		if err != nil {
			return all, err
		}
	}
	return all, nil
}

// Do sends one command and reads its reply.
func (c *Conn) Do(args ...string) ([]byte, error) {
	if err := c.Send(Command(args...)); err != nil {
		return nil, err
	}
	return c.Read(1)
}

// ReadAll reads until the server closes the connection (or the timeout)
// and returns what it sent.
func (c *Conn) ReadAll() ([]byte, error) {
	_ = c.c.SetReadDeadline(time.Now().Add(c.Timeout))
	return io.ReadAll(c.r)
}

// A Case is a sequence of commands sent on one connection, after FLUSHALL,
// whose replies psp and redis-server must send byte for byte alike.
type Case struct {
	Name string
	// Commands are inline-quoted commands ("SET k v", "SET k \"a b\"")
	// sent as multibulk requests, one reply each. In TwoClientCases, a
	// command after Other is sent on a second connection (opened as the
	// first, in RESP3 too when the case is), and Pause followed by a
	// number of milliseconds is a pause.
	Commands []string
	// Unordered: replies are arrays of members whose order redis-server
	// leaves to its hash tables; they are compared sorted.
	Unordered bool
	// RESP3: the connection first sends HELLO 3 (its reply, which names
	// the connection, is not compared), so that every reply is in RESP3.
	RESP3 bool
}

// Args splits an inline-quoted command into its arguments.
func Args(cmd string) []string {
	var args []string
	var cur strings.Builder
	inq, any := false, false
	for i := 0; i < len(cmd); i++ {
		c := cmd[i]
		switch {
		case inq && c == '\\' && i+1 < len(cmd):
			i++
			switch cmd[i] {
			case 'n':
				cur.WriteByte('\n')
			case 'r':
				cur.WriteByte('\r')
			case 't':
				cur.WriteByte('\t')
			case '0':
				cur.WriteByte(0)
			case 'x':
				v, _ := strconv.ParseUint(cmd[i+1:i+3], 16, 8)
				cur.WriteByte(byte(v))
				i += 2
			default:
				cur.WriteByte(cmd[i])
			}
		case c == '"':
			inq, any = !inq, true
		case c == ' ' && !inq:
			if cur.Len() > 0 || any {
				args = append(args, cur.String())
				cur.Reset()
				any = false
			}
		default:
			cur.WriteByte(c)
		}
	}
	if cur.Len() > 0 || any {
		args = append(args, cur.String())
	}
	return args
}

// RedisPy is a short script of every command family psp serves, run by
// Debian's python3 with python3-redis (redis-py): python3 - HOST PORT.
//
//go:embed redispy.py
var RedisPy []byte

// RunRedisPy runs RedisPy against addr with /usr/bin/python3 (the
// interpreter python3-redis is installed for) and fails the test unless
// every check passes; it skips (fails in CI) without python3-redis.
func RunRedisPy(tb testing.TB, addr string) {
	tb.Helper()
	out, err := testenv.DebianPython(tb, "python3-redis", "redis", RedisPy, addr)
	if err != nil || !bytes.Equal(bytes.TrimSpace(out), []byte("ok")) {
		tb.Fatalf("redis-py against %s: %v\n%s", addr, err, out)
	}
}

// RedisPyPubSub is redis-py's pub/sub (get_message, run_in_thread,
// PUBSUB's introspection) in a script run as RedisPy is.
//
//go:embed redispy_pubsub.py
var RedisPyPubSub []byte

// RunRedisPyPubSub runs RedisPyPubSub against addr as RunRedisPy runs
// RedisPy.
func RunRedisPyPubSub(tb testing.TB, addr string) {
	tb.Helper()
	out, err := testenv.DebianPython(tb, "python3-redis", "redis", RedisPyPubSub, addr)
	if err != nil || !bytes.Equal(bytes.TrimSpace(out), []byte("ok")) {
		tb.Fatalf("redis-py pub/sub against %s: %v\n%s", addr, err, out)
	}
}

// SortedReply sorts the elements of an array reply (nested arrays as
// wholes, a SCAN reply's keys), for replies whose order redis-server
// leaves to its hash tables.
func SortedReply(p []byte) []byte {
	if len(p) == 0 || (p[0] != '*' && p[0] != '~') {
		return p
	}
	r := bufio.NewReader(bytes.NewReader(p))
	head, _ := r.ReadBytes('\n')
	var elems [][]byte
	for {
		e, err := ReadReply(r)
		if err != nil {
			break
		}
		elems = append(elems, SortedReply(e))
	}
	if strings.HasPrefix(string(head), "*2") && len(elems) == 2 && elems[1][0] == '*' {
		return append(append(head, elems[0]...), elems[1]...) // SCAN: cursor, keys
	}
	slices.SortFunc(elems, bytes.Compare)
	return append(head, bytes.Join(elems, nil)...)
}

// Other and Pause begin the lines of TwoClientCases' Commands that are
// sent on the second connection, and that pause (see Case.Commands).
const (
	Other = "2> "
	Pause = "pause "
)

// Compare sends case c's commands to redis-server at real and to psp at
// psp, each on a fresh connection after FLUSHALL, and fails the test at
// each reply that is not byte for byte redis-server's.
func Compare(t *testing.T, real, psp string, c Case) {
	t.Helper()
	var conns, others [2]*Conn
	dial := func(addr string) *Conn {
		conn, err := Dial(addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		if c.RESP3 {
			if hello, err := conn.Do("HELLO", "3"); err != nil || len(hello) == 0 || hello[0] != '%' {
				t.Fatalf("HELLO 3 on %s: %q, %v", addr, hello, err)
			}
		}
		return conn
	}
	for i, addr := range []string{real, psp} {
		conns[i] = dial(addr)
		if _, err := conns[i].Do("FLUSHALL"); err != nil {
			t.Fatalf("FLUSHALL on %s: %v", addr, err)
		}
	}
	for i, line := range c.Commands {
		if ms, ok := strings.CutPrefix(line, Pause); ok {
			n, err := strconv.Atoi(ms)
			if err != nil {
				t.Fatalf("%q: %v", line, err)
			}
			time.Sleep(time.Duration(n) * time.Millisecond)
			continue
		}
		on, cmd := conns, line
		if rest, ok := strings.CutPrefix(line, Other); ok {
			if others[0] == nil {
				others[0], others[1] = dial(real), dial(psp)
			}
			on, cmd = others, rest
		}
		args := Args(cmd)
		want, err := on[0].Do(args...)
		if err != nil {
			t.Fatalf("%s: redis-server: %v", line, err)
		}
		got, err := on[1].Do(args...)
		if err != nil {
			t.Fatalf("%s: psp: %v (got %q, redis-server %q)", line, err, got, want)
		}
		if c.Unordered {
			got, want = SortedReply(got), SortedReply(want)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s (command %d, after %q):\npsp:          %q\nredis-server: %q",
				line, i, c.Commands[max(i-3, 0):i], got, want)
		}
	}
}
