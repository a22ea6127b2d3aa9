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

func serveConn(srv *Server, f nic.Framer, c net.Conn, workers chan int) {
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
				c.Write(out)
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
					c.Write(out)
					return
				}
				continue
			}
			break
		}
		in = append([]byte(nil), in...)
		if len(out) > 0 {
			if _, err := c.Write(out); err != nil {
				return
			}
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
