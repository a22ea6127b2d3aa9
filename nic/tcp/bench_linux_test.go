//go:build linux

package tcp_test

import (
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/persephone-go/psp/internal/testenv"
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
