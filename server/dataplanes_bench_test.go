//go:build linux && cgo && dpdk

package server

import (
	"context"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/persephone-go/psp/darc"
	"github.com/persephone-go/psp/dispatcher"
	"github.com/persephone-go/psp/nic"
	"github.com/persephone-go/psp/nic/dpdk"
	"github.com/persephone-go/psp/nic/udp"
	"github.com/persephone-go/psp/wire"
)

// BenchmarkDataplanes measures packets per second through the whole
// dispatcher (rx -> classify -> DARC -> worker -> tx) over the DPDK
// dataplane on a net_ring loopback device and over the UDP-socket
// dataplane on loopback, in one run. Requests circulate in a closed loop:
// inFlight of them, each reply coming back as a new request. b.N counts
// answered requests.
func BenchmarkDataplanes(b *testing.B) {
	const workers, inFlight = 2, 256
	payloads := make([][]byte, inFlight)
	for i := range payloads {
		payloads[i] = make([]byte, wire.HeaderLen)
		wire.Header{ID: uint32(i), Type: uint32(1 + i%2)}.Encode(payloads[i])
	}
	b.Run("dpdk-net_ring", func(b *testing.B) {
		dp, err := dpdk.Open(dpdk.Config{Device: "net_ring_dispatch", IP: netip.MustParseAddr("10.0.0.2"), Workers: workers})
		if err != nil {
			b.Skipf("dpdk: %v", err)
		}
		defer dp.Close()
		if err := dp.Circulate(payloads); err != nil {
			b.Fatal(err)
		}
		runDispatcher(b, dp, workers)
	})
	b.Run("udp-loopback", func(b *testing.B) {
		dp, err := udp.Open(udp.Config{Addr: "127.0.0.1:0", Workers: workers})
		if err != nil {
			b.Fatal(err)
		}
		defer dp.Close()
		conn, err := net.DialUDP("udp4", nil, net.UDPAddrFromAddrPort(dp.Addr()))
		if err != nil {
			b.Fatal(err)
		}
		defer conn.Close()
		for _, p := range payloads {
			conn.Write(p)
		}
		go func() { // the client: every reply goes back as a request
			buf := make([]byte, 2048)
			for {
				n, err := conn.Read(buf)
				if err != nil {
					return
				}
				conn.Write(buf[:n])
			}
		}()
		runDispatcher(b, dp, workers)
	})
}

func runDispatcher(b *testing.B, dp nic.Dataplane, workers int) {
	policy, err := darc.New(darc.NameDARC, darc.Config{Workers: workers, NumTypes: dispatcher.HeaderNumTypes,
		Profile: []darc.TypeProfile{{Type: 1, MeanNs: 1000, Ratio: 0.5}, {Type: 2, MeanNs: 100000, Ratio: 0.5}}})
	if err != nil {
		b.Fatal(err)
	}
	echo := dispatcher.HandlerFunc(func(int, darc.Type, *nic.Buffer) bool { return true })
	d, err := dispatcher.New(dispatcher.Spec{Workers: workers, StatsInterval: time.Millisecond}, dp, dispatcher.HeaderClassifier{}, policy, echo)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	answered := func() uint64 {
		if s := d.Stats(); s != nil {
			return s.Answered
		}
		return 0
	}
	for answered() == 0 {
		time.Sleep(time.Millisecond)
	}
	b.ResetTimer()
	start, base := time.Now(), answered()
	for answered()-base < uint64(b.N) {
		time.Sleep(time.Millisecond)
	}
	n := answered() - base
	b.ReportMetric(float64(n)/time.Since(start).Seconds(), "pkt/s")
	b.StopTimer()
	cancel()
	<-done
}
