package memnic_test

import (
	"context"
	"encoding/binary"
	"errors"
	"net/netip"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/persephone-go/psp/nic"
	"github.com/persephone-go/psp/nic/memnic"
	"github.com/persephone-go/psp/nic/nictest"
	"github.com/persephone-go/psp/wire"
)

var client = netip.MustParseAddrPort("198.51.100.7:5555")

func TestConformance(t *testing.T) {
	nictest.Run(t, func(t *testing.T, workers int) nictest.Target {
		dp := memnic.New(memnic.Config{Workers: workers, Buffers: 64, BufSize: 512})
		return nictest.Target{
			DP:   dp,
			Send: func(p []byte) error { return injectOrFail(dp, p) },
			Recv: func(timeout time.Duration) ([]byte, error) {
				select {
				case r := <-dp.Replies():
					if r.Peer != client {
						return nil, errors.New("reply addressed to " + r.Peer.String())
					}
					return r.Payload, nil
				case <-time.After(timeout):
					return nil, errors.New("no reply")
				}
			},
			FreeBuffers: dp.FreeBuffers,
			BufSize:     512,
		}
	})
}

func injectOrFail(dp *memnic.Dataplane, p []byte) error {
	if !dp.Inject(p, client) {
		return errors.New("inject: no free buffer")
	}
	return nil
}

func TestConfigValidate(t *testing.T) {
	for name, c := range map[string]memnic.Config{
		"negative workers": {Workers: -1},
		"short generator":  {Generator: &memnic.Generator{Size: 8}},
		"huge generator":   {BufSize: 64, Generator: &memnic.Generator{Size: 65}},
		"negative rate":    {Generator: &memnic.Generator{Rate: -1}},
	} {
		if c.Validate() == nil {
			t.Errorf("%s: Validate accepted %+v", name, c)
		}
	}
	if err := (memnic.Config{}).Validate(); err != nil {
		t.Errorf("zero Config invalid: %v", err)
	}
}

func TestInjectDropsWhenPoolEmpty(t *testing.T) {
	dp := memnic.New(memnic.Config{Buffers: 4})
	defer dp.Close()
	n := dp.InjectBatch([][]byte{{1}, {2}, {3}, {4}, {5}, {6}}, client)
	if n != 4 {
		t.Fatalf("InjectBatch queued %d, want 4 (pool size)", n)
	}
	if s := dp.Stats(); s.RxDropped != 1 {
		t.Fatalf("RxDropped = %d, want 1", s.RxDropped)
	}
	bufs := make([]*nic.Buffer, 8)
	got, _ := dp.Recv(bufs, 0)
	if got != 4 || bufs[0].Payload()[0] != 1 || bufs[3].Payload()[0] != 4 {
		t.Fatalf("Recv = %d packets, first %v", got, bufs[0].Payload())
	}
	dp.Release(bufs[:got]...)
	if !dp.InjectPort([]byte{9}, client, 80) {
		t.Fatal("Inject failed after buffers were released")
	}
	if got, _ := dp.Recv(bufs, 0); got != 1 || bufs[0].DstPort != 80 {
		t.Fatalf("Recv after InjectPort: %d packets, port %d", got, bufs[0].DstPort)
	}
}

func TestRecvWakesOnInject(t *testing.T) {
	dp := memnic.New(memnic.Config{})
	defer dp.Close()
	go func() {
		time.Sleep(20 * time.Millisecond)
		dp.Inject([]byte("hello"), client)
	}()
	bufs := make([]*nic.Buffer, 4)
	n, err := dp.Recv(bufs, time.Minute) // returns as soon as the packet comes
	if n != 1 || err != nil || string(bufs[0].Payload()) != "hello" {
		t.Fatalf("Recv = %d, %v", n, err)
	}
}

func TestCloseReturnsQueuedBuffers(t *testing.T) {
	dp := memnic.New(memnic.Config{Buffers: 8})
	dp.InjectBatch([][]byte{{1}, {2}, {3}}, client)
	dp.Close()
	if dp.FreeBuffers() != 8 {
		t.Fatalf("FreeBuffers = %d after Close, want 8", dp.FreeBuffers())
	}
	if dp.Inject([]byte{1}, client) {
		t.Fatal("Inject after Close succeeded")
	}
}

func TestGeneratorCountAndMix(t *testing.T) {
	headers := []wire.Header{{Type: wire.TypeShort, ServiceNs: 500}, {Type: wire.TypeLong, ServiceNs: 500000}}
	dp := memnic.New(memnic.Config{Buffers: 16, Generator: &memnic.Generator{Headers: headers, Count: 10, Size: 24}})
	defer dp.Close()
	bufs := make([]*nic.Buffer, 4)
	var ids []uint32
	for len(ids) < 10 {
		n, err := dp.Recv(bufs, 0)
		if err != nil || n == 0 {
			t.Fatalf("Recv = %d, %v after %d packets", n, err, len(ids))
		}
		for _, b := range bufs[:n] {
			h, err := wire.Decode(b.Payload())
			if err != nil || b.Len != 24 {
				t.Fatalf("generated packet len %d: %v", b.Len, err)
			}
			want := headers[len(ids)%2]
			if h.Type != want.Type || h.ServiceNs != want.ServiceNs {
				t.Fatalf("packet %d is %+v, want type %d", len(ids), h, want.Type)
			}
			ids = append(ids, h.ID)
		}
		if _, err := dp.TxQueue(0).Send(bufs[:n]); err != nil {
			t.Fatal(err)
		}
	}
	for i, id := range ids {
		if id != uint32(i+1) {
			t.Fatalf("ids %v are not 1..10", ids)
		}
	}
	if n, _ := dp.Recv(bufs, 10*time.Millisecond); n != 0 {
		t.Fatalf("generator produced %d packets past Count", n)
	}
	if dp.Generated() != 10 || dp.Replied() != 10 || len(dp.Replies()) != 0 {
		t.Fatalf("Generated %d Replied %d stored %d", dp.Generated(), dp.Replied(), len(dp.Replies()))
	}
}

func TestGeneratorRate(t *testing.T) {
	// 2000 packets/s for 50 ms is about 100 packets; a paced generator must
	// not produce them all at once.
	dp := memnic.New(memnic.Config{Generator: &memnic.Generator{Rate: 2000}})
	defer dp.Close()
	bufs := make([]*nic.Buffer, 64)
	start := time.Now() // before the generator's clock starts at the first Recv
	n, _ := dp.Recv(bufs, 0)
	if n > 2 {
		t.Fatalf("paced generator produced a burst of %d at start", n)
	}
	dp.Release(bufs[:n]...)
	total := n
	for time.Since(start) < 50*time.Millisecond {
		k, _ := dp.Recv(bufs, 5*time.Millisecond)
		dp.Release(bufs[:k]...)
		total += k
	}
	elapsed := time.Since(start)
	if limit := int(elapsed.Seconds()*2000) + 2; total > limit {
		t.Fatalf("produced %d packets in %v at 2000/s (more than %d)", total, elapsed, limit)
	}
	if total == 0 {
		t.Fatal("paced generator produced nothing")
	}
}

func TestOnReply(t *testing.T) {
	var mu sync.Mutex
	got := map[int]int{}
	dp := memnic.New(memnic.Config{Workers: 2, OnReply: func(w int, b *nic.Buffer) {
		mu.Lock()
		got[w] += int(b.Payload()[0])
		mu.Unlock()
	}})
	defer dp.Close()
	dp.InjectBatch([][]byte{{3}, {4}}, client)
	bufs := make([]*nic.Buffer, 2)
	if n, _ := dp.Recv(bufs, 0); n != 2 {
		t.Fatal("Recv failed")
	}
	dp.TxQueue(0).Send(bufs[:1])
	dp.TxQueue(1).Send(bufs[1:])
	if got[0] != 3 || got[1] != 4 || len(dp.Replies()) != 0 {
		t.Fatalf("OnReply saw %v", got)
	}
}

func TestFeed(t *testing.T) {
	dp := memnic.New(memnic.Config{Buffers: 256})
	defer dp.Close()
	payload := make([]byte, 16)
	sent, dropped := dp.Feed(context.Background(), 0, 100, func(seq int) ([]byte, netip.AddrPort) {
		binary.LittleEndian.PutUint32(payload, uint32(seq))
		return payload, netip.AddrPort{}
	})
	if sent != 100 || dropped != 0 {
		t.Fatalf("Feed sent %d dropped %d", sent, dropped)
	}
	bufs := make([]*nic.Buffer, 128)
	n, _ := dp.Recv(bufs, 0)
	if n != 100 || bufs[99].Peer != netip.MustParseAddrPort("192.0.2.1:40000") || binary.LittleEndian.Uint32(bufs[99].Payload()) != 99 {
		t.Fatalf("Recv got %d packets", n)
	}
}

func TestFeedPaces(t *testing.T) {
	dp := memnic.New(memnic.Config{Buffers: 64})
	defer dp.Close()
	start := time.Now()
	sent, dropped := dp.Feed(context.Background(), 20000, 50, func(int) ([]byte, netip.AddrPort) {
		return []byte{1}, client
	})
	// The 50th packet is due 49/20000 s after the first: pacing cannot be
	// faster than that (it may be slower on a busy machine).
	if elapsed := time.Since(start); sent != 50 || dropped != 0 || elapsed < 49*time.Second/20000 {
		t.Fatalf("Feed at 20000/s: sent %d dropped %d in %v", sent, dropped, elapsed)
	}
}

func TestHotPathsAllocateNothing(t *testing.T) {
	dp := memnic.New(memnic.Config{DiscardReplies: true})
	defer dp.Close()
	bufs := make([]*nic.Buffer, 32)
	payload := make([]byte, 64)
	tx := dp.TxQueue(0)
	if a := testing.AllocsPerRun(200, func() {
		for i := 0; i < 32; i++ {
			dp.Inject(payload, client)
		}
		n, _ := dp.Recv(bufs, 0)
		tx.Send(bufs[:n])
	}); a != 0 {
		t.Fatalf("Inject+Recv+Send allocated %.1f times per burst", a)
	}
	gen := memnic.New(memnic.Config{Generator: &memnic.Generator{}})
	defer gen.Close()
	if a := testing.AllocsPerRun(200, func() {
		n, _ := gen.Recv(bufs, 0)
		gen.TxQueue(0).Send(bufs[:n])
	}); a != 0 {
		t.Fatalf("generator Recv+Send allocated %.1f times per burst", a)
	}
}

// BenchmarkGenerator measures the generator's Recv plus a Send of every
// packet: the dataplane's cost per packet in a dispatcher benchmark.
func BenchmarkGenerator(b *testing.B) {
	dp := memnic.New(memnic.Config{Generator: &memnic.Generator{}})
	defer dp.Close()
	bufs := make([]*nic.Buffer, 32)
	tx := dp.TxQueue(0)
	b.ReportAllocs()
	for b.Loop() {
		n, _ := dp.Recv(bufs, 0)
		tx.Send(bufs[:n])
	}
	b.ReportMetric(float64(dp.Generated())/b.Elapsed().Seconds()/1e6, "Mpps")
}

// BenchmarkInjector measures an injector goroutine feeding a net-worker
// goroutine that receives and replies; ns/op is per packet.
func BenchmarkInjector(b *testing.B) {
	if runtime.GOMAXPROCS(0) < 2 {
		b.Skip("needs GOMAXPROCS >= 2")
	}
	dp := memnic.New(memnic.Config{DiscardReplies: true})
	defer dp.Close()
	payload := make([]byte, wire.HeaderLen)
	done := make(chan struct{})
	go func() {
		defer close(done)
		bufs := make([]*nic.Buffer, 32)
		tx := dp.TxQueue(0)
		for {
			n, err := dp.Recv(bufs, time.Millisecond)
			if err != nil {
				return
			}
			tx.Send(bufs[:n])
		}
	}()
	b.ReportAllocs()
	sent := 0
	for b.Loop() {
		for !dp.Inject(payload, client) {
			runtime.Gosched() // pool empty: let the receiver catch up
		}
		sent++
	}
	b.StopTimer()
	dp.Close()
	<-done
	b.ReportMetric(float64(sent)/b.Elapsed().Seconds()/1e6, "Mpps")
}
