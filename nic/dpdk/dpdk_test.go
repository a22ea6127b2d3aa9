//go:build linux && cgo && dpdk

package dpdk

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/persephone-go/psp/internal/testenv"
	"github.com/persephone-go/psp/nic"
	"github.com/persephone-go/psp/wire"
)

// requireEAL skips (fails in CI) when the EAL cannot start here.
func requireEAL(tb testing.TB, err error) {
	tb.Helper()
	if errors.Is(err, ErrEAL) {
		testenv.Skip(tb, "DPDK EAL unavailable: %v", err)
	}
}

func openTestRingPair(tb testing.TB, cfg Config) *ringPair {
	tb.Helper()
	return openTest(tb, cfg, openRingPair)
}

func openTestDevice(tb testing.TB, cfg Config) *Dataplane {
	tb.Helper()
	return openTest(tb, cfg, Open)
}

// openTest opens a dataplane of cfg (serverIP unless it says) with open,
// skipping the test without DPDK's EAL; it closes when the test ends.
func openTest[D interface{ Close() error }](tb testing.TB, cfg Config, open func(Config) (D, error)) D {
	tb.Helper()
	if !cfg.IP.IsValid() {
		cfg.IP = serverIP
	}
	d, err := open(cfg)
	requireEAL(tb, err)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { d.Close() })
	return d
}

// request builds a psp request frame from the client to the dataplane.
func request(r *ringPair, clientPort uint16, id uint32) []byte {
	payload := make([]byte, wire.HeaderLen)
	wire.Header{ID: id, Type: wire.TypeShort, ServiceNs: 1000}.Encode(payload)
	return udpFrame{
		dstMAC: r.MAC(), srcMAC: clientMAC,
		src:     netip.AddrPortFrom(clientIP, clientPort),
		dst:     netip.AddrPortFrom(serverIP, wire.DefaultPort),
		payload: payload,
	}.build()
}

// recvN receives exactly n buffers or fails.
func recvN(tb testing.TB, d *Dataplane, n int) []*nic.Buffer {
	tb.Helper()
	got := make([]*nic.Buffer, 0, n)
	bufs := make([]*nic.Buffer, 64)
	deadline := time.Now().Add(5 * time.Second)
	for len(got) < n && time.Now().Before(deadline) {
		k, err := d.Recv(bufs[:min(len(bufs), n-len(got))], 10*time.Millisecond)
		if err != nil {
			tb.Fatalf("recv: %v", err)
		}
		got = append(got, bufs[:k]...)
	}
	if len(got) != n {
		tb.Fatalf("received %d buffers, want %d (stats %+v)", len(got), n, d.PortStats())
	}
	return got
}

func TestRingPairRequestsAndReplies(t *testing.T) {
	r := openTestRingPair(t, Config{Workers: 2})
	const n = 40 // more than a burst
	for i := range n {
		if err := r.inject(request(r, uint16(40000+i), uint32(i))); err != nil {
			t.Fatal(err)
		}
	}
	bufs := recvN(t, r.Dataplane, n)
	seen := map[uint32]bool{}
	for _, b := range bufs {
		h, err := wire.Decode(b.Payload())
		if err != nil {
			t.Fatal(err)
		}
		if b.Len != wire.HeaderLen || b.WireLen != b.Len {
			t.Errorf("request %d: Len %d WireLen %d, want %d", h.ID, b.Len, b.WireLen, wire.HeaderLen)
		}
		if want := netip.AddrPortFrom(clientIP, uint16(40000+h.ID)); b.Peer != want {
			t.Errorf("request %d: Peer %v, want %v", h.ID, b.Peer, want)
		}
		if b.DstPort != wire.DefaultPort || b.Ref == 0 || b.RxTime < 0 {
			t.Errorf("request %d: DstPort %d Ref %#x RxTime %d", h.ID, b.DstPort, b.Ref, b.RxTime)
		}
		if len(b.Data) != r.MTU()-28 {
			t.Errorf("request %d: payload room %d, want MTU-28 = %d", h.ID, len(b.Data), r.MTU()-28)
		}
		seen[h.ID] = true
	}
	if len(seen) != n {
		t.Fatalf("distinct ids %d, want %d", len(seen), n)
	}
	if got := r.Outstanding(); got != n {
		t.Fatalf("outstanding %d, want %d", got, n)
	}

	// Replies of different lengths, from both workers, built in place.
	for i, b := range bufs {
		h, _ := wire.Decode(b.Payload())
		reply := 8 + int(h.ID)%50
		for k := range reply {
			b.Data[k] = byte(h.ID) + byte(k)
		}
		b.Len = reply
		if sent, err := r.TxQueue(i % 2).Send(bufs[i : i+1]); err != nil || sent != 1 {
			t.Fatalf("send: %d, %v", sent, err)
		}
		if b.Data != nil || b.Ref != 0 {
			t.Fatal("a sent buffer still points into its mbuf")
		}
	}
	for range n {
		frame, err := r.transmitted()
		if err != nil || frame == nil {
			t.Fatalf("transmitted: %v, %v", frame, err)
		}
		p, err := parseUDP(frame)
		if err != nil {
			t.Fatalf("reply: %v\n% x", err, frame)
		}
		if p.dstMAC != clientMAC || p.srcMAC != r.MAC() {
			t.Errorf("reply MACs %x -> %x", p.srcMAC, p.dstMAC)
		}
		if p.src != netip.AddrPortFrom(serverIP, wire.DefaultPort) || p.dst.Addr() != clientIP {
			t.Errorf("reply addresses %v -> %v", p.src, p.dst)
		}
		id := uint32(p.dst.Port() - 40000)
		if want := 8 + int(id)%50; len(p.payload) != want {
			t.Errorf("reply to %d: %d payload bytes, want %d", id, len(p.payload), want)
		}
		for k, c := range p.payload {
			if c != byte(id)+byte(k) {
				t.Fatalf("reply to %d: payload byte %d is %d", id, k, c)
			}
		}
		if p.ttl != 64 {
			t.Errorf("ttl %d", p.ttl)
		}
	}
	if f, _ := r.transmitted(); f != nil {
		t.Fatal("more frames transmitted than replies sent")
	}
	st := r.Stats()
	if st.RxPackets != n || st.TxPackets != n || st.TxErrors != 0 || st.RxDropped != 0 {
		t.Fatalf("stats %+v", st)
	}
	if ps := r.PortStats(); ps.PoolInUse != 0 || r.Outstanding() != 0 {
		t.Fatalf("buffers leaked: pool in use %d, outstanding %d", ps.PoolInUse, r.Outstanding())
	}
}

func TestSendChecksumsMatchKernelAlgorithm(t *testing.T) {
	// Odd and even lengths, a payload that sums to 0xffff, the largest
	// payload the MTU allows.
	r := openTestRingPair(t, Config{})
	for _, size := range []int{0, 1, 2, 15, 16, 17, 255, 1000, r.MTU() - 28} {
		if err := r.inject(request(r, 5000, uint32(size))); err != nil {
			t.Fatal(err)
		}
		b := recvN(t, r.Dataplane, 1)[0]
		for k := range size {
			b.Data[k] = byte(k*7 + size)
		}
		if size == 2 {
			b.Data[0], b.Data[1] = 0xff, 0xff
		}
		b.Len = size
		if _, err := r.TxQueue(0).Send([]*nic.Buffer{b}); err != nil {
			t.Fatal(err)
		}
		frame, _ := r.transmitted()
		if _, err := parseUDP(frame); err != nil {
			t.Fatalf("payload of %d bytes: %v", size, err)
		}
	}
}

func TestSendRejectsOversizedReply(t *testing.T) {
	r := openTestRingPair(t, Config{})
	if err := r.inject(request(r, 5000, 1)); err != nil {
		t.Fatal(err)
	}
	b := recvN(t, r.Dataplane, 1)[0]
	b.Len = len(b.Data) + 1
	sent, err := r.TxQueue(0).Send([]*nic.Buffer{b})
	if err != nil || sent != 0 {
		t.Fatalf("send of an oversized reply: %d, %v", sent, err)
	}
	if st := r.Stats(); st.TxErrors != 1 {
		t.Fatalf("tx errors %d, want 1", st.TxErrors)
	}
	if f, _ := r.transmitted(); f != nil {
		t.Fatal("an oversized reply was transmitted")
	}
	if ps := r.PortStats(); ps.PoolInUse != 0 {
		t.Fatalf("pool in use %d after the buffer was dropped", ps.PoolInUse)
	}
	// A buffer sent or released twice is ignored the second time.
	r.Release(b)
	if sent, err := r.TxQueue(0).Send([]*nic.Buffer{b}); sent != 0 || err != nil {
		t.Fatalf("second send: %d, %v", sent, err)
	}
	if ps := r.PortStats(); ps.PoolInUse != 0 || r.Outstanding() != 0 {
		t.Fatalf("after a double release: pool in use %d, outstanding %d", ps.PoolInUse, r.Outstanding())
	}
}

func TestARPReply(t *testing.T) {
	r := openTestRingPair(t, Config{})
	if err := r.inject(arpFrame(1, broadcast, clientMAC, clientIP, serverIP)); err != nil {
		t.Fatal(err)
	}
	// Not for us: ignored.
	if err := r.inject(arpFrame(1, broadcast, clientMAC, clientIP, netip.MustParseAddr("10.9.0.3"))); err != nil {
		t.Fatal(err)
	}
	bufs := make([]*nic.Buffer, 8)
	if n, err := r.Recv(bufs, 0); n != 0 || err != nil {
		t.Fatalf("recv of ARP: %d, %v", n, err)
	}
	frame, err := r.transmitted()
	if err != nil || frame == nil {
		t.Fatalf("no ARP reply: %v", err)
	}
	mac := r.MAC()
	want := arpFrame(2, clientMAC, mac, serverIP, clientIP)
	copy(want[14+18:14+24], clientMAC[:]) // target hardware address
	if !bytes.Equal(frame[:len(want)], want) {
		t.Fatalf("ARP reply\n got % x\nwant % x", frame, want)
	}
	if f, _ := r.transmitted(); f != nil {
		t.Fatal("answered an ARP request for another address")
	}
	ps := r.PortStats()
	if ps.ARPReplies != 1 || ps.Drops[DropARPIgnored] != 1 {
		t.Fatalf("arp replies %d, ignored %d", ps.ARPReplies, ps.Drops[DropARPIgnored])
	}
}

func TestDropsByReason(t *testing.T) {
	r := openTestRingPair(t, Config{ExtraPorts: []uint16{7000}})
	mac := r.MAC()
	good := func() udpFrame {
		return udpFrame{
			dstMAC: mac, srcMAC: clientMAC,
			src:     netip.AddrPortFrom(clientIP, 1234),
			dst:     netip.AddrPortFrom(serverIP, wire.DefaultPort),
			payload: []byte("0123456789abcdef"),
		}
	}
	mutate := func(f func(b []byte)) []byte {
		b := good().build()
		f(b)
		return b
	}
	cases := []struct {
		name   string
		frame  []byte
		reason DropReason
	}{
		{"runt", good().build()[:20], DropRunt},
		{"other mac", func() []byte { f := good(); f.dstMAC = [6]byte{2, 2, 2, 2, 2, 2}; return f.build() }(), DropOtherMAC},
		{"ipv6", mutate(func(b []byte) { b[12], b[13] = 0x86, 0xdd }), DropNotIPv4},
		{"ip version", mutate(func(b []byte) { b[14] = 0x65 }), DropBadIPv4},
		{"ip checksum", mutate(func(b []byte) { b[14+10] ^= 0xff }), DropBadIPv4},
		{"ip total length beyond frame", mutate(func(b []byte) { binary.BigEndian.PutUint16(b[16:], 200) }), DropRunt},
		{"fragment", func() []byte { f := good(); f.flagsFrag = 0x2000; return f.build() }(), DropFragment},
		{"other ip", func() []byte { f := good(); f.dst = netip.AddrPortFrom(clientIP, 6789); return f.build() }(), DropOtherIP},
		{"tcp", func() []byte { f := good(); f.proto = 6; return f.build() }(), DropNotUDP},
		{"udp checksum", mutate(func(b []byte) { b[len(b)-1] ^= 1 }), DropBadUDP},
		{"udp length", mutate(func(b []byte) { binary.BigEndian.PutUint16(b[38:], 100) }), DropBadUDP},
		{"other port", func() []byte { f := good(); f.dst = netip.AddrPortFrom(serverIP, 53); return f.build() }(), DropOtherPort},
	}
	bufs := make([]*nic.Buffer, 8)
	for _, c := range cases {
		before := r.PortStats().Drops
		if err := r.inject(c.frame); err != nil {
			t.Fatal(err)
		}
		if n, err := r.Recv(bufs, 0); n != 0 || err != nil {
			t.Errorf("%s: delivered %d (%v)", c.name, n, err)
			r.Release(bufs[:n]...)
			continue
		}
		after := r.PortStats().Drops
		for reason := range after {
			want := before[reason]
			if DropReason(reason) == c.reason {
				want++
			}
			if after[reason] != want {
				t.Errorf("%s: %v drops %d, want %d", c.name, DropReason(reason), after[reason], want)
			}
		}
	}
	// Accepted: no UDP checksum, an extra port, broadcast destination MAC.
	noSum := good()
	noSum.noUDPChecksum = true
	extra := good()
	extra.dst = netip.AddrPortFrom(serverIP, 7000)
	bcast := good()
	bcast.dstMAC = broadcast
	for _, f := range []udpFrame{noSum, extra, bcast} {
		if err := r.inject(f.build()); err != nil {
			t.Fatal(err)
		}
	}
	got := recvN(t, r.Dataplane, 3)
	if got[1].DstPort != 7000 {
		t.Errorf("extra port: DstPort %d", got[1].DstPort)
	}
	r.Release(got...)
	st := r.Stats()
	if st.RxDropped != uint64(len(cases)) || st.RxPackets != 3 {
		t.Fatalf("stats %+v, want %d dropped and 3 received", st, len(cases))
	}
	if ps := r.PortStats(); ps.PoolInUse != 0 || r.Outstanding() != 0 {
		t.Fatalf("pool in use %d, outstanding %d", ps.PoolInUse, r.Outstanding())
	}
}

func TestCloseUnblocksRecvAndFreesLateBuffers(t *testing.T) {
	r := openTestRingPair(t, Config{})
	if err := r.inject(request(r, 5000, 1)); err != nil {
		t.Fatal(err)
	}
	held := recvN(t, r.Dataplane, 1)
	errc := make(chan error, 1)
	go func() {
		bufs := make([]*nic.Buffer, 4)
		for {
			if _, err := r.Recv(bufs, time.Second); err != nil {
				errc <- err
				return
			}
		}
	}()
	time.Sleep(20 * time.Millisecond)
	if err := r.Dataplane.Close(); err != nil {
		t.Fatal(err)
	}
	if err := testenv.Await(t, errc, 3*time.Second, "Close to unblock Recv"); !errors.Is(err, nic.ErrClosed) {
		t.Fatalf("recv after close: %v", err)
	}
	if r.poolFreed.Load() {
		t.Fatal("pool freed while a buffer was still held")
	}
	if _, err := r.TxQueue(0).Send(held); !errors.Is(err, nic.ErrClosed) {
		t.Fatalf("send after close: %v", err)
	}
	if !r.poolFreed.Load() || r.Outstanding() != 0 {
		t.Fatalf("pool not freed after the last buffer came back (outstanding %d)", r.Outstanding())
	}
	if err := r.Dataplane.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
	// Stale buffers after the pool is gone are ignored.
	r.Release(held...)
	if _, err := r.TxQueue(0).Send(held); !errors.Is(err, nic.ErrClosed) {
		t.Fatalf("send of a stale buffer after close: %v", err)
	}
}

func TestOpenErrors(t *testing.T) {
	openTestRingPair(t, Config{}) // the EAL is up with the default arguments
	if _, err := Open(Config{}); !errors.Is(err, ErrConfig) {
		t.Fatalf("open without IP: %v", err)
	}
	if _, err := Open(Config{IP: serverIP, Workers: -1}); !errors.Is(err, ErrConfig) {
		t.Fatalf("open with -1 workers: %v", err)
	}
	if _, err := Open(Config{IP: serverIP, EAL: []string{"--no-huge", "-l", "0"}}); !errors.Is(err, ErrEAL) {
		t.Fatalf("open with other EAL arguments: %v", err)
	}
	if _, err := Open(Config{IP: serverIP, Device: "net_nosuchdriver0"}); err == nil {
		t.Fatal("open of an unknown driver succeeded")
	} else {
		t.Log(err)
	}
	if _, err := Open(Config{IP: serverIP, PortID: 999}); err == nil {
		t.Fatal("open of a missing port succeeded")
	} else {
		t.Log(err)
	}
	if _, err := Open(Config{IP: serverIP, Device: "net_null0", PoolSize: 100}); err == nil {
		t.Fatal("open with a pool smaller than the rings succeeded")
	} else {
		t.Log(err)
	}
}

func TestNetRing0Loopback(t *testing.T) {
	// net_ring0 loops every tx queue back to its rx queue: requests sent on
	// the net worker's queue come back as requests; replies come back
	// addressed to the client's MAC and are dropped as other-mac.
	d := openTestDevice(t, Config{Device: "net_ring0", Workers: 3})
	const n = 50
	mac := d.MAC()
	for i := range n {
		f := udpFrame{
			dstMAC: mac, srcMAC: clientMAC,
			src:     netip.AddrPortFrom(clientIP, uint16(1000+i)),
			dst:     netip.AddrPortFrom(serverIP, wire.DefaultPort),
			payload: make([]byte, wire.HeaderLen),
		}
		if err := d.rawTransmit(f.build()); err != nil {
			t.Fatal(err)
		}
	}
	bufs := recvN(t, d, n)
	for i, b := range bufs {
		if _, err := d.TxQueue(i % 3).Send([]*nic.Buffer{b}); err != nil {
			t.Fatal(err)
		}
	}
	scratch := make([]*nic.Buffer, 32)
	deadline := time.Now().Add(5 * time.Second)
	for d.PortStats().Drops[DropOtherMAC] < n && time.Now().Before(deadline) {
		if k, _ := d.Recv(scratch, time.Millisecond); k > 0 {
			t.Fatalf("a reply came back as a request")
		}
	}
	ps := d.PortStats()
	if ps.Drops[DropOtherMAC] != n || ps.Delivered != n || ps.Polled != 2*n {
		t.Fatalf("port stats %+v", ps)
	}
	if st := d.Stats(); st.TxPackets != n || st.RxPackets != n {
		t.Fatalf("stats %+v", st)
	}
}

func TestNetNull0DropsGarbage(t *testing.T) {
	// net_null0 receives zero-filled frames without end: every one is
	// dropped and counted, none reaches the caller.
	d := openTestDevice(t, Config{Device: "net_null0"})
	bufs := make([]*nic.Buffer, 32)
	for range 100 {
		if n, err := d.Recv(bufs, 0); n != 0 || err != nil {
			t.Fatalf("recv: %d, %v", n, err)
		}
	}
	ps := d.PortStats()
	if ps.Polled < 100*32 || ps.Dropped() != ps.Polled || ps.Delivered != 0 {
		t.Fatalf("port stats %+v", ps)
	}
	if err := d.rawTransmit(make([]byte, 60)); err != nil {
		t.Fatalf("transmit on net_null0: %v", err)
	}
}

func TestOpenCloseRepeatedly(t *testing.T) {
	// Pools and devices are freed on Close: reopening the same device many
	// times must not exhaust the EAL's memory or names.
	for range 12 {
		d := openTestDevice(t, Config{Device: "net_ring0", Workers: 2})
		if err := d.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestCloseGivesBackEverything opens, loads and closes each kind of
// dataplane (a net_ring device by name, a ring pair, a net_null device)
// twice in this process and checks that the EAL's memzones and heap are
// back where they were after each Close: a second Open of the same device
// then finds its names and memory free.
func TestCloseGivesBackEverything(t *testing.T) {
	payloads := make([][]byte, 64)
	for i := range payloads {
		payloads[i] = make([]byte, wire.HeaderLen)
		wire.Header{ID: uint32(i), Type: wire.TypeShort}.Encode(payloads[i])
	}
	kinds := []struct {
		name string
		open func() (nic.Dataplane, error)
		load func(nic.Dataplane) error
		// driverLeak is what DPDK 22.11's driver itself keeps per Open:
		// net_null allocates a 64-byte dummy packet per queue (192 bytes
		// of heap with its header) and never frees them.
		driverLeak uint64
	}{
		{"net_ring by name", func() (nic.Dataplane, error) {
			return Open(Config{IP: serverIP, Device: "net_ring_reopen", Workers: 2})
		}, func(dp nic.Dataplane) error { return dp.(*Dataplane).Circulate(payloads) }, 0},
		{"ring pair", func() (nic.Dataplane, error) {
			r, err := openRingPair(Config{IP: serverIP, Workers: 2})
			if err != nil {
				return nil, err
			}
			return r, nil
		}, func(dp nic.Dataplane) error {
			r := dp.(*ringPair)
			for i := range 16 {
				if err := r.inject(request(r, 5000, uint32(i))); err != nil {
					return err
				}
			}
			return nil
		}, 0},
		{"net_null", func() (nic.Dataplane, error) {
			return Open(Config{IP: serverIP, Device: "net_null_reopen"})
		}, func(nic.Dataplane) error { return nil }, 3 * 192}, // 1 rx queue, 2 tx queues
	}
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			var mz0, heap0 uint64
			for round := range 3 {
				if round == 1 {
					// The first round may set up what the EAL keeps for the
					// process (the ethdev shared data): measure from here.
					mz0, heap0 = ealUsage()
				}
				dp, err := k.open()
				requireEAL(t, err)
				if err != nil {
					t.Fatalf("round %d: open: %v", round, err)
				}
				if err := k.load(dp); err != nil {
					t.Fatalf("round %d: load: %v", round, err)
				}
				// Hold and give back some buffers, as a dispatcher would.
				bufs := make([]*nic.Buffer, 32)
				deadline := time.Now().Add(300 * time.Millisecond)
				n := 0
				for n == 0 && time.Now().Before(deadline) {
					n, _ = dp.Recv(bufs, 10*time.Millisecond)
				}
				dp.Release(bufs[:n]...)
				if err := dp.Close(); err != nil {
					t.Fatalf("round %d: close: %v", round, err)
				}
				if round >= 1 {
					leak := uint64(round) * k.driverLeak
					if mz, heap := ealUsage(); mz != mz0 || heap != heap0+leak {
						t.Errorf("round %d: after Close the EAL holds %d memzones and %d heap bytes, %d and %d+%d (the driver's) before Open",
							round, mz, heap, mz0, heap0, leak)
					}
				}
			}
		})
	}
}

func TestWorkersShareTxQueues(t *testing.T) {
	// A ring port has 16 TX queues: 20 workers share 15 of them, each
	// sending from its own goroutine.
	const workers, perWorker = 20, 30
	r := openTestRingPair(t, Config{Workers: workers})
	if q := r.DeviceTxQueues(); q != 15 {
		t.Fatalf("device queues for workers %d, want 15", q)
	}
	for i := range workers * perWorker {
		if err := r.inject(request(r, uint16(10000+i), uint32(i))); err != nil {
			t.Fatal(err)
		}
	}
	bufs := recvN(t, r.Dataplane, workers*perWorker)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, b := range bufs[w*perWorker : (w+1)*perWorker] {
				if sent, err := r.TxQueue(w).Send([]*nic.Buffer{b}); sent != 1 || err != nil {
					t.Errorf("worker %d: send %d, %v", w, sent, err)
				}
			}
		}()
	}
	wg.Wait()
	replies := 0
	for f, _ := r.transmitted(); f != nil; f, _ = r.transmitted() {
		if _, err := parseUDP(f); err != nil {
			t.Fatal(err)
		}
		replies++
	}
	if replies != workers*perWorker {
		t.Fatalf("%d replies, want %d", replies, workers*perWorker)
	}
}

func TestCirculateSendsToItself(t *testing.T) {
	r := openTestRingPair(t, Config{})
	if err := r.Circulate([][]byte{[]byte("hello"), {}}); err != nil {
		t.Fatal(err)
	}
	self := netip.AddrPortFrom(serverIP, wire.DefaultPort)
	for _, want := range []string{"hello", ""} {
		frame, err := r.transmitted()
		if err != nil || frame == nil {
			t.Fatalf("nothing transmitted: %v", err)
		}
		p, err := parseUDP(frame)
		if err != nil {
			t.Fatal(err)
		}
		if p.src != self || p.dst != self || p.srcMAC != r.MAC() || p.dstMAC != r.MAC() || string(p.payload) != want {
			t.Fatalf("frame %+v", p)
		}
	}
	if err := r.Circulate([][]byte{make([]byte, r.MTU())}); err == nil {
		t.Fatal("circulated a payload larger than the MTU allows")
	}
}

// TestAddRemovePort: ports come and go while the port runs.
func TestAddRemovePort(t *testing.T) {
	r := openTestRingPair(t, Config{})
	frame := func(port uint16) []byte {
		return udpFrame{dstMAC: r.MAC(), srcMAC: clientMAC, src: netip.AddrPortFrom(clientIP, 1234),
			dst: netip.AddrPortFrom(serverIP, port), payload: []byte("0123456789abcdef")}.build()
	}
	bufs := make([]*nic.Buffer, 8)
	if err := r.inject(frame(7001)); err != nil {
		t.Fatal(err)
	}
	if n, _ := r.Recv(bufs, 0); n != 0 {
		t.Fatalf("port 7001 served before AddPort")
	}
	if err := r.AddPort(7001); err != nil {
		t.Fatal(err)
	}
	if ports := r.Ports(); len(ports) != 2 || ports[1] != 7001 {
		t.Fatalf("ports %v", ports)
	}
	if err := r.inject(frame(7001)); err != nil {
		t.Fatal(err)
	}
	got := recvN(t, r.Dataplane, 1)
	if got[0].DstPort != 7001 {
		t.Fatalf("DstPort %d", got[0].DstPort)
	}
	r.Release(got...)
	if err := r.RemovePort(7001); err != nil {
		t.Fatal(err)
	}
	if err := r.RemovePort(wire.DefaultPort); err == nil {
		t.Fatal("removed the configured port")
	}
	before := r.PortStats().Drops[DropOtherPort]
	if err := r.inject(frame(7001)); err != nil {
		t.Fatal(err)
	}
	if n, _ := r.Recv(bufs, 0); n != 0 || r.PortStats().Drops[DropOtherPort] != before+1 {
		t.Fatalf("port 7001 served after RemovePort (%d received)", n)
	}
}
