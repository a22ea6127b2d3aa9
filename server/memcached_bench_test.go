package server

import (
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/persephone-go/psp/app/memcached/memcachedtest"
	"github.com/persephone-go/psp/internal/testenv"
)

// memcaslapRun drives addr with memcaslap over UDP (90% gets, 10% sets, 8
// concurrent requests from one thread) for d and returns its throughput
// and mean latency.
func memcaslapRun(tb testing.TB, addr string, d time.Duration) (opsPerSec, avgMicros float64) {
	tb.Helper()
	bin := testenv.RequireTool(tb, "memcaslap")
	secs := fmt.Sprintf("%ds", int(d.Seconds()))
	out, err := exec.Command(bin, "-s", addr, "-U", "-t", secs, "-T", "1", "-c", "8", "-S", secs).CombinedOutput()
	if err != nil {
		tb.Fatalf("memcaslap: %v\n%s", err, out)
	}
	tps := regexp.MustCompile(`TPS: (\d+)`).FindSubmatch(out)
	avg := regexp.MustCompile(`(?s)Total Statistics \(\d+ events\).*?Avg:\s+(\d+)`).FindSubmatch(out)
	if tps == nil || avg == nil {
		tb.Fatalf("memcaslap output without TPS or latency:\n%s", out)
	}
	opsPerSec, _ = strconv.ParseFloat(string(tps[1]), 64)
	avgMicros, _ = strconv.ParseFloat(string(avg[1]), 64)
	for _, counter := range []string{"udp_timeout", "packet_drop"} {
		if m := regexp.MustCompile(counter + `: (\d+)`).FindSubmatch(out); m != nil && string(m[1]) != "0" {
			tb.Logf("%s: %s %s", addr, counter, m[1])
		}
	}
	return opsPerSec, avgMicros
}

// memcslapSets runs memcslap's UDP set test (the only one libmemcached
// runs over UDP: its sets are noreply) and returns sets per second.
func memcslapSets(tb testing.TB, addr string, n int) float64 {
	tb.Helper()
	bin := testenv.RequireTool(tb, "memcslap")
	out, err := exec.Command(bin, "--servers="+addr, "--udp", "--test=set", "--concurrency=2", "--execute-number="+strconv.Itoa(n)).CombinedOutput()
	if err != nil {
		tb.Fatalf("memcslap: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`Time to set\s+(\d+) keys by\s+\d+ threads:\s+([0-9.]+) seconds`).FindSubmatch(out)
	if m == nil {
		tb.Fatalf("memcslap output without set time:\n%s", out)
	}
	keys, _ := strconv.ParseFloat(string(m[1]), 64)
	secs, _ := strconv.ParseFloat(string(m[2]), 64)
	return keys / max(secs, 1e-6)
}

// BenchmarkMemcachedUnderMemcaslap drives psp's memcached application as
// `psp serve --app memcached` runs it with its defaults (UDP dataplane,
// DARC, workers auto, serving in place) and Debian's memcached (two
// threads) with the same clients, one after the other in the same run:
// memcaslap's get/set mix (closed loop, 8 requests in flight) and
// memcslap's UDP sets. It reports both throughputs and their ratio
// (psp/memcached: 1 or more is psp at least as fast). Run it alone, with
// -benchtime 1x (or -count N for several pairs):
//
//	go test -run '^$' -bench MemcachedUnderMemcaslap -benchtime 1x ./server
func BenchmarkMemcachedUnderMemcaslap(b *testing.B) {
	mc := memcachedtest.StartMemcached(b, true, "-t", "2")
	psp := startMemcachedDefaults(b).Addr()
	for range b.N {
		pspOps, pspAvg := memcaslapRun(b, psp, 5*time.Second)
		mcOps, mcAvg := memcaslapRun(b, mc, 5*time.Second)
		pspSets := memcslapSets(b, psp, 20000)
		mcSets := memcslapSets(b, mc, 20000)
		b.ReportMetric(pspOps, "psp-ops/s")
		b.ReportMetric(mcOps, "memcached-ops/s")
		b.ReportMetric(pspOps/mcOps, "psp/memcached")
		b.ReportMetric(pspAvg, "psp-µs/op")
		b.ReportMetric(mcAvg, "memcached-µs/op")
		b.ReportMetric(pspSets, "psp-sets/s")
		b.ReportMetric(mcSets, "memcached-sets/s")
	}
}

// startMemcachedDefaults starts the memcached application with psp serve's
// defaults, on a free loopback port.
func startMemcachedDefaults(tb testing.TB) *Server {
	tb.Helper()
	return runServer(tb, Config{Listen: "127.0.0.1:0", App: App{Name: AppMemcached}, Admin: Admin{Addr: "off"}})
}
