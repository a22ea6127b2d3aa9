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

	"github.com/persephone-go/psp/loadgen"
	"github.com/persephone-go/psp/report"
	"github.com/persephone-go/psp/workload"
	"github.com/schollz/progressbar/v3"
	"github.com/urfave/cli/v2"
	"golang.org/x/term"
)

// clientLoadFlags are the flags psp client and psp sweep share: the workload and
// how the client plays it.
func clientLoadFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "workload", Value: "high-bimodal", Usage: "built-in workload (" + strings.Join(workload.Names(), ", ") + ") or a YAML/JSON workload file"},
		&cli.IntFlag{Name: "workers", Value: 14, Usage: "the server's worker count, to turn a load into a rate"},
		&cli.Float64Flag{Name: "dilation", Value: 1, Usage: "the server's time dilation (emulate app: service time x dilation); slowdowns are computed against service time x dilation and rates derived from loads are divided by it"},
		&cli.DurationFlag{Name: "duration", Value: 5 * time.Second, Usage: "length of each run's schedule"},
		&cli.Uint64Flag{Name: "seed", Value: 1, Usage: "seed of the arrival schedule (same seed, same schedule)"},
		&cli.Float64Flag{Name: "warmup", Value: loadgen.DefaultWarmup, Usage: "fraction of the earliest requests left out of the statistics (0 keeps all)"},
		&cli.DurationFlag{Name: "grace", Usage: "how long after the schedule's end replies still count as in time (default 20 x the longest mean service time x dilation, at least 100ms)"},
		&cli.DurationFlag{Name: "max-lag", Value: loadgen.DefaultMaxLag, Usage: "tolerated 99th-percentile lag of the sender behind its schedule; above it a run is not sustained"},
		&cli.StringFlag{Name: "format", Value: loadgen.FormatPSP, Usage: "request format: psp (16-byte header carrying the service time; spin, emulate and tpcc apps), kv (GET/SCAN + key for the kv app; use the rocksdb workload) or memcached (memcached's UDP protocol: get, multi-get, set; use the memcached workload)"},
		&cli.IntFlag{Name: "kv-keys", Value: 5000, Usage: "keys preloaded by the kv server (--format kv): GETs read k00000..k<N-1>"},
		&cli.IntFlag{Name: "memcached-keys", Value: loadgen.DefaultMemcachedKeys, Usage: "--format memcached: the key space k0..k<N-1>, stored before each run (see --preload)"},
		&cli.IntFlag{Name: "multiget-keys", Value: loadgen.DefaultMultiGetKeys, Usage: "--format memcached: keys per MULTIGET"},
		&cli.IntFlag{Name: "value-size", Value: loadgen.DefaultValueSize, Usage: "--format memcached: bytes per value (SET and preload)"},
		&cli.BoolFlag{Name: "preload", Value: true, Usage: "--format memcached: set every key before each run, so reads hit (--preload=false skips it)"},
		&cli.BoolFlag{Name: "from-send", Usage: "measure latencies from each request's actual send time, leaving out the client's own lag behind its schedule (an overloaded client machine); default: from the intended send time"},
		&cli.BoolFlag{Name: "progress", Usage: "show a progress bar even when stderr is not a terminal"},
	}
}

func clientCommand() *cli.Command {
	return &cli.Command{
		Name:  "client",
		Usage: "send an open-loop Poisson load of requests (psp header, kv or memcached) to a server and report latencies",
		Description: "psp client sends requests at the times of a seeded Poisson schedule, whatever the\n" +
			"server's replies do, and measures each latency from the request's intended send\n" +
			"time (no coordinated omission). It prints per-type and overall p50/p99/p99.9\n" +
			"latency and slowdown, offered and achieved rates, lost and late requests. A run\n" +
			"whose achieved rate is under 99.9% of the offered one, or whose sender fell behind\n" +
			"its schedule, is marked not sustained (and psp client exits with status 1).\n\n" +
			"Against a server running the emulate application with --dilation D, pass the same\n" +
			"--dilation: requests carry their nominal service time and the server scales it.\n\n" +
			"Examples:\n" +
			"  psp client --server 127.0.0.1:6789 --workload high-bimodal --rate 20000 --duration 5s\n" +
			"  psp client --load 0.8 --workers 14 --dilation 1000 --duration 10s --json\n" +
			"  psp client --server 127.0.0.1:11211 --format memcached --workload memcached --rate 5000",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "server", Value: loadgen.DefaultServer, Usage: "the server's UDP address (host:port)"},
			&cli.Float64Flag{Name: "rate", Usage: "offered rate in requests/s (or give --load)"},
			&cli.Float64Flag{Name: "load", Usage: "offered load as a fraction of the workers' capacity: rate = load x workers / (mean service time x dilation)"},
			&cli.StringFlag{Name: "admin", Usage: "the server's admin address (host:port): when set, --dilation and --label default to the server's dilation and policy from its /status"},
			&cli.StringFlag{Name: "label", Value: "server", Usage: "policy name recorded in the results (e.g. darc), for psp plot"},
			&cli.BoolFlag{Name: "json", Usage: "print the result as JSON (the psp plot format) instead of a table"},
			&cli.StringFlag{Name: "samples", Usage: "write every request (send time, reply time, latency, status) to this CSV file"},
		}, clientLoadFlags()...),
		Action: runClient,
	}
}

// clientPlan is one run to make: a schedule and how to play and label it.
type clientPlan struct {
	workload *workload.Workload
	spec     loadgen.Spec
	load     float64
	rate     float64
	duration time.Duration
	seed     uint64
	workers  int
	progress bool
	preload  bool // memcached format: store the keys before each run
}

// clientPlanFromFlags reads the shared load flags; the rate comes later.
func clientPlanFromFlags(c *cli.Context) (clientPlan, error) {
	w, err := workload.Parse(c.String("workload"))
	if err != nil {
		return clientPlan{}, fmt.Errorf("workload: %w", err)
	}
	p := clientPlan{
		workload: &w,
		duration: c.Duration("duration"),
		seed:     c.Uint64("seed"),
		workers:  c.Int("workers"),
		progress: c.Bool("progress") || term.IsTerminal(int(os.Stderr.Fd())),
	}
	if p.workers <= 0 {
		return p, fmt.Errorf("--workers %d: want > 0", p.workers)
	}
	if p.duration <= 0 {
		return p, fmt.Errorf("--duration %v: want > 0", p.duration)
	}
	d := c.Float64("dilation")
	if !(d > 0) {
		return p, fmt.Errorf("--dilation %v: want > 0", d)
	}
	warm := c.Float64("warmup")
	if warm < 0 || warm >= 1 {
		return p, fmt.Errorf("--warmup %v: want a fraction in [0, 1)", warm)
	}
	if warm == 0 {
		warm = -1 // keep every sample
	}
	p.spec = loadgen.Spec{
		Dilation: d,
		Warmup:   warm,
		Grace:    c.Duration("grace"),
		MaxLag:   c.Duration("max-lag"),

		FromActualSend: c.Bool("from-send"),
		Format:         c.String("format"),
		KVKeys:         c.Int("kv-keys"),
		MemcachedKeys:  c.Int("memcached-keys"),
		MultiGetKeys:   c.Int("multiget-keys"),
		ValueSize:      c.Int("value-size"),
	}
	p.preload = c.Bool("preload") && p.spec.Format == loadgen.FormatMemcached
	return p, nil
}

// setLoad sets the plan's load and derived rate.
func (p *clientPlan) setLoad(load float64) {
	p.load = load
	p.rate = loadgen.RateForLoad(p.workload, load, p.workers, p.spec.Dilation)
}

// setRate sets the plan's rate and derived load.
func (p *clientPlan) setRate(rate float64) {
	p.rate = rate
	p.load = p.workload.LoadForRate(rate*p.spec.Dilation, p.workers)
}

// run draws the schedule and plays it, showing progress on stderr when
// asked. ctx cancellation (Ctrl-C) ends the run early with what was
// measured.
func (p *clientPlan) run(ctx context.Context, desc string) (*loadgen.Result, error) {
	sched, err := loadgen.NewSchedule(p.workload, p.rate, p.duration, p.seed)
	if err != nil {
		return nil, err
	}
	spec := p.spec
	if p.preload {
		if err := loadgen.PreloadMemcached(ctx, spec.Server, spec.MemcachedKeys, spec.ValueSize); err != nil {
			return nil, err
		}
	}
	var bar *progressbar.ProgressBar
	if p.progress && p.duration >= 2*time.Second {
		bar = progressbar.NewOptions(len(sched.Requests),
			progressbar.OptionSetWriter(os.Stderr),
			progressbar.OptionSetDescription(desc),
			progressbar.OptionShowCount(),
			progressbar.OptionSetPredictTime(true),
			progressbar.OptionClearOnFinish(),
			progressbar.OptionThrottle(100*time.Millisecond))
		spec.Progress = func(sent, _ int) { _ = bar.Set(sent) }
	}
	res, err := loadgen.Run(ctx, spec, sched)
	if bar != nil {
		_ = bar.Finish()
	}
	return res, err
}

// clientSignalContext is cancelled by SIGINT or SIGTERM.
func clientSignalContext(parent context.Context) (context.Context, context.CancelFunc) {
	return signal.NotifyContext(parent, os.Interrupt, syscall.SIGTERM)
}

func runClient(c *cli.Context) error {
	if c.NArg() > 0 {
		return fmt.Errorf("client: unexpected argument %q (flags only; see psp client --help)", c.Args().First())
	}
	p, err := clientPlanFromFlags(c)
	if err != nil {
		return fmt.Errorf("client: %w", err)
	}
	p.spec.Server = c.String("server")
	label := c.String("label")
	if admin := c.String("admin"); admin != "" {
		st, err := sweepFetchStatus(c.Context, admin)
		if err != nil {
			return fmt.Errorf("client: --admin %s: %w", admin, err)
		}
		if !c.IsSet("dilation") && st.Dilation > 0 {
			p.spec.Dilation = st.Dilation
		}
		if !c.IsSet("label") && st.Policy != "" {
			label = st.Policy
		}
	}
	switch rate, load := c.Float64("rate"), c.Float64("load"); {
	case rate > 0 && load > 0:
		return errors.New("client: give --rate or --load, not both")
	case rate > 0:
		p.setRate(rate)
	case load > 0:
		p.setLoad(load)
	default:
		return errors.New("client: give --rate REQ/S or --load FRACTION (with --workers and --dilation)")
	}
	ctx, stop := clientSignalContext(c.Context)
	defer stop()
	res, err := p.run(ctx, fmt.Sprintf("%.0f req/s", p.rate))
	if err != nil {
		return fmt.Errorf("client: %w", err)
	}
	if f := c.String("samples"); f != "" {
		if err := writeSampleFile(f, res); err != nil {
			return fmt.Errorf("client: %w", err)
		}
	}
	// The client does not know how many of the server's workers were idle.
	pt := res.Point(loadgen.PointSpec{Policy: label, Workload: p.workload.Name, Workers: p.workers, Load: p.load, MeanIdleWorkers: math.NaN()})
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
	}
	if !res.Sustained {
		return fmt.Errorf("client: run not sustained: %s", res.NotSustainedReason())
	}
	return nil
}

// printClientDetails prints the client-side counters the table has no room for.
func printClientDetails(w io.Writer, r *loadgen.Result) {
	fmt.Fprintf(w, "sent %d of %d scheduled, answered %d in time, %d late, %d lost", r.Sent, r.Scheduled, r.Answered, r.Late, r.Lost)
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
