package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
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
			"the Wasm psp-header classifier (built in), and plays the High Bimodal workload (50% 1µs,\n" +
			"50% 100µs) at a few loads with the open-loop client. It runs anywhere: no checkout needed.\n\n" +
			"It opens with its verdict: SHORT's live p99 and p99.9 slowdowns under each policy at\n" +
			"each load, each beside the simulator's expectation for the very requests sent (their\n" +
			"replay plus the server's overhead, measured during every point on a twin server that\n" +
			"serves SHORT requests alone where they cannot queue; with --calibrate N, once before\n" +
			"the points), and one line saying whether DARC won and whether every point is within\n" +
			"the range a sample of its size would show. Progress is one line on stderr. The\n" +
			"details (per-point tables, overheads, ranges, the contrast with the other policy's\n" +
			"replay) go to report.txt and each point's log line to demo.log in --out, with the\n" +
			"results and charts; --verbose prints them too. Each point lasts long enough for\n" +
			"--samples SHORT requests (over 1000: the p99.9 is then not the sample's maximum);\n" +
			"latencies run from each request's actual send to the kernel's receive of its reply.",
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
			&cli.BoolFlag{Name: "progress", Usage: "show the progress line even when stderr is not a terminal"},
			&cli.BoolFlag{Name: "verbose", Usage: "also print the details (per-point tables, overheads, ranges, contrast; report.txt) and each point's log line (demo.log)"},
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
	if err := os.MkdirAll(sw.Out, 0o755); err != nil {
		return fmt.Errorf("demo: create output directory: %w", err)
	}
	logFile, err := os.Create(filepath.Join(sw.Out, demoLogFile))
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	defer logFile.Close()
	verbose := c.Bool("verbose")
	sw.Log = logFile
	if verbose {
		sw.Log = io.MultiWriter(logFile, c.App.ErrWriter)
	}
	sw.Plan.Progress = progressWriter(c)
	out := c.App.Writer
	cls := o.Classifier
	if cls == "" {
		cls = "built-in C psp-header"
	}
	if !c.Bool("json") {
		length := fmt.Sprintf("%v each", o.Duration)
		if o.Duration == 0 {
			length = fmt.Sprintf("about %d SHORT requests each", o.Samples)
		}
		fmt.Fprintf(out, "psp demo: DARC against c-FCFS, %s on %d emulated workers dilated %gx (SHORT sleeps %v, LONG %v),\n"+
			"classifier %s; loads %s, %s.\n\n",
			sw.Plan.Workload.Name, o.Workers, o.Dilation, time.Duration(1000*o.Dilation), time.Duration(100_000*o.Dilation), cls,
			strings.Trim(fmt.Sprint(loads), "[]"), length)
	}
	start := time.Now()
	ctx, stop := signalContext(c.Context)
	defer stop()
	res, err := sw.Run(ctx)
	if c.Bool("json") {
		if res != nil && len(res.Points) > 0 {
			if perr := printSweep(c, out, res); perr != nil && err == nil {
				err = perr
			}
		}
		if err != nil {
			return fmt.Errorf("demo: %w", err)
		}
		return nil
	}
	if res == nil || len(res.Points) == 0 {
		if err == nil {
			err = errors.New("no point measured")
		}
		return fmt.Errorf("demo: %w (the log is in %s)", err, logFile.Name())
	}
	printVerdict(out, sw, res)
	var report bytes.Buffer
	if perr := printDemoReport(c, &report, sw, res); perr != nil && err == nil {
		err = perr
	}
	reportFile := filepath.Join(sw.Out, demoReportFile)
	if werr := os.WriteFile(reportFile, report.Bytes(), 0o644); werr != nil && err == nil {
		err = fmt.Errorf("write the report: %w", werr)
	}
	abs, _ := filepath.Abs(sw.Out)
	if verbose {
		fmt.Fprintln(out)
		out.Write(report.Bytes())
	} else {
		fmt.Fprintf(out, "\nThe details (per-point tables, the host's overhead, each tail's expected range, the\n"+
			"contrast with the other policy's replay) are in %s; psp demo --verbose prints them.\n",
			filepath.Join(abs, demoReportFile))
	}
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	fmt.Fprintf(out, "done in %v; results, charts and logs are in %s (redraw with: psp plot %s)\n",
		time.Since(start).Round(time.Second), abs, filepath.Join(sw.Out, "results.csv"))
	return nil
}

// The files psp demo writes besides the sweep's: its log (one line per
// point) and the detailed report psp demo --verbose prints.
const (
	demoLogFile    = "demo.log"
	demoReportFile = "report.txt"
)

// printDemoReport writes the demo's details to w: the sweep's table and
// summaries, the tails against the simulator, the SLO misses that are the
// host's and the contrast with the other policy's replay.
func printDemoReport(c *cli.Context, w io.Writer, sw *harness.Sweep, res *harness.SweepResult) error {
	err := printSweep(c, w, res)
	for _, p := range res.Points {
		if !p.Sustained {
			fmt.Fprintln(w, "\nPoints marked ! were not sustained: the lines above say why. On a busy machine the\n"+
				"client falls behind its schedule and every latency includes that lag; rerun on a\n"+
				"quieter machine, or compare with psp sweep --from-send.")
			break
		}
	}
	printTails(w, res.Tails)
	printHostMisses(w, res.Tails, sw.SLO)
	printContrasts(w, res.Contrasts)
	fmt.Fprintln(w, "\nslowdown.png also shows the simulator's curves for the same setup (\"policy (sim)\").")
	return err
}
