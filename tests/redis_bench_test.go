package tests

import (
	"encoding/csv"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/persephone-go/psp/app/redis/redistest"
	"github.com/persephone-go/psp/internal/affinity"
	"github.com/persephone-go/psp/internal/testenv"
)

// BenchmarkRedisBenchmarkRatio runs Debian's redis-benchmark (-t get,set,
// 50 clients, 100,000 requests a test) against psp serve --app redis (2
// workers, DARC) and against redis-server, each twice a round (A B B A,
// who goes first alternating), without pipelining and with -P 16.
// It prints each run's requests/s and reports psp's GET and SET
// requests/s over redis-server's (psp/redis-GET-x, psp/redis-SET-x, and
// the same with -P16; the target is 1.0 or more), in two setups:
//
//   - own-core: each server runs on the machine's last CPU and
//     redis-benchmark on the others (taskset -c), and psp's dispatcher
//     polls for requests (--dispatcher-spin 20ms --spin 0), as the paper's
//     dispatcher does on a core of its own. redis-server runs on that same
//     core. The client's thread is the ceiling of both setups (it uses a
//     whole core against either server): a server that polls spares the
//     client the wake-up of a sleeping server on every request it sends,
//     and one on its own core never takes the client's.
//   - shared: servers and client share every core, psp with its defaults
//     (its dispatcher sleeps when idle, as redis-server does).
//
// With a single CPU only shared runs. Run it alone:
//
//	go test -run '^$' -bench RedisBenchmarkRatio -benchtime 3x ./tests
func BenchmarkRedisBenchmarkRatio(b *testing.B) {
	cpus, err := affinity.Available()
	if err != nil {
		b.Fatal(err)
	}
	b.Run("own-core", func(b *testing.B) {
		if len(cpus) < 2 {
			b.Skipf("one CPU (%v): no core apart from the client's", cpus)
		}
		server, client := affinity.FormatList(cpus[len(cpus)-1:]), affinity.FormatList(cpus[:len(cpus)-1])
		real := redistest.StartRedisOn(b, server)
		psp := fmt.Sprintf("127.0.0.1:%d", freePort(b, "tcp"))
		startServer(b, serverOptions{app: "redis", policy: "darc", dilation: -1, listen: "tcp://" + psp, cpus: server,
			extra: []string{"--workers", "2", "--dispatcher-spin", "20ms", "--spin", "0"}})
		b.Logf("servers on CPU %s, redis-benchmark on %s", server, client)
		compareRedisBenchmark(b, psp, real, client)
	})
	b.Run("shared", func(b *testing.B) {
		real := redistest.StartRedis(b)
		_, psp := startRedisServer(b)
		compareRedisBenchmark(b, psp, real, "")
	})
}

// compareRedisBenchmark runs b.N rounds of redisBenchmark against psp and
// redis-server, with and without -P 16, prints the table and reports
// psp's requests/s over redis-server's (their sums over the runs).
func compareRedisBenchmark(b *testing.B, psp, real, clientCPUs string) {
	servers := []struct{ name, addr string }{{"psp", psp}, {"redis-server", real}}
	var table strings.Builder
	fmt.Fprintf(&table, "%s\n%-13s %-9s %12s %12s\n", b.Name(), "server", "pipeline", "SET req/s", "GET req/s")
	sums := map[string]float64{} // server, pipeline and test -> requests/s summed over rounds
	for round := range b.N {
		for _, pipeline := range []int{1, 16} {
			// Each server runs twice a round, in the order A B B A (B A A
			// B the next round): the host's speed drifts over seconds, and
			// a drift that lasts the round weighs on both alike.
			for _, i := range []int{0, 1, 1, 0} {
				s := servers[(i+round)%len(servers)]
				rps := redisBenchmark(b, s.addr, pipeline, clientCPUs)
				fmt.Fprintf(&table, "%-13s %-9d %12.0f %12.0f\n", s.name, pipeline, rps["SET"], rps["GET"])
				for test, v := range rps {
					sums[fmt.Sprintf("%s %d %s", s.name, pipeline, test)] += v
				}
			}
		}
	}
	b.StopTimer()
	fmt.Print(table.String())
	for _, pipeline := range []int{1, 16} {
		for _, test := range []string{"GET", "SET"} {
			p, r := sums[fmt.Sprintf("psp %d %s", pipeline, test)], sums[fmt.Sprintf("redis-server %d %s", pipeline, test)]
			unit := "psp/redis-" + test + "-x"
			if pipeline > 1 {
				unit = fmt.Sprintf("psp/redis-%s-P%d-x", test, pipeline)
			}
			b.ReportMetric(p/r, unit)
		}
	}
}

// redisBenchmark runs redis-benchmark -t get,set against addr with 50
// clients (on clientCPUs when set) and returns each test's requests/s.
func redisBenchmark(b *testing.B, addr string, pipeline int, clientCPUs string) map[string]float64 {
	b.Helper()
	host, port, _ := net.SplitHostPort(addr)
	// 100,000 pipelined requests take a tenth of a second, in which the
	// connections' setup and a moment of the other programs on the
	// machine weigh as much as the servers: pipelined runs send ten
	// times as many.
	n := 100000
	if pipeline > 1 {
		n *= 10
	}
	args := []string{"-h", host, "-p", port, "-c", "50", "-n", strconv.Itoa(n), "-P", strconv.Itoa(pipeline), "-t", "get,set", "--csv"}
	tool := "redis-benchmark"
	if clientCPUs != "" {
		args = append([]string{"-c", clientCPUs, testenv.RequireTool(b, tool)}, args...)
		tool = "taskset"
	}
	out, err := runTool(b, tool, args...)
	if err != nil {
		b.Fatalf("redis-benchmark against %s: %v\n%s", addr, err, out)
	}
	recs, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	if err != nil {
		b.Fatalf("redis-benchmark's CSV: %v\n%s", err, out)
	}
	rps := map[string]float64{}
	for _, r := range recs {
		if len(r) < 2 || r[0] == "test" {
			continue
		}
		v, err := strconv.ParseFloat(r[1], 64)
		if err != nil {
			b.Fatalf("redis-benchmark's CSV: %q: %v", r, err)
		}
		rps[r[0]] = v
	}
	if rps["GET"] == 0 || rps["SET"] == 0 {
		b.Fatalf("redis-benchmark printed no GET or SET figure:\n%s", out)
	}
	return rps
}
