package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/urfave/cli/v2"

	"github.com/persephone-go/psp/darc"
	"github.com/persephone-go/psp/harness"
	"github.com/persephone-go/psp/internal/connpick"
	"github.com/persephone-go/psp/report"
	"github.com/persephone-go/psp/server"
	"github.com/persephone-go/psp/sim"
	"github.com/persephone-go/psp/workload"
)

func simCommand() *cli.Command {
	return &cli.Command{
		Name:      "sim",
		Usage:     "simulate scheduling policies on a workload over a range of loads",
		UsageText: "psp sim [--workload NAME|FILE] [--workers N] [--policies P,...] [--loads A:B:STEP|L,...] [flags]",
		Description: "Runs a discrete-event simulation of N workers fed by an open-loop Poisson\n" +
			"process, for every policy at every offered load, and prints per load point the\n" +
			"p50/p99/p99.9 latency and slowdown per type and overall, achieved throughput,\n" +
			"drops and mean idle workers, then one summary line per policy: the highest load\n" +
			"at which the p99.9 slowdown stays within --slo.\n\n" +
			"Policies: " + strings.Join(sim.PolicyNames(), ", ") + ".\n" +
			"  cfcfs, dfcfs, fp, darc-static and darc are the darc package's (the dispatcher's);\n" +
			"  ts (time sharing, one queue, a preempted request to the tail), ts-mq (the same\n" +
			"  with one queue per type, shortest type first), shinjuku (Shinjuku's own\n" +
			"  discipline: per-type queues picked by the head's wait over its type's mean,\n" +
			"  every quantum preempted) and preempt (a waiting short request preempts a long\n" +
			"  one) exist only here.\n\n" +
			"The testbed: --network-rtt adds the network's round trip to latencies (not to\n" +
			"slowdowns), --dispatcher-rate bounds the dispatcher's throughput; --phases plays a\n" +
			"workload that changes over time (--timeline draws it); --misclassify models a\n" +
			"classifier that errs; --conns models clients on in-order connections (TCP), whose\n" +
			"replies leave in their requests' order. Summaries bound the p99.9 slowdown (--slo) or latency\n" +
			"(--latency-slo) of all requests, every type (--slo-per-type) or some (--slo-types).\n\n" +
			"Example (the paper's Extreme Bimodal experiment):\n" +
			"  psp sim --workload extreme-bimodal --workers 16 --policies cfcfs,ts,dfcfs,darc \\\n" +
			"      --loads 0.1:0.9:0.1 --slo 10 --slo-per-type --out extreme",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "workload", Value: "high-bimodal",
				Usage: "`WORKLOAD`: a built-in one (" + strings.Join(workload.Names(), ", ") + ") or a .yaml/.json workload file"},
			&cli.StringFlag{Name: "phases", Usage: "`PHASES`: play a workload that changes over time instead of --workload: a built-in list (" + strings.Join(workload.PhaseNames(), ", ") + ") or a .yaml/.json file (see go doc workload.ParsePhases); --duration is then the phases' total"},
			&cli.StringFlag{Name: "tenants", Usage: "simulate tenants instead of --workload: a YAML `FILE` listing each tenant's name, workload, load and share (workers, weight, max_workers, buffers, max_buffers), scheduled as psp serve's tenants are; --loads then multiplies every tenant's load (default 1), policies darc and darc-static"},
			&cli.BoolFlag{Name: "lend-all", Usage: "with --tenants: lend every idle worker across tenants, those a tenant's DARC keeps for its short types too (psp serve's lend_all)"},
			&cli.IntFlag{Name: "workers", Value: sim.DefaultWorkers, Usage: "number of application workers"},
			&cli.StringFlag{Name: "policies", Value: "cfcfs,darc",
				Usage: "comma-separated policies: " + strings.Join(sim.PolicyNames(), ", ")},
			&cli.StringFlag{Name: "loads", Value: "0.1:0.9:0.1",
				Usage: "offered loads (fraction of the workers' capacity): a range START:END:STEP (END included) or a list 0.5,0.8"},
			&cli.DurationFlag{Name: "duration", Value: 500 * time.Millisecond,
				Usage: "simulated time during which requests arrive, per load point"},
			&cli.Float64Flag{Name: "warmup", Value: sim.DefaultWarmup, Usage: "fraction of the duration whose arrivals are not recorded"},
			&cli.Uint64Flag{Name: "seed", Value: 1, Usage: "random seed; a seed gives the same arrivals to every policy"},
			&cli.Float64Flag{Name: "slo", Value: 10, Usage: "p99.9 slowdown bound for the summary lines (0: no summary)"},
			&cli.DurationFlag{Name: "latency-slo", Usage: "p99.9 latency bound for the summary lines instead of --slo (e.g. 20us; end to end, --network-rtt included)"},
			&cli.BoolFlag{Name: "slo-per-type", Usage: "apply the SLO to every request type instead of to all requests"},
			&cli.StringFlag{Name: "slo-types", Usage: "apply the SLO to these comma-separated types only (e.g. SHORT)"},
			&cli.Float64Flag{Name: "delta", Value: darc.DefaultDelta, Usage: "DARC grouping factor: types within (1+delta) of a group's shortest mean share reservations"},
			&cli.IntFlag{Name: "spillway", Value: darc.DefaultSpillway, Usage: "DARC spillway workers (the last worker ids)"},
			&cli.IntFlag{Name: "static-reserved", Value: 1, Usage: "workers darc-static reserves for the shortest type"},
			&cli.IntFlag{Name: "min-samples", Usage: "completions before DARC's first reservation and between updates (0: 5% of the expected arrivals, 100 to 50000)"},
			&cli.IntFlag{Name: "max-window", Usage: "completions after which DARC checks its profiling window even without a backlog (default " + fmt.Sprint(darc.DefaultMaxWindowFactor) + " x min-samples; 0: no limit)"},
			&cli.Float64Flag{Name: "delay-factor", Value: darc.DefaultDelayFactor, Usage: "DARC checks its reservation when a type's queuing delay exceeds this multiple of its mean service time (paper: 10)"},
			&cli.Float64Flag{Name: "hysteresis", Value: darc.DefaultHysteresis, Usage: "DARC keeps a group's worker count w while its demand stays within w±(0.5+hysteresis) workers (0 or negative: the paper's plain rounding on every update)"},
			&cli.IntFlag{Name: "queue-capacity", Usage: "capacity of each typed (or per-worker) queue; arrivals beyond it are dropped", DefaultText: "4096; each type's budget with --pool"},
			&cli.IntFlag{Name: "pool", Usage: "requests the server may hold at once (its buffers: 8160 for psp serve's UDP default), split into per-type guarantees and a shared part as psp serve does; 0: no budgets"},
			&cli.Float64Flag{Name: "deadline-factor", Value: darc.DefaultDeadlineFactor, Usage: "automatic queue deadlines, as psp serve's: this x the longest mean service time that can hold up a type's workers, at least --deadline-floor; negative: none"},
			&cli.DurationFlag{Name: "deadline-floor", Value: time.Duration(darc.DefaultDeadlineFloor), Usage: "least automatic queue deadline (absolute time: see --dilation)"},
			&cli.Float64Flag{Name: "dilation", Value: 1, Usage: "multiply service times, to simulate an emulated server with that dilation (psp serve --app emulate --dilation): absolute times such as the deadline floor then compare as they do live"},
			&cli.DurationFlag{Name: "quantum", Value: sim.DefaultQuantum, Usage: "ts, ts-mq: time slice before a waiting request preempts"},
			&cli.DurationFlag{Name: "preempt-cost", Value: sim.DefaultPreemptCost, Usage: "ts, ts-mq, preempt: worker time lost per preemption"},
			&cli.DurationFlag{Name: "preempt-delay", Value: sim.DefaultPreemptDelay, Usage: "preempt: delay from a short request's wait to the preemption"},
			&cli.DurationFlag{Name: "network-rtt", Usage: "network round trip added to every latency (not to slowdowns); the paper's testbed: about 10us"},
			&cli.Float64Flag{Name: "dispatcher-rate", Usage: "dispatcher throughput in requests/s (e.g. 7e6, the paper's): requests wait for the one dispatcher; 0: unbounded"},
			&cli.DurationFlag{Name: "in-place", Usage: "model psp serve's serving in place: a request dispatched to an idle worker runs on the dispatcher when its type's expected service is under this (psp serve's default: 20us), holding arrivals until done; non-preemptive policies only (0: off, the paper's dispatcher)"},
			&cli.IntFlag{Name: "conns", Usage: "model clients sending over `N` in-order connections (TCP, psp client --conns), each request on the one --conn-pick chooses, each reply leaving after the previous one of its connection, latency and slowdown to that reply; 0: every request answered on its own (UDP)"},
			connPickFlag(),
			&cli.Float64Flag{Name: "misclassify", Usage: "fraction of requests the classifier gives another type (0.5 with two types: a random classifier)"},
			&cli.DurationFlag{Name: "timeline", Usage: "record each run over time in buckets of this width (with --out: timeline-<policy>-<load>.png and the JSON's timeline)"},
			&cli.StringFlag{Name: "out", Usage: "also write, in this `DIR`, results.csv, results.json, slowdown.png and latency-<type>.png"},
			jsonFlag(),
			&cli.StringFlag{Name: "source", Value: sim.DefaultSource, Usage: "source label of the points (for charts mixing sources)"},
			&cli.IntFlag{Name: "parallel", Usage: "simulations run at once (0: GOMAXPROCS)"},
			&cli.BoolFlag{Name: "progress", Usage: "show a progress bar even when stderr is not a terminal"},
			&cli.BoolFlag{Name: "quiet", Usage: "print only the summary lines, not the per-load tables"},
		},
		Action: runSim,
	}
}

func runSim(c *cli.Context) error {
	if c.NArg() > 0 {
		return fmt.Errorf("sim: unexpected argument %q (flags only; see psp sim --help)", c.Args().First())
	}
	if err := refuseZero(c, "workload", "phases", "workers", "policies", "loads", "duration", "delta", "spillway",
		"queue-capacity", "delay-factor", "quantum", "source", "out", "latency-slo", "slo-types", "timeline", "dilation"); err != nil {
		return fmt.Errorf("sim: %w", err)
	}
	policies, err := harness.ParsePolicies(c.String("policies"), sim.PolicyNames())
	if err != nil {
		return fmt.Errorf("sim: --%w", err)
	}
	loads, err := harness.ParseLoads(c.String("loads"))
	if err != nil {
		return fmt.Errorf("sim: --%w", err)
	}
	var pick connpick.Policy // only with connections
	if c.Int("conns") > 0 {
		if pick, err = connpick.Parse(c.String("conn-pick")); err != nil {
			return fmt.Errorf("sim: --conn-pick: %w", err)
		}
	} else if c.IsSet("conn-pick") {
		return fmt.Errorf("sim: --conn-pick without --conns: there are no connections to choose from")
	}
	var (
		w       workload.Workload
		phases  workload.Phases
		tenants []sim.Tenant
	)
	switch {
	case c.IsSet("tenants"):
		if c.IsSet("workload") || c.IsSet("phases") {
			return fmt.Errorf("sim: --tenants excludes --workload and --phases (each tenant has its workload)")
		}
		if c.Int("conns") != 0 {
			return fmt.Errorf("sim: --conns with --tenants: connections are simulated for one workload only")
		}
		if tenants, err = harness.LoadTenants(c.String("tenants")); err != nil {
			return fmt.Errorf("sim: --%w", err)
		}
		if !c.IsSet("loads") {
			loads = []float64{1}
		}
		if !c.IsSet("policies") {
			policies = []string{darc.NameDARC}
		}
		w = tenants[0].Workload // replaced by the tenants' when the run starts
	case c.IsSet("phases"):
		if c.IsSet("workload") {
			return fmt.Errorf("sim: give --workload or --phases, not both")
		}
		if c.IsSet("duration") {
			return fmt.Errorf("sim: --duration with --phases: the phases give the duration")
		}
		if phases, err = workload.ParsePhases(c.String("phases")); err != nil {
			return fmt.Errorf("sim: --phases: %w", err)
		}
		w = phases.Union()
	default:
		if w, err = workload.Parse(c.String("workload")); err != nil {
			return fmt.Errorf("sim: --workload: %w", err)
		}
	}
	slo, err := sloFromFlags(c)
	if err != nil {
		return fmt.Errorf("sim: %w", err)
	}
	if w := c.Int("workers"); w < 1 || w > server.MaxWorkers {
		return fmt.Errorf("sim: --workers %d: want 1..%d (psp serve's limit)", w, server.MaxWorkers)
	}
	duration := c.Duration("duration")
	if len(phases.Phases) > 0 {
		duration = 0
	} else if duration <= 0 {
		return fmt.Errorf("sim: --duration %v: want > 0", duration)
	}
	maxWindow := c.Int("max-window")
	if c.IsSet("max-window") && maxWindow == 0 {
		maxWindow = -1 // no limit (darc.Config's zero is the default)
	}
	hysteresis := c.Float64("hysteresis")
	if hysteresis == 0 {
		hysteresis = -1 // a band of exactly ±0.5 is plain rounding (darc.Config's zero is the default)
	}
	warmup := c.Float64("warmup")
	if err := checkWarmup(warmup); err != nil {
		return fmt.Errorf("sim: %w", err)
	}
	for _, name := range []string{"preempt-cost", "preempt-delay"} {
		if d := c.Duration(name); d < 0 {
			return fmt.Errorf("sim: --%s %v: want >= 0", name, d)
		}
	}
	if warmup == 0 {
		warmup = -1 // no warm-up (sim.Config's zero means the default)
	}
	negZero := func(d time.Duration) time.Duration {
		if d == 0 {
			return -1 // explicit zero (sim.TSConfig's zero means the default)
		}
		return d
	}
	factor := c.Float64("deadline-factor")
	if factor == 0 {
		factor = -1 // explicit zero: no automatic deadlines (darc.Config's zero means the default)
	}
	floor := int64(c.Duration("deadline-floor"))
	if floor == 0 {
		floor = -1 // explicit zero (darc.Config's zero means the default)
	}
	sweep := sim.Sweep{
		Base: sim.Config{
			Workload:       w,
			Phases:         phases,
			Workers:        c.Int("workers"),
			Duration:       duration,
			Seed:           c.Uint64("seed"),
			Warmup:         warmup,
			Dilation:       c.Float64("dilation"),
			Source:         c.String("source"),
			NetworkRTT:     c.Duration("network-rtt"),
			DispatcherRate: c.Float64("dispatcher-rate"),
			InPlaceLimit:   c.Duration("in-place"),
			Misclassify:    c.Float64("misclassify"),
			Conns:          c.Int("conns"),
			ConnPick:       pick,
			Timeline:       c.Duration("timeline"),
			Tenants:        tenants,
			Darc: darc.Config{
				Pool:           c.Int("pool"),
				LendAll:        c.Bool("lend-all"),
				DeadlineFactor: factor,
				DeadlineFloor:  floor,
				Delta:          c.Float64("delta"),
				Spillway:       c.Int("spillway"),
				StaticReserved: c.Int("static-reserved"),
				MinSamples:     c.Int("min-samples"),
				MaxWindow:      maxWindow,
				DelayFactor:    c.Float64("delay-factor"),
				Hysteresis:     hysteresis,
				QueueCapacity:  c.Int("queue-capacity"),
			},
			TS: sim.TSConfig{
				Quantum:      c.Duration("quantum"),
				PreemptCost:  negZero(c.Duration("preempt-cost")),
				PreemptDelay: negZero(c.Duration("preempt-delay")),
			},
		},
		Policies: policies,
		Loads:    loads,
		Parallel: c.Int("parallel"),
	}
	total := len(policies) * len(loads)
	if pw := progressWriter(c); pw != nil {
		name := w.Name
		if len(tenants) > 0 {
			name = fmt.Sprintf("%d tenants", len(tenants))
		}
		bar := progressbar.NewOptions(total,
			progressbar.OptionSetWriter(pw),
			progressbar.OptionSetDescription(fmt.Sprintf("simulating %s on %d workers", name, sweep.Base.Workers)),
			progressbar.OptionShowCount(),
			progressbar.OptionSetWidth(30),
			progressbar.OptionClearOnFinish(),
		)
		sweep.Progress = func(done, total int, p report.Point) { _ = bar.Set(done) }
		defer bar.Close()
	}
	points, err := sim.RunSweep(c.Context, sweep)
	if err != nil {
		return fmt.Errorf("sim: %w", err)
	}
	return writeSimResults(c, points, slo)
}

// sloFromFlags reads --slo, --latency-slo, --slo-per-type and --slo-types;
// a zero SLO means no summary.
func sloFromFlags(c *cli.Context) (report.SLO, error) {
	slo := report.SLO{Slowdown: c.Float64("slo"), PerType: c.Bool("slo-per-type")}
	if c.IsSet("latency-slo") {
		if c.IsSet("slo") {
			return report.SLO{}, fmt.Errorf("give --slo (slowdown) or --latency-slo, not both")
		}
		if c.Duration("latency-slo") < 0 {
			return report.SLO{}, fmt.Errorf("--latency-slo %v: want > 0", c.Duration("latency-slo"))
		}
		slo.Slowdown, slo.LatencyNs = 0, float64(c.Duration("latency-slo"))
	}
	if slo.Slowdown < 0 {
		return report.SLO{}, fmt.Errorf("--slo %v: want > 0 (0: no summary)", slo.Slowdown)
	}
	for _, t := range strings.Split(c.String("slo-types"), ",") {
		if t = strings.TrimSpace(t); t != "" {
			slo.Types = append(slo.Types, t)
		}
	}
	if slo.Slowdown == 0 && slo.LatencyNs == 0 {
		return report.SLO{}, nil
	}
	return slo, slo.Validate()
}

func writeSimResults(c *cli.Context, points []report.Point, slo report.SLO) error {
	out := c.App.Writer
	if out == nil {
		out = os.Stdout
	}
	var sums []report.Summary
	if slo.Slowdown > 0 || slo.LatencyNs > 0 {
		for _, name := range slo.Types {
			if len(points) > 0 {
				if _, ok := points[0].TypeStat(name); !ok {
					return fmt.Errorf("sim: --slo-types: no type %q in the workload (types: %s)", name, strings.Join(report.TypeNames(points), ", "))
				}
			}
		}
		sums = report.SummarizeSLO(points, slo)
	}
	var files []string
	if dir := c.String("out"); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("sim: --out: %w", err)
		}
		for _, name := range []string{"results.csv", "results.json"} {
			f := filepath.Join(dir, name)
			if err := report.WriteFile(f, points, sums); err != nil {
				return fmt.Errorf("sim: %w", err)
			}
			files = append(files, f)
		}
		charts, err := harness.WriteCharts(dir, points, nil, report.PlotOptions{SLO: slo.Slowdown})
		files = append(files, charts...)
		if err != nil {
			return fmt.Errorf("sim: %w", err)
		}
		tls, err := harness.WriteTimelines(dir, points)
		files = append(files, tls...)
		if err != nil {
			return fmt.Errorf("sim: %w", err)
		}
	}
	if c.Bool("json") {
		return report.WriteJSON(out, points, sums)
	}
	if !c.Bool("quiet") {
		if err := report.WriteTable(out, points); err != nil {
			return fmt.Errorf("sim: %w", err)
		}
		fmt.Fprintln(out)
	}
	if err := report.WriteSummary(out, sums); err != nil {
		return fmt.Errorf("sim: %w", err)
	}
	if len(files) > 0 {
		fmt.Fprintln(out)
		printWrittenFiles(out, files)
	}
	return nil
}
