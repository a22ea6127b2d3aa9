//go:build linux

package tcp_test

import (
	"bufio"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/persephone-go/psp/internal/testenv"
	"github.com/persephone-go/psp/nic"
	"github.com/persephone-go/psp/nic/nictest"
	"github.com/persephone-go/psp/nic/tcp"
)

// benchClients runs conns closed-loop clients against addr, each sending
// a 16-byte request and waiting for its 16-byte reply, b.N requests in
// all.
func benchClients(b *testing.B, addr string, conns int) {
	b.Helper()
	var wg sync.WaitGroup
	per := b.N/conns + 1
	b.ResetTimer()
	for range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := net.Dial("tcp", addr)
			if err != nil {
				b.Error(err)
				return
			}
			defer c.Close()
			req := []byte("0123456789abcde\n")
			reply := make([]byte, len(req))
			for range per {
				if _, err := c.Write(req); err != nil {
					b.Error(err)
					return
				}
				if _, err := io.ReadFull(c, reply); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// BenchmarkEchoTCP: 16 closed-loop connections echoed by the dataplane's
// receive loop (Recv, then Send on one TX queue), against Go's own
// goroutine-per-connection echo server in the same run (BenchmarkEchoTCP/go).
func BenchmarkEchoTCP(b *testing.B) {
	const conns = 16
	b.Run("dataplane", func(b *testing.B) {
		dp := open(b, tcp.Config{})
		done := make(chan struct{})
		go nictest.Echo(dp, done, 5*time.Millisecond, 0)
		benchClients(b, dp.Addr().String(), conns)
		close(done)
	})
	b.Run("go", func(b *testing.B) {
		addr := testenv.TCPServer(b, func(c net.Conn) {
			buf := make([]byte, 16)
			for {
				if _, err := io.ReadFull(c, buf); err != nil {
					return
				}
				c.Write(buf)
			}
		})
		benchClients(b, addr, conns)
	})
}

// BenchmarkLongReply: one connection asks for replies of 64 parts, each
// part an AllocReply buffer (nic.Reply's path for a reply longer than a
// buffer: KEYS, LRANGE, a large GET), from a pool of 8,192 buffers (psp
// serve --app redis's default). A part's cost must not grow with the
// pool.
func BenchmarkLongReply(b *testing.B) {
	const parts = 64
	dp := open(b, tcp.Config{Workers: 1, Buffers: 8192})
	serve(b, dp, 1, func(w int, req *nic.Buffer) bool {
		out := make([]*nic.Buffer, 0, parts)
		for range parts {
			p := dp.AllocReply(req)
			if p == nil {
				break
			}
			p.Len = copy(p.Data, "part ")
			out = append(out, p)
		}
		dp.TxQueue(w).Send(out)
		req.Len = copy(req.Data, "end\n")
		return true
	})
	c, err := net.Dial("tcp", dp.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	want := strings.Repeat("part ", parts) + "end\n"
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := io.WriteString(c, "go\n"); err != nil {
			b.Fatal(err)
		}
		line, err := r.ReadString('\n')
		if err != nil || line != want {
			b.Fatalf("reply %q, %v", line, err)
		}
	}
}
