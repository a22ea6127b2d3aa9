package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	json "github.com/goccy/go-json"
	"github.com/urfave/cli/v2"

	"github.com/persephone-go/psp/darc"
	"github.com/persephone-go/psp/harness"
	"github.com/persephone-go/psp/report"
	"github.com/persephone-go/psp/server"
	"github.com/persephone-go/psp/workload"
)

func sweepCommand() *cli.Command {
	return &cli.Command{
		Name:  "sweep",
		Usage: "measure a server at a range of loads under each policy and plot p99.9 slowdown against load",
		Description: "psp sweep starts a psp serve process per policy on loopback (or targets a running\n" +
			"server with --server and --admin), plays the workload at each load with the psp\n" +
			"client's open-loop generator and writes, in --out: results.csv, results.json,\n" +
			"slowdown.png (p99.9 slowdown against load, one line per policy) and\n" +
			"latency-<type>.png (p99.9 latency of each type), in the form of the paper's figures.\n" +
			"Server logs go to --out too. Redraw the charts later with psp plot.\n\n" +
			"Before the first load of each policy, --prewarm of traffic at the middle load lets\n" +
			"DARC finish its start-up profiling (the server is started with --min-samples).\n\n" +
			"Example:\n" +
			"  psp sweep --policies darc,cfcfs --loads 0.2:0.9:0.1 --workload high-bimodal \\\n" +
			"    --workers 14 --app emulate --dilation 1000 --duration 5s --out results",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "policies", Value: "darc,cfcfs", Usage: "comma-separated policies to start servers with (darc, cfcfs, dfcfs, fp, darc-static); with --server, the label of the running server's policy"},
			&cli.StringFlag{Name: "loads", Value: "0.2:0.9:0.1", Usage: "offered loads: START:END:STEP or a comma-separated list of fractions of the workers' capacity"},
			&cli.StringFlag{Name: "app", Value: "emulate", Usage: "application the started servers run (emulate sleeps service time x dilation; with it --dilation defaults to 1000)"},
			&cli.StringFlag{Name: "classifier", Usage: "Wasm classifier `FILE` the started servers load (default: the native psp-header classifier)"},
			&cli.IntFlag{Name: "min-samples", Value: 200, Usage: "completions DARC profiles before reserving (passed to the started servers)"},
			&cli.StringSliceFlag{Name: "serve-arg", Usage: "extra argument for the started psp serve processes (repeatable), e.g. --serve-arg=--idle=busy-poll"},
			&cli.BoolFlag{Name: "in-process", Usage: "run the servers inside this process instead of child processes (quicker to start; they share the Go runtime with the load generator)"},
			&cli.StringFlag{Name: "transport", Value: "udp", Usage: "how requests reach the started servers: udp, or tcp (over --conns connections)"},
			&cli.StringFlag{Name: "server", Usage: "target a running server's `ADDR` (host:port, or tcp://host:port) instead of starting servers"},
			&cli.StringFlag{Name: "admin", Usage: "the running server's admin `ADDR` (host:port or URL), for its /status"},
			&cli.DurationFlag{Name: "prewarm", Value: 2 * time.Second, Usage: "traffic sent at the middle load before each policy's first point, not measured (0: none)"},
			&cli.StringFlag{Name: "out", Value: "psp-sweep", Usage: "output `DIR` (created if missing)"},
			&cli.BoolFlag{Name: "with-sim", Usage: "also simulate the same policies and loads (1s each) and draw them on slowdown.png as \"policy (sim)\"; written to sim.json"},
			&cli.IntFlag{Name: "calibrate", Usage: "with --with-sim: before each policy's points, measure the server's overhead with this many requests of the shortest type alone (where they cannot queue), and compare the live tails with the replay plus that overhead distribution (over 1000; 0: the median overhead only)"},
			&cli.BoolFlag{Name: "calibrate-alongside", Usage: "with --with-sim: measure the overhead during every point instead, on a twin of each started server that serves the shortest type alone beside it, so that the host's bursts fall in both (not with --server or --calibrate)"},
			&cli.Float64Flag{Name: "slo", Value: 10, Usage: "p99.9 slowdown SLO for the summary lines and the charts' dashed line (0: none)"},
			&cli.StringFlag{Name: "phases", Usage: "`PHASES`: play a workload that changes over time instead of --workload (built-in: " + strings.Join(workload.PhaseNames(), ", ") + ", or a .yaml/.json file); --loads apply to the phases without a load of their own"},
			&cli.DurationFlag{Name: "timeline", Usage: "record each point over time in buckets of this width: p99.9 per type and the server's reservations, polled (results.json, timeline-<policy>-<load>.png)"},
			jsonFlag(),
			&cli.BoolFlag{Name: "quiet", Usage: "no per-point progress lines on stderr"},
		}, loadFlags()...),
		Action: runSweep,
	}
}

func runSweep(c *cli.Context) error {
	if c.NArg() > 0 {
		return fmt.Errorf("sweep: unexpected argument %q (flags only; see psp sweep --help)", c.Args().First())
	}
	if err := refuseZero(c, "policies", "loads", "app", "min-samples", "server", "admin", "out", "phases", "timeline"); err != nil {
		return fmt.Errorf("sweep: %w", err)
	}
	plan, err := planFromFlags(c)
	if err != nil {
		return fmt.Errorf("sweep: %w", err)
	}
	if c.IsSet("phases") {
		if c.IsSet("workload") || c.IsSet("duration") {
			return errors.New("sweep: --phases replaces --workload and --duration (the phases give both)")
		}
		if plan.Phases, err = workload.ParsePhases(c.String("phases")); err != nil {
			return fmt.Errorf("sweep: --phases: %w", err)
		}
		plan.Workload, plan.Duration = plan.Phases.Union(), 0
	}
	if c.Duration("timeline") < 0 {
		return fmt.Errorf("sweep: --timeline %v: want > 0", c.Duration("timeline"))
	}
	if t := c.String("transport"); t != server.TransportUDP && t != server.TransportTCP {
		return fmt.Errorf("sweep: --transport %q: want udp or tcp", t)
	}
	loads, err := harness.ParseLoads(c.String("loads"))
	if err != nil {
		return fmt.Errorf("sweep: --%w", err)
	}
	sw := &harness.Sweep{
		Plan:  plan,
		Loads: loads,
		Server: harness.ServerSpec{
			App:        c.String("app"),
			Classifier: c.String("classifier"),
			MinSamples: c.Int("min-samples"),
			Args:       c.StringSlice("serve-arg"),
			Transport:  c.String("transport"),
		},
		Prewarm:  c.Duration("prewarm"),
		Out:      c.String("out"),
		SLO:      c.Float64("slo"),
		Timeline: c.Duration("timeline"),
		Log:      c.App.ErrWriter,
	}
	if c.Bool("quiet") {
		sw.Log = io.Discard
	}
	if c.Bool("with-sim") {
		sw.Simulate = time.Second
	}
	switch n := c.Int("calibrate"); {
	case n < 0:
		return fmt.Errorf("sweep: --calibrate %d: want > 0 (0: none)", n)
	case n > 0 && !c.Bool("with-sim"):
		return errors.New("sweep: --calibrate needs --with-sim (the overhead is added to the simulator's replay)")
	default:
		sw.Calibrate = n
	}
	if c.Bool("calibrate-alongside") {
		switch {
		case !c.Bool("with-sim"):
			return errors.New("sweep: --calibrate-alongside needs --with-sim (the overhead is added to the simulator's replay)")
		case c.IsSet("server"):
			return errors.New("sweep: --calibrate-alongside needs servers psp sweep starts (it starts a twin of each), not --server")
		case c.Int("calibrate") > 0:
			return errors.New("sweep: --calibrate and --calibrate-alongside are two ways of measuring the same overhead: give one")
		}
		sw.CalibrateAlongside = true
	}
	if c.Bool("in-process") {
		sw.Launcher = harness.InProcess{}
	}
	if c.IsSet("server") {
		sw.Target = &harness.Target{Listen: c.String("server"), Admin: c.String("admin")}
		// The label of a running server's policy is free text, but one.
		label := strings.TrimSpace(c.String("policies"))
		if strings.Contains(label, ",") {
			return fmt.Errorf("sweep: --server measures one running server: give --policies a single label (its policy), not %q", label)
		}
		sw.Policies = []string{label}
	} else {
		if c.IsSet("admin") {
			return errors.New("sweep: --admin needs --server (started servers get their own admin address)")
		}
		if sw.Policies, err = harness.ParsePolicies(c.String("policies"), darc.PolicyNames()); err != nil {
			return fmt.Errorf("sweep: --%w", err)
		}
		if f := sw.Server.Classifier; f != "" {
			if _, err := os.Stat(f); err != nil {
				return fmt.Errorf("sweep: --classifier: %w", err)
			}
		}
	}
	ctx, stop := signalContext(c.Context)
	defer stop()
	res, err := sw.Run(ctx)
	if res != nil && len(res.Points) > 0 {
		if perr := printSweep(c, c.App.Writer, res); perr != nil && err == nil {
			err = perr
		}
	}
	return err
}

// printSweep prints a sweep's table, summaries and files to out, or its
// points as JSON with --json.
func printSweep(c *cli.Context, out io.Writer, res *harness.SweepResult) error {
	if c.Bool("json") {
		if len(res.Tails) == 0 {
			return report.WriteJSON(out, res.Points, res.Summaries)
		}
		// The report's document plus the tail comparisons.
		var b bytes.Buffer
		if err := report.WriteJSON(&b, res.Points, res.Summaries); err != nil {
			return err
		}
		doc := map[string]any{}
		if err := json.Unmarshal(b.Bytes(), &doc); err != nil {
			return fmt.Errorf("json: %w", err)
		}
		doc["tails"] = res.Tails
		if len(res.Contrasts) > 0 {
			doc["contrasts"] = res.Contrasts
		}
		if len(res.WithoutConns) > 0 {
			doc["tails_without_conns"] = res.WithoutConns
		}
		enc, err := json.MarshalIndent(doc, "", "  ")
		if err != nil {
			return fmt.Errorf("json: %w", err)
		}
		_, err = out.Write(append(enc, '\n'))
		return err
	}
	if err := report.WriteTable(out, res.Points); err != nil {
		return err
	}
	if !c.Bool("json") && c.Command.Name == "sweep" {
		printTails(out, res.Tails)
		printHostMisses(out, res.Tails, c.Float64("slo"))
		printContrasts(out, res.Contrasts)
		printWithoutConns(out, res.WithoutConns)
	}
	if len(res.Summaries) > 0 {
		fmt.Fprintln(out)
		if err := report.WriteSummary(out, res.Summaries); err != nil {
			return err
		}
	}
	fmt.Fprintln(out)
	printWrittenFiles(out, res.Files)
	return nil
}

// printTails prints the live-against-simulated tail comparison of a sweep
// that simulated its points: under the overhead distribution when the
// sweep calibrated it (and the constant median overhead beside it), else
// under the constant overhead alone.
func printTails(w io.Writer, tails []harness.TailComparison) {
	if len(tails) == 0 {
		return
	}
	t0 := tails[0]
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	us := func(ns float64) string { return time.Duration(ns).Round(10 * time.Microsecond).String() }
	if t0.Distribution() {
		fmt.Fprintf(w, "\n%s tail slowdowns, live against the simulator's replay of the same requests plus the\n"+
			"server's overhead, measured request by request where requests cannot queue (network,\n"+
			"emulation, the host's stalls; during each point on a twin server, or once before the\n"+
			"points with --calibrate). ratio = live / expected; range = where a sample of that many\n"+
			"requests would put the tail with %g%% probability (a p99.9 of a thousand requests is their\n"+
			"second slowest): a point is judged by how far it lies outside its range. const: live\n"+
			"over the simulator plus the median overhead for every request, for comparison:\n", t0.Type, 100*harness.SampleConfidence)
		fmt.Fprintln(tw, "policy\tload\tsamples\toverhead p50/p99.9\tp99 live\texpected\trange\tratio\tconst\tp99.9 live\texpected\trange\tratio\tconst\t")
	} else {
		fmt.Fprintf(w, "\n%s tail slowdowns, live against simulated + the server's fixed overhead (live median\n"+
			"minus simulated median at each policy's lowest load), ratio = live / (sim + overhead):\n", t0.Type)
		fmt.Fprintln(tw, "policy\tload\tsamples\toverhead\tp99 live\tsim+oh\tratio\tp99.9 live\tsim+oh\tratio\t")
	}
	if t0.Conns > 0 {
		fmt.Fprintf(w, "(a run over TCP, replayed on its %d connections: a reply leaves after the earlier ones of its connection)\n", t0.Conns)
	}
	bad := 0
	span := func(r [2]float64) string { return fmt.Sprintf("%.3g-%.3g", r[0], r[1]) }
	for _, t := range tails {
		note := ""
		if p := t.Problem(harness.DefaultTailBound); p != "" {
			note, bad = "  ! "+p, bad+1
		}
		if t.Distribution() {
			fmt.Fprintf(tw, "%s\t%.2g\t%d\t%s\t%.3g\t%.3g\t%s\t%.2f\t%.2f\t%.3g\t%.3g\t%s\t%.2f\t%.2f\t%s\n", t.Policy, t.Load, t.Samples,
				us(float64(t.OverheadP50Ns))+"/"+us(float64(t.OverheadP999Ns)),
				t.LiveP99, t.ExpectedDistP99, span(t.ExpectedRangeP99), t.RatioDistP99, t.RatioP99,
				t.LiveP999, t.ExpectedDistP999, span(t.ExpectedRangeP999), t.RatioDistP999, t.RatioP999, note)
			continue
		}
		fmt.Fprintf(tw, "%s\t%.2g\t%d\t%s\t%.3g\t%.3g\t%.2f\t%.3g\t%.3g\t%.2f\t%s\n", t.Policy, t.Load, t.Samples,
			us(t.OverheadNs), t.LiveP99, t.ExpectedP99, t.RatioP99, t.LiveP999, t.ExpectedP999, t.RatioP999, note)
	}
	tw.Flush()
	if bad == 0 {
		fmt.Fprintf(w, "every point within %gx of the simulator's range: the live server shows the policy.\n", harness.DefaultTailBound)
	} else {
		fmt.Fprintf(w, "%d of %d points outside %gx of the simulator or too short (see psp status for where requests' time went).\n", bad, len(tails), harness.DefaultTailBound)
	}
}

// printHostMisses explains the summary's SLO misses that are the host's:
// points whose shortest type's live p99.9 slowdown exceeds slo while the
// simulator's replay of the same requests meets it. Within the bound of
// the replay plus the host's overhead in the same seconds, the miss is the
// host's, not the policy's; outside it, neither explains it.
func printHostMisses(w io.Writer, tails []harness.TailComparison, slo float64) {
	if slo <= 0 {
		return
	}
	header := false
	for _, t := range tails {
		if !t.Distribution() || t.LiveP999 <= slo || t.SimP999 > slo {
			continue
		}
		if !header {
			fmt.Fprintf(w, "\nSLO misses the simulator does not make (p99.9 slowdown over %g):\n", slo)
			header = true
		}
		verdict := "the host's stalls, not the policy"
		if p := t.Problem(harness.DefaultTailBound); !t.Within(harness.DefaultTailBound) {
			verdict = "more than the host's overhead explains: see psp status for where the time went"
		} else if p != "" {
			verdict = "not judged: " + p
		}
		fmt.Fprintf(w, "  %s at load %.2g: %s p99.9 %.3g live, %.3g in the simulator's replay, %.3g (%.3g-%.3g) with the\n"+
			"  host's overhead of the same seconds added: %s.\n",
			t.Policy, t.Load, t.Type, t.LiveP999, t.SimP999, t.ExpectedDistP999, t.ExpectedRangeP999[0], t.ExpectedRangeP999[1], verdict)
	}
}

// printContrasts prints the check's negative control: the live points
// against the other policy's replay of the same requests.
func printContrasts(w io.Writer, contrasts []harness.TailComparison) {
	printAgainstReplay(w, "The same live points against the other policy's replay of their requests (the check must\n"+
		"tell the policies apart: these ratios, and how far outside the range, should be far from 1):\n",
		contrasts, func(c harness.TailComparison) string { return c.SimPolicy })
}

// printWithoutConns prints the live points of a run over TCP against a
// replay that ignores their connections: how much of the tail the
// connections' reply order accounts for.
func printWithoutConns(w io.Writer, tails []harness.TailComparison) {
	printAgainstReplay(w, "The same live points against a replay that ignores their connections (every request answered\n"+
		"on its own, as over UDP): ratios far above 1 are the time replies waited for their connection's turn:\n",
		tails, func(c harness.TailComparison) string { return c.Policy + ", no connections" })
}

// printAgainstReplay prints, after intro, the live points against
// another replay of their requests (named by replayedAs): the ratios and
// how far outside the expected range they lie.
func printAgainstReplay(w io.Writer, intro string, cs []harness.TailComparison, replayedAs func(harness.TailComparison) string) {
	if len(cs) == 0 {
		return
	}
	fmt.Fprintf(w, "\n%s", intro)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "live\treplayed as\tload\tp99 ratio\toutside\tp99.9 ratio\toutside\t")
	for _, c := range cs {
		p99, p999 := c.Ratios()
		d99, d999 := c.Deviations()
		fmt.Fprintf(tw, "%s\t%s\t%.2g\t%.2f\t%.2f\t%.2f\t%.2f\t\n", c.Policy, replayedAs(c), c.Load, p99, d99, p999, d999)
	}
	tw.Flush()
}

func printWrittenFiles(w io.Writer, paths []string) {
	for _, p := range paths {
		fmt.Fprintf(w, "wrote %s\n", p)
	}
}
