package memcached

import (
	"fmt"
	"strings"
	"testing"
)

// discard takes datagrams and drops them.
type discard struct{}

func (discard) Send([]byte) error { return nil }

// preload stores keys k0..k(n-1) with size-byte values.
func preload(tb testing.TB, srv *Server, n, size int) {
	tb.Helper()
	v := strings.Repeat("v", size)
	for i := range n {
		body := fmt.Sprintf("set k%d 0 0 %d\r\n%s\r\n", i, size, v)
		if got := text(exchange(srv, 0, body)); got != "STORED\r\n" {
			tb.Fatalf("preload: %q", got)
		}
	}
}

// run serves body on worker 0 with the datagrams discarded, under the
// reply limit HandleMulti sets.
func run(srv *Server, body []byte) {
	ss := srv.sessions[0]
	ss.dg.reset(1, discard{})
	ss.dg.limit = srv.udpLimit(UDPHeaderLen + len(body))
	ss.serve(body)
}

func multiGet(n int) []byte {
	var b strings.Builder
	b.WriteString("get")
	for i := range n {
		fmt.Fprintf(&b, " k%d", i)
	}
	b.WriteString("\r\n")
	return []byte(b.String())
}

func benchRequests(b *testing.B, body []byte) {
	srv := openServer(b, Config{})
	preload(b, srv, 1000, 64)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		run(srv, body)
	}
}

// BenchmarkGet: a single-key get (hit, 64-byte value), framed into its
// datagram; ns per request in the application.
func BenchmarkGet(b *testing.B) { benchRequests(b, []byte("get k123\r\n")) }

// BenchmarkMultiGet100: a get of 100 keys (100 datagrams).
func BenchmarkMultiGet100(b *testing.B) { benchRequests(b, multiGet(100)) }

// BenchmarkSet: a set of a 64-byte value.
func BenchmarkSet(b *testing.B) {
	benchRequests(b, []byte("set k123 0 0 64\r\n"+strings.Repeat("w", 64)+"\r\n"))
}

// TestRequestsAllocateNothing: get, multi-get and set allocate nothing per
// request once a worker's buffers have grown.
func TestRequestsAllocateNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes Pebble's pools allocate")
	}
	srv := openServer(t, Config{})
	preload(t, srv, 200, 64)
	for _, body := range [][]byte{
		[]byte("get k123\r\n"),
		[]byte("gets k1 k2 missing\r\n"),
		multiGet(100),
		[]byte("set k123 0 0 64\r\n" + strings.Repeat("w", 64) + "\r\n"),
		[]byte("incr missing 1\r\ndelete missing\r\n"),
	} {
		run(srv, body) // warm up
		if n := testing.AllocsPerRun(200, func() { run(srv, body) }); n != 0 {
			t.Errorf("%.40q: %.1f allocations per request, want 0", body, n)
		}
	}
}
