package harness

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"gonum.org/v1/plot/vg"

	"github.com/persephone-go/psp/darc"
	"github.com/persephone-go/psp/report"
	"github.com/persephone-go/psp/sim"
	"github.com/persephone-go/psp/workload"
)

// loadRange returns start, start+step, ..., end and the extra loads.
func loadRange(start, end, step float64, extra ...float64) []float64 {
	var out []float64
	for l := start; l <= end+1e-9; l += step {
		out = append(out, math.Round(l*1000)/1000)
	}
	return append(out, extra...)
}

// curves is an experiment of policies against load on one workload.
type curves struct {
	workload string
	workers  int
	policies []string
	loads    [2][]float64     // full, small
	duration [2]time.Duration // full, small
	seeds    [2]int           // full, small
	base     sim.Config       // testbed settings
	slo      report.SLO       // the summary's SLO
	ref      string           // the policy the others are compared with
	variants func() []variant // other variants than plain policies, if any
	dur      time.Duration    // resolved duration
	nseeds   int              // resolved seeds
}

// run simulates the curves and returns the points and their groups.
func (c *curves) run(ctx context.Context, x *expRun) ([]report.Point, []group, error) {
	loads := pick(x, c.loads[0], c.loads[1])
	seeds := x.seeds(c.seeds[0], c.seeds[1])
	c.dur = x.duration(c.duration[0], c.duration[1])
	c.nseeds = len(seeds)
	var vs []variant
	if c.variants != nil {
		vs = c.variants()
	} else {
		for _, p := range c.policies {
			cfg := c.base
			cfg.Workload, cfg.Workers, cfg.Policy = builtin(c.workload), c.workers, p
			vs = append(vs, variant{label: p, cfg: cfg})
		}
	}
	pts, err := x.simGrid(ctx, vs, loads, seeds, c.dur)
	if err != nil {
		return nil, nil, err
	}
	return pts, groups(pts), nil
}

func (c *curves) labels(gs []group) []string {
	var out []string
	for _, g := range gs {
		out = append(out, g.label)
	}
	return out
}

// sub is the charts' subtitle.
func (c *curves) sub() string { return subtitle(c.workload, c.workers, c.dur, c.nseeds) }

// slowdownCharts draws p99.9 slowdown against load for all requests
// (slowdown.png) and for each type (slowdown-<type>.png).
func (c *curves) slowdownCharts(x *expRun, gs []group, slo float64) error {
	if err := x.saveChart(curveChart(gs, slowdownMetric(""), "p99.9 slowdown, all requests\n"+c.sub(), "p99.9 slowdown (log)", slo, 1), "slowdown.png"); err != nil {
		return err
	}
	for _, t := range builtin(c.workload).Types {
		ch := curveChart(gs, slowdownMetric(t.Name), "p99.9 slowdown of "+t.Name+"\n"+c.sub(), "p99.9 slowdown (log)", slo, 1)
		if err := x.saveChart(ch, "slowdown-"+safeName(t.Name)+".png"); err != nil {
			return err
		}
	}
	return nil
}

// policyColumns is one column per label of metric m.
func policyColumns(labels []string, m metric) []column {
	var cols []column
	for _, l := range labels {
		cols = append(cols, column{header: l, label: l, m: m})
	}
	return cols
}

// lowLoadWaste describes the CPU waste of each label at the lowest load.
func lowLoadWaste(gs []group) string {
	var parts []string
	for _, g := range gs {
		if len(g.loads) == 0 {
			continue
		}
		s := spreadOf(g.points[0], wasteMetric())
		parts = append(parts, fmt.Sprintf("%s %s", g.label, s.cell(wasteMetric().format)))
	}
	return strings.Join(parts, ", ")
}

func expFig1() Experiment {
	c := &curves{
		workload: "extreme-bimodal", workers: 16, policies: []string{"cfcfs", "dfcfs", "ts", "darc"},
		loads:    [2][]float64{loadRange(0.1, 0.9, 0.1, 0.95), {0.3, 0.6, 0.9}},
		duration: [2]time.Duration{time.Second, 20 * time.Millisecond},
		seeds:    [2]int{3, 1},
		slo:      report.SLO{Slowdown: 10, PerType: true},
		ref:      "darc",
	}
	return Experiment{
		Name:  "fig1",
		Title: "Figure 1: p99.9 slowdown of c-FCFS, d-FCFS, time sharing and DARC on Extreme Bimodal (simulated)",
		Setup: "Extreme Bimodal (99.5% 0.5us, 0.5% 500us), 16 workers, loads 0.1-0.95, 3 seeds of 1 s",
		run: func(ctx context.Context, x *expRun) error {
			pts, gs, err := c.run(ctx, x)
			if err != nil {
				return err
			}
			labels := c.labels(gs)
			x.table(loadTable("worst type's p99.9 slowdown", gs, policyColumns(labels, worstMetric()), spreadNote(c.nseeds)))
			x.table(loadTable("p99.9 slowdown, all requests", gs, policyColumns(labels, slowdownMetric("")), spreadNote(c.nseeds)))
			x.table(loadTable("CPU waste: workers idle while requests wait", gs, policyColumns(labels, wasteMetric()), spreadNote(c.nseeds)))
			t, sp := sloTable(pts, labels, c.slo, c.ref)
			x.table(t)
			x.res.Summaries = report.SummarizeSLO(pts, c.slo)
			x.res.Measured = fmt.Sprintf("p99.9 slowdown per type on Extreme Bimodal, %d workers, %d policies x %d loads x %d seeds of %v: highest load with %s: %s",
				c.workers, len(labels), len(gs[0].loads), c.nseeds, c.dur, c.slo, joinLoads(labels, sp))
			return c.slowdownCharts(x, gs, c.slo.Slowdown)
		},
	}
}

func expFig3() Experiment {
	c := &curves{
		workload: "high-bimodal", workers: 14, policies: []string{"darc", "cfcfs"},
		loads:    [2][]float64{loadRange(0.1, 0.9, 0.1, 0.95), {0.3, 0.6, 0.9}},
		duration: [2]time.Duration{2 * time.Second, 50 * time.Millisecond},
		seeds:    [2]int{5, 1},
		base:     sim.Config{NetworkRTT: TestbedRTT, DispatcherRate: TestbedDispatcherRate},
		slo:      report.SLO{LatencyNs: 20e3, Types: []string{"SHORT"}},
		ref:      "darc",
	}
	return Experiment{
		Name:  "fig3",
		Title: "Figure 3: DARC against c-FCFS on High Bimodal, the paper's testbed simulated (10us network round trip, 7 Mrps dispatcher)",
		Setup: "High Bimodal (50% 1us, 50% 100us), 14 workers, loads 0.1-0.95, 5 seeds of 2 s; SLO: SHORT p99.9 latency <= 20us end to end",
		run: func(ctx context.Context, x *expRun) error {
			pts, gs, err := c.run(ctx, x)
			if err != nil {
				return err
			}
			labels := c.labels(gs)
			var cols []column
			for _, m := range []metric{latencyMetric("SHORT"), latencyMetric("LONG"), slowdownMetric("")} {
				for _, l := range labels {
					cols = append(cols, column{header: l + " " + m.name, label: l, m: m})
				}
			}
			x.table(loadTable("p99.9 latency (network round trip included) and slowdown", gs, cols, spreadNote(c.nseeds)))
			t, sp := sloTable(pts, labels, c.slo, c.ref)
			x.table(t)
			x.res.Summaries = report.SummarizeSLO(pts, c.slo)
			// The paper's ratios, from the medians over seeds.
			slowRatio, slowAt := ratioRange(gs, "cfcfs", "darc", slowdownMetric(""))
			longRatio, longAt := ratioRange(gs, "darc", "cfcfs", latencyMetric("LONG"))
			x.table(Table{Title: "ratios (medians over seeds; sustained loads)", Header: []string{"what", "up to", "at load"}, Rows: [][]string{
				{"c-FCFS / DARC p99.9 slowdown, all requests", fmt.Sprintf("%.1fx", slowRatio), fmtLoad(slowAt)},
				{"DARC / c-FCFS LONG p99.9 latency", fmt.Sprintf("%.1fx", longRatio), fmtLoad(longAt)},
			}, Note: "(paper, 14 workers: DARC cuts p99.9 slowdown up to 15.7x, sustains 2.3x more load at the 20us SHORT SLO, at up to 4.2x the LONG tail latency)"})
			loadRatio := "-"
			if d, f := sp["darc"].med, sp["cfcfs"].med; d > 0 && f > 0 {
				loadRatio = fmt.Sprintf("%.2fx", d/f)
			}
			x.res.Measured = fmt.Sprintf("%s on High Bimodal (%d workers, 10us RTT, 7 Mrps dispatcher, %d seeds of %v): highest load %s (%s more); p99.9 slowdown up to %.1fx lower under DARC, LONG p99.9 latency up to %.1fx higher",
				c.slo, c.workers, c.nseeds, c.dur, joinLoads(labels, sp), loadRatio, slowRatio, longRatio)
			if err := x.saveChart(curveChart(gs, latencyMetric("SHORT"), "SHORT p99.9 latency, end to end\n"+c.sub(), "p99.9 latency (µs, log)", c.slo.LatencyNs/1e3, 1e3), "latency-SHORT.png"); err != nil {
				return err
			}
			if err := x.saveChart(curveChart(gs, latencyMetric("LONG"), "LONG p99.9 latency, end to end\n"+c.sub(), "p99.9 latency (µs, log)", 0, 1e3), "latency-LONG.png"); err != nil {
				return err
			}
			return x.saveChart(curveChart(gs, slowdownMetric(""), "p99.9 slowdown, all requests\n"+c.sub(), "p99.9 slowdown (log)", 0, 1), "slowdown.png")
		},
	}
}

// ratioRange is the largest ratio num/den of a metric's medians over the
// loads where both are sustained with every seed, and the load where it
// is reached.
func ratioRange(gs []group, num, den string, m metric) (float64, float64) {
	var a, b *group
	for i := range gs {
		switch gs[i].label {
		case num:
			a = &gs[i]
		case den:
			b = &gs[i]
		}
	}
	best, at := 0.0, 0.0
	if a == nil || b == nil {
		return best, at
	}
	for i, l := range a.loads {
		j := slices.Index(b.loads, l)
		if j < 0 {
			continue
		}
		sa, sb := spreadOf(a.points[i], m), spreadOf(b.points[j], m)
		if sa.unsustained > 0 || sb.unsustained > 0 || !(sb.med > 0) {
			continue
		}
		if r := sa.med / sb.med; r > best {
			best, at = r, l
		}
	}
	return best, at
}

func expFig4() Experiment {
	const workers, maxReserved = 16, 6
	c := &curves{
		workload: "extreme-bimodal", workers: workers,
		loads:    [2][]float64{{0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.95}, {0.5, 0.8, 0.95}},
		duration: [2]time.Duration{500 * time.Millisecond, 20 * time.Millisecond},
		seeds:    [2]int{3, 1},
		slo:      report.SLO{Slowdown: 10, PerType: true},
	}
	c.variants = func() []variant {
		var vs []variant
		for k := 0; k <= maxReserved; k++ {
			vs = append(vs, variant{label: "static " + strconv.Itoa(k), x: float64(k), cfg: sim.Config{
				Workload: builtin(c.workload), Workers: workers, Policy: darc.NameDARCStatic, Darc: darc.Config{StaticReserved: k}}})
		}
		return append(vs, variant{label: "darc", cfg: sim.Config{Workload: builtin(c.workload), Workers: workers, Policy: darc.NameDARC}})
	}
	return Experiment{
		Name:  "fig4",
		Title: "Figure 4: DARC-static, 0 to 6 workers reserved for SHORT, against DARC on Extreme Bimodal (simulated)",
		Setup: "Extreme Bimodal, 16 workers, darc-static reserving 0-6 workers and darc, loads 0.5-0.95, 3 seeds of 0.5 s",
		run: func(ctx context.Context, x *expRun) error {
			pts, gs, err := c.run(ctx, x)
			if err != nil {
				return err
			}
			labels := c.labels(gs)
			var cols []column
			for _, l := range labels {
				cols = append(cols, column{header: l, label: l, m: worstMetric()})
			}
			x.table(loadTable("worst type's p99.9 slowdown", gs, cols, spreadNote(c.nseeds)))
			t, sp := sloTable(pts, labels, c.slo, "")
			x.table(t)
			x.res.Summaries = report.SummarizeSLO(pts, c.slo)
			best, bestLoad := "", -1.0
			ml := report.Line{Label: "darc-static"}
			for k := 0; k <= maxReserved; k++ {
				s := sp["static "+strconv.Itoa(k)]
				ml.X, ml.Y, ml.Lo, ml.Hi = append(ml.X, float64(k)), append(ml.Y, s.med), append(ml.Lo, s.lo), append(ml.Hi, s.hi)
				if s.med > bestLoad {
					best, bestLoad = strconv.Itoa(k), s.med
				}
			}
			d := sp["darc"]
			dl := report.Line{Label: "darc (dynamic)", X: []float64{0, maxReserved}, Y: []float64{d.med, d.med}, Lo: []float64{d.lo, d.lo}, Hi: []float64{d.hi, d.hi}}
			ch := &report.Chart{Title: "highest load with " + c.slo.String() + "\n" + c.sub(), XLabel: "workers reserved for SHORT",
				YLabel: "highest load meeting the SLO", Lines: []report.Line{ml, dl}, YMin: 0, YMax: 1}
			if err := x.saveChart(ch, "max-load.png"); err != nil {
				return err
			}
			if err := x.saveChart(curveChart(gs, worstMetric(), "worst type's p99.9 slowdown\n"+c.sub(), "p99.9 slowdown (log)", c.slo.Slowdown, 1), "slowdown.png"); err != nil {
				return err
			}
			nominal, _ := darc.Reserve([]darc.TypeProfile{{Type: 1, MeanNs: 500, Ratio: 0.995}, {Type: 2, MeanNs: 500e3, Ratio: 0.005}}, workers, 0, 0)
			x.res.Measured = fmt.Sprintf("highest load with %s as DARC-static reserves 0-%d workers for SHORT on Extreme Bimodal (%d seeds of %v): best %s reserved (%s); DARC %s (its demand-based reservation: %d for SHORT)",
				c.slo, maxReserved, c.nseeds, c.dur, best, fmtLoad(bestLoad), d.cell(fmtLoad), len(nominal[0].Reserved))
			return nil
		},
	}
}

func expTPCC() Experiment {
	c := &curves{
		workload: "tpcc", workers: 14, policies: []string{"cfcfs", "shinjuku", "darc"},
		loads:    [2][]float64{loadRange(0.1, 0.9, 0.1, 0.95), {0.3, 0.6, 0.9}},
		duration: [2]time.Duration{time.Second, 30 * time.Millisecond},
		seeds:    [2]int{5, 1},
		base:     sim.Config{NetworkRTT: TestbedRTT, DispatcherRate: TestbedDispatcherRate},
		slo:      report.SLO{Slowdown: 10, PerType: true},
		ref:      "darc",
	}
	return comparison(c, "tpcc", "TPC-C: DARC against c-FCFS (Shenango's policy) and Shinjuku, simulated testbed",
		"TPC-C (5 transaction types, 5.7-100us), 14 workers, loads 0.1-0.95, 5 seeds of 1 s")
}

func expRocksDB() Experiment {
	c := &curves{
		workload: "rocksdb", workers: 14, policies: []string{"cfcfs", "shinjuku", "darc"},
		loads:    [2][]float64{loadRange(0.1, 0.9, 0.1, 0.95), {0.3, 0.6, 0.9}},
		duration: [2]time.Duration{5 * time.Second, 200 * time.Millisecond},
		seeds:    [2]int{5, 1},
		base:     sim.Config{NetworkRTT: TestbedRTT, DispatcherRate: TestbedDispatcherRate},
		slo:      report.SLO{Slowdown: 10, PerType: true},
		ref:      "darc",
	}
	return comparison(c, "rocksdb", "RocksDB: DARC against c-FCFS (Shenango's policy) and Shinjuku, simulated testbed",
		"RocksDB (50% GET 1.5us, 50% SCAN 635us), 14 workers, loads 0.1-0.95, 5 seeds of 5 s")
}

// typeTable shows each type's p99.9 slowdown under each label at the
// largest measured load up to at.
func typeTable(gs []group, labels []string, w workload.Workload, at float64, seeds int) Table {
	load := 0.0
	for _, g := range gs {
		for _, l := range g.loads {
			if l <= at+1e-9 {
				load = max(load, l)
			}
		}
	}
	t := Table{Title: fmt.Sprintf("p99.9 slowdown per type at load %g", load), Header: append([]string{"type"}, labels...), Note: spreadNote(seeds)}
	for _, typ := range w.Types {
		row := []string{typ.Name}
		for _, l := range labels {
			cell := "-"
			for _, g := range gs {
				if j := slices.Index(g.loads, load); g.label == l && j >= 0 {
					cell = spreadOf(g.points[j], slowdownMetric(typ.Name)).cell(fmtSlowdown)
				}
			}
			row = append(row, cell)
		}
		t.Rows = append(t.Rows, row)
	}
	return t
}

// comparison is the TPC-C and RocksDB experiment: policies against load,
// the highest load at the SLO and its ratio to DARC's.
func comparison(c *curves, name, title, setup string) Experiment {
	return Experiment{
		Name: name, Title: title, Setup: setup,
		run: func(ctx context.Context, x *expRun) error {
			pts, gs, err := c.run(ctx, x)
			if err != nil {
				return err
			}
			labels := c.labels(gs)
			x.table(loadTable("worst type's p99.9 slowdown", gs, policyColumns(labels, worstMetric()), spreadNote(c.nseeds)))
			x.table(typeTable(gs, labels, builtin(c.workload), 0.8, c.nseeds))
			var measured []string
			for _, slo := range []report.SLO{c.slo, {Slowdown: c.slo.Slowdown}} {
				t, sp := sloTable(pts, labels, slo, c.ref)
				x.table(t)
				x.res.Summaries = append(x.res.Summaries, report.SummarizeSLO(pts, slo)...)
				var ratios []string
				for _, l := range labels {
					if l != c.ref && sp[l].med > 0 && sp[c.ref].med > 0 {
						ratios = append(ratios, fmt.Sprintf("%.2fx %s's", sp[c.ref].med/sp[l].med, l))
					}
				}
				m := fmt.Sprintf("with %s: %s", slo, joinLoads(labels, sp))
				if len(ratios) > 0 {
					m += " (DARC: " + strings.Join(ratios, ", ") + ")"
				}
				measured = append(measured, m)
			}
			x.res.Measured = fmt.Sprintf("highest load on %s (%d workers, 10us RTT, 7 Mrps dispatcher, %d seeds of %v) %s",
				c.workload, c.workers, c.nseeds, c.dur, strings.Join(measured, "; "))
			return c.slowdownCharts(x, gs, c.slo.Slowdown)
		},
	}
}

func expFig9() Experiment {
	const workers = 14
	fractions := []float64{0, 0.01, 0.05, 0.1, 0.2, 0.35, 0.5}
	c := &curves{
		workload: "high-bimodal", workers: workers,
		loads:    [2][]float64{{0.6, 0.8, 0.9}, {0.8}},
		duration: [2]time.Duration{2 * time.Second, 50 * time.Millisecond},
		seeds:    [2]int{5, 1},
	}
	c.variants = func() []variant {
		vs := []variant{{label: "cfcfs", cfg: sim.Config{Workload: builtin(c.workload), Workers: workers, Policy: darc.NameCFCFS}}}
		for _, f := range fractions {
			vs = append(vs, variant{label: fmt.Sprintf("darc %g%%", 100*f), x: f, cfg: sim.Config{
				Workload: builtin(c.workload), Workers: workers, Policy: darc.NameDARC, Misclassify: f}})
		}
		return vs
	}
	return Experiment{
		Name:  "fig9",
		Title: "Figure 9: DARC with a classifier that errs, up to a random one, against c-FCFS on High Bimodal (simulated)",
		Setup: "High Bimodal, 14 workers, 0-50% of requests given the other type (50%: a random classifier), loads 0.6, 0.8, 0.9, 5 seeds of 2 s",
		run: func(ctx context.Context, x *expRun) error {
			_, gs, err := c.run(ctx, x)
			if err != nil {
				return err
			}
			loads := pick(x, c.loads[0], c.loads[1])
			t := Table{Title: "p99.9 slowdown by misclassified fraction (SHORT; all requests)", Header: []string{"misclassified"}, Note: spreadNote(c.nseeds)}
			for _, l := range loads {
				t.Header = append(t.Header, fmt.Sprintf("SHORT @%g", l), fmt.Sprintf("all @%g", l))
			}
			cell := func(label string, load float64, m metric) spread {
				for _, g := range gs {
					if g.label == label {
						if j := slices.Index(g.loads, load); j >= 0 {
							return spreadOf(g.points[j], m)
						}
					}
				}
				return spread{med: math.NaN()}
			}
			rows := append([]string{"cfcfs"}, nil...)
			for _, f := range fractions {
				rows = append(rows, fmt.Sprintf("darc %g%%", 100*f))
			}
			for _, label := range rows {
				row := []string{label}
				for _, l := range loads {
					row = append(row, cell(label, l, slowdownMetric("SHORT")).cell(fmtSlowdown), cell(label, l, slowdownMetric("")).cell(fmtSlowdown))
				}
				t.Rows = append(t.Rows, row)
			}
			x.table(t)
			mid := loads[len(loads)/2]
			var charts []*report.Chart
			for _, m := range []metric{slowdownMetric("SHORT"), slowdownMetric("")} {
				ch := &report.Chart{Title: fmt.Sprintf("%s at load %g, by misclassified fraction\n%s", m.name, mid, subtitle(c.workload, workers, c.dur, c.nseeds)),
					XLabel: "requests given the wrong type (%)", YLabel: "p99.9 slowdown (log)", LogY: true}
				dl := report.Line{Label: "darc"}
				for _, f := range fractions {
					s := cell(fmt.Sprintf("darc %g%%", 100*f), mid, m)
					dl.X, dl.Y, dl.Lo, dl.Hi = append(dl.X, 100*f), append(dl.Y, s.med), append(dl.Lo, s.lo), append(dl.Hi, s.hi)
				}
				s := cell("cfcfs", mid, m)
				cl := report.Line{Label: "cfcfs", X: []float64{0, 100 * fractions[len(fractions)-1]}, Y: []float64{s.med, s.med}, Lo: []float64{s.lo, s.lo}, Hi: []float64{s.hi, s.hi}}
				ch.Lines = []report.Line{dl, cl}
				charts = append(charts, ch)
			}
			if err := report.SaveStacked(x.path("misclassify.png"), charts, report.PlotOptions{Width: 18 * vg.Centimeter}); err != nil {
				return err
			}
			exact, random, fcfs := cell("darc 0%", mid, slowdownMetric("SHORT")), cell("darc 50%", mid, slowdownMetric("SHORT")), cell("cfcfs", mid, slowdownMetric("SHORT"))
			x.res.Measured = fmt.Sprintf("SHORT p99.9 slowdown at load %g on High Bimodal (%d workers, %d seeds of %v) as the classifier errs: DARC %s with an exact classifier, %s with a random one; c-FCFS %s",
				mid, workers, c.nseeds, c.dur, exact.cell(fmtSlowdown), random.cell(fmtSlowdown), fcfs.cell(fmtSlowdown))
			return nil
		},
	}
}

func expFig10() Experiment {
	const workers = 14
	costs := []time.Duration{0, 250 * time.Nanosecond, 500 * time.Nanosecond, time.Microsecond, 2 * time.Microsecond}
	c := &curves{
		workload: "high-bimodal", workers: workers,
		loads:    [2][]float64{loadRange(0.1, 0.9, 0.1, 0.95), {0.3, 0.6, 0.9}},
		duration: [2]time.Duration{time.Second, 30 * time.Millisecond},
		seeds:    [2]int{3, 1},
		slo:      report.SLO{Slowdown: 10, PerType: true},
	}
	label := func(p string, cost time.Duration) string { return fmt.Sprintf("%s %v", p, cost) }
	c.variants = func() []variant {
		var vs []variant
		for _, p := range []string{sim.PolicyTS, sim.PolicyShinjuku} {
			for _, cost := range costs {
				pc := cost
				if pc == 0 {
					pc = -1 // free preemptions (zero takes the default)
				}
				vs = append(vs, variant{label: label(p, cost), x: float64(cost), cfg: sim.Config{
					Workload: builtin(c.workload), Workers: workers, Policy: p, TS: sim.TSConfig{PreemptCost: pc}}})
			}
		}
		return append(vs, variant{label: "darc", cfg: sim.Config{Workload: builtin(c.workload), Workers: workers, Policy: darc.NameDARC}})
	}
	return Experiment{
		Name:  "fig10",
		Title: "Figure 10: preemption overhead: time sharing and Shinjuku with 0-2us per preemption (5us quantum) against DARC on High Bimodal (simulated)",
		Setup: "High Bimodal, 14 workers, ts and shinjuku at 0, 0.25, 0.5, 1, 2us per preemption, and darc, loads 0.1-0.95, 3 seeds of 1 s",
		run: func(ctx context.Context, x *expRun) error {
			pts, gs, err := c.run(ctx, x)
			if err != nil {
				return err
			}
			_, sp := sloTable(pts, c.labels(gs), c.slo, "")
			t := Table{Title: "highest load with " + c.slo.String(), Header: []string{"cost per preemption", "ts", "shinjuku", "darc"},
				Note: spreadNote(c.nseeds)}
			var lines []report.Line
			for _, p := range []string{sim.PolicyTS, sim.PolicyShinjuku} {
				ln := report.Line{Label: p}
				for _, cost := range costs {
					s := sp[label(p, cost)]
					ln.X, ln.Y, ln.Lo, ln.Hi = append(ln.X, cost.Seconds()*1e6), append(ln.Y, s.med), append(ln.Lo, s.lo), append(ln.Hi, s.hi)
				}
				lines = append(lines, ln)
			}
			d := sp["darc"]
			for _, cost := range costs {
				t.Rows = append(t.Rows, []string{cost.String(), sp[label(sim.PolicyTS, cost)].cell(fmtLoad), sp[label(sim.PolicyShinjuku, cost)].cell(fmtLoad), d.cell(fmtLoad)})
			}
			x.table(t)
			last := costs[len(costs)-1].Seconds() * 1e6
			lines = append(lines, report.Line{Label: "darc (no preemption)", X: []float64{0, last}, Y: []float64{d.med, d.med}, Lo: []float64{d.lo, d.lo}, Hi: []float64{d.hi, d.hi}})
			ch := &report.Chart{Title: "highest load with " + c.slo.String() + "\n" + c.sub(), XLabel: "cost per preemption (µs)",
				YLabel: "highest load meeting the SLO", Lines: lines, YMin: 0, YMax: 1}
			if err := x.saveChart(ch, "max-load.png"); err != nil {
				return err
			}
			x.res.Summaries = report.SummarizeSLO(pts, c.slo)
			x.res.Measured = fmt.Sprintf("highest load with %s on High Bimodal (%d workers, 5us quantum, %d seeds of %v) as a preemption costs 0 to %v: ts %s to %s, shinjuku %s to %s; darc %s",
				c.slo, workers, c.nseeds, c.dur, costs[len(costs)-1],
				sp[label(sim.PolicyTS, 0)].cell(fmtLoad), sp[label(sim.PolicyTS, costs[len(costs)-1])].cell(fmtLoad),
				sp[label(sim.PolicyShinjuku, 0)].cell(fmtLoad), sp[label(sim.PolicyShinjuku, costs[len(costs)-1])].cell(fmtLoad), d.cell(fmtLoad))
			return nil
		},
	}
}

func expFig7() Experiment {
	const workers, load = 14, 0.8
	return Experiment{
		Name:  "fig7",
		Title: "Figure 7: DARC through phase changes (service times swap, then the mix goes 99.5/0.5, then one type is left), simulated",
		Setup: "High Bimodal's two types at load 0.8 on 14 workers, four 5 s phases, darc and cfcfs, timeline in 100 ms buckets, 3 seeds",
		run: func(ctx context.Context, x *expRun) error {
			ph, err := workload.ParsePhases("phase-change")
			if err != nil {
				return err
			}
			scale := pick(x, 1.0, 0.05)
			if x.opt.Duration > 0 {
				scale = float64(x.opt.Duration) / float64(ph.Total())
			}
			ph = ph.Scaled(scale)
			bucket := time.Duration(float64(100*time.Millisecond) * scale)
			seeds := x.seeds(3, 1)
			var vs []variant
			for _, p := range []string{darc.NameDARC, darc.NameCFCFS} {
				vs = append(vs, variant{label: p, cfg: sim.Config{Phases: ph, Workers: workers, Policy: p, Timeline: bucket, Warmup: -1}})
			}
			pts, err := x.simGrid(ctx, vs, []float64{load}, seeds, 0)
			if err != nil {
				return err
			}
			summary, err := x.phaseReport(pts, vs[0].cfg, ph, bucket, len(seeds), 1, "", "")
			if err != nil {
				return err
			}
			x.res.Measured = fmt.Sprintf("DARC's re-reservation after each phase change (%s, load %g, %d workers, %d seeds of %v): %s seconds to the nominal reservation",
				ph.Name, load, workers, len(seeds), ph.Total(), summary)
			return nil
		},
	}
}

// phaseReport writes fig7's tables (titles prefixed with prefix) and
// charts (timeline-<policy><suffix>.png) from points of DARC (label
// "darc") and others over the phases of cfg, and returns how long DARC took
// to re-reserve after each change. timeScale multiplies the timelines'
// times (the dilation of a live run's simulation).
func (x *expRun) phaseReport(pts []report.Point, cfg sim.Config, ph workload.Phases, bucket time.Duration, nseeds int, timeScale float64, suffix, prefix string) (string, error) {
	type phaseSeeds struct {
		after []float64
		unmet int
		end   map[string]int
	}
	per := make([]phaseSeeds, len(ph.Phases))
	var expected []report.Reservation
	for i := range pts {
		p := &pts[i]
		if p.Policy != darc.NameDARC {
			continue
		}
		c := cfg
		c.Seed = p.Seed
		prs, err := sim.PhaseReservations(c, p)
		if err != nil {
			return "", err
		}
		expected = expected[:0]
		for k, pr := range prs {
			expected = append(expected, pr.Expected)
			if pr.Matched {
				per[k].after = append(per[k].after, pr.AfterSec*timeScale)
			} else {
				per[k].unmet++
			}
			if per[k].end == nil {
				per[k].end = map[string]int{}
			}
			end := "none"
			if pr.End != nil {
				end = pr.End.String()
			}
			per[k].end[end]++
		}
	}
	t := Table{Title: prefix + "DARC's reservation through the phases", Header: []string{"phase", "nominal reservation", "reached after (s)", "at the phase's end"},
		Note: fmt.Sprintf("(reached after: from the phase's start until DARC's reservation equals the one the phase's nominal profile calls for; median over %d seeds [min-max]; workers per group, the spillway worker included)", nseeds)}
	var summary []string
	for k, p := range ph.Phases {
		reached := loadSpread(per[k].after).cell(func(v float64) string { return strconv.FormatFloat(v, 'f', 3, 64) })
		if per[k].unmet > 0 {
			reached += fmt.Sprintf(" (not with %d seed(s))", per[k].unmet)
		}
		var ends []string
		for e, n := range per[k].end {
			if nseeds > 1 {
				e = fmt.Sprintf("%s (%d)", e, n)
			}
			ends = append(ends, e)
		}
		slices.Sort(ends)
		exp := "-"
		if k < len(expected) {
			exp = expected[k].String()
		}
		t.Rows = append(t.Rows, []string{p.Name, exp, reached, strings.Join(ends, "; ")})
		if k > 0 {
			summary = append(summary, p.Name+" "+reached)
		}
	}
	x.table(t)
	// Steady-state tails: the median over each phase's second half of the
	// buckets' p99.9 latency, per policy and type (seed 1).
	lt := Table{Title: prefix + "p99.9 latency per type in each phase's second half (median over its buckets; first seed)", Header: []string{"phase"}}
	var first []*report.Point
	for i := range pts {
		if pts[i].Seed == pts[0].Seed {
			first = append(first, &pts[i])
		}
	}
	for _, p := range first {
		for _, name := range p.Timeline.Types {
			lt.Header = append(lt.Header, p.Policy+" "+name)
		}
	}
	at := 0.0
	for _, phase := range ph.Phases {
		d := time.Duration(phase.Duration).Seconds() * timeScale
		row := []string{phase.Name}
		for _, p := range first {
			for ti := range p.Timeline.Types {
				var vs []float64
				for _, b := range p.Timeline.Buckets {
					s := b.StartSec * timeScale
					if s >= at+d/2 && s+p.Timeline.BucketSec*timeScale <= at+d && b.Types[ti].Count > 0 {
						vs = append(vs, float64(b.Types[ti].P999Latency))
					}
				}
				if len(vs) == 0 {
					row = append(row, "-")
				} else {
					row = append(row, report.FormatNs(median(vs)))
				}
			}
		}
		lt.Rows = append(lt.Rows, row)
		at += d
	}
	x.table(lt)
	for _, p := range first {
		tl := scaleTimeline(p.Timeline, timeScale)
		what := p.Policy
		switch {
		case p.Source != "sim" && p.Source != "":
			what += ", " + p.Source
		case suffix != "":
			what += ", simulated"
		}
		title := fmt.Sprintf("%s: p99.9 latency per %v\n%s at load %g, %d workers", what, time.Duration(float64(bucket)*timeScale), p.Workload, p.Load, p.Workers)
		if err := report.PlotTimeline(tl, title, x.path("timeline-"+safeName(p.Policy)+suffix+".png"), report.PlotOptions{}); err != nil {
			return "", err
		}
	}
	return strings.Join(summary, ", "), nil
}

// scaleTimeline returns t with its times multiplied by f.
func scaleTimeline(t *report.Timeline, f float64) *report.Timeline {
	if f == 1 {
		return t
	}
	c := *t
	c.BucketSec *= f
	c.Phases = slices.Clone(t.Phases)
	for i := range c.Phases {
		c.Phases[i].StartSec *= f
	}
	c.Buckets = slices.Clone(t.Buckets)
	for i := range c.Buckets {
		c.Buckets[i].StartSec *= f
	}
	c.Reservations = slices.Clone(t.Reservations)
	for i := range c.Reservations {
		c.Reservations[i].AtSec *= f
	}
	return &c
}
