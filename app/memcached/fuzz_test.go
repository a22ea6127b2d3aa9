package memcached

import (
	"io"
	"net"
	"strings"
	"testing"
	"time"

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

// FuzzTCP feeds an arbitrary byte stream to a TCP connection: the server
// must never panic, and must finish the connection once the client stops.
func FuzzTCP(f *testing.F) {
	for _, c := range memcachedtest.Cases {
		for _, r := range c.Requests {
			if len(r.Body) < 4096 {
				f.Add([]byte(r.Body))
			}
		}
	}
	f.Add([]byte("set a 0 0 5000000\r\nabc"))
	srv, err := Open(Config{MaxItemSize: 4096})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { srv.Close() })
	f.Fuzz(func(t *testing.T, in []byte) {
		client, conn := net.Pipe()
		done := make(chan struct{})
		go func() {
			srv.serveConn(conn, new(tcpConn))
			conn.Close()
			close(done)
		}()
		go io.Copy(io.Discard, client) // the replies
		client.SetWriteDeadline(time.Now().Add(5 * time.Second))
		client.Write(in) // fails when the server closes first: fine
		client.Close()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("connection not finished after %q", in)
		}
	})
}
