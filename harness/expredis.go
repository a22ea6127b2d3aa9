package harness

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/persephone-go/psp/darc"
	"github.com/persephone-go/psp/loadgen"
	"github.com/persephone-go/psp/report"
	"github.com/persephone-go/psp/server"
)

// The redis experiment's setup: the open-loop load on this
// project's 2-core machines.
const (
	redisExpConns     = 20
	redisExpRate      = 5000
	redisExpKeys      = 100000
	redisExpValueSize = 64
	redisExpWorkers   = 2
	// RedisServerBinary is the redis-server executable the redis
	// experiment runs beside psp when it is on PATH.
	RedisServerBinary = "redis-server"
)

// redisMixes are the command mixes the redis experiment plays: GETs
// alone first (each server's own quiet figure), then with a long command.
var redisMixes = []struct{ label, mix, long string }{
	{"GET only", "get:1", ""},
	{"1% SCAN 0 COUNT 10000", "get:0.99,scan10000:0.01", "SCAN10000"},
	{"1% ZRANGE of 10,000", "get:0.99,zrange10000:0.01", "ZRANGE10000"},
	{"0.2% KEYS *", "get:0.998,keys:0.002", "KEYS"},
}

// redisServer is a server the redis experiment measures: psp with a
// policy, or redis-server.
type redisServer struct {
	label string
	addr  string // host:port
	stop  func() error
}

func expRedis() Experiment {
	return Experiment{
		Name:  "redis",
		Title: "Redis's protocol: GET tails under SCAN, ZRANGE and KEYS mixes, psp serve --app redis (DARC, c-FCFS) beside redis-server on the same cores",
		Setup: "psp serve --app redis (darc, cfcfs; 2 workers) and redis-server when on PATH, all running at once; 100,000 keys of 64 bytes, 20 connections, 5,000 requests/s open loop; GETs alone, with 1% SCAN 0 COUNT 10000, 1% ZRANGE of 10,000 members, 0.2% KEYS *; 10 s each after 2 s of the same mix unmeasured (10 s for the first mix, the first runs after the preload), servers in turn",
		Live:  true,
		run:   runRedis,
	}
}

func runRedis(ctx context.Context, x *expRun) error {
	keys := pick(x, redisExpKeys, 10000)
	dur := x.duration(10*time.Second, time.Second)
	prewarm := pick(x, 2*time.Second, time.Second)
	mixes := redisMixes
	if x.small {
		mixes = mixes[:2]
	}
	servers, err := x.startRedisServers(ctx)
	defer func() {
		for _, s := range servers {
			if err := s.stop(); err != nil {
				x.logf("stop %s: %v", s.label, err)
			}
		}
	}()
	if err != nil {
		return err
	}
	for _, s := range servers {
		x.logf("%s on %s: storing %d keys, a sorted set and a list of %d members", s.label, s.addr, keys, loadgen.RedisCollection)
		if err := loadgen.PreloadRedis(ctx, s.addr, keys, redisExpValueSize); err != nil {
			return fmt.Errorf("%s: %w", s.label, err)
		}
	}
	// results[seed][mix][server]
	type key struct {
		seed        uint64
		mix, server int
	}
	results := map[key]*loadgen.Result{}
	seeds := x.seeds(1, 1)
	for _, seed := range seeds {
		for mi, m := range mixes {
			w, err := loadgen.RedisMix(m.mix)
			if err != nil {
				return err
			}
			for i := range servers {
				si := (i + mi) % len(servers) // who goes first turns
				s := servers[si]
				warm := prewarm
				if mi == 0 {
					// The first run after the preload: as long as a
					// measured one, or the server's collection of the
					// preload's garbage lands in it.
					warm = max(prewarm, dur)
				}
				plan := Plan{Workload: w, Workers: redisExpWorkers, Rate: redisExpRate, Duration: warm, Seed: seed + 1000,
					Spec: loadgen.Spec{Server: loadgen.TCPScheme + s.addr, Conns: redisExpConns, Format: loadgen.FormatRedis,
						RedisKeys: keys, ValueSize: redisExpValueSize, Grace: 10 * time.Second}}
				if _, err := plan.Run(ctx, s.label+" warm-up"); err != nil {
					return fmt.Errorf("%s, %s: warm-up: %w", s.label, m.label, err)
				}
				plan.Duration, plan.Seed, plan.Progress = dur, seed, x.opt.Progress
				x.logf("%s, %s, seed %d: %d requests/s for %v", s.label, m.label, seed, redisExpRate, dur)
				res, err := plan.Run(ctx, s.label+" "+m.label)
				if err != nil {
					return fmt.Errorf("%s, %s: %w", s.label, m.label, err)
				}
				results[key{seed, mi, si}] = res
				p := plan.Point(res, s.label, math.NaN(), math.NaN())
				p.Seed, p.Workload = seed, m.label
				x.res.Points = append(x.res.Points, p)
			}
		}
	}

	tails := Table{Title: fmt.Sprintf("GET and long-command latency (ms), %d connections, %d requests/s, %d keys", redisExpConns, redisExpRate, keys),
		Header: []string{"mix", "server", "seed", "sent", "answered", "shed", "late", "lost", "GET p50", "GET p99", "GET p99.9", "long p99", "long p99.9", "long max", "long shed"},
		Note: fmt.Sprintf("(each %v run follows %v of the same mix unmeasured, its first %.0f%% left out; latency from each request's scheduled send; shed: answered BUSY by psp's queue deadlines; late: answered past the schedule's end and 10 s; ! = not sustained: the client fell behind its schedule, or requests were shed or went unanswered)",
			dur, prewarm, loadgen.DefaultWarmup*100)}
	ratios := Table{Title: "psp's GET tails over redis-server's and over its own GET-only run, and the long command's p99.9 over redis-server's",
		Header: []string{"mix", "server", "seed", "GET p99 / redis", "GET p99.9 / redis", "GET p99 / GET only", "GET p99.9 / GET only", "long p99.9 / redis"},
		Note:   "(targets: at most 0.33, 0.33, 2, 2 and 2; - without redis-server)"}
	var measured []string
	for _, seed := range seeds {
		for mi, m := range mixes {
			for si, s := range servers {
				res := results[key{seed, mi, si}]
				get, long := typeStats(res, "GET"), typeStats(res, m.long)
				mark := ""
				if !res.Sustained {
					mark = " !"
				}
				row := []string{m.label, s.label + mark, strconv.FormatUint(seed, 10), strconv.FormatInt(res.Sent, 10), strconv.FormatInt(res.Answered, 10),
					strconv.FormatInt(res.Overloaded, 10), strconv.FormatInt(res.Late, 10), strconv.FormatInt(res.Lost, 10), msCell(get.P50Latency), msCell(get.P99Latency), msCell(get.P999Latency), "-", "-", "-", "-"}
				if m.long != "" {
					row[11], row[12], row[13], row[14] = msCell(long.P99Latency), msCell(long.P999Latency), msCell(long.MaxLatency), strconv.FormatUint(long.Dropped, 10)
				}
				tails.Rows = append(tails.Rows, row)
				if m.long == "" || s.label == RedisServerBinary {
					continue
				}
				quiet := typeStats(results[key{seed, 0, si}], "GET")
				r := []string{m.label, s.label, strconv.FormatUint(seed, 10), "-", "-",
					ratioCell(get.P99Latency, quiet.P99Latency), ratioCell(get.P999Latency, quiet.P999Latency), "-"}
				if ri := redisIndex(servers); ri >= 0 {
					rg, rl := typeStats(results[key{seed, mi, ri}], "GET"), typeStats(results[key{seed, mi, ri}], m.long)
					r[3], r[4], r[7] = ratioCell(get.P99Latency, rg.P99Latency), ratioCell(get.P999Latency, rg.P999Latency), ratioCell(long.P999Latency, rl.P999Latency)
					if s.label == pspLabel(darc.NameDARC) && seed == seeds[0] {
						measured = append(measured, fmt.Sprintf("%s: GET p99.9 %s ms (redis-server %s, psp GET only %s)", m.label,
							msCell(get.P999Latency), msCell(rg.P999Latency), msCell(quiet.P999Latency)))
					}
				} else if s.label == pspLabel(darc.NameDARC) && seed == seeds[0] {
					measured = append(measured, fmt.Sprintf("%s: GET p99.9 %s ms (psp GET only %s)", m.label, msCell(get.P999Latency), msCell(quiet.P999Latency)))
				}
				ratios.Rows = append(ratios.Rows, r)
			}
		}
	}
	x.table(tails)
	x.table(ratios)
	// The chart: each server's GET p99.9 by mix, the first seed's.
	var names []string
	for mi, m := range mixes {
		names = append(names, fmt.Sprintf("%d: %s", mi, m.label))
	}
	ch := &report.Chart{Title: fmt.Sprintf("GET p99.9 by mix, %d requests/s over %d connections, %d keys", redisExpRate, redisExpConns, keys),
		XLabel: "mix (" + strings.Join(names, ", ") + ")", YLabel: "GET p99.9 (ms, log)", LogY: true}
	for si, s := range servers {
		ln := report.Line{Label: s.label}
		for mi := range mixes {
			if v := typeStats(results[key{seeds[0], mi, si}], "GET").P999Latency; v > 0 {
				ln.X, ln.Y = append(ln.X, float64(mi)), append(ln.Y, float64(v)/1e6)
			}
		}
		ch.Lines = append(ch.Lines, ln)
	}
	if err := x.saveChart(ch, "get-p999.png"); err != nil {
		return err
	}
	without := ""
	if redisIndex(servers) < 0 {
		without = "; redis-server not on PATH, psp alone"
	}
	x.res.Measured = fmt.Sprintf("psp DARC, %d workers, %d requests/s over %d connections: %s%s", redisExpWorkers, redisExpRate, redisExpConns, strings.Join(measured, "; "), without)
	return nil
}

// pspLabel names psp with a policy in the redis experiment's tables.
func pspLabel(policy string) string { return "psp " + policy }

// redisIndex is redis-server's index among servers, or -1.
func redisIndex(servers []redisServer) int {
	for i, s := range servers {
		if s.label == RedisServerBinary {
			return i
		}
	}
	return -1
}

// startRedisServers starts psp serve --app redis with DARC and with
// c-FCFS, and redis-server when it is on PATH. It returns the servers
// started so far, also on error.
func (x *expRun) startRedisServers(ctx context.Context) ([]redisServer, error) {
	var out []redisServer
	for _, policy := range []string{darc.NameDARC, darc.NameCFCFS} {
		rs, err := x.opt.Launcher.Launch(ctx, ServerSpec{Policy: policy, Workers: redisExpWorkers, App: server.AppRedis,
			Transport: server.TransportTCP, LogPath: filepath.Join(x.opt.Out, "psp-"+policy+".log")})
		if err != nil {
			return out, err
		}
		addr, _ := strings.CutPrefix(rs.Listen, loadgen.TCPScheme)
		out = append(out, redisServer{label: pspLabel(policy), addr: addr, stop: rs.Stop})
	}
	path, err := exec.LookPath(RedisServerBinary)
	if err != nil {
		x.logf("%s is not on PATH: psp alone (Debian: apt-get install redis-server)", RedisServerBinary)
		return out, nil
	}
	s, err := startRedisBinary(ctx, path)
	if err != nil {
		return out, err
	}
	return append(out, s), nil
}

// startRedisBinary starts redis-server on a free loopback port, without
// persistence, and returns once it answers PING.
func startRedisBinary(ctx context.Context, path string) (redisServer, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return redisServer{}, fmt.Errorf("start %s: %w", path, err)
	}
	addr := l.Addr().String()
	l.Close()
	_, port, _ := net.SplitHostPort(addr)
	cmd := exec.Command(path, "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--protected-mode", "no")
	child, err := startChild(cmd)
	if err != nil {
		return redisServer{}, fmt.Errorf("start %s: %w", path, err)
	}
	stop := func() error {
		if err := child.stop(); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		return nil
	}
	s := redisServer{label: RedisServerBinary, addr: addr, stop: stop}
	deadline := time.Now().Add(startupTimeout)
	for {
		if err := redisPing(ctx, addr); err == nil {
			return s, nil
		} else if time.Now().After(deadline) || ctx.Err() != nil {
			_ = stop()
			return redisServer{}, fmt.Errorf("start %s on %s: %w", path, addr, err)
		}
		select {
		case <-child.exited:
			return redisServer{}, fmt.Errorf("start %s on %s: exited: %v", path, addr, child.waitErr)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// redisPing sends PING to addr and expects +PONG.
func redisPing(ctx context.Context, addr string) error {
	d := net.Dialer{Timeout: time.Second}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if line != "+PONG\r\n" {
		return errors.New("PING answered " + strconv.Quote(line))
	}
	return nil
}

// typeStats returns the statistics of the type called name in res (zero
// when it has none).
func typeStats(res *loadgen.Result, name string) report.TypeStats {
	for _, ts := range res.Types {
		if ts.Name == name {
			return ts
		}
	}
	return report.TypeStats{}
}

// msCell renders a latency in ns as milliseconds.
func msCell(ns int64) string {
	if ns == 0 {
		return "-"
	}
	return strconv.FormatFloat(float64(ns)/1e6, 'f', 2, 64)
}

// ratioCell renders a/b.
func ratioCell(a, b int64) string {
	if a == 0 || b == 0 {
		return "-"
	}
	return strconv.FormatFloat(float64(a)/float64(b), 'f', 2, 64)
}
