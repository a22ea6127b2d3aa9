package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"
	"golang.org/x/term"

	"github.com/persephone-go/psp/admin"
	"github.com/persephone-go/psp/harness"
	"github.com/persephone-go/psp/internal/connpick"
	"github.com/persephone-go/psp/loadgen"
	"github.com/persephone-go/psp/report"
	"github.com/persephone-go/psp/server"
	"github.com/persephone-go/psp/workload"
)

// loadFlags are the flags psp client and psp sweep share: the workload and
// how the client plays it.
func loadFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "workload", Value: "high-bimodal", Usage: "`WORKLOAD`: a built-in one (" + strings.Join(workload.Names(), ", ") + ") or a YAML/JSON workload file"},
		&cli.IntFlag{Name: "workers", Value: 14, Usage: "the server's worker count, to turn a load into a rate"},
		&cli.Float64Flag{Name: "dilation", Usage: "the server's time dilation (emulate app: service time x dilation); slowdowns are computed against service time x dilation and rates derived from loads are divided by it", DefaultText: "the server's, from --admin; else 1"},
		&cli.DurationFlag{Name: "duration", Value: 5 * time.Second, Usage: "length of each run's schedule"},
		&cli.Uint64Flag{Name: "seed", Value: 1, Usage: "seed of the arrival schedule (same seed, same schedule)"},
		&cli.Float64Flag{Name: "warmup", Value: loadgen.DefaultWarmup, Usage: "fraction of the earliest requests left out of the statistics (0 keeps all)"},
		&cli.DurationFlag{Name: "grace", Usage: "how long after the schedule's end replies still count as in time", DefaultText: "20 x the longest mean service time x dilation, at least 100ms"},
		&cli.DurationFlag{Name: "max-lag", Value: loadgen.DefaultMaxLag, Usage: "tolerated 99th-percentile lag of the sender behind its schedule; above it a run is not sustained"},
		&cli.StringFlag{Name: "format", Value: loadgen.FormatPSP, Usage: "request format: psp (16-byte header carrying the service time; spin, emulate and tpcc apps), kv (GET/SCAN + key for the kv app; use the rocksdb workload), memcached (memcached's protocol, over UDP or TCP: get, multi-get, set; use the memcached workload) or redis (Redis's protocol over TCP; give the commands with --mix)"},
		&cli.StringFlag{Name: "mix", Usage: "--format redis: the command `MIX`, each command's share, e.g. get:0.99,scan10000:0.01 (commands: get, set, incr, ping, mget<N>, scan<COUNT>, keys, zrange<N>, lrange<N>)"},
		&cli.IntFlag{Name: "redis-keys", Value: loadgen.DefaultRedisKeys, Usage: "--format redis: the key space key:0..key:<N-1>, stored before each run with a sorted set and a list of 10,000 members (see --preload)"},
		&cli.IntFlag{Name: "kv-keys", Value: 5000, Usage: "keys preloaded by the kv server (--format kv): GETs read k00000..k<N-1>"},
		&cli.IntFlag{Name: "memcached-keys", Value: loadgen.DefaultMemcachedKeys, Usage: "--format memcached: the key space k0..k<N-1>, stored before each run (see --preload)"},
		&cli.IntFlag{Name: "multiget-keys", Value: loadgen.DefaultMultiGetKeys, Usage: "--format memcached: keys per MULTIGET"},
		&cli.IntFlag{Name: "value-size", Value: loadgen.DefaultValueSize, Usage: "--format memcached or redis: bytes per value (SET and preload)"},
		&cli.BoolFlag{Name: "preload", Value: true, Usage: "--format memcached or redis: set every key before each run, so reads hit (--preload=false skips it; redis: FLUSHALL first)"},
		&cli.DurationFlag{Name: "spin-window", Value: loadgen.DefaultSpinWindow, Usage: "how close to each send time the sender stops sleeping and spins without yielding, so that the send leaves on time (a sleep can wake tens of microseconds late); 0 always sleeps. A server on the same cores loses the CPU the spin takes"},
		&cli.BoolFlag{Name: "from-send", Usage: "measure latencies from each request's actual send time, leaving out the client's own lag behind its schedule (an overloaded client machine); default: from the intended send time"},
		&cli.IntFlag{Name: "conns", Value: loadgen.DefaultConns, Usage: "TCP connections to a tcp:// server, each request on the one --conn-pick chooses"},
		connPickFlag(),
		&cli.BoolFlag{Name: "progress", Usage: "show progress bars even when stderr is not a terminal"},
	}
}

// connPickFlag is --conn-pick, of psp client and psp sim.
func connPickFlag() cli.Flag {
	return &cli.StringFlag{Name: "conn-pick", Value: string(connpick.Default), Usage: "how a request's TCP connection is chosen: " +
		"pool, an idle connection (no request in flight), else the one with the fewest in flight, as the connection pools of client libraries " +
		"(redis-py, go-redis, Jedis, libmemcached) send; round-robin, request i on connection i mod --conns whatever is in flight there, " +
		"as a client pipelining on every connection in turn"}
}

// maxSpinWindow bounds --spin-window: a sender spinning longer than this
// between sends is a busy loop, not a timer.
const maxSpinWindow = time.Second

// planFromFlags reads the shared load flags into a plan; the rate or load
// comes later.
func planFromFlags(c *cli.Context) (harness.Plan, error) {
	if err := refuseZero(c, "workload", "workers", "dilation", "duration", "grace", "max-lag", "kv-keys", "format", "memcached-keys", "multiget-keys", "value-size", "redis-keys", "mix"); err != nil {
		return harness.Plan{}, err
	}
	var w workload.Workload
	var err error
	if mix := c.String("mix"); mix != "" {
		if c.IsSet("workload") {
			return harness.Plan{}, errors.New("--mix and --workload: give one (--mix is the redis format's workload)")
		}
		if c.String("format") != loadgen.FormatRedis {
			return harness.Plan{}, fmt.Errorf("--mix is a command mix of the redis format: give --format %s", loadgen.FormatRedis)
		}
		if w, err = loadgen.RedisMix(mix); err != nil {
			return harness.Plan{}, fmt.Errorf("--mix: %w", err)
		}
	} else if w, err = workload.Parse(c.String("workload")); err != nil {
		return harness.Plan{}, fmt.Errorf("--workload: %w", err)
	}
	warm := c.Float64("warmup")
	if err := checkWarmup(warm); err != nil {
		return harness.Plan{}, err
	}
	if warm == 0 {
		warm = -1 // keep every sample (loadgen.Spec's zero is the default)
	}
	if d := c.Float64("dilation"); d < 0 || math.IsInf(d, 0) || math.IsNaN(d) {
		return harness.Plan{}, fmt.Errorf("--dilation %v: want > 0", d)
	}
	if c.Int("workers") < 1 {
		return harness.Plan{}, fmt.Errorf("--workers %d: want at least 1", c.Int("workers"))
	}
	if d := c.Duration("duration"); d <= 0 || d > server.MaxDuration {
		return harness.Plan{}, fmt.Errorf("--duration %v: want > 0, up to %v", d, server.MaxDuration)
	}
	for _, f := range []string{"grace", "max-lag"} {
		if d := c.Duration(f); !(d >= 0 && d <= server.MaxDuration) {
			return harness.Plan{}, fmt.Errorf("--%s %v: want a duration up to %v (not negative)", f, d, server.MaxDuration)
		}
	}
	if n := c.Int("conns"); n < 1 || n > loadgen.MaxConns {
		return harness.Plan{}, fmt.Errorf("--conns %d: want 1..%d", n, loadgen.MaxConns)
	}
	pick, err := connpick.Parse(c.String("conn-pick"))
	if err != nil {
		return harness.Plan{}, fmt.Errorf("--conn-pick: %w", err)
	}
	if c.String("format") == loadgen.FormatMemcached && !strings.HasPrefix(c.String("server"), loadgen.TCPScheme) {
		if v, most := c.Int("value-size"), loadgen.MaxValueSize(c.Int("memcached-keys")); v > most {
			return harness.Plan{}, fmt.Errorf("--value-size %d: at most %d (a memcached set must fit one UDP datagram)", v, most)
		}
	}
	spin := c.Duration("spin-window")
	if spin < 0 || spin > maxSpinWindow {
		return harness.Plan{}, fmt.Errorf("--spin-window %v: want 0 (always sleep) to %v", spin, maxSpinWindow)
	}
	if spin == 0 {
		spin = -1 // loadgen.Spec: negative always sleeps (zero is the default)
	}
	p := harness.Plan{
		Workload: w,
		Workers:  c.Int("workers"),
		Duration: c.Duration("duration"),
		Seed:     c.Uint64("seed"),
		Spec: loadgen.Spec{
			Dilation:       c.Float64("dilation"),
			Warmup:         warm,
			Grace:          c.Duration("grace"),
			MaxLag:         c.Duration("max-lag"),
			FromActualSend: c.Bool("from-send"),
			SpinWindow:     spin,
			Format:         c.String("format"),
			KVKeys:         c.Int("kv-keys"),
			MemcachedKeys:  c.Int("memcached-keys"),
			MultiGetKeys:   c.Int("multiget-keys"),
			ValueSize:      c.Int("value-size"),
			RedisKeys:      c.Int("redis-keys"),
			Conns:          c.Int("conns"),
			ConnPick:       pick,
		},
		Preload: c.Bool("preload"),
	}
	p.Progress = progressWriter(c)
	return p, nil
}

// checkWarmup refuses a --warmup that is not a fraction in [0, 1) (NaN
// included).
func checkWarmup(w float64) error {
	if !(w >= 0 && w < 1) {
		return fmt.Errorf("--warmup %v: want a fraction in [0, 1)", w)
	}
	return nil
}

// progressWriter is where progress bars go: stderr when it is a terminal
// or with --progress, else nowhere (nil).
func progressWriter(c *cli.Context) io.Writer {
	w := c.App.ErrWriter
	if w == nil {
		w = os.Stderr
	}
	if c.Bool("progress") {
		return w
	}
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		return w
	}
	return nil
}

func clientCommand() *cli.Command {
	return &cli.Command{
		Name:  "client",
		Usage: "send an open-loop Poisson load of requests (psp header, kv, memcached or redis) to a server and report latencies",
		Description: "psp client sends requests at the times of a seeded Poisson schedule, whatever the\n" +
			"server's replies do, and measures each latency from the request's intended send\n" +
			"time (no coordinated omission). It prints per-type and overall p50/p99/p99.9\n" +
			"latency and slowdown, offered and achieved rates, lost and late requests. A run\n" +
			"whose achieved rate is under 99.9% of the offered one, or whose sender fell behind\n" +
			"its schedule, is marked not sustained (and psp client exits with status 1).\n\n" +
			"Against a server running the emulate application with --dilation D, pass the same\n" +
			"--dilation, or --admin and the client reads it from the server's status.\n\n" +
			"Examples:\n" +
			"  psp client --server 127.0.0.1:6789 --workload high-bimodal --rate 20000 --duration 5s\n" +
			"  psp client --load 0.8 --workers 14 --admin 127.0.0.1:9090 --duration 10s --json\n" +
			"  psp client --server 127.0.0.1:11211 --format memcached --workload memcached --rate 5000\n" +
			"  psp client --server tcp://127.0.0.1:11211 --conns 20 --format memcached --workload memcached --rate 5000\n" +
			"  psp client --server tcp://127.0.0.1:6379 --format redis --mix get:0.99,scan10000:0.01 --rate 5000",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "server", Value: loadgen.DefaultServer, Usage: "the server's `ADDR`: host:port (UDP) or tcp://host:port (TCP, over --conns connections)"},
			&cli.Float64Flag{Name: "rate", Usage: "offered rate in requests/s (or give --load)"},
			&cli.Float64Flag{Name: "load", Usage: "offered load as a fraction of the workers' capacity: rate = load x workers / (mean service time x dilation)"},
			&cli.StringFlag{Name: "admin", Usage: "the server's admin `ADDR` (host:port or URL): --dilation and --label then default to the server's dilation and policy, and the report adds the server's own account of the run (drops by reason, kernel drops)"},
			&cli.StringFlag{Name: "label", Value: "server", Usage: "policy name recorded in the results (e.g. darc), for psp plot"},
			jsonFlag(),
			&cli.StringFlag{Name: "samples", Usage: "write every request (send time, reply time, latency, status) to this CSV `FILE`"},
		}, loadFlags()...),
		Action: runClient,
	}
}

// signalContext is cancelled by SIGINT or SIGTERM.
func signalContext(parent context.Context) (context.Context, context.CancelFunc) {
	return signal.NotifyContext(parent, os.Interrupt, syscall.SIGTERM)
}

func runClient(c *cli.Context) error {
	if c.NArg() > 0 {
		return fmt.Errorf("client: unexpected argument %q (flags only; see psp client --help)", c.Args().First())
	}
	p, err := planFromFlags(c)
	if err != nil {
		return fmt.Errorf("client: %w", err)
	}
	if err := refuseZero(c, "server", "rate", "load", "admin", "label"); err != nil {
		return fmt.Errorf("client: %w", err)
	}
	p.Spec.Server = c.String("server")
	label := c.String("label")
	var ac *admin.Client
	var before *server.Status
	if c.IsSet("admin") {
		var err error
		ac, err = admin.NewClient(c.String("admin"), 0)
		if err != nil {
			return fmt.Errorf("client: --admin: %w", err)
		}
		st, err := ac.Status(c.Context)
		if err != nil {
			return fmt.Errorf("client: --admin: %w", err)
		}
		p.UseStatus(st)
		if !c.IsSet("label") && st.Policy != "" {
			label = st.Policy
		}
		before = st
	}
	p.Rate, p.Load = c.Float64("rate"), c.Float64("load")
	switch {
	case p.Rate < 0 || p.Load < 0 || math.IsNaN(p.Rate) || math.IsNaN(p.Load) || math.IsInf(p.Rate, 0) || math.IsInf(p.Load, 0):
		return errors.New("client: --rate and --load must be positive numbers")
	case p.Rate > 0 && p.Load > 0:
		return errors.New("client: give --rate or --load, not both")
	case p.Rate == 0 && p.Load == 0:
		return errors.New("client: give --rate REQ/S or --load FRACTION (with --workers and --dilation)")
	}
	ctx, stop := signalContext(c.Context)
	defer stop()
	res, err := p.Run(ctx, fmt.Sprintf("%.0f req/s", p.OfferedRate()))
	if err != nil {
		return fmt.Errorf("client: %w", err)
	}
	if f := c.String("samples"); f != "" {
		if err := writeSampleFile(f, res); err != nil {
			return fmt.Errorf("client: %w", err)
		}
	}
	// The client does not know how many of the server's workers were idle.
	pt := p.Point(res, label, math.NaN(), math.NaN())
	out := c.App.Writer
	if c.Bool("json") {
		if err := report.WriteJSON(out, []report.Point{pt}, nil); err != nil {
			return fmt.Errorf("client: %w", err)
		}
	} else {
		if err := report.WriteTable(out, []report.Point{pt}); err != nil {
			return fmt.Errorf("client: %w", err)
		}
		printClientDetails(out, res)
		if before != nil {
			// Let the server publish its stats (every 100ms) for the end
			// of the run.
			time.Sleep(250 * time.Millisecond)
			if after, err := ac.Status(c.Context); err != nil {
				fmt.Fprintf(out, "server: %v\n", err)
			} else {
				printServerAccount(out, before, after)
			}
		}
	}
	if !res.Sustained {
		return fmt.Errorf("client: run not sustained: %s", res.NotSustainedReason())
	}
	return nil
}

// printServerAccount prints the server's own account of the run (the
// difference between two /status documents) and checks its accounting
// identity: received = answered + dropped (by reason) + in flight, with the
// packets dropped before the server received them beside it.
func printServerAccount(w io.Writer, before, after *server.Status) {
	d := after.Drops.Since(before.Drops)
	sub := func(a, b uint64) uint64 { return a - min(a, b) }
	received := sub(after.Received, before.Received)
	answered := sub(after.Answered, before.Answered)
	dropped := sub(after.Dropped, before.Dropped)
	fmt.Fprintf(w, "server, during the run: received %d, answered %d, dropped %d", received, answered, dropped)
	if dropped > 0 {
		fmt.Fprintf(w, " (%s)", d)
	}
	if n := sub(after.OverloadReplies, before.OverloadReplies); n > 0 {
		fmt.Fprintf(w, ", %d of them answered \"overloaded\"", n)
	}
	fmt.Fprintf(w, "; in flight %d now; dropped before the server (kernel socket or device) %d, send errors %d\n",
		after.InFlight, sub(after.Net.RxDropped, before.Net.RxDropped), sub(after.Net.TxErrors, before.Net.TxErrors))
	holds := "holds"
	if after.Received != after.Answered+after.Dropped+after.InFlight {
		holds = "DOES NOT HOLD"
	}
	fmt.Fprintf(w, "server, since start: received %d = answered %d + dropped %d + in flight %d: %s\n",
		after.Received, after.Answered, after.Dropped, after.InFlight, holds)
}

// printClientDetails prints the client-side counters the table has no room for.
func printClientDetails(w io.Writer, r *loadgen.Result) {
	fmt.Fprintf(w, "sent %d of %d scheduled, answered %d in time, %d late, %d lost", r.Sent, r.Scheduled, r.Answered, r.Late, r.Lost)
	if r.ClientDrops > 0 {
		fmt.Fprintf(w, " (%d replies dropped by the kernel at this client's socket: lost outside the server)", r.ClientDrops)
	}
	if r.Overloaded > 0 {
		fmt.Fprintf(w, ", %d answered \"overloaded\" (shed)", r.Overloaded)
	}
	if r.SendErrors+r.BadReplies+r.Duplicates+r.Refused+r.ErrorReplies > 0 {
		fmt.Fprintf(w, ", %d send errors, %d bad replies, %d duplicates, %d refused, %d error statuses", r.SendErrors, r.BadReplies, r.Duplicates, r.Refused, r.ErrorReplies)
	}
	fmt.Fprintf(w, "; offered %.1f req/s, achieved %.1f req/s; sender lag p99 %v, max %v; %d warm-up requests left out\n",
		r.OfferedRate, r.AchievedRate, r.LagP99, r.LagMax, r.Warmup)
}

func writeSampleFile(path string, r *loadgen.Result) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("samples: %w", err)
	}
	if err := r.WriteSamplesCSV(f); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("samples: %w", err)
	}
	return nil
}
