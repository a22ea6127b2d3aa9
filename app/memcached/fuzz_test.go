package memcached

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/persephone-go/psp/app"
	"github.com/persephone-go/psp/nic"

	"github.com/persephone-go/psp/app/memcached/memcachedtest"
)

// FuzzServe feeds arbitrary request bodies to a worker: it must never
// panic, every datagram must be well framed, the store must keep working
// afterwards, and the request, shed, must get an "overloaded" reply
// exactly when serving it answered something (within what wantsReply
// reads).
func FuzzServe(f *testing.F) {
	for _, c := range memcachedtest.Cases {
		for _, r := range c.Requests {
			if len(r.Body) < 4096 {
				f.Add([]byte(r.Body))
			}
		}
	}
	f.Add([]byte("get " + strings.Repeat("k ", 40) + "\r\n"))
	f.Add([]byte("set a 0 0 5\r\nab"))
	f.Add([]byte("incr a 1\r\ndecr a 99999999999999999999\r\n"))
	for _, c := range shedCases {
		if len(c.datagram) > UDPHeaderLen {
			f.Add(c.datagram[UDPHeaderLen:])
		}
	}
	srv, err := Open(Config{MaxItemSize: 4096})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { srv.Close() })
	// A server with a tight reply bound: every reply stays within it, in
	// whole messages.
	tight, err := Open(Config{MaxItemSize: 4096, UDPReplyRatio: 2, UDPReplyFloor: UDPMaxPayload})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { tight.Close() })
	// Every exchange happens 31 days after the previous one, so that a
	// flush_all of the input (delayed by at most 30 days, or to a date)
	// is either in force or not when the probe runs, never in the same
	// second as its set.
	now := int64(1_700_000_000)
	srv.clock = func() int64 { return now }
	f.Fuzz(func(t *testing.T, body []byte) {
		now += 31 * 86400
		dgs := exchange(srv, 0, string(body))
		if shed := wantsReply(body); len(body) <= shedScan && shed != answered(dgs) {
			t.Fatalf("%q: shed reply %v, served reply %v", body, shed, answered(dgs))
		}
		for i, d := range dgs {
			h, ok := ParseFrameHeader(d)
			switch {
			case !ok || len(d) > UDPMaxPayload:
				t.Fatalf("datagram %d: %d bytes", i, len(d))
			case h.RequestID != 42 || h.Reserved != 0:
				t.Fatalf("datagram %d: header %+v", i, h)
			case h.Total == 0 && len(d) != UDPHeaderLen:
				t.Fatalf("datagram %d: total 0 with %d bytes", i, len(d))
			case h.Total != 0 && h.Seq >= h.Total:
				t.Fatalf("datagram %d: seq %d of %d", i, h.Seq, h.Total)
			}
		}
		req := AppendRequest(nil, 42, body)
		cut := handle(tight, req)
		if n, limit := replyBytes(cut), tight.udpLimit(len(req)); n > limit || !wholeMessages(cut) {
			t.Fatalf("%q: %d bytes in %d datagrams (whole messages: %v), bound %d", body, n, len(cut), wholeMessages(cut), limit)
		}
		now += 31 * 86400
		if got := text(exchange(srv, 0, "set __probe 0 0 2\r\nok\r\nget __probe\r\n")); got != "STORED\r\nVALUE __probe 0 2\r\nok\r\nEND\r\n" {
			t.Fatalf("store broken after %q: %q", body, got)
		}
	})
}

// FuzzClassify: the classifier never panics and answers a known type.
func FuzzClassify(f *testing.F) {
	for _, c := range memcachedtest.Cases {
		for i, r := range c.Requests {
			f.Add(r.Datagram(uint16(i)))
		}
	}
	f.Fuzz(func(t *testing.T, p []byte) {
		if typ := Classify(p); typ >= NumTypes {
			t.Fatalf("type %d for %q", typ, p)
		}
	})
}

// FuzzStream feeds an arbitrary byte stream, cut in arbitrary pieces, to
// a connection's framer and serves every command it frames, as the TCP
// dataplane and a worker would: nothing panics, every request lies within
// the input, every reply within its buffer, and the memory a value held
// while it arrived is given back.
func FuzzStream(f *testing.F) {
	for _, c := range memcachedtest.Cases {
		for _, r := range c.Requests {
			if len(r.Body) < 4096 {
				f.Add([]byte(r.Body), uint16(7))
			}
		}
	}
	f.Add([]byte("set a 0 0 5000000\r\nabc"), uint16(3))
	f.Add([]byte("set a 0 0 20000\r\n"+strings.Repeat("v", 20000)+"\r\nget a\r\n"), uint16(1000))
	srv, err := Open(Config{MaxItemSize: 32 << 10, TCPMemory: 30000})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { srv.Close() })
	f.Fuzz(func(t *testing.T, in []byte, piece uint16) {
		step := int(piece%512) + 1
		fr := srv.Protocol().NewConn(1, netip.AddrPort{})
		var pending []byte
		skip := 0
		reply := &fakeReply{}
		defer func() {
			fr.(nic.ConnCloser).ConnClosed()
			if held := srv.guards.memHeld.Load(); held != 0 {
				t.Fatalf("%d bytes of TCP memory held after the connection closed", held)
			}
		}()
		for off := 0; off < len(in); off += step {
			pending = append(pending, in[off:min(off+step, len(in))]...)
			for {
				if skip > 0 {
					k := min(skip, len(pending))
					pending, skip = pending[k:], skip-k
					if skip > 0 {
						break
					}
				}
				fm := fr.Frame(pending, 1<<20)
				switch fm.Kind {
				case nic.FrameRequest:
					if fm.Len <= 0 || fm.Len > len(pending) {
						t.Fatalf("request of %d bytes in %d", fm.Len, len(pending))
					}
					b := &nic.Buffer{Data: make([]byte, max(4096, fm.Len)), Flags: nic.FromStream}
					b.Len = copy(b.Data, pending[:fm.Len])
					srv.HandleMulti(0, Classify(b.Payload()), b, reply)
					if b.Len < 0 || b.Len > len(b.Data) {
						t.Fatalf("reply of %d bytes in a buffer of %d", b.Len, len(b.Data))
					}
					pending = pending[fm.Len:]
					continue
				case nic.FrameSkip:
					skip = fm.Len
					continue
				case nic.FrameClose:
					return
				}
				break
			}
		}
	})
}

// fakeReply collects the leading parts of a reply.
type fakeReply struct{ parts int }

func (r *fakeReply) Send(p []byte) error {
	if len(p) > r.Room() {
		return app.ErrReplyTooLong
	}
	r.parts++
	return nil
}
func (r *fakeReply) Room() int          { return 4096 }
func (r *fakeReply) NoReply()           {}
func (r *fakeReply) Park(time.Duration) {}
