package tests

import (
	"encoding/csv"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/persephone-go/psp/app/redis/redistest"
)

// BenchmarkRedisBenchmarkRatio runs Debian's redis-benchmark (-t get,set,
// 50 clients, 100,000 requests a test) against psp serve --app redis (2
// workers, DARC) and against redis-server, one after the other in each
// round (who goes first alternates), without pipelining and with -P 16.
// It prints each run's requests/s and reports psp's GET and SET
// requests/s over redis-server's (psp/redis-GET-x, psp/redis-SET-x, and
// the same with -P16; the target is 1.0 or more). The servers and the
// client share the machine's cores. Run it alone:
//
//	go test -run '^$' -bench RedisBenchmarkRatio -benchtime 1x ./tests
func BenchmarkRedisBenchmarkRatio(b *testing.B) {
	real := redistest.StartRedis(b)
	_, psp := startRedisServer(b)
	servers := []struct{ name, addr string }{{"psp", psp}, {"redis-server", real}}
	var table strings.Builder
	fmt.Fprintf(&table, "%-13s %-9s %12s %12s\n", "server", "pipeline", "SET req/s", "GET req/s")
	sums := map[string]float64{} // server, pipeline and test -> requests/s summed over rounds
	for round := range b.N {
		for _, pipeline := range []int{1, 16} {
			for i := range servers {
				s := servers[(i+round)%len(servers)]
				rps := redisBenchmark(b, s.addr, pipeline)
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
// clients and returns each test's requests/s.
func redisBenchmark(b *testing.B, addr string, pipeline int) map[string]float64 {
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
	out, err := runTool(b, "redis-benchmark", "-h", host, "-p", port, "-c", "50", "-n", strconv.Itoa(n), "-P", strconv.Itoa(pipeline),
		"-t", "get,set", "--csv")
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
