package memcached

import (
	"fmt"
	"math/rand/v2"
	"strconv"
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

// BenchmarkSetLarge: sets of 60,000-byte incompressible values (as large
// as a datagram takes) over a set of keys a quarter of the bound holds,
// under the default bound and the least: the store flushes its memtables
// and compacts what was overwritten. ns per set; refused/op counts the
// sets the bound refused.
func BenchmarkSetLarge(b *testing.B) {
	const size = 60000
	raw := make([]byte, 4<<20)
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range raw {
		raw[i] = byte(rng.Uint32())
	}
	for _, bound := range []int64{DefaultStoreMemory, MinStoreMemory} {
		b.Run(fmt.Sprintf("bound=%dMiB", bound>>20), func(b *testing.B) {
			srv := openServer(b, Config{StoreMemory: bound})
			keys := int(bound / 4 / size)
			var body []byte
			b.SetBytes(size)
			b.ResetTimer()
			for i := range b.N {
				off := rng.IntN(len(raw) - size)
				body = append(body[:0], "set k"...)
				body = strconv.AppendInt(body, int64(i%keys), 10)
				body = append(body, " 0 0 60000\r\n"...)
				body = append(body, raw[off:off+size]...)
				body = append(body, "\r\n"...)
				run(srv, body)
			}
			b.StopTimer()
			b.ReportMetric(float64(srv.st.lim.refused.Load())/float64(b.N), "refused/op")
		})
	}
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
	// Sets of new keys in a store that evicts one item for each: the
	// index's nodes and keys are reused.
	srv.st.itemBudget = srv.st.ix.bytes.Load()
	i := 0
	var body []byte
	value := strings.Repeat("w", 64)
	set := func() {
		body = append(body[:0], "set new"...)
		body = strconv.AppendInt(body, int64(i%5000), 10)
		body = append(body, " 0 0 64\r\n"...)
		body = append(body, value...)
		body = append(body, "\r\n"...)
		run(srv, body)
		i++
	}
	for range 20000 {
		set() // warm up: every key once, and the index's pages
	}
	if n := testing.AllocsPerRun(200, set); n != 0 {
		t.Errorf("sets of new keys, evicting: %.1f allocations per request, want 0", n)
	}
	if srv.st.ix.totals().evicted == 0 {
		t.Error("no item was evicted")
	}
}

// BenchmarkMemcaslapMix: memcaslap's default load as one worker serves it:
// keys drawn from a window of 10,000 (long keys, as memcaslap's), 1,024-byte
// values, nine gets for each set, the store preloaded with the window.
// ns per request in the application.
func BenchmarkMemcaslapMix(b *testing.B) {
	const window, size = 10000, 1024
	srv := openServer(b, Config{})
	v := strings.Repeat("v", size)
	key := func(i int) string { return fmt.Sprintf("%040d", i*7919) }
	sets, gets := make([][]byte, window), make([][]byte, window)
	for i := range window {
		sets[i] = fmt.Appendf(nil, "set %s 0 0 %d\r\n%s\r\n", key(i), size, v)
		gets[i] = fmt.Appendf(nil, "get %s\r\n", key(i))
		run(srv, sets[i])
	}
	rng := rand.New(rand.NewPCG(1, 2))
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		k := rng.IntN(window)
		if i%10 == 0 {
			run(srv, sets[k])
		} else {
			run(srv, gets[k])
		}
	}
}
