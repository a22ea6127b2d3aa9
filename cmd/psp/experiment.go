package main

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	json "github.com/goccy/go-json"
	"github.com/urfave/cli/v2"

	"github.com/persephone-go/psp/harness"
	"github.com/persephone-go/psp/server"
)

func experimentCommand() *cli.Command {
	var list strings.Builder
	for _, e := range harness.Experiments() {
		fmt.Fprintf(&list, "  %-10s %s\n", e.Name, e.Title)
	}
	return &cli.Command{
		Name:      "experiment",
		Usage:     "reproduce one of the paper's figures or tables (simulated testbed, or dilated live servers)",
		UsageText: "psp experiment list\n   psp experiment NAME... [--size full|small] [--seeds N] [--duration D] [--out DIR] [flags]",
		Description: "Each experiment runs its simulations (or starts psp servers on loopback for the\n" +
			"live ones), prints its tables with the spread over seeds, says in one line what\n" +
			"it measured, and writes into --out/NAME: results.csv and results.json (every\n" +
			"point, per seed), experiment.json (the tables too), tables.txt and its charts.\n" +
			"--size small runs the same code in seconds (CI); the full size chooses seeds and\n" +
			"durations so that each point's p99.9 is stable, and finishes in minutes.\n\n" +
			"Experiments:\n" + list.String() + "\n" +
			"psp experiment list shows each one's full-size setup.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "size", Value: harness.SizeFull, Usage: "full (the figure, minutes) or small (seconds: fewer loads, seeds and requests)"},
			&cli.IntFlag{Name: "seeds", Usage: "seeds per point, overriding the size's (each seed is a separate run)"},
			&cli.DurationFlag{Name: "duration", Usage: "duration of each point, overriding the size's (simulated time; live: each measured run; phases: each phase)"},
			&cli.StringFlag{Name: "out", Value: "psp-experiments", Usage: "output `DIR`: each experiment writes into DIR/NAME"},
			&cli.IntFlag{Name: "parallel", Usage: "simulations run at once (0: GOMAXPROCS)"},
			&cli.BoolFlag{Name: "in-process", Usage: "live experiments: run the servers inside this process instead of child processes"},
			&cli.StringFlag{Name: "transport", Value: "udp", Usage: "live experiments: how requests reach the servers, udp or tcp"},
			&cli.BoolFlag{Name: "progress", Usage: "show the live runs' progress bars even when stderr is not a terminal"},
			&cli.BoolFlag{Name: "quiet", Usage: "no progress lines on stderr"},
			jsonFlag(),
		},
		Action: runExperiment,
	}
}

func runExperiment(c *cli.Context) error {
	out := c.App.Writer
	if c.NArg() == 0 {
		return errors.New("experiment: name an experiment, or list them with psp experiment list (experiments: " + strings.Join(harness.ExperimentNames(), ", ") + ")")
	}
	if c.Args().First() == "list" {
		if c.NArg() > 1 {
			return fmt.Errorf("experiment list: unexpected argument %q", c.Args().Get(1))
		}
		return listExperiments(out, c.Bool("json"))
	}
	if err := refuseZero(c, "size", "seeds", "duration", "out"); err != nil {
		return fmt.Errorf("experiment: %w", err)
	}
	var exps []harness.Experiment
	for _, name := range c.Args().Slice() {
		e, err := harness.LookupExperiment(name)
		if err != nil {
			return err
		}
		exps = append(exps, e)
	}
	switch s := c.String("size"); s {
	case harness.SizeFull, harness.SizeSmall:
	default:
		return fmt.Errorf("experiment: --size %q: want %s or %s", s, harness.SizeFull, harness.SizeSmall)
	}
	if c.Int("seeds") < 0 || c.Duration("duration") < 0 || c.Int("parallel") < 0 {
		return fmt.Errorf("experiment: --seeds, --duration and --parallel must not be negative")
	}
	if n := c.Int("seeds"); n > harness.MaxExperimentSeeds {
		return fmt.Errorf("experiment: --seeds %d: at most %d (each seed is a run of every point)", n, harness.MaxExperimentSeeds)
	}
	if d := c.Duration("duration"); d > harness.MaxExperimentDuration {
		return fmt.Errorf("experiment: --duration %v: at most %v per point", d, harness.MaxExperimentDuration)
	}
	if t := c.String("transport"); t != server.TransportUDP && t != server.TransportTCP {
		return fmt.Errorf("experiment: --transport %q: want udp or tcp", t)
	}
	opt := harness.ExperimentOptions{
		Transport: c.String("transport"),
		Size:      c.String("size"),
		Seeds:     c.Int("seeds"),
		Duration:  c.Duration("duration"),
		Parallel:  c.Int("parallel"),
		Log:       c.App.ErrWriter,
		Progress:  progressWriter(c),
	}
	if c.Bool("quiet") {
		opt.Log = nil
	}
	if c.Bool("in-process") {
		opt.Launcher = harness.InProcess{}
	}
	ctx, stop := signalContext(c.Context)
	defer stop()
	go func() {
		// The first signal stops the runs; restore the default action so
		// that a second one ends the process at once.
		<-ctx.Done()
		stop()
	}()
	var results []*harness.ExperimentResult
	for i, e := range exps {
		o := opt
		o.Out = filepath.Join(c.String("out"), e.Name)
		if opt.Log != nil {
			fmt.Fprintf(opt.Log, "psp experiment %s (%s size): %s\n", e.Name, opt.Size, e.Title)
		}
		start := time.Now()
		res, err := e.Run(ctx, o)
		if err != nil {
			return err
		}
		results = append(results, res)
		if c.Bool("json") {
			continue
		}
		if i > 0 {
			fmt.Fprintln(out)
		}
		if err := harness.WriteExperimentTables(out, res); err != nil {
			return err
		}
		fmt.Fprintln(out)
		printWrittenFiles(out, res.Files)
		fmt.Fprintf(out, "%s done in %v\n", e.Name, time.Since(start).Round(100*time.Millisecond))
	}
	if c.Bool("json") {
		var v any = results
		if len(results) == 1 {
			v = results[0]
		}
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return fmt.Errorf("experiment: %w", err)
		}
		_, err = fmt.Fprintf(out, "%s\n", b)
		return err
	}
	return nil
}

func listExperiments(w io.Writer, asJSON bool) error {
	type entry struct {
		Name  string `json:"name"`
		Title string `json:"title"`
		Setup string `json:"setup"`
		Live  bool   `json:"live"`
	}
	var list []entry
	for _, e := range harness.Experiments() {
		list = append(list, entry{e.Name, e.Title, e.Setup, e.Live})
	}
	if asJSON {
		b, err := json.MarshalIndent(list, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, e := range list {
		kind := "simulated"
		if e.Live {
			kind = "live"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", e.Name, kind, e.Title)
		fmt.Fprintf(tw, "\t\tfull size: %s\n", e.Setup)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintln(w, "\nrun one with: psp experiment NAME [--size small]")
	return err
}
