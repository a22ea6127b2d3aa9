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
	"github.com/persephone-go/psp/report"
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
			"  ts (time sharing, one queue), ts-mq (time sharing, one queue per type) and\n" +
			"  preempt (a waiting short request preempts a long one) exist only here.\n\n" +
			"Example (the paper's Extreme Bimodal experiment):\n" +
			"  psp sim --workload extreme-bimodal --workers 16 --policies cfcfs,ts,dfcfs,darc \\\n" +
			"      --loads 0.1:0.9:0.1 --slo 10 --slo-per-type --out extreme",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "workload", Value: "high-bimodal",
				Usage: "`WORKLOAD`: a built-in one (" + strings.Join(workload.Names(), ", ") + ") or a .yaml/.json workload file"},
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
			&cli.BoolFlag{Name: "slo-per-type", Usage: "apply --slo to every request type instead of to all requests"},
			&cli.Float64Flag{Name: "delta", Value: darc.DefaultDelta, Usage: "DARC grouping factor: types within (1+delta) of a group's shortest mean share reservations"},
			&cli.IntFlag{Name: "spillway", Value: darc.DefaultSpillway, Usage: "DARC spillway workers (the last worker ids)"},
			&cli.IntFlag{Name: "static-reserved", Value: 1, Usage: "workers darc-static reserves for the shortest type"},
			&cli.IntFlag{Name: "min-samples", Usage: "completions before DARC's first reservation and between updates (0: 5% of the expected arrivals, 100 to 50000)"},
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
	if err := refuseZero(c, "workload", "workers", "policies", "loads", "duration", "delta", "spillway",
		"queue-capacity", "delay-factor", "quantum", "source", "out", "dilation"); err != nil {
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
	w, err := workload.Parse(c.String("workload"))
	if err != nil {
		return fmt.Errorf("sim: --workload: %w", err)
	}
	if c.Int("workers") < 1 {
		return fmt.Errorf("sim: --workers %d: want at least 1", c.Int("workers"))
	}
	if c.Duration("duration") <= 0 {
		return fmt.Errorf("sim: --duration %v: want > 0", c.Duration("duration"))
	}
	hysteresis := c.Float64("hysteresis")
	if hysteresis == 0 {
		hysteresis = -1 // a band of exactly ±0.5 is plain rounding (darc.Config's zero is the default)
	}
	warmup := c.Float64("warmup")
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
			Workload: w,
			Workers:  c.Int("workers"),
			Duration: c.Duration("duration"),
			Seed:     c.Uint64("seed"),
			Warmup:   warmup,
			Dilation: c.Float64("dilation"),
			Source:   c.String("source"),
			Darc: darc.Config{
				Pool:           c.Int("pool"),
				DeadlineFactor: factor,
				DeadlineFloor:  floor,
				Delta:          c.Float64("delta"),
				Spillway:       c.Int("spillway"),
				StaticReserved: c.Int("static-reserved"),
				MinSamples:     c.Int("min-samples"),
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
		bar := progressbar.NewOptions(total,
			progressbar.OptionSetWriter(pw),
			progressbar.OptionSetDescription(fmt.Sprintf("simulating %s on %d workers", w.Name, sweep.Base.Workers)),
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
	return writeSimResults(c, points)
}

func writeSimResults(c *cli.Context, points []report.Point) error {
	out := c.App.Writer
	if out == nil {
		out = os.Stdout
	}
	var sums []report.Summary
	if slo := c.Float64("slo"); slo > 0 {
		sums = report.Summarize(points, slo, c.Bool("slo-per-type"))
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
		charts, err := harness.WriteCharts(dir, points, nil, report.PlotOptions{SLO: c.Float64("slo")})
		files = append(files, charts...)
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
