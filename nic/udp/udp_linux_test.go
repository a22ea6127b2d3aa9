//go:build linux

package udp_test

import (
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/ipv4"

	"github.com/persephone-go/psp/internal/testenv"
	"github.com/persephone-go/psp/nic"
	"github.com/persephone-go/psp/nic/nictest"
	"github.com/persephone-go/psp/nic/udp"
	"github.com/persephone-go/psp/wire"
)

func open(t testing.TB, cfg udp.Config) *udp.Dataplane {
	t.Helper()
	if cfg.Addr == "" {
		cfg.Addr = "127.0.0.1:0"
	}
	dp, err := udp.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dp.Close() })
	return dp
}

// dialClient returns a client socket connected to dp.
func dialClient(t testing.TB, dp *udp.Dataplane) *net.UDPConn {
	t.Helper()
	c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(dp.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// receiveOne opens a dataplane of 32 buffers and returns it with the one
// datagram a client sent it, received.
func receiveOne(t testing.TB) (*udp.Dataplane, []*nic.Buffer) {
	t.Helper()
	dp := open(t, udp.Config{Buffers: 32, Batch: 8})
	dialClient(t, dp).Write([]byte("x"))
	bufs := make([]*nic.Buffer, 1)
	if n, _ := dp.Recv(bufs, 5*time.Second); n != 1 {
		t.Fatal("no packet")
	}
	return dp, bufs
}

func TestConformance(t *testing.T) {
	for _, addr := range []string{"127.0.0.1:0", "[::1]:0"} {
		t.Run(addr, func(t *testing.T) {
			if addr == "[::1]:0" {
				if c, err := net.ListenPacket("udp6", addr); err != nil {
					testenv.Skip(t, "no IPv6 loopback: %v", err)
				} else {
					c.Close()
				}
			}
			nictest.Run(t, func(t *testing.T, workers int) nictest.Target {
				dp := open(t, udp.Config{Addr: addr, Workers: workers, Buffers: 64, BufSize: 512, Batch: 16})
				c := dialClient(t, dp)
				buf := make([]byte, 2048)
				return nictest.Target{
					DP: dp,
					Send: func(p []byte) error {
						_, err := c.Write(p)
						return err
					},
					Recv: func(timeout time.Duration) ([]byte, error) {
						c.SetReadDeadline(time.Now().Add(timeout))
						n, err := c.Read(buf)
						return append([]byte(nil), buf[:n]...), err
					},
					FreeBuffers: dp.FreeBuffers,
					BufSize:     512,
				}
			})
		})
	}
}

func TestDualStackRepliesToIPv4(t *testing.T) {
	dp, err := udp.Open(udp.Config{Addr: ":0", Buffers: 32, Batch: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer dp.Close()
	c, err := net.DialUDP("udp4", nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), dp.Addr().Port())))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write([]byte("ping"))
	bufs := make([]*nic.Buffer, 4)
	n, err := dp.Recv(bufs, 5*time.Second)
	if n != 1 || err != nil {
		t.Fatalf("Recv = %d, %v", n, err)
	}
	if !bufs[0].Peer.Addr().Is4() {
		t.Fatalf("IPv4 client seen as %v", bufs[0].Peer)
	}
	if sent, err := dp.TxQueue(0).Send(bufs[:1]); sent != 1 || err != nil {
		t.Fatalf("Send = %d, %v", sent, err)
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	got := make([]byte, 16)
	if k, err := c.Read(got); err != nil || string(got[:k]) != "ping" {
		t.Fatalf("client read %q, %v", got[:k], err)
	}
}

func TestSendToUnreachableFamilyCounted(t *testing.T) {
	dp, bufs := receiveOne(t)
	free := dp.FreeBuffers()
	bufs[0].Peer = netip.MustParseAddrPort("[2001:db8::1]:9") // IPv6 peer on an IPv4 socket
	n, err := dp.TxQueue(0).Send(bufs)
	if n != 0 || err == nil {
		t.Fatalf("Send to an IPv6 peer from an IPv4 socket = %d, %v", n, err)
	}
	if s := dp.Stats(); s.TxErrors != 1 || s.TxPackets != 0 {
		t.Fatalf("Stats TxErrors %d TxPackets %d", s.TxErrors, s.TxPackets)
	}
	if dp.FreeBuffers() != free+1 {
		t.Fatal("failed send did not return its buffer to the pool")
	}
}

func TestDefaultAddrUsesDefaultPort(t *testing.T) {
	if udp.DefaultAddr != ":"+strconv.Itoa(wire.DefaultPort) {
		t.Fatalf("DefaultAddr %q does not use wire.DefaultPort %d", udp.DefaultAddr, wire.DefaultPort)
	}
}

func TestConfigValidate(t *testing.T) {
	for _, c := range []udp.Config{{Workers: -1}, {BufSize: 70000}, {Batch: 2000}, {Buffers: 4, Batch: 8}, {ReadBuffer: -1}} {
		if _, err := udp.Open(c); err == nil {
			t.Errorf("Open accepted %+v", c)
		}
	}
	if _, err := udp.Open(udp.Config{Addr: "256.0.0.1:1"}); err == nil {
		t.Error("Open accepted a bad address")
	}
}

// TestNoRequestLostWithManyWorkers sends requests from many client sockets
// (different source ports, so any kernel load balancing would spread them)
// to a dataplane with several TX queues, and checks that the net worker
// receives every one and that each reply reaches the client that sent it.
func TestNoRequestLostWithManyWorkers(t *testing.T) {
	const workers, clients, perClient = 4, 16, 8
	dp := open(t, udp.Config{Workers: workers, Buffers: 256, Batch: 32})
	conns := make([]*net.UDPConn, clients)
	for i := range conns {
		conns[i] = dialClient(t, dp)
	}
	// Receive and echo on worker (id % workers), in the background.
	done := make(chan error, 1)
	go func() {
		bufs := make([]*nic.Buffer, 32)
		got := 0
		deadline := time.Now().Add(10 * time.Second)
		for got < clients*perClient {
			if time.Now().After(deadline) {
				done <- errors.New("net worker timed out")
				return
			}
			n, err := dp.Recv(bufs, 50*time.Millisecond)
			if err != nil {
				done <- err
				return
			}
			for _, b := range bufs[:n] {
				id := binary.LittleEndian.Uint32(b.Payload())
				dp.TxQueue(int(id) % workers).Send([]*nic.Buffer{b})
			}
			got += n
		}
		done <- nil
	}()
	for k := 0; k < perClient; k++ {
		for i, c := range conns {
			var p [8]byte
			binary.LittleEndian.PutUint32(p[:], uint32(k*clients+i))
			binary.LittleEndian.PutUint32(p[4:], uint32(i))
			if _, err := c.Write(p[:]); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i, c := range conns {
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		seen := map[uint32]bool{}
		for range perClient {
			var p [64]byte
			n, err := c.Read(p[:])
			if err != nil {
				t.Fatalf("client %d got %d of %d replies: %v", i, len(seen), perClient, err)
			}
			id, owner := binary.LittleEndian.Uint32(p[:]), binary.LittleEndian.Uint32(p[4:])
			if n != 8 || owner != uint32(i) || seen[id] {
				t.Fatalf("client %d got a reply for client %d (id %d, duplicate %v)", i, owner, id, seen[id])
			}
			seen[id] = true
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if s := dp.Stats(); s.RxPackets != clients*perClient || s.TxPackets != clients*perClient {
		t.Fatalf("Stats %+v", s)
	}
}

// TestRecvSendAllocateNothing runs a loopback burst through Recv and Send.
func TestRecvSendAllocateNothing(t *testing.T) {
	dp := open(t, udp.Config{Buffers: 128, Batch: 16})
	c := dialClient(t, dp)
	bufs := make([]*nic.Buffer, 16)
	req := make([]byte, 16)
	reply := make([]byte, 64)
	tx := dp.TxQueue(0)
	burst := func() {
		for range 16 {
			c.Write(req)
		}
		got := 0
		for got < 16 {
			n, err := dp.Recv(bufs, time.Second)
			if err != nil || n == 0 {
				t.Fatalf("Recv = %d, %v", n, err)
			}
			tx.Send(bufs[:n])
			got += n
		}
		for range 16 {
			c.Read(reply)
		}
	}
	burst() // warm up (first deadline, poller registration)
	// The client's Write and Read allocate nothing either; any allocation
	// comes from the dataplane.
	if a := testing.AllocsPerRun(50, burst); a != 0 {
		t.Fatalf("a 16-packet burst through Recv and Send allocated %.1f times", a)
	}
}

func TestCloseWhileSending(t *testing.T) {
	dp, bufs := receiveOne(t)
	dp.Close()
	if _, err := dp.TxQueue(0).Send(bufs); !errors.Is(err, nic.ErrClosed) {
		t.Fatalf("Send after Close = %v, want nic.ErrClosed", err)
	}
	if dp.FreeBuffers() != 32 {
		t.Fatalf("FreeBuffers = %d after Close and Send, want 32", dp.FreeBuffers())
	}
}

// BenchmarkEcho measures a loopback echo: client goroutines send 16-byte
// requests, the net worker receives bursts and the workers' TX queues
// reply. ns/op is per request answered; allocs/op are the client's (x/net's
// ReadBatch allocates each sender's address), see TestRecvSendAllocateNothing
// for the dataplane's.
func BenchmarkEcho(b *testing.B) {
	for _, workers := range []int{1, 2} {
		b.Run("workers="+string(rune('0'+workers)), func(b *testing.B) { benchEcho(b, workers) })
	}
}

func benchEcho(b *testing.B, workers int) {
	dp := open(b, udp.Config{Workers: workers, Buffers: 1024, Batch: 32})
	client, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(dp.Addr()))
	if err != nil {
		b.Fatal(err)
	}
	defer client.Close()
	cpc := ipv4.NewPacketConn(client)
	const window = 64 // requests in flight
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // net worker: receive and answer round-robin over workers
		defer wg.Done()
		runtime.LockOSThread()
		bufs := make([]*nic.Buffer, 32)
		w := 0
		for {
			n, err := dp.Recv(bufs, time.Millisecond)
			if err != nil {
				return
			}
			if n > 0 {
				dp.TxQueue(w).Send(bufs[:n])
				w = (w + 1) % workers
			}
			select {
			case <-stop:
				return
			default:
			}
		}
	}()
	msgs := make([]ipv4.Message, window)
	for i := range msgs {
		msgs[i].Buffers = [][]byte{make([]byte, 64)}
	}
	req := make([]ipv4.Message, window)
	for i := range req {
		req[i].Buffers = [][]byte{make([]byte, 16)}
	}
	b.ReportAllocs()
	b.ResetTimer()
	answered := 0
	for answered < b.N {
		k := min(window, b.N-answered)
		if _, err := cpc.WriteBatch(req[:k], 0); err != nil {
			b.Fatal(err)
		}
		for got := 0; got < k; {
			client.SetReadDeadline(time.Now().Add(2 * time.Second))
			n, err := cpc.ReadBatch(msgs[:k-got], 0)
			if err != nil {
				b.Fatalf("client: %d of %d replies: %v", got, k, err)
			}
			got += n
		}
		answered += k
	}
	b.StopTimer()
	close(stop)
	wg.Wait()
	b.ReportMetric(float64(answered)/b.Elapsed().Seconds(), "pps")
}

// BenchmarkReadBatchXNet shows why Recv does not use x/net's ReadBatch: it
// allocates the sender's address for every packet (allocs/op here is per
// 16-packet batch). Compare BenchmarkRecv.
func BenchmarkReadBatchXNet(b *testing.B) {
	srv, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	c, err := net.DialUDP("udp4", nil, srv.LocalAddr().(*net.UDPAddr))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	pc := ipv4.NewPacketConn(srv)
	msgs := make([]ipv4.Message, 16)
	for i := range msgs {
		msgs[i].Buffers = [][]byte{make([]byte, 2048)}
	}
	benchmarkBatches(b, c, func(got int) (int, error) { return pc.ReadBatch(msgs[got:], 0) }, nil)
}

// benchmarkBatches writes batches of 16 packets with c and receives each
// whole with recv (its argument: how many are in so far), then calls done
// (when set) after each batch.
func benchmarkBatches(b *testing.B, c net.Conn, recv func(got int) (int, error), done func()) {
	req := make([]byte, 16)
	b.ReportAllocs()
	for b.Loop() {
		for range 16 {
			c.Write(req)
		}
		for got := 0; got < 16; {
			n, err := recv(got)
			if err != nil {
				b.Fatal(err)
			}
			got += n
		}
		if done != nil {
			done()
		}
	}
}

// BenchmarkRecv is BenchmarkReadBatchXNet through this package's Recv.
func BenchmarkRecv(b *testing.B) {
	dp := open(b, udp.Config{Buffers: 64, Batch: 16})
	c := dialClient(b, dp)
	bufs := make([]*nic.Buffer, 16)
	benchmarkBatches(b, c, func(got int) (int, error) { return dp.Recv(bufs[got:], time.Second) },
		func() { dp.Release(bufs...) })
}

func TestKernelDropsCounted(t *testing.T) {
	dp := open(t, udp.Config{ReadBuffer: 1, Buffers: 32, Batch: 8}) // the kernel rounds up to its minimum
	c := dialClient(t, dp)
	payload := make([]byte, 1024)
	for range 500 { // nobody receives: the socket buffer overflows
		c.Write(payload)
	}
	if s := dp.Stats(); s.RxDropped == 0 {
		t.Fatalf("500 datagrams into a tiny socket buffer, Stats.RxDropped = 0")
	}
	if a := testing.AllocsPerRun(20, func() { dp.Stats() }); a != 0 {
		t.Fatalf("Stats allocated %.1f times", a)
	}
}

// TestKernelDropsPerPort: every port's socket counts its own drops; a
// port removed keeps its drops in Stats.
func TestKernelDropsPerPort(t *testing.T) {
	dp := open(t, udp.Config{ReadBuffer: 1, Buffers: 32, Batch: 8})
	extra := freeUDPPort(t)
	if err := dp.AddPort(extra); err != nil {
		t.Fatal(err)
	}
	c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(dp.Addr().Addr(), extra)))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for range 500 {
		c.Write(make([]byte, 1024))
	}
	pd := dp.PortDrops()
	if len(pd) != 2 || pd[0].Port != dp.Addr().Port() || pd[0].Drops != 0 || pd[1].Port != extra || pd[1].Drops == 0 {
		t.Fatalf("PortDrops %+v: want none at %d, some at %d", pd, dp.Addr().Port(), extra)
	}
	if s := dp.Stats(); s.RxDropped != pd[1].Drops {
		t.Errorf("Stats.RxDropped %d, the ports' %d", s.RxDropped, pd[1].Drops)
	}
	if err := dp.RemovePort(extra); err != nil {
		t.Fatal(err)
	}
	if s := dp.Stats(); s.RxDropped != pd[1].Drops {
		t.Errorf("after the port's removal Stats.RxDropped %d, want its %d drops kept", s.RxDropped, pd[1].Drops)
	}
}

// TestPoolExhaustion receives with every buffer but a few in use, then
// checks that receiving resumes once buffers come back and that none leaks.
func TestPoolExhaustion(t *testing.T) {
	dp := open(t, udp.Config{Buffers: 16, Batch: 8})
	c := dialClient(t, dp)
	var held []*nic.Buffer
	bufs := make([]*nic.Buffer, 8)
	for id := 0; len(held) < 16; id++ {
		if id < 16 {
			c.Write([]byte{byte(id)})
		}
		n, err := dp.Recv(bufs, time.Second)
		if err != nil || (n == 0 && id >= 16) {
			t.Fatalf("Recv = %d, %v with %d held", n, err, len(held))
		}
		held = append(held, bufs[:n]...)
	}
	c.Write([]byte{99})
	if n, err := dp.Recv(bufs, 10*time.Millisecond); n != 0 || err != nil {
		t.Fatalf("Recv with the pool empty = %d, %v; want 0, nil", n, err)
	}
	dp.Release(held[0]) // one buffer back: the waiting datagram comes in
	n, err := dp.Recv(bufs, time.Second)
	if n != 1 || err != nil || bufs[0].Payload()[0] != 99 {
		t.Fatalf("Recv after a release = %d, %v", n, err)
	}
	dp.Release(append(held[1:], bufs[0])...)
	if dp.FreeBuffers() != 16 {
		t.Fatalf("FreeBuffers = %d, want 16", dp.FreeBuffers())
	}
}

// TestIdleRecvAllocations covers the paths of an idle server: a poll
// allocates nothing; a bounded wait that times out allocates once (the
// runtime wraps the poller's timeout in a *net.OpError).
func TestIdleRecvAllocations(t *testing.T) {
	dp := open(t, udp.Config{Buffers: 32, Batch: 8})
	bufs := make([]*nic.Buffer, 8)
	dp.Recv(bufs, time.Microsecond) // warm up
	if a := testing.AllocsPerRun(20, func() {
		if n, err := dp.Recv(bufs, 0); n != 0 || err != nil {
			t.Fatalf("poll = %d, %v", n, err)
		}
	}); a != 0 {
		t.Fatalf("idle poll allocated %.1f times", a)
	}
	if a := testing.AllocsPerRun(20, func() {
		if n, err := dp.Recv(bufs, 100*time.Microsecond); n != 0 || err != nil {
			t.Fatalf("wait = %d, %v", n, err)
		}
	}); a > 1 {
		t.Fatalf("idle bounded wait allocated %.1f times, want at most 1", a)
	}
}

// TestRxTimeIsKernelArrival checks that a datagram's RxTime is when the
// kernel received it, not when Recv read it: a datagram left unread for a
// while shows that wait.
func TestRxTimeIsKernelArrival(t *testing.T) {
	dp := open(t, udp.Config{Buffers: 8, Batch: 4})
	c := dialClient(t, dp)
	before := dp.Now()
	if _, err := c.Write(make([]byte, wire.HeaderLen)); err != nil {
		t.Fatal(err)
	}
	const wait = 30 * time.Millisecond
	time.Sleep(wait)
	bufs := make([]*nic.Buffer, 4)
	n, err := dp.Recv(bufs, time.Second)
	after := dp.Now()
	if err != nil || n != 1 {
		t.Fatalf("Recv = %d, %v", n, err)
	}
	rx := bufs[0].RxTime
	if rx < before-int64(time.Millisecond) || after-rx < int64(wait) {
		t.Errorf("RxTime %v: sent after %v, read at %v: want it at least %v before the read", time.Duration(rx), time.Duration(before), time.Duration(after), wait)
	}
	dp.Release(bufs[:n]...)
}
