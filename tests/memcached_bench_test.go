package tests

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/persephone-go/psp/app/memcached/memcachedtest"
	"github.com/persephone-go/psp/loadgen"
	"github.com/persephone-go/psp/report"
	"github.com/persephone-go/psp/workload"
)

// The open-loop memcached mix over TCP (BenchmarkMemcachedOpenLoopTCP).
const (
	openLoopConns     = 20
	openLoopKeys      = 10000
	openLoopValueSize = 64
	openLoopRate      = 5000
	openLoopTime      = 5 * time.Second
	openLoopWarmUp    = 2 * time.Second
	openLoopStepTime  = 3 * time.Second
)

// openLoopSteps are the rates stepped through to find the highest one
// memcached answers in full.
var openLoopSteps = []float64{10000, 15000, 20000, 30000, 40000, 60000, 80000}

// BenchmarkMemcachedOpenLoopTCP plays an open-loop memcached mix (95% gets
// of one key, 5% gets of 100 keys; 10,000 keys of 64 bytes, stored first)
// over 20 TCP connections, latency from each request's scheduled send,
// against psp serve --app memcached (its defaults, on tcp://: requests
// scheduled by DARC) and Debian's memcached -t 2, one after the other with
// the same schedule, in the same run:
//
//   - after a warm-up of both (2 s at 5,000 requests/s, not counted), at
//     5,000 requests/s for 5 s: psp's GET p99.9 over memcached's
//     (psp/memcached-GET-p99.9; 1.25 or less is the target);
//   - stepping the rate up (3 s a step) until memcached no longer answers
//     every request in time: the highest rate it answers in full
//     (memcached-full-req/s), and whether psp answers in full at that rate
//     (psp-full-at-that-rate, 1 or 0).
//
// It prints the table of every run. The client runs in this process, on the
// servers' cores. Run it alone:
//
//	go test -run '^$' -bench MemcachedOpenLoopTCP -benchtime 1x ./tests
func BenchmarkMemcachedOpenLoopTCP(b *testing.B) {
	mc := memcachedtest.StartMemcached(b, false, "-t", "2")
	psp := startServer(b, serverOptions{app: "memcached", policy: "darc", dilation: -1, tcp: true, minSamples: 5000,
		extra: []string{"--workers", "auto"}})
	servers := []struct{ name, addr string }{{"psp", psp.tcp}, {"memcached", mc}}
	for _, s := range servers {
		if err := loadgen.PreloadMemcached(context.Background(), loadgen.TCPScheme+s.addr, openLoopKeys, openLoopValueSize); err != nil {
			b.Fatalf("%s: %v", s.name, err)
		}
	}
	w := builtin(b, "memcached")
	w.Types = []workload.TypeSpec{w.Types[0], w.Types[1]} // GET, MULTIGET: no SET
	w.Types[0].Share, w.Types[1].Share = 0.95, 0.05
	var table strings.Builder
	fmt.Fprintf(&table, "%-9s %7s %7s %8s %5s %5s %5s %9s %9s %9s %14s %9s\n", "server", "req/s", "sent", "answered", "shed", "late", "lost", "GET p50", "GET p99", "GET p99.9", "MULTIGET p99.9", "lag p99")
	run := func(round int, rate float64, d time.Duration, show bool) map[string]*loadgen.Result {
		sched, err := loadgen.NewSchedule(w, rate, d, uint64(round)*1000+uint64(rate))
		if err != nil {
			b.Fatal(err)
		}
		out := map[string]*loadgen.Result{}
		for i := range servers {
			s := servers[(i+round)%len(servers)] // who goes first alternates
			res, err := loadgen.Run(context.Background(), loadgen.Spec{Server: loadgen.TCPScheme + s.addr, Conns: openLoopConns,
				Format: loadgen.FormatMemcached, MemcachedKeys: openLoopKeys, ValueSize: openLoopValueSize, MaxLag: time.Second}, sched)
			if err != nil {
				b.Fatalf("%s at %.0f/s: %v", s.name, rate, err)
			}
			out[s.name] = res
			if !show {
				continue
			}
			get, multi := typeStats(res, "GET"), typeStats(res, "MULTIGET")
			fmt.Fprintf(&table, "%-9s %7.0f %7d %8d %5d %5d %5d %9s %9s %9s %14s %9s\n", s.name, rate, res.Sent, res.Answered, res.Overloaded, res.Late, res.Lost,
				ms(get.P50Latency), ms(get.P99Latency), ms(get.P999Latency), ms(multi.P999Latency), res.LagP99.Round(time.Microsecond))
		}
		return out
	}
	// Both servers warm up first (a run at the first rate, not counted):
	// psp's DARC profiles its first 5,000 completions, each server's
	// caches and heap fill.
	run(0, openLoopRate, openLoopWarmUp, false)
	for round := range b.N {
		at := run(round, openLoopRate, openLoopTime, true)
		ratio := float64(typeStats(at["psp"], "GET").P999Latency) / float64(typeStats(at["memcached"], "GET").P999Latency)
		highest, pspFull := 0.0, false
		for _, rate := range openLoopSteps {
			step := run(round, rate, openLoopStepTime, true)
			if !answeredInFull(step["memcached"]) {
				break
			}
			highest, pspFull = rate, answeredInFull(step["psp"])
		}
		b.ReportMetric(ratio, "psp/memcached-GET-p99.9")
		b.ReportMetric(highest, "memcached-full-req/s")
		b.ReportMetric(map[bool]float64{true: 1}[pspFull], "psp-full-at-that-rate")
	}
	// on stdout: go test cuts a benchmark's log at ten lines
	fmt.Printf("open loop, 95%% get + 5%% get of 100 keys, %d TCP connections, latency from the scheduled send:\n%s", openLoopConns, table.String())
}

// answeredInFull reports whether every request of res was answered in
// time: none lost, none late, none shed, no error.
func answeredInFull(res *loadgen.Result) bool {
	return res.Sent == res.Scheduled && res.Answered == res.Sent && res.Lost == 0 && res.Late == 0 && res.ErrorReplies == 0 && res.BadReplies == 0
}

// typeStats returns the named type's statistics in res (zero when absent).
func typeStats(res *loadgen.Result, name string) report.TypeStats {
	for _, ts := range res.Types {
		if ts.Name == name {
			return ts
		}
	}
	return report.TypeStats{}
}

// ms renders a latency in ns as milliseconds.
func ms[T ~int64 | ~float64](ns T) string { return fmt.Sprintf("%.3fms", float64(ns)/1e6) }
