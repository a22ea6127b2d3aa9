package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/persephone-go/psp/loadgen"
	"github.com/persephone-go/psp/workload"
	"github.com/urfave/cli/v2"
	"golang.org/x/term"
)

// demoClassifier is the Wasm psp-header classifier the demo loads, relative
// to the repository root.
var demoClassifier = filepath.Join("examples", "classifiers", "c", "pspheader.wasm")

func demoCommand() *cli.Command {
	return &cli.Command{
		Name:  "demo",
		Usage: "run DARC against c-FCFS on an emulated 14-worker server and chart the difference (about a minute)",
		Description: "psp demo reproduces the shape of the paper's Figure 3 on this machine: for DARC and\n" +
			"c-FCFS it starts a psp server on loopback with the emulate application (each\n" +
			"request sleeps its service time x --dilation, so 14 workers fit on a laptop) and\n" +
			"the Wasm psp-header classifier, plays the High Bimodal workload (50% 1us, 50% 100us)\n" +
			"at a few loads with the open-loop client, prints the table and writes the results\n" +
			"and charts into --out. Run it from the psp repository (go run ./cmd/psp demo) or\n" +
			"pass --classifier.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "out", Value: "psp-demo", Usage: "output directory"},
			&cli.StringFlag{Name: "loads", Value: "0.6,0.8,0.9", Usage: "offered loads"},
			&cli.DurationFlag{Name: "duration", Value: 7 * time.Second, Usage: "length of each load point"},
			&cli.Float64Flag{Name: "dilation", Value: 2000, Usage: "time dilation of the emulated server (1us of service = dilation us of sleep)"},
			&cli.IntFlag{Name: "workers", Value: 14, Usage: "emulated workers"},
			&cli.StringFlag{Name: "classifier", Usage: "Wasm classifier (default: " + demoClassifier + " found from the working directory up)"},
			&cli.Uint64Flag{Name: "seed", Value: 1, Usage: "seed of the arrival schedules"},
			&cli.BoolFlag{Name: "progress", Usage: "show progress bars even when stderr is not a terminal"},
		},
		Action: runDemo,
	}
}

func runDemo(c *cli.Context) error {
	if c.NArg() > 0 {
		return fmt.Errorf("demo: unexpected argument %q (flags only; see psp demo --help)", c.Args().First())
	}
	cls := c.String("classifier")
	if cls == "" {
		found, err := demoFindUp(demoClassifier)
		if err != nil {
			return fmt.Errorf("demo: %w (run the demo from the psp repository, or pass --classifier FILE.wasm)", err)
		}
		cls = found
	}
	w, err := workload.Builtin("high-bimodal")
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	loads, err := sweepParseLoads(c.String("loads"))
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	dilation := c.Float64("dilation")
	if !(dilation > 0) {
		return fmt.Errorf("demo: --dilation %v: want > 0", dilation)
	}
	workers := c.Int("workers")
	if workers < 2 {
		return fmt.Errorf("demo: --workers %d: want at least 2", workers)
	}
	cfg := &sweepConfig{
		plan: clientPlan{
			workload: &w,
			spec:     loadgen.Spec{Dilation: dilation},
			duration: c.Duration("duration"),
			seed:     c.Uint64("seed"),
			workers:  workers,
			progress: c.Bool("progress") || term.IsTerminal(int(os.Stderr.Fd())),
		},
		policies:   []string{"darc", "cfcfs"},
		loads:      loads,
		app:        "emulate",
		classifier: cls,
		minSamples: 200,
		prewarm:    2 * time.Second,
		out:        c.String("out"),
		slo:        10,
		withSim:    true,
		simTime:    500 * time.Millisecond,
	}
	out := c.App.Writer
	fmt.Fprintf(out, "psp demo: %s on %d emulated workers (dilation %g: SHORT sleeps %v, LONG %v),\n"+
		"classifier %s; DARC and c-FCFS at loads %v, %v each.\n\n",
		w.Name, workers, dilation, time.Duration(1000*dilation), time.Duration(100_000*dilation), cls, loads, cfg.plan.duration)
	start := time.Now()
	ctx, stop := clientSignalContext(c.Context)
	defer stop()
	points, err := cfg.run(ctx, out, c.App.ErrWriter)
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	for _, p := range points {
		if !p.Sustained {
			fmt.Fprintln(out, "\nPoints marked ! were not sustained: the lines above say why. On a busy machine the\n"+
				"client falls behind its schedule and every latency includes that lag; rerun on a\n"+
				"quieter machine, or compare with psp sweep --from-send.")
			break
		}
	}
	fmt.Fprintln(out, "\nslowdown.png also shows the simulator's curves for the same setup (\"policy (sim)\").")
	abs, _ := filepath.Abs(cfg.out)
	fmt.Fprintf(out, "\ndone in %v; results and charts are in %s (redraw with: psp plot %s)\n",
		time.Since(start).Round(time.Second), abs, filepath.Join(cfg.out, "results.csv"))
	return nil
}

// demoFindUp looks for rel in the working directory and its parents.
func demoFindUp(rel string) (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("find %s: %w", rel, err)
	}
	for {
		p := filepath.Join(dir, rel)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("find %s: %w", rel, errors.New("not found in the working directory or its parents"))
		}
		dir = parent
	}
}
