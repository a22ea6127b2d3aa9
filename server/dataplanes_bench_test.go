//go:build linux && cgo && dpdk

package server

import (
	"context"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/persephone-go/psp/app"
	"github.com/persephone-go/psp/darc"
	"github.com/persephone-go/psp/dispatcher"
	"github.com/persephone-go/psp/internal/testenv"
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
		runDispatcher(b, reflectedUDP(b, udp.Config{Addr: "127.0.0.1:0", Workers: workers}, payloads), workers)
	})
}

func runDispatcher(b *testing.B, dp nic.Dataplane, workers int) {
	policy, err := darc.New(darc.NameDARC, darc.Config{Workers: workers, NumTypes: dispatcher.HeaderNumTypes,
		Profile: []darc.TypeProfile{{Type: 1, MeanNs: 1000, Ratio: 0.5}, {Type: 2, MeanNs: 100000, Ratio: 0.5}}})
	if err != nil {
		b.Fatal(err)
	}
	echo := app.HandlerFunc(func(int, app.Type, *nic.Buffer) bool { return true })
	d, err := dispatcher.New(dispatcher.Spec{Workers: workers, StatsInterval: time.Millisecond}, dp, dispatcher.HeaderClassifier{}, policy, echo)
	if err != nil {
		b.Fatal(err)
	}
	n, elapsed := answerN(b, d, 1)
	b.ReportMetric(float64(n)/elapsed.Seconds(), "pkt/s")
}

// reflectedUDP opens a UDP dataplane of cfg and a client on loopback that
// sends payloads to it and every reply back as a request; both close at
// the benchmark's end.
func reflectedUDP(b *testing.B, cfg udp.Config, payloads [][]byte) *udp.Dataplane {
	dp, err := udp.Open(cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { dp.Close() })
	conn, err := net.DialUDP("udp4", nil, net.UDPAddrFromAddrPort(dp.Addr()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { conn.Close() })
	for _, p := range payloads {
		conn.Write(p)
	}
	go testenv.Reflect(conn)
	return dp
}

// answerN runs d until it has answered warmup requests, then times b.N
// more, and stops it. It returns how many it answered in the timed part
// (at least b.N) and how long that took.
func answerN(b *testing.B, d *dispatcher.Dispatcher, warmup uint64) (uint64, time.Duration) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	answered := func() uint64 {
		if s := d.Stats(); s != nil {
			return s.Answered
		}
		return 0
	}
	for answered() < warmup {
		time.Sleep(time.Millisecond)
	}
	b.ResetTimer()
	start, base := time.Now(), answered()
	for answered()-base < uint64(b.N) {
		time.Sleep(time.Millisecond)
	}
	n, elapsed := answered()-base, time.Since(start)
	b.StopTimer()
	cancel()
	<-done
	return n, elapsed
}

// BenchmarkStages shows where a request's time goes when it is alone in the
// server: one request circulating (its reply comes back as the next
// request), so nothing queues and every stage but service is the
// dataplane's and the host's share. It reports the stage histograms'
// p50 and p99 (bucket upper bounds) over DPDK on net_ring with busy-poll,
// the paper's setup, and over UDP loopback with spin-then-park, in one run.
// b.N counts answered requests.
//
//	sudo go test -tags dpdk -run '^$' -bench Stages -benchtime 200000x ./server
func BenchmarkStages(b *testing.B) {
	payload := make([]byte, wire.HeaderLen)
	wire.Header{ID: 1, Type: wire.TypeShort}.Encode(payload)
	b.Run("dpdk-net_ring/busy-poll", func(b *testing.B) {
		dp, err := dpdk.Open(dpdk.Config{Device: "net_ring_stages", IP: netip.MustParseAddr("10.0.0.2"), Workers: 1})
		if err != nil {
			b.Skipf("dpdk: %v", err)
		}
		defer dp.Close()
		if err := dp.Circulate([][]byte{payload}); err != nil {
			b.Fatal(err)
		}
		reportStages(b, runStages(b, dp, dispatcher.IdleBusyPoll))
	})
	b.Run("udp-loopback/spin-then-park", func(b *testing.B) {
		dp := reflectedUDP(b, udp.Config{Addr: "127.0.0.1:0", Workers: 1, KernelWait: true}, [][]byte{payload})
		reportStages(b, runStages(b, dp, dispatcher.IdleSpinThenPark))
	})
}

// runStages runs a one-worker dispatcher with an echo application on dp
// until b.N more requests are answered and returns SHORT's stages.
func runStages(b *testing.B, dp nic.Dataplane, idle string) *dispatcher.TypeStages {
	policy, err := darc.New(darc.NameCFCFS, darc.Config{Workers: 1, NumTypes: dispatcher.HeaderNumTypes})
	if err != nil {
		b.Fatal(err)
	}
	echo := app.HandlerFunc(func(int, app.Type, *nic.Buffer) bool { return true })
	d, err := dispatcher.New(dispatcher.Spec{Workers: 1, Idle: idle, StatsInterval: time.Millisecond}, dp, dispatcher.HeaderClassifier{}, policy, echo)
	if err != nil {
		b.Fatal(err)
	}
	answerN(b, d, 1000)
	st := d.Stages()[wire.TypeShort]
	if st == nil {
		b.Fatal("no SHORT request ran")
	}
	return st
}

// reportStages reports each stage's p50 and p99 in ns.
func reportStages(b *testing.B, st *dispatcher.TypeStages) {
	for _, s := range dispatcher.Stages() {
		h := &st[s]
		b.ReportMetric(float64(h.QuantileNs(0.5)), s.String()+"-p50-ns")
		b.ReportMetric(float64(h.QuantileNs(0.99)), s.String()+"-p99-ns")
		b.ReportMetric(float64(h.QuantileNs(0.999)), s.String()+"-p99.9-ns")
	}
	b.ReportMetric(st[dispatcher.StageLatency].MeanNs(), "latency-mean-ns")
}
