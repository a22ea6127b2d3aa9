package main

import (
	"fmt"
	"path/filepath"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/persephone-go/psp/harness"
)

func demoCommand() *cli.Command {
	d := harness.DefaultDemo
	return &cli.Command{
		Name:  "demo",
		Usage: "run DARC against c-FCFS on an emulated 14-worker server and chart the difference (about a minute and a half)",
		Description: "psp demo reproduces the shape of the paper's Figure 3 on this machine: for DARC and\n" +
			"c-FCFS it starts a psp server on loopback with the emulate application (each\n" +
			"request sleeps its service time x --dilation, so 14 workers fit on a laptop) and\n" +
			"the Wasm psp-header classifier (built in), plays the High Bimodal workload (50% 1µs,\n" +
			"50% 100µs) at a few loads with the open-loop client, prints the table and writes\n" +
			"the results and charts into --out. It runs anywhere: no checkout needed.\n\n" +
			"It also replays each point's requests in the simulator and prints, per point, SHORT's\n" +
			"live p99 and p99.9 slowdowns against the replay's plus the server's overhead: during\n" +
			"every point a twin of the server beside it serves SHORT requests alone, at a rate\n" +
			"where they cannot queue, and each one's latency minus its service time is a draw of\n" +
			"what the network, the emulation and the host add at that time (with --calibrate N,\n" +
			"N such requests on the server itself, once, before its points); the expected tail is\n" +
			"that of a replayed latency plus an independent draw. A ratio near 1 means the live server shows the policy, not its\n" +
			"host; the same points against the other policy's replay show how far apart the two\n" +
			"policies are. Each point lasts long enough for --samples SHORT requests (over 1000:\n" +
			"the p99.9 is then not the sample's maximum); latencies run from each request's\n" +
			"actual send to the kernel's receive of its reply.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "out", Value: d.Out, Usage: "output `DIR`"},
			&cli.StringFlag{Name: "loads", Value: "0.5,0.8,0.9", Usage: "offered loads: START:END:STEP or a comma-separated list"},
			&cli.IntFlag{Name: "samples", Value: d.Samples, Usage: "SHORT requests measured per load point (sets each point's length)"},
			&cli.DurationFlag{Name: "duration", Usage: "length of each load point, instead of --samples", DefaultText: "from --samples"},
			&cli.IntFlag{Name: "calibrate", Usage: "measure each server's overhead once, with N SHORT requests before its points (over 1000), instead of during every point on a twin server", DefaultText: "during every point"},
			&cli.Float64Flag{Name: "dilation", Value: d.Dilation, Usage: "time dilation of the emulated server (1µs of service = dilation µs of sleep)"},
			&cli.IntFlag{Name: "workers", Value: d.Workers, Usage: "emulated workers"},
			&cli.StringFlag{Name: "classifier", Usage: "Wasm classifier `FILE` (default: the built-in C psp-header module)"},
			&cli.Uint64Flag{Name: "seed", Value: d.Seed, Usage: "seed of the arrival schedules"},
			&cli.BoolFlag{Name: "in-process", Usage: "run the servers inside this process instead of child processes"},
			&cli.BoolFlag{Name: "progress", Usage: "show progress bars even when stderr is not a terminal"},
			jsonFlag(),
		},
		Action: runDemo,
	}
}

func runDemo(c *cli.Context) error {
	if c.NArg() > 0 {
		return fmt.Errorf("demo: unexpected argument %q (flags only; see psp demo --help)", c.Args().First())
	}
	if err := refuseZero(c, "out", "loads", "samples", "calibrate", "duration", "dilation", "workers", "classifier"); err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	loads, err := harness.ParseLoads(c.String("loads"))
	if err != nil {
		return fmt.Errorf("demo: --%w", err)
	}
	o := harness.DemoOptions{
		Out:        c.String("out"),
		Loads:      loads,
		Samples:    c.Int("samples"),
		Calibrate:  c.Int("calibrate"),
		Duration:   c.Duration("duration"),
		Dilation:   c.Float64("dilation"),
		Workers:    c.Int("workers"),
		Seed:       c.Uint64("seed"),
		Classifier: c.String("classifier"),
	}
	if c.Bool("in-process") {
		o.Launcher = harness.InProcess{}
	}
	if o.Duration < 0 {
		return fmt.Errorf("demo: --duration %v: want > 0", o.Duration)
	}
	if o.Samples < 0 {
		return fmt.Errorf("demo: --samples %d: want > 0", o.Samples)
	}
	if o.Calibrate < 0 {
		return fmt.Errorf("demo: --calibrate %d: want > 0 (without it: during every point)", o.Calibrate)
	}
	sw, err := harness.Demo(o)
	if err != nil {
		return err
	}
	sw.Log = c.App.ErrWriter
	sw.Plan.Progress = progressWriter(c)
	out := c.App.Writer
	cls := o.Classifier
	if cls == "" {
		cls = "built-in C psp-header (" + sw.Server.Classifier + ")"
	}
	if !c.Bool("json") {
		length := fmt.Sprintf("%v each", o.Duration)
		if o.Duration == 0 {
			length = fmt.Sprintf("about %d SHORT requests each", o.Samples)
		}
		fmt.Fprintf(out, "psp demo: %s on %d emulated workers (dilation %g: SHORT sleeps %v, LONG %v),\n"+
			"classifier %s; DARC and c-FCFS at loads %v, %s.\n\n",
			sw.Plan.Workload.Name, o.Workers, o.Dilation, time.Duration(1000*o.Dilation), time.Duration(100_000*o.Dilation), cls, loads, length)
	}
	start := time.Now()
	ctx, stop := signalContext(c.Context)
	defer stop()
	res, err := sw.Run(ctx)
	if res != nil && len(res.Points) > 0 {
		if perr := printSweep(c, res); perr != nil && err == nil {
			err = perr
		}
	}
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	if c.Bool("json") {
		return nil
	}
	for _, p := range res.Points {
		if !p.Sustained {
			fmt.Fprintln(out, "\nPoints marked ! were not sustained: the lines above say why. On a busy machine the\n"+
				"client falls behind its schedule and every latency includes that lag; rerun on a\n"+
				"quieter machine, or compare with psp sweep --from-send.")
			break
		}
	}
	printTails(out, res.Tails)
	printHostMisses(out, res.Tails, sw.SLO)
	printContrasts(out, res.Contrasts)
	fmt.Fprintln(out, "\nslowdown.png also shows the simulator's curves for the same setup (\"policy (sim)\").")
	abs, _ := filepath.Abs(sw.Out)
	fmt.Fprintf(out, "\ndone in %v; results and charts are in %s (redraw with: psp plot %s)\n",
		time.Since(start).Round(time.Second), abs, filepath.Join(sw.Out, "results.csv"))
	return nil
}
