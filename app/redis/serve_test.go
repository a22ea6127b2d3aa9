package redis

import (
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/persephone-go/psp/app"
	"github.com/persephone-go/psp/nic"
)

// testReply is a app.Reply that collects a reply's leading chunks.
type testReply struct {
	room   int
	chunks [][]byte
	fail   bool
	// park: the handler parked the request, for parkAfter.
	park      bool
	parkAfter time.Duration
}

func (r *testReply) Send(p []byte) error {
	if r.fail {
		return app.ErrNoReplyBuffer
	}
	if len(p) > r.room {
		return app.ErrReplyTooLong
	}
	r.chunks = append(r.chunks, append([]byte(nil), p...))
	return nil
}
func (r *testReply) Room() int { return r.room }
func (r *testReply) NoReply()  {}
func (r *testReply) Park(after time.Duration) {
	r.park, r.parkAfter = true, after
}

// testRoom is the test dataplane's buffer size.
const testRoom = 4096

// testMaxRequest is the test dataplane's longest request.
const testMaxRequest = 64 << 20

// serveTest serves srv's protocol over TCP for a test: each connection
// on its own goroutine, framed with the server's framer, each request run
// at once by the handler on a worker of its own (no dispatcher, no
// pipelining across connections). It returns the address.
func serveTest(t testing.TB, srv *Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	workers := make(chan int, len(srv.workers))
	for i := range srv.workers {
		workers <- i
	}
	var ids atomic.Uint64
	var wg sync.WaitGroup
	t.Cleanup(wg.Wait)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				peer, _ := netip.ParseAddrPort(c.RemoteAddr().String())
				serveConn(srv, srv.NewConn(ids.Add(1), peer), c, workers)
			}()
		}
	}()
	return ln.Addr().String()
}

// testPusher is serveConn's nic.Pusher: a push while the connection's
// requests run waits for their replies (the serving goroutine writes it
// after them); one while the connection waits for input is written at
// once.
type testPusher struct {
	mu      sync.Mutex
	c       net.Conn
	busy    bool
	pending []byte
	closed  bool
}

func (p *testPusher) Push(b []byte) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.closed:
		return nic.ErrConnClosed
	case p.busy:
		p.pending = append(p.pending, b...)
	default:
		if _, err := p.c.Write(b); err != nil {
			return nic.ErrConnClosed
		}
	}
	return nil
}

// take appends the pushes pending to out, the replies so far: they
// came while the last request ran.
func (p *testPusher) take(out []byte) []byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	out = append(out, p.pending...)
	p.pending = p.pending[:0]
	return out
}

// write writes out and what was pushed meanwhile, and marks the
// connection idle (busy false) or busy.
func (p *testPusher) write(out []byte, busy bool) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	out = append(out, p.pending...)
	p.pending = p.pending[:0]
	p.busy = busy
	if len(out) == 0 {
		return nil
	}
	_, err := p.c.Write(out)
	return err
}

func serveConn(srv *Server, f nic.Framer, c net.Conn, workers chan int) {
	p := &testPusher{c: c}
	if pt, ok := f.(nic.PushTaker); ok {
		pt.TakePusher(p)
	}
	defer func() {
		p.mu.Lock()
		p.closed = true
		p.mu.Unlock()
		if cc, ok := f.(nic.ConnCloser); ok {
			cc.ConnClosed()
		}
	}()
	var in []byte
	buf := make([]byte, 64<<10)
	skip := 0
	for {
		n, err := c.Read(buf)
		if err != nil {
			return
		}
		data := buf[:n]
		if skip > 0 {
			d := min(skip, len(data))
			skip -= d
			data = data[d:]
		}
		in = append(in, data...)
		var out []byte
		p.mu.Lock()
		p.busy = true
		p.mu.Unlock()
		for len(in) > 0 {
			fr := f.Frame(in, testMaxRequest)
			switch fr.Kind {
			case nic.FrameMore:
			case nic.FrameSkip:
				out = append(out, fr.Reply...)
				d := min(fr.Len, len(in))
				skip = fr.Len - d
				in = in[d:]
				continue
			case nic.FrameClose:
				out = append(out, fr.Reply...)
				p.write(out, true)
				return
			case nic.FrameRequest:
				b := &nic.Buffer{Data: make([]byte, max(testRoom, fr.Len)), Flags: nic.FromStream, Session: f}
				b.Len = copy(b.Data, in[:fr.Len])
				in = in[fr.Len:]
				r := &testReply{room: testRoom}
				w := <-workers
				ok := srv.HandleMulti(w, 0, b, r)
				workers <- w
				if b.Flags&nic.ReplyDiscardHeld != 0 {
					out = out[:0] // the replies held since the last write
				}
				for _, ch := range r.chunks {
					out = append(out, ch...)
				}
				if ok {
					out = append(out, b.Payload()...)
				}
				if b.Flags&nic.ReplyClose != 0 {
					p.write(out, true)
					return
				}
				out = p.take(out)
				continue
			}
			break
		}
		in = append([]byte(nil), in...)
		if err := p.write(out, false); err != nil {
			return
		}
	}
}

// openTest opens a Server for a test and closes it at the end.
func openTest(t testing.TB, cfg Config) *Server {
	t.Helper()
	if cfg.Workers == 0 {
		cfg.Workers = 4
	}
	s, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}
