package server

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/persephone-go/psp/app/memcached/memcachedtest"
	"github.com/persephone-go/psp/dispatcher"
	"github.com/persephone-go/psp/internal/testenv"
)

// memcaslapRun drives addr with memcaslap (90% gets, 10% sets, closed
// loop, conc requests in flight from one thread) for d, over UDP (-U) when
// udp is set, else over TCP, and returns its throughput and mean latency.
// An error line of memcaslap's, a UDP timeout or a lost datagram fails
// the benchmark: a server that answers fewer requests does not win by it.
func memcaslapRun(tb testing.TB, addr string, udp bool, conc int, d time.Duration) (opsPerSec, avgMicros float64) {
	tb.Helper()
	bin := testenv.RequireTool(tb, "memcaslap")
	secs := fmt.Sprintf("%ds", int(d.Seconds()))
	args := []string{"-s", addr, "-t", secs, "-T", "1", "-c", strconv.Itoa(conc), "-S", secs}
	if udp {
		args = append(args, "-U")
	}
	out, err := exec.Command(bin, args...).CombinedOutput()
	if err != nil {
		tb.Fatalf("memcaslap %s: %v\n%s", strings.Join(args, " "), err, out)
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
			tb.Errorf("memcaslap against %s: %s %s", addr, counter, m[1])
		}
	}
	if m := regexp.MustCompile(`(?im)^.*(error|failed).*$`).Find(out); m != nil {
		tb.Errorf("memcaslap against %s: %s", addr, m)
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
// `psp serve --app memcached` runs it with its defaults (DARC, workers
// auto, serving in place) and Debian's memcached (two threads) with the
// same client, one after the other in the same run, and reports both
// throughputs and their ratio (psp/memcached: 1 or more is psp at least as
// fast):
//
//   - transport=tcp: psp on --listen tcp://127.0.0.1:PORT (the TCP
//     dataplane, requests scheduled by DARC) and memcached -U 0, under
//     memcaslap's TCP mode: its get/set mix, closed loop, 16 requests in
//     flight from one thread, 8 s.
//   - transport=udp: psp on its default UDP dataplane and memcached -p 0,
//     under memcaslap -U (8 requests in flight, 8 s), then memcslap's UDP
//     sets.
//
// Run it alone, with -benchtime 1x (or -count N for several pairs):
//
//	go test -run '^$' -bench MemcachedUnderMemcaslap -benchtime 1x ./server
func BenchmarkMemcachedUnderMemcaslap(b *testing.B) {
	b.Run("transport=tcp", func(b *testing.B) {
		mc := memcachedtest.StartMemcached(b, false, "-t", "2")
		psp := strings.TrimPrefix(runServer(b, Config{Listen: TransportTCP + "://127.0.0.1:0", App: App{Name: AppMemcached}, Admin: Admin{Addr: "off"}}).Addr(), TransportTCP+"://")
		for range b.N {
			pspOps, pspAvg := memcaslapRun(b, psp, false, 16, 8*time.Second)
			mcOps, mcAvg := memcaslapRun(b, mc, false, 16, 8*time.Second)
			reportPair(b, pspOps, mcOps, "ops/s")
			reportPair(b, pspAvg, mcAvg, "µs/op")
			b.ReportMetric(pspOps/mcOps, "psp/memcached")
		}
	})
	b.Run("transport=udp", func(b *testing.B) {
		mc := memcachedtest.StartMemcached(b, true, "-t", "2")
		psp := startMemcachedDefaults(b).Addr()
		for range b.N {
			pspOps, pspAvg := memcaslapRun(b, psp, true, 8, 8*time.Second)
			mcOps, mcAvg := memcaslapRun(b, mc, true, 8, 8*time.Second)
			pspSets := memcslapSets(b, psp, 20000)
			mcSets := memcslapSets(b, mc, 20000)
			reportPair(b, pspOps, mcOps, "ops/s")
			reportPair(b, pspAvg, mcAvg, "µs/op")
			reportPair(b, pspSets, mcSets, "sets/s")
			b.ReportMetric(pspOps/mcOps, "psp/memcached")
		}
	})
}

// reportPair reports psp's and memcached's figures of one unit.
func reportPair(b *testing.B, psp, memcached float64, unit string) {
	b.ReportMetric(psp, "psp-"+unit)
	b.ReportMetric(memcached, "memcached-"+unit)
}

// startMemcachedDefaults starts the memcached application with psp serve's
// defaults, on a free loopback port.
func startMemcachedDefaults(tb testing.TB) *Server {
	tb.Helper()
	return runServer(tb, Config{Listen: "127.0.0.1:0", App: App{Name: AppMemcached}, Admin: Admin{Addr: "off"}})
}

// BenchmarkLoneGet measures a lone request's time in the server: the
// memcached application with psp serve's defaults, one get at a time,
// every 5ms (so nothing queues and every thread has gone idle in between),
// from a client in a process of its own (this test binary, run again as
// loneClient). It reports the GET type's in-server latency p50 and p99 and
// the receive, service and transmit stages' p50 (bucket upper bounds, from the
// server's stage histograms, as psp status shows them) and the client's
// round trip p50.
//
// The server runs with the dispatcher parking as soon as it is idle
// (--dispatcher-spin 0) and polling (the default). The client either
// sleeps in the kernel until the reply comes (client=sleeping) or polls
// its socket (client=polling), as a client that bypasses the kernel
// would. On loopback the reply's sendmmsg runs the client's receive path
// inside the server's call, and wakes a sleeping client there: with
// client=sleeping "transmit" includes that wake-up (tens of microseconds
// on a VM whose idle vCPUs halt).
//
// server=bare-echo is the floor this kernel sets for the same figure: a
// thread that spins on a non-blocking socket and echoes each datagram
// with sendto, timed from the same kernel receive stamp to the return of
// its send (latency; receive ends when recvmsg returns, transmit is the
// sendto), with its p50 rounded up to the same histogram buckets. b.N
// counts gets.
//
//	go test -run '^$' -bench LoneGet -benchtime 400x ./server
func BenchmarkLoneGet(b *testing.B) {
	for _, server := range []struct {
		name string
		spin time.Duration // DispatcherSpin; 0 for bare-echo
	}{{"parking", -1}, {"polling", 0}, {"bare-echo", 0}} {
		for _, client := range []string{"sleeping", "polling"} {
			b.Run("server="+server.name+"/client="+client, func(b *testing.B) {
				if server.name == "bare-echo" {
					benchBareEcho(b, client)
					return
				}
				srv := runServer(b, Config{Listen: "127.0.0.1:0", App: App{Name: AppMemcached}, Admin: Admin{Addr: "off"}, DispatcherSpin: server.spin})
				runLoneClient(b, srv.Addr(), 50, 0, client) // profile GET, so that it is served in place
				before := getStages(b, srv)
				b.ResetTimer()
				rttP50 := runLoneClient(b, srv.Addr(), b.N, loneInterval, client)
				b.StopTimer()
				time.Sleep(5 * time.Millisecond) // the stage histograms are published within 1ms
				after := getStages(b, srv)
				for _, s := range []dispatcher.Stage{dispatcher.StageLatency, dispatcher.StageReceive, dispatcher.StageService, dispatcher.StageTransmit} {
					h := after[s]
					for i, v := range before[s].Buckets {
						h.Buckets[i] -= v
					}
					h.Count -= before[s].Count
					b.ReportMetric(float64(h.QuantileNs(0.5)), s.String()+"-p50-ns")
					if s == dispatcher.StageLatency {
						b.ReportMetric(float64(h.QuantileNs(0.99)), s.String()+"-p99-ns")
					}
				}
				b.ReportMetric(float64(rttP50.Nanoseconds()), "client-rtt-p50-ns")
			})
		}
	}
}

// benchBareEcho is BenchmarkLoneGet's server=bare-echo: the lone client
// against bareEcho.
func benchBareEcho(b *testing.B, client string) {
	echo := startBareEcho(b)
	runLoneClient(b, echo.addr, 50, 0, client)
	echo.reset()
	b.ResetTimer()
	rttP50 := runLoneClient(b, echo.addr, b.N, loneInterval, client)
	b.StopTimer()
	latency, receive, transmit := echo.stop(b)
	b.ReportMetric(float64(bucketedNs(latency.quantile(0.5))), "latency-p50-ns")
	b.ReportMetric(float64(bucketedNs(latency.quantile(0.99))), "latency-p99-ns")
	b.ReportMetric(float64(bucketedNs(receive.quantile(0.5))), "receive-p50-ns")
	b.ReportMetric(float64(bucketedNs(transmit.quantile(0.5))), "transmit-p50-ns")
	b.ReportMetric(float64(rttP50.Nanoseconds()), "client-rtt-p50-ns")
}

// bucketedNs rounds ns up to the upper bound of its stage histogram bucket,
// as psp status reports quantiles.
func bucketedNs(ns int64) int64 {
	for i := range dispatcher.NumBuckets - 1 {
		if ns <= dispatcher.BucketBound(i) {
			return dispatcher.BucketBound(i)
		}
	}
	return ns
}

// durations is a list of measured durations.
type durations []time.Duration

// quantile returns the q-quantile (nearest rank) in ns, 0 when empty.
func (d durations) quantile(q float64) int64 {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(int(q*float64(len(s))), len(s)-1)].Nanoseconds()
}

// loneInterval is BenchmarkLoneGet's pause between two gets.
const loneInterval = 5 * time.Millisecond

// loneClientEnv, set to "ADDR N INTERVAL MODE", makes this test binary the
// lone client (see TestMain).
const loneClientEnv = "PSP_TEST_LONE_CLIENT"

// runLoneClient runs the lone client in a process of its own, waiting for
// each reply as mode says ("sleeping" or "polling"), and returns its round
// trip p50.
func runLoneClient(b *testing.B, addr string, n int, interval time.Duration, mode string) time.Duration {
	b.Helper()
	cmd := exec.Command(os.Args[0], "-test.run", "^$")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s %d %s %s", loneClientEnv, addr, n, interval, mode))
	out, err := cmd.Output()
	if err != nil {
		b.Fatalf("lone client: %v\n%s", err, out)
	}
	p50, err := time.ParseDuration(strings.TrimSpace(string(out)))
	if err != nil {
		b.Fatalf("lone client printed %q: %v", out, err)
	}
	return p50
}

// loneClient sends n memcached gets of one key to addr, one at a time,
// interval apart, and prints the round trips' median. With mode "sleeping"
// it waits for each reply in the kernel; with "polling" it spins on its
// non-blocking socket until the reply is there.
func loneClient(spec string) error {
	var addr, every, mode string
	var n int
	if _, err := fmt.Sscanf(spec, "%s %d %s %s", &addr, &n, &every, &mode); err != nil {
		return fmt.Errorf("%s %q: %w", loneClientEnv, spec, err)
	}
	interval, err := time.ParseDuration(every)
	if err != nil {
		return fmt.Errorf("%s %q: %w", loneClientEnv, spec, err)
	}
	if mode != "sleeping" && mode != "polling" {
		return fmt.Errorf("%s %q: mode %q is neither sleeping nor polling", loneClientEnv, spec, mode)
	}
	c, err := net.Dial("udp", addr)
	if err != nil {
		return err
	}
	conn := c.(*net.UDPConn)
	defer conn.Close()
	raw, err := conn.SyscallConn()
	if err != nil {
		return err
	}
	get := memcachedtest.Request{Body: "get k1\r\n"}.Datagram(1)
	reply := make([]byte, 2048)
	rtts := make([]time.Duration, 0, n)
	for range n {
		time.Sleep(interval)
		start := time.Now()
		if _, err := conn.Write(get); err != nil {
			return err
		}
		if mode == "polling" {
			err = pollRead(raw, reply, start.Add(5*time.Second))
		} else {
			_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
			_, err = conn.Read(reply)
		}
		if err != nil {
			return err
		}
		rtts = append(rtts, time.Since(start))
	}
	slices.Sort(rtts)
	fmt.Println(rtts[len(rtts)/2])
	return nil
}

// pollRead reads one datagram from raw's non-blocking socket into buf,
// spinning (never sleeping) until one is there or deadline passes.
func pollRead(raw syscall.RawConn, buf []byte, deadline time.Time) error {
	var readErr error
	err := raw.Read(func(fd uintptr) bool {
		for {
			_, err := unix.Read(int(fd), buf)
			switch {
			case err == nil:
				return true
			case err != unix.EAGAIN && err != unix.EINTR:
				readErr = err
				return true
			case time.Now().After(deadline):
				readErr = os.ErrDeadlineExceeded
				return true
			}
		}
	})
	if err != nil {
		return err
	}
	return readErr
}

// getStages returns the GET type's stage histograms.
func getStages(b *testing.B, srv *Server) dispatcher.TypeStages {
	b.Helper()
	d := srv.Dispatcher()
	names := d.TypeNames()
	for t, st := range d.Stages() {
		if st != nil && t < len(names) && names[t] == "GET" {
			return *st
		}
	}
	b.Fatal("no GET ran")
	return dispatcher.TypeStages{}
}
