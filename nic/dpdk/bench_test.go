//go:build linux && cgo && dpdk

package dpdk

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/persephone-go/psp/darc"
	"github.com/persephone-go/psp/internal/testenv"
	"github.com/persephone-go/psp/nic"
	"github.com/persephone-go/psp/nic/udp"
	"github.com/persephone-go/psp/wire"
)

// pipeline is the request path on one goroutine: rx -> classify (the psp
// header's type field) -> DARC -> worker (echo, inline) -> tx on the
// worker's own queue. It measures what the dataplane and the policy cost
// per packet, without cross-core hand-offs.
type pipeline struct {
	dp      nic.Dataplane
	policy  darc.Policy
	workers int
	bufs    []*nic.Buffer
	slots   []*nic.Buffer // handle -> buffer
	free    []uint64      // free handles
	out     []darc.Assignment
	batches [][]*nic.Buffer // per worker, sent at the end of each burst
}

func newPipeline(tb testing.TB, dp nic.Dataplane, workers int) *pipeline {
	tb.Helper()
	policy, err := darc.New(darc.NameDARC, darc.Config{
		Workers:  workers,
		NumTypes: 3,
		Profile: []darc.TypeProfile{
			{Type: darc.Type(wire.TypeShort), MeanNs: 1000, Ratio: 0.5},
			{Type: darc.Type(wire.TypeLong), MeanNs: 100000, Ratio: 0.5},
		},
	})
	if err != nil {
		tb.Fatal(err)
	}
	p := &pipeline{
		dp: dp, policy: policy, workers: workers,
		bufs:    make([]*nic.Buffer, 32),
		slots:   make([]*nic.Buffer, 4096),
		out:     make([]darc.Assignment, workers),
		batches: make([][]*nic.Buffer, workers),
	}
	for h := range p.slots {
		p.free = append(p.free, uint64(h))
	}
	for w := range p.batches {
		p.batches[w] = make([]*nic.Buffer, 0, 4096)
	}
	return p
}

// step runs one burst through the path and returns how many requests it
// answered.
func (p *pipeline) step(tb testing.TB) int {
	n, err := p.dp.Recv(p.bufs, 0)
	if err != nil {
		tb.Fatal(err)
	}
	now := p.dp.Now()
	for _, b := range p.bufs[:n] {
		typ := darc.Type(wire.TypeOf(b.Payload()))
		h := p.free[len(p.free)-1]
		if p.policy.Enqueue(darc.Request{Handle: h, Type: typ}, now) != darc.Accepted {
			p.dp.Release(b)
			continue
		}
		p.free = p.free[:len(p.free)-1]
		p.slots[h] = b
	}
	answered := 0
	for {
		k := p.policy.Dispatch(now, p.out)
		if k == 0 {
			break
		}
		for _, a := range p.out[:k] {
			b := p.slots[a.Request.Handle]
			p.slots[a.Request.Handle] = nil
			p.free = append(p.free, a.Request.Handle)
			if a.Worker == darc.Expired {
				p.dp.Release(b)
				continue
			}
			// The worker: the reply echoes the request in place.
			p.batches[a.Worker] = append(p.batches[a.Worker], b)
			p.policy.Complete(a.Worker, a.Request.Type, 1000, now)
		}
	}
	for w, batch := range p.batches {
		if len(batch) == 0 {
			continue
		}
		sent, err := p.dp.TxQueue(w).Send(batch)
		if err != nil {
			tb.Fatal(err)
		}
		answered += sent
		clear(batch)
		p.batches[w] = batch[:0]
	}
	return answered
}

// selfAddressed returns a request frame the dataplane sends to itself.
func selfAddressed(d *Dataplane, id uint32, typ uint32) []byte {
	self := netip.AddrPortFrom(d.IP(), wire.DefaultPort)
	return udpFrame{dstMAC: d.MAC(), srcMAC: d.MAC(), src: self, dst: self, payload: header(id, typ)}.build()
}

func header(id, typ uint32) []byte {
	payload := make([]byte, wire.HeaderLen)
	wire.Header{ID: id, Type: typ}.Encode(payload)
	return payload
}

// circulate opens a net_ring device with inFlight self-addressed requests in it.
func circulate(tb testing.TB, workers, inFlight int) *Dataplane {
	tb.Helper()
	// A fresh net_ring device each time: the ring driver keeps the rings of
	// a removed device and complains when their names come back.
	d := openTestDevice(tb, Config{Device: eal.name("net_ring_bench"), Workers: workers})
	payloads := make([][]byte, inFlight)
	for i := range payloads {
		payloads[i] = header(uint32(i), uint32(1+i%2))
	}
	if err := d.Circulate(payloads); err != nil {
		tb.Fatal(err)
	}
	return d
}

func TestPipelineCirculatesOnNetRing0(t *testing.T) {
	const inFlight = 64
	d := circulate(t, 3, inFlight)
	p := newPipeline(t, d, 3)
	answered := 0
	for range 1000 {
		answered += p.step(t)
	}
	if answered < 1000 {
		t.Fatalf("%d answered in 1000 bursts", answered)
	}
	st, ps := d.Stats(), d.PortStats()
	if st.TxErrors != 0 || ps.Dropped() != 0 {
		t.Fatalf("losses: stats %+v port %+v", st, ps)
	}
	// Every packet is either still circulating or held by nobody: the pool
	// holds exactly the injected requests.
	if d.Outstanding() != 0 || ps.PoolInUse != inFlight {
		t.Fatalf("outstanding %d, pool in use %d, want 0 and %d", d.Outstanding(), ps.PoolInUse, inFlight)
	}
}

func TestHotPathAllocatesNothing(t *testing.T) {
	d := circulate(t, 2, 64)
	bufs := make([]*nic.Buffer, 32)
	tx := d.TxQueue(1)
	frame := selfAddressed(d, 1, 1)
	empty := 0
	allocs := testing.AllocsPerRun(1000, func() {
		n, _ := d.Recv(bufs, 0)
		if n == 0 {
			empty++
			return
		}
		// One buffer released, one request injected in its place.
		d.Release(bufs[n-1])
		if err := d.rawTransmit(frame); err != nil {
			t.Fatal(err)
		}
		tx.Send(bufs[:n-1])
	})
	if allocs != 0 {
		t.Fatalf("Recv+Send+Release allocate %v times per run", allocs)
	}
	if empty > 0 {
		t.Fatalf("%d of 1000 runs received nothing: the test measured less than it claims", empty)
	}
	p := newPipeline(t, d, 2)
	allocs = testing.AllocsPerRun(1000, func() {
		if p.step(t) == 0 {
			empty++
		}
	})
	if allocs != 0 {
		t.Fatalf("rx -> DARC -> tx allocates %v times per burst", allocs)
	}
	if empty > 0 {
		t.Fatalf("%d of 1000 pipeline steps answered nothing", empty)
	}
}

// BenchmarkPipeline measures packets per second through rx -> classify ->
// DARC -> worker -> tx, over a DPDK net_ring device and over the UDP-socket
// dataplane on loopback, in one run. b.N counts packets.
func BenchmarkPipeline(b *testing.B) {
	const workers, inFlight = 4, 256
	b.Run("dpdk-net_ring", func(b *testing.B) {
		d := circulate(b, workers, inFlight)
		runPipeline(b, newPipeline(b, d, workers))
	})
	b.Run("udp-loopback", func(b *testing.B) {
		d, err := udp.Open(udp.Config{Addr: "127.0.0.1:0", Workers: workers})
		if err != nil {
			b.Fatal(err)
		}
		defer d.Close()
		// Clients echo every reply back as a new request.
		const clients = 4
		for c := range clients {
			conn, err := net.DialUDP("udp4", nil, net.UDPAddrFromAddrPort(d.Addr()))
			if err != nil {
				b.Fatal(err)
			}
			defer conn.Close()
			req := make([]byte, wire.HeaderLen)
			for i := range inFlight / clients {
				wire.Header{ID: uint32(c*1000 + i), Type: uint32(1 + i%2)}.Encode(req)
				if _, err := conn.Write(req); err != nil {
					b.Fatal(err)
				}
			}
			go testenv.Reflect(conn)
		}
		runPipeline(b, newPipeline(b, d, workers))
	})
}

func runPipeline(b *testing.B, p *pipeline) {
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	done, idle := 0, 0
	for done < b.N {
		n := p.step(b)
		done += n
		if n == 0 {
			if idle++; idle > 1_000_000 {
				b.Fatalf("no progress after %d packets", done)
			}
		} else {
			idle = 0
		}
	}
	elapsed := time.Since(start)
	b.ReportMetric(float64(done)/elapsed.Seconds(), "pkt/s")
}

// BenchmarkRecvDropNetNull0 measures the receive path on packets it must
// drop (net_null0 delivers zero-filled frames): poll, classify, free.
func BenchmarkRecvDropNetNull0(b *testing.B) {
	d := openTestDevice(b, Config{Device: "net_null0"})
	bufs := make([]*nic.Buffer, 32)
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	before := d.PortStats().Polled
	for range b.N {
		d.Recv(bufs, 0)
	}
	polled := d.PortStats().Polled - before
	b.ReportMetric(float64(polled)/time.Since(start).Seconds(), "pkt/s")
}
