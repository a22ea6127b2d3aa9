package accept

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

func TestClassify(t *testing.T) {
	op := func(errno syscall.Errno) error {
		return &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", errno)}
	}
	for _, tc := range []struct {
		err  error
		want Class
	}{
		{op(syscall.EMFILE), Exhausted},
		{op(syscall.ENFILE), Exhausted},
		{op(syscall.ENOBUFS), Exhausted},
		{op(syscall.ENOMEM), Exhausted},
		{syscall.EMFILE, Exhausted},
		{op(syscall.ECONNABORTED), Aborted},
		{op(syscall.EPROTO), Aborted},
		{op(syscall.ENETUNREACH), Aborted},
		{op(syscall.EPERM), Aborted},
		{op(syscall.EINTR), Aborted},
		{op(syscall.EBADF), Fatal},
		{op(syscall.EINVAL), Fatal},
		{op(syscall.ENOTSOCK), Fatal},
		{&net.OpError{Op: "accept", Err: net.ErrClosed}, Closed},
		{net.ErrClosed, Closed},
		{errors.New("something else"), Fatal},
		{fmt.Errorf("wrapped: %w", op(syscall.ENFILE)), Exhausted},
	} {
		if got := Classify(tc.err); got != tc.want {
			t.Errorf("Classify(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

func TestLoopPausesGrowAndLogOncePerBurst(t *testing.T) {
	var log bytes.Buffer
	l := NewLoop(Options{Name: "test", Log: &log, MinPause: time.Millisecond, MaxPause: 8 * time.Millisecond})
	emfile := os.NewSyscallError("accept4", syscall.EMFILE)
	var pauses []time.Duration
	for range 6 {
		p, err := l.Failed(emfile)
		if err != nil {
			t.Fatalf("Failed(EMFILE) stops the loop: %v", err)
		}
		pauses = append(pauses, p)
	}
	want := []time.Duration{1, 2, 4, 8, 8, 8}
	for i := range want {
		if pauses[i] != want[i]*time.Millisecond {
			t.Fatalf("pauses %v, want %v ms", pauses, want)
		}
	}
	if n := strings.Count(log.String(), "\n"); n != 1 {
		t.Errorf("%d log lines for one burst, want 1:\n%s", n, log.String())
	}
	if p, err := l.Failed(os.NewSyscallError("accept4", syscall.ECONNABORTED)); p != 0 || err != nil {
		t.Errorf("Failed(ECONNABORTED) = %v, %v; want no pause and go on", p, err)
	}
	l.Accepted()
	if !strings.Contains(log.String(), "recovered after 6 errors") {
		t.Errorf("no recovery line after the burst:\n%s", log.String())
	}
	// A new burst starts from the shortest pause again, with its own line.
	if p, _ := l.Failed(emfile); p != time.Millisecond {
		t.Errorf("first pause of a new burst %v, want 1ms", p)
	}
	if n := strings.Count(log.String(), "\n"); n != 3 {
		t.Errorf("%d log lines after two bursts, want 3:\n%s", n, log.String())
	}
	c := l.Counts()
	if c.Exhausted != 7 || c.Aborted != 1 || c.Bursts != 2 || c.Accepted != 1 {
		t.Errorf("counts %+v, want 7 exhausted, 1 aborted, 2 bursts, 1 accepted", c)
	}
	if _, err := l.Failed(os.NewSyscallError("accept4", syscall.EBADF)); err == nil || !errors.Is(err, syscall.EBADF) {
		t.Errorf("Failed(EBADF) = %v, want a fatal error wrapping EBADF", err)
	}
	if _, err := l.Failed(net.ErrClosed); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Failed(ErrClosed) = %v, want net.ErrClosed", err)
	}
}

// scripted is a listener whose Accept returns errs in turn, then accepts
// from the real listener.
type scripted struct {
	net.Listener
	mu   sync.Mutex
	errs []error
}

func (s *scripted) Accept() (net.Conn, error) {
	s.mu.Lock()
	if len(s.errs) > 0 {
		err := s.errs[0]
		s.errs = s.errs[1:]
		s.mu.Unlock()
		return nil, err
	}
	s.mu.Unlock()
	return s.Listener.Accept()
}

func listen(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

func TestListenerRetriesTemporaryErrors(t *testing.T) {
	for _, errno := range []syscall.Errno{syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM, syscall.ECONNABORTED} {
		t.Run(errno.Error(), func(t *testing.T) {
			raw := listen(t)
			errs := make([]error, 5)
			for i := range errs {
				errs[i] = &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", errno)}
			}
			var log bytes.Buffer
			ln := NewListener(&scripted{Listener: raw, errs: errs}, NewLoop(Options{Name: "t", Log: &syncWriter{w: &log}, MinPause: time.Millisecond}), 0)
			go func() {
				if c, err := net.Dial("tcp", raw.Addr().String()); err == nil {
					defer c.Close()
					time.Sleep(time.Second)
				}
			}()
			c, err := ln.Accept()
			if err != nil {
				t.Fatalf("Accept after five %v: %v", errno, err)
			}
			c.Close()
			if got := ln.Loop().Counts(); got.Accepted != 1 || got.Aborted+got.Exhausted != 5 {
				t.Errorf("counts %+v, want 1 accepted after 5 errors", got)
			}
		})
	}
}

func TestListenerFatalErrorAndClose(t *testing.T) {
	raw := listen(t)
	ln := NewListener(&scripted{Listener: raw, errs: []error{os.NewSyscallError("accept4", syscall.EINVAL)}}, NewLoop(Options{}), 0)
	if _, err := ln.Accept(); err == nil || !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("Accept = %v, want the fatal EINVAL", err)
	}
	// Close ends a pause at once.
	many := make([]error, 100)
	for i := range many {
		many[i] = os.NewSyscallError("accept4", syscall.EMFILE)
	}
	ln = NewListener(&scripted{Listener: listen(t), errs: many}, NewLoop(Options{MinPause: time.Second, MaxPause: time.Minute}), 0)
	done := make(chan error)
	go func() { _, err := ln.Accept(); done <- err }()
	time.Sleep(50 * time.Millisecond)
	start := time.Now()
	ln.Close()
	select {
	case err := <-done:
		if !errors.Is(err, net.ErrClosed) {
			t.Errorf("Accept after Close = %v, want net.ErrClosed", err)
		}
		if d := time.Since(start); d > 500*time.Millisecond {
			t.Errorf("Close took %v to end a pause", d)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not end Accept's pause")
	}
}

func TestListenerCapsOpenConnections(t *testing.T) {
	raw := listen(t)
	ln := NewListener(raw, NewLoop(Options{}), 3)
	var served []net.Conn
	accepted := make(chan net.Conn)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				close(accepted)
				return
			}
			accepted <- c
		}
	}()
	var clients []net.Conn
	dial := func() net.Conn {
		c, err := net.Dial("tcp", raw.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		clients = append(clients, c)
		return c
	}
	defer func() {
		for _, c := range clients {
			c.Close()
		}
	}()
	for range 3 {
		dial()
		served = append(served, <-accepted)
	}
	// Past the cap: accepted and closed at once (the client reads EOF).
	for range 4 {
		c := dial()
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Read(make([]byte, 1)); err == nil {
			t.Fatal("a connection past the cap was served")
		} else if errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatal("a connection past the cap was left hanging")
		}
	}
	if got := ln.Loop().Counts().Refused; got != 4 {
		t.Errorf("refused %d, want 4", got)
	}
	if ln.Open() != 3 {
		t.Errorf("open %d, want 3", ln.Open())
	}
	// One closed (twice: counted once) makes room for one more.
	served[0].Close()
	served[0].Close()
	dial()
	select {
	case c := <-accepted:
		served = append(served, c)
	case <-time.After(5 * time.Second):
		t.Fatal("no connection accepted after one closed")
	}
	if ln.Open() != 3 {
		t.Errorf("open %d, want 3", ln.Open())
	}
	ln.Close()
	for _, c := range served {
		c.Close()
	}
	if ln.Open() != 0 {
		t.Errorf("open %d after every connection closed", ln.Open())
	}
}

// syncWriter serialises writes for the race detector.
type syncWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// fakeListener hands out one end of a pipe per address sent on next, with
// that remote address.
type fakeListener struct {
	next   chan string
	closed chan struct{}
}

type addrConn struct {
	net.Conn
	remote net.Addr
}

func (c addrConn) RemoteAddr() net.Addr { return c.remote }

func (f *fakeListener) Accept() (net.Conn, error) {
	select {
	case a := <-f.next:
		c, peer := net.Pipe()
		go func() { io.Copy(io.Discard, peer) }()
		return addrConn{c, net.TCPAddrFromAddrPort(netip.MustParseAddrPort(a))}, nil
	case <-f.closed:
		return nil, net.ErrClosed
	}
}
func (f *fakeListener) Close() error   { close(f.closed); return nil }
func (f *fakeListener) Addr() net.Addr { return &net.TCPAddr{} }

// TestListenerSharePerSource: one source holds at most its share of the
// connections (an IPv6 /64 counts as one source, an IPv4-mapped address
// as its IPv4 one), others are served beside it, a closed connection
// frees its place, and loopback clients are not bounded by it.
func TestListenerSharePerSource(t *testing.T) {
	raw := &fakeListener{next: make(chan string), closed: make(chan struct{})}
	ln := NewListener(raw, NewLoop(Options{}), 100)
	ln.SetPerSource(2)
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	// connect reports whether a connection from addr is served.
	connect := func(addr string) net.Conn {
		refused := ln.Loop().Counts().Refused
		raw.next <- addr
		for {
			select {
			case c := <-accepted:
				return c
			case <-time.After(time.Millisecond):
				if ln.Loop().Counts().Refused > refused {
					return nil
				}
			}
		}
	}
	for _, tc := range []struct {
		addrs  []string
		served int
	}{
		{[]string{"198.51.100.7:1", "198.51.100.7:2", "198.51.100.7:3", "[::ffff:198.51.100.7]:4"}, 2},
		{[]string{"[2001:db8::1]:1", "[2001:db8::2]:1", "[2001:db8::ffff:3]:1"}, 2},
		{[]string{"198.51.100.8:1", "[2001:db8:0:1::1]:1"}, 2},
		{[]string{"127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3", "[::1]:1", "[::1]:2", "[::1]:3"}, 6},
	} {
		var served []net.Conn
		for _, a := range tc.addrs {
			if c := connect(a); c != nil {
				served = append(served, c)
			}
		}
		if len(served) != tc.served {
			t.Errorf("%v: %d served, want %d", tc.addrs, len(served), tc.served)
		}
	}
	if got, want := ln.Loop().Counts().Refused, uint64(3); got != want {
		t.Errorf("refused %d, want %d", got, want)
	}
	// A closed connection frees its source's place (once).
	a := connect("203.0.113.1:1")
	if connect("203.0.113.1:2") == nil || connect("203.0.113.1:3") != nil {
		t.Fatal("203.0.113.1: want two served, the third refused")
	}
	a.Close()
	a.Close()
	if connect("203.0.113.1:4") == nil {
		t.Error("a place freed by a closed connection was not given again")
	}
	if connect("203.0.113.1:5") != nil {
		t.Error("a connection closed twice freed two places")
	}
}
