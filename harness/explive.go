package harness

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/persephone-go/psp/darc"
	"github.com/persephone-go/psp/loadgen"
	"github.com/persephone-go/psp/report"
	"github.com/persephone-go/psp/server"
	"github.com/persephone-go/psp/sim"
	"github.com/persephone-go/psp/workload"
)

// LiveDilation is the time dilation of the live experiments' emulated
// servers: 14 workers' sleeps fit on two cores (SHORT 1us sleeps 2ms).
const LiveDilation = 2000

func expFig3Live() Experiment {
	const workers = 14
	return Experiment{
		Name:  "fig3-live",
		Title: "Figure 3, live: DARC against c-FCFS on emulated psp servers (High Bimodal dilated 2000x), with the simulator at the same scale",
		Setup: "psp serve (emulate, 14 workers, dilation 2000, 200-sample profiles) per policy and seed, loads 0.6, 0.8, 0.9, 10 s each, 2 seeds",
		Live:  true,
		run: func(ctx context.Context, x *expRun) error {
			w := builtin("high-bimodal")
			loads := pick(x, []float64{0.6, 0.8, 0.9}, []float64{0.8})
			seeds := x.seeds(2, 1)
			dur := x.duration(10*time.Second, 2*time.Second)
			minSamples := pick(x, 200, 50)
			prewarm := pick(x, 2*time.Second, time.Second)
			policies := []string{darc.NameDARC, darc.NameCFCFS}
			var live []report.Point
			for _, seed := range seeds {
				sw := &Sweep{
					Plan:     Plan{Workload: w, Workers: workers, Duration: dur, Seed: seed, Progress: x.opt.Progress},
					Policies: policies,
					Loads:    loads,
					Server:   ServerSpec{App: server.AppEmulate, Dilation: LiveDilation, MinSamples: minSamples, Transport: x.opt.Transport},
					Launcher: x.opt.Launcher,
					Prewarm:  prewarm,
					Out:      filepath.Join(x.opt.Out, fmt.Sprintf("live-seed%d", seed)),
					SLO:      10,
					Log:      x.opt.Log,
				}
				x.logf("live sweep, seed %d: %s at loads %v, %v each", seed, strings.Join(policies, " and "), loads, dur)
				res, err := sw.Run(ctx)
				if res != nil {
					for _, p := range res.Points {
						p.Seed = seed
						p.Policy += " live"
						live = append(live, p)
					}
					x.res.Files = append(x.res.Files, res.Files...)
				}
				if err != nil {
					return err
				}
			}
			x.res.Points = append(x.res.Points, live...)
			// The simulator at the same scale: the same dilation (so the
			// deadlines compare as they do live), durations and profiles,
			// the pre-warm and the client's warm-up left out.
			span := prewarm + dur
			warm := (float64(prewarm) + loadgen.DefaultWarmup*float64(dur)) / float64(span)
			var vs []variant
			for _, p := range policies {
				vs = append(vs, variant{label: p + " sim", cfg: sim.Config{Workload: w, Workers: workers, Policy: p, Warmup: warm,
					Dilation: LiveDilation, Darc: darc.Config{MinSamples: minSamples}}})
			}
			simDur := span
			simSeeds := x.seeds(5, 2)
			simPts, err := x.simGrid(ctx, vs, loads, simSeeds, simDur)
			if err != nil {
				return err
			}
			gs := groups(append(slices.Clone(live), simPts...))
			labels := []string{"darc live", "cfcfs live", "darc sim", "cfcfs sim"}
			var cols []column
			for _, m := range []metric{slowdownMetric("SHORT"), slowdownMetric("LONG"), slowdownMetric("")} {
				for _, l := range labels {
					cols = append(cols, column{header: l + " " + strings.TrimSuffix(m.name, " p99.9 slowdown"), label: l, m: m})
				}
			}
			for i := range cols {
				if cols[i].m.name == "p99.9 slowdown" {
					cols[i].header = cols[i].label + " all"
				}
			}
			x.table(loadTable("p99.9 slowdown: live (dilated) and simulated at the same scale", gs, cols,
				fmt.Sprintf("(live: median over %d seeds [min-max], %v per point after a %v pre-warm; sim: %d seeds of the same %v, dilated the same, pre-warm and warm-up left out; ! = not sustained: on a busy machine the client falls behind its schedule)",
					len(seeds), dur, prewarm, len(simSeeds), simDur)))
			slo := report.SLO{Slowdown: 10, PerType: true}
			t, sp := sloTable(append(slices.Clone(live), simPts...), labels, slo, "")
			x.table(t)
			ch := curveChart(gs, slowdownMetric("SHORT"), fmt.Sprintf("SHORT p99.9 slowdown, live (dilation %d) and simulated\n%s", LiveDilation, subtitle(w.Name, workers, dur, len(seeds))),
				"p99.9 slowdown (log)", slo.Slowdown, 1)
			if err := x.saveChart(ch, "slowdown-SHORT.png"); err != nil {
				return err
			}
			if err := x.saveChart(curveChart(gs, slowdownMetric(""), "p99.9 slowdown, all requests, live and simulated\n"+subtitle(w.Name, workers, dur, len(seeds)),
				"p99.9 slowdown (log)", slo.Slowdown, 1), "slowdown.png"); err != nil {
				return err
			}
			mid := loads[len(loads)/2]
			at := func(label string) string {
				for _, g := range gs {
					if g.label == label {
						if j := slices.Index(g.loads, mid); j >= 0 {
							return spreadOf(g.points[j], slowdownMetric("SHORT")).cell(fmtSlowdown)
						}
					}
				}
				return "-"
			}
			x.res.Measured = fmt.Sprintf("SHORT p99.9 slowdown at load %g on emulated servers (High Bimodal x%d, %d workers, %d seeds of %v): DARC %s, c-FCFS %s live; the simulator at the same scale %s and %s; highest load with %s: %s",
				mid, LiveDilation, workers, len(seeds), dur, at("darc live"), at("cfcfs live"), at("darc sim"), at("cfcfs sim"), slo, joinLoads(labels, sp))
			return nil
		},
	}
}

func expFig7Live() Experiment {
	const workers, load = 14, 0.8
	return Experiment{
		Name:  "fig7-live",
		Title: "Figure 7, live: DARC through the phase changes on an emulated psp server (dilated 2000x), with the simulator at the same scale",
		Setup: "psp serve (darc, emulate, 14 workers, dilation 2000, 200-sample profiles), four 10 s phases at load 0.8, /status polled every 100 ms; 1 seed",
		Live:  true,
		run: func(ctx context.Context, x *expRun) error {
			base, err := workload.ParsePhases("phase-change")
			if err != nil {
				return err
			}
			phaseDur := x.duration(10*time.Second, 2500*time.Millisecond)
			ph := base.Scaled(float64(phaseDur) / float64(time.Duration(base.Phases[0].Duration)))
			minSamples := pick(x, 200, 50)
			bucket := pick(x, time.Second, 500*time.Millisecond)
			seeds := x.seeds(1, 1)
			var live []report.Point
			for _, seed := range seeds {
				sw := &Sweep{
					Plan:     Plan{Phases: ph, Workers: workers, Seed: seed, Spec: loadgen.Spec{Warmup: -1}, Progress: x.opt.Progress},
					Policies: []string{darc.NameDARC},
					Loads:    []float64{load},
					Server:   ServerSpec{App: server.AppEmulate, Dilation: LiveDilation, MinSamples: minSamples, Transport: x.opt.Transport},
					Launcher: x.opt.Launcher,
					Out:      filepath.Join(x.opt.Out, fmt.Sprintf("live-seed%d", seed)),
					Timeline: bucket,
					Log:      x.opt.Log,
				}
				x.logf("live phases, seed %d: %s at load %g, %v per phase", seed, ph.Name, load, phaseDur)
				res, err := sw.Run(ctx)
				if res != nil {
					for _, p := range res.Points {
						p.Seed = seed
						live = append(live, p)
					}
					x.res.Files = append(x.res.Files, res.Files...)
				}
				if err != nil {
					return err
				}
			}
			x.res.Points = append(x.res.Points, live...)
			cfg := sim.Config{Phases: ph, Workers: workers}
			liveSummary, err := x.phaseReport(live, cfg, ph, bucket, len(seeds), 1, "-live", "live: ")
			if err != nil {
				return err
			}
			// The simulator at the live run's scale: the same dilation,
			// phases and profiles.
			simSeeds := x.seeds(5, 2)
			vs := []variant{{label: darc.NameDARC, cfg: sim.Config{Phases: ph, Workers: workers, Policy: darc.NameDARC, Dilation: LiveDilation,
				Timeline: bucket, Warmup: -1, Darc: darc.Config{MinSamples: minSamples}}}}
			simPts, err := x.simGrid(ctx, vs, []float64{load}, simSeeds, 0)
			if err != nil {
				return err
			}
			for i := range simPts {
				// Nominal latencies, as the live timeline shows them.
				for _, b := range simPts[i].Timeline.Buckets {
					for j := range b.Types {
						b.Types[j].P999Latency = int64(float64(b.Types[j].P999Latency) / LiveDilation)
					}
				}
			}
			simSummary, err := x.phaseReport(simPts, vs[0].cfg, ph, bucket, len(simSeeds), 1, "-sim", "simulated at the same scale: ")
			if err != nil {
				return err
			}
			x.res.Measured = fmt.Sprintf("DARC's re-reservation after each phase change on an emulated server (x%d, %d workers, load %g, %v phases): live %s s; simulated at the same scale %s s",
				LiveDilation, workers, load, phaseDur, liveSummary, simSummary)
			return nil
		},
	}
}
