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
}

// curveRun is one run of curves: its points, grouped by label, and the
// loads, duration and seeds its size and options resolved.
type curveRun struct {
	c      *curves
	x      *expRun
	pts    []report.Point
	gs     []group
	labels []string // the groups' labels, in order
	loads  []float64
	dur    time.Duration
	nseeds int
}

// config is the simulation of policy p on the curves' workload and
// workers, with their testbed settings.
func (c *curves) config(p string) sim.Config {
	cfg := c.base
	cfg.Workload, cfg.Workers, cfg.Policy = builtin(c.workload), c.workers, p
	return cfg
}

// run simulates the curves.
func (c *curves) run(ctx context.Context, x *expRun) (*curveRun, error) {
	seeds := x.seeds(c.seeds[0], c.seeds[1])
	r := &curveRun{c: c, x: x, loads: pick(x, c.loads[0], c.loads[1]), dur: x.duration(c.duration[0], c.duration[1]), nseeds: len(seeds)}
	var vs []variant
	if c.variants != nil {
		vs = c.variants()
	} else {
		for _, p := range c.policies {
			vs = append(vs, variant{label: p, cfg: c.config(p)})
		}
	}
	pts, err := x.simGrid(ctx, vs, r.loads, seeds, r.dur)
	if err != nil {
		return nil, err
	}
	r.pts, r.gs = pts, groups(pts)
	for _, g := range r.gs {
		r.labels = append(r.labels, g.label)
	}
	return r, nil
}

// experiment returns e running the curves, then analyse on the run to
// write the tables, the summary and the charts.
func (c *curves) experiment(e Experiment, analyse func(r *curveRun) error) Experiment {
	e.run = func(ctx context.Context, x *expRun) error {
		r, err := c.run(ctx, x)
		if err != nil {
			return err
		}
		return analyse(r)
	}
	return e
}

// sub is the charts' subtitle.
func (r *curveRun) sub() string { return subtitle(r.c.workload, r.c.workers, r.dur, r.nseeds) }

// loadTable adds a table of one row per load and the columns cols, each
// cell a spread over seeds.
func (r *curveRun) loadTable(title string, cols []column) {
	r.x.table(loadTable(title, r.gs, cols, spreadNote(r.nseeds)))
}

// highestLoads adds the table of each label's highest load meeting slo
// (with its ratio to ref's, unless ref is "") and the result's summaries
// at slo, and returns the loads' spreads per label.
func (r *curveRun) highestLoads(slo report.SLO, ref string) map[string]spread {
	t, sp := sloTable(r.pts, r.labels, slo, ref)
	r.x.table(t)
	r.x.res.Summaries = append(r.x.res.Summaries, report.SummarizeSLO(r.pts, slo)...)
	return sp
}

// curveChart saves as file the chart of metric m against load, one line
// per label, titled title over the run's subtitle; slo > 0 draws the SLO
// (in the metric's units divided by scale).
func (r *curveRun) curveChart(file string, m metric, title, ylabel string, slo, scale float64) error {
	return r.x.saveChart(curveChart(r.gs, m, title+"\n"+r.sub(), ylabel, slo, scale), file)
}

// slowdownCharts draws p99.9 slowdown against load for all requests
// (slowdown.png) and for each type (slowdown-<type>.png).
func (r *curveRun) slowdownCharts(slo float64) error {
	if err := r.curveChart("slowdown.png", slowdownMetric(""), "p99.9 slowdown, all requests", "p99.9 slowdown (log)", slo, 1); err != nil {
		return err
	}
	for _, t := range builtin(r.c.workload).Types {
		if err := r.curveChart("slowdown-"+safeName(t.Name)+".png", slowdownMetric(t.Name), "p99.9 slowdown of "+t.Name, "p99.9 slowdown (log)", slo, 1); err != nil {
			return err
		}
	}
	return nil
}

// maxLoadChart saves as max-load.png the chart of lines: the highest load
// meeting the curves' SLO against xlabel.
func (r *curveRun) maxLoadChart(xlabel string, lines ...report.Line) error {
	ch := &report.Chart{Title: "highest load with " + r.c.slo.String() + "\n" + r.sub(), XLabel: xlabel,
		YLabel: "highest load meeting the SLO", Lines: lines, YMin: 0, YMax: 1}
	return r.x.saveChart(ch, "max-load.png")
}

// addSpread adds to ln the point (x, the median of s), the range of s its
// band.
func addSpread(ln *report.Line, x float64, s spread) {
	ln.X, ln.Y, ln.Lo, ln.Hi = append(ln.X, x), append(ln.Y, s.med), append(ln.Lo, s.lo), append(ln.Hi, s.hi)
}

// levelLine is a horizontal line from x = 0 to xmax at the median of s,
// the range of s its band: a variant that does not vary along the x axis.
func levelLine(label string, xmax float64, s spread) report.Line {
	return report.Line{Label: label, X: []float64{0, xmax}, Y: []float64{s.med, s.med}, Lo: []float64{s.lo, s.lo}, Hi: []float64{s.hi, s.hi}}
}

// spreadAt is the spread over seeds of metric m for label at load; its
// median is NaN (and its cell "-") without such points.
func spreadAt(gs []group, label string, load float64, m metric) spread {
	for _, g := range gs {
		if g.label == label {
			if j := slices.Index(g.loads, load); j >= 0 {
				return spreadOf(g.points[j], m)
			}
		}
	}
	return spread{med: math.NaN()}
}

// policyColumns is one column per label of metric m.
func policyColumns(labels []string, m metric) []column {
	var cols []column
	for _, l := range labels {
		cols = append(cols, column{header: l, label: l, m: m})
	}
	return cols
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
	return c.experiment(Experiment{
		Name:  "fig1",
		Title: "Figure 1: p99.9 slowdown of c-FCFS, d-FCFS, time sharing and DARC on Extreme Bimodal (simulated)",
		Setup: "Extreme Bimodal (99.5% 0.5us, 0.5% 500us), 16 workers, loads 0.1-0.95, 3 seeds of 1 s",
	}, func(r *curveRun) error {
		r.loadTable("worst type's p99.9 slowdown", policyColumns(r.labels, worstMetric()))
		r.loadTable("p99.9 slowdown, all requests", policyColumns(r.labels, slowdownMetric("")))
		r.loadTable("CPU waste: workers idle while requests wait", policyColumns(r.labels, wasteMetric()))
		sp := r.highestLoads(c.slo, c.ref)
		r.x.res.Measured = fmt.Sprintf("p99.9 slowdown per type on Extreme Bimodal, %d workers, %d policies x %d loads x %d seeds of %v: highest load with %s: %s",
			c.workers, len(r.labels), len(r.gs[0].loads), r.nseeds, r.dur, c.slo, joinLoads(r.labels, sp))
		return r.slowdownCharts(c.slo.Slowdown)
	})
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
	return c.experiment(Experiment{
		Name:  "fig3",
		Title: "Figure 3: DARC against c-FCFS on High Bimodal, the paper's testbed simulated (10us network round trip, 7 Mrps dispatcher)",
		Setup: "High Bimodal (50% 1us, 50% 100us), 14 workers, loads 0.1-0.95, 5 seeds of 2 s; SLO: SHORT p99.9 latency <= 20us end to end",
	}, func(r *curveRun) error {
		var cols []column
		for _, m := range []metric{latencyMetric("SHORT"), latencyMetric("LONG"), slowdownMetric("")} {
			for _, l := range r.labels {
				cols = append(cols, column{header: l + " " + m.name, label: l, m: m})
			}
		}
		r.loadTable("p99.9 latency (network round trip included) and slowdown", cols)
		sp := r.highestLoads(c.slo, c.ref)
		// The paper's ratios, from the medians over seeds.
		slowRatio, slowAt := ratioRange(r.gs, "cfcfs", "darc", slowdownMetric(""))
		longRatio, longAt := ratioRange(r.gs, "darc", "cfcfs", latencyMetric("LONG"))
		r.x.table(Table{Title: "ratios (medians over seeds; sustained loads)", Header: []string{"what", "up to", "at load"}, Rows: [][]string{
			{"c-FCFS / DARC p99.9 slowdown, all requests", fmt.Sprintf("%.1fx", slowRatio), fmtLoad(slowAt)},
			{"DARC / c-FCFS LONG p99.9 latency", fmt.Sprintf("%.1fx", longRatio), fmtLoad(longAt)},
		}, Note: "(paper, 14 workers: DARC cuts p99.9 slowdown up to 15.7x, sustains 2.3x more load at the 20us SHORT SLO, at up to 4.2x the LONG tail latency)"})
		loadRatio := "-"
		if d, f := sp["darc"].med, sp["cfcfs"].med; d > 0 && f > 0 {
			loadRatio = fmt.Sprintf("%.2fx", d/f)
		}
		r.x.res.Measured = fmt.Sprintf("%s on High Bimodal (%d workers, 10us RTT, 7 Mrps dispatcher, %d seeds of %v): highest load %s (%s more); p99.9 slowdown up to %.1fx lower under DARC, LONG p99.9 latency up to %.1fx higher",
			c.slo, c.workers, r.nseeds, r.dur, joinLoads(r.labels, sp), loadRatio, slowRatio, longRatio)
		if err := r.curveChart("latency-SHORT.png", latencyMetric("SHORT"), "SHORT p99.9 latency, end to end", "p99.9 latency (µs, log)", c.slo.LatencyNs/1e3, 1e3); err != nil {
			return err
		}
		if err := r.curveChart("latency-LONG.png", latencyMetric("LONG"), "LONG p99.9 latency, end to end", "p99.9 latency (µs, log)", 0, 1e3); err != nil {
			return err
		}
		return r.curveChart("slowdown.png", slowdownMetric(""), "p99.9 slowdown, all requests", "p99.9 slowdown (log)", 0, 1)
	})
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
	const maxReserved = 6
	c := &curves{
		workload: "extreme-bimodal", workers: 16,
		loads:    [2][]float64{{0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.95}, {0.5, 0.8, 0.95}},
		duration: [2]time.Duration{500 * time.Millisecond, 20 * time.Millisecond},
		seeds:    [2]int{3, 1},
		slo:      report.SLO{Slowdown: 10, PerType: true},
	}
	label := func(reserved int) string { return "static " + strconv.Itoa(reserved) }
	c.variants = func() []variant {
		var vs []variant
		for k := 0; k <= maxReserved; k++ {
			cfg := c.config(darc.NameDARCStatic)
			cfg.Darc.StaticReserved = k
			vs = append(vs, variant{label: label(k), x: float64(k), cfg: cfg})
		}
		return append(vs, variant{label: "darc", cfg: c.config(darc.NameDARC)})
	}
	return c.experiment(Experiment{
		Name:  "fig4",
		Title: "Figure 4: DARC-static, 0 to 6 workers reserved for SHORT, against DARC on Extreme Bimodal (simulated)",
		Setup: "Extreme Bimodal, 16 workers, darc-static reserving 0-6 workers and darc, loads 0.5-0.95, 3 seeds of 0.5 s",
	}, func(r *curveRun) error {
		r.loadTable("worst type's p99.9 slowdown", policyColumns(r.labels, worstMetric()))
		sp := r.highestLoads(c.slo, "")
		best, bestLoad := "", -1.0
		static := report.Line{Label: "darc-static"}
		for k := 0; k <= maxReserved; k++ {
			s := sp[label(k)]
			addSpread(&static, float64(k), s)
			if s.med > bestLoad {
				best, bestLoad = strconv.Itoa(k), s.med
			}
		}
		d := sp["darc"]
		if err := r.maxLoadChart("workers reserved for SHORT", static, levelLine("darc (dynamic)", maxReserved, d)); err != nil {
			return err
		}
		if err := r.curveChart("slowdown.png", worstMetric(), "worst type's p99.9 slowdown", "p99.9 slowdown (log)", c.slo.Slowdown, 1); err != nil {
			return err
		}
		nominal, _ := darc.Reserve([]darc.TypeProfile{{Type: 1, MeanNs: 500, Ratio: 0.995}, {Type: 2, MeanNs: 500e3, Ratio: 0.005}}, c.workers, 0, 0)
		r.x.res.Measured = fmt.Sprintf("highest load with %s as DARC-static reserves 0-%d workers for SHORT on Extreme Bimodal (%d seeds of %v): best %s reserved (%s); DARC %s (its demand-based reservation: %d for SHORT)",
			c.slo, maxReserved, r.nseeds, r.dur, best, fmtLoad(bestLoad), d.cell(fmtLoad), len(nominal[0].Reserved))
		return nil
	})
}

func expTPCC() Experiment {
	return comparison("tpcc", time.Second, 30*time.Millisecond,
		"TPC-C: DARC against c-FCFS (Shenango's policy) and Shinjuku, simulated testbed",
		"TPC-C (5 transaction types, 5.7-100us), 14 workers, loads 0.1-0.95, 5 seeds of 1 s")
}

func expRocksDB() Experiment {
	return comparison("rocksdb", 5*time.Second, 200*time.Millisecond,
		"RocksDB: DARC against c-FCFS (Shenango's policy) and Shinjuku, simulated testbed",
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
			row = append(row, spreadAt(gs, l, load, slowdownMetric(typ.Name)).cell(fmtSlowdown))
		}
		t.Rows = append(t.Rows, row)
	}
	return t
}

// comparison is the TPC-C and RocksDB experiment, named after its
// workload: c-FCFS, Shinjuku and DARC against load on the simulated
// testbed, points of duration full or small by size, and the highest load
// at the per-type SLO and at the overall one, with its ratio to DARC's.
func comparison(wl string, full, small time.Duration, title, setup string) Experiment {
	c := &curves{
		workload: wl, workers: 14, policies: []string{"cfcfs", "shinjuku", "darc"},
		loads:    [2][]float64{loadRange(0.1, 0.9, 0.1, 0.95), {0.3, 0.6, 0.9}},
		duration: [2]time.Duration{full, small},
		seeds:    [2]int{5, 1},
		base:     sim.Config{NetworkRTT: TestbedRTT, DispatcherRate: TestbedDispatcherRate},
		slo:      report.SLO{Slowdown: 10, PerType: true},
		ref:      "darc",
	}
	return c.experiment(Experiment{Name: wl, Title: title, Setup: setup}, func(r *curveRun) error {
		r.loadTable("worst type's p99.9 slowdown", policyColumns(r.labels, worstMetric()))
		r.x.table(typeTable(r.gs, r.labels, builtin(c.workload), 0.8, r.nseeds))
		var measured []string
		for _, slo := range []report.SLO{c.slo, {Slowdown: c.slo.Slowdown}} {
			sp := r.highestLoads(slo, c.ref)
			var ratios []string
			for _, l := range r.labels {
				if l != c.ref && sp[l].med > 0 && sp[c.ref].med > 0 {
					ratios = append(ratios, fmt.Sprintf("%.2fx %s's", sp[c.ref].med/sp[l].med, l))
				}
			}
			m := fmt.Sprintf("with %s: %s", slo, joinLoads(r.labels, sp))
			if len(ratios) > 0 {
				m += " (DARC: " + strings.Join(ratios, ", ") + ")"
			}
			measured = append(measured, m)
		}
		r.x.res.Measured = fmt.Sprintf("highest load on %s (%d workers, 10us RTT, 7 Mrps dispatcher, %d seeds of %v) %s",
			c.workload, c.workers, r.nseeds, r.dur, strings.Join(measured, "; "))
		return r.slowdownCharts(c.slo.Slowdown)
	})
}

func expFig9() Experiment {
	fractions := []float64{0, 0.01, 0.05, 0.1, 0.2, 0.35, 0.5}
	c := &curves{
		workload: "high-bimodal", workers: 14,
		loads:    [2][]float64{{0.6, 0.8, 0.9}, {0.8}},
		duration: [2]time.Duration{2 * time.Second, 50 * time.Millisecond},
		seeds:    [2]int{5, 1},
	}
	label := func(fraction float64) string { return fmt.Sprintf("darc %g%%", 100*fraction) }
	c.variants = func() []variant {
		vs := []variant{{label: "cfcfs", cfg: c.config(darc.NameCFCFS)}}
		for _, f := range fractions {
			cfg := c.config(darc.NameDARC)
			cfg.Misclassify = f
			vs = append(vs, variant{label: label(f), x: f, cfg: cfg})
		}
		return vs
	}
	return c.experiment(Experiment{
		Name:  "fig9",
		Title: "Figure 9: DARC with a classifier that errs, up to a random one, against c-FCFS on High Bimodal (simulated)",
		Setup: "High Bimodal, 14 workers, 0-50% of requests given the other type (50%: a random classifier), loads 0.6, 0.8, 0.9, 5 seeds of 2 s",
	}, func(r *curveRun) error {
		t := Table{Title: "p99.9 slowdown by misclassified fraction (SHORT; all requests)", Header: []string{"misclassified"}, Note: spreadNote(r.nseeds)}
		for _, l := range r.loads {
			t.Header = append(t.Header, fmt.Sprintf("SHORT @%g", l), fmt.Sprintf("all @%g", l))
		}
		for _, name := range r.labels {
			row := []string{name}
			for _, l := range r.loads {
				row = append(row, spreadAt(r.gs, name, l, slowdownMetric("SHORT")).cell(fmtSlowdown), spreadAt(r.gs, name, l, slowdownMetric("")).cell(fmtSlowdown))
			}
			t.Rows = append(t.Rows, row)
		}
		r.x.table(t)
		mid := r.loads[len(r.loads)/2]
		var charts []*report.Chart
		for _, m := range []metric{slowdownMetric("SHORT"), slowdownMetric("")} {
			dl := report.Line{Label: "darc"}
			for _, f := range fractions {
				addSpread(&dl, 100*f, spreadAt(r.gs, label(f), mid, m))
			}
			cl := levelLine("cfcfs", 100*fractions[len(fractions)-1], spreadAt(r.gs, "cfcfs", mid, m))
			charts = append(charts, &report.Chart{Title: fmt.Sprintf("%s at load %g, by misclassified fraction\n%s", m.name, mid, r.sub()),
				XLabel: "requests given the wrong type (%)", YLabel: "p99.9 slowdown (log)", LogY: true, Lines: []report.Line{dl, cl}})
		}
		if err := report.SaveStacked(r.x.path("misclassify.png"), charts, report.PlotOptions{Width: 18 * vg.Centimeter}); err != nil {
			return err
		}
		short := func(name string) string { return spreadAt(r.gs, name, mid, slowdownMetric("SHORT")).cell(fmtSlowdown) }
		r.x.res.Measured = fmt.Sprintf("SHORT p99.9 slowdown at load %g on High Bimodal (%d workers, %d seeds of %v) as the classifier errs: DARC %s with an exact classifier, %s with a random one; c-FCFS %s",
			mid, c.workers, r.nseeds, r.dur, short(label(0)), short(label(0.5)), short("cfcfs"))
		return nil
	})
}

func expFig10() Experiment {
	costs := []time.Duration{0, 250 * time.Nanosecond, 500 * time.Nanosecond, time.Microsecond, 2 * time.Microsecond}
	policies := []string{sim.PolicyTS, sim.PolicyShinjuku}
	c := &curves{
		workload: "high-bimodal", workers: 14,
		loads:    [2][]float64{loadRange(0.1, 0.9, 0.1, 0.95), {0.3, 0.6, 0.9}},
		duration: [2]time.Duration{time.Second, 30 * time.Millisecond},
		seeds:    [2]int{3, 1},
		slo:      report.SLO{Slowdown: 10, PerType: true},
	}
	label := func(p string, cost time.Duration) string { return fmt.Sprintf("%s %v", p, cost) }
	c.variants = func() []variant {
		var vs []variant
		for _, p := range policies {
			for _, cost := range costs {
				cfg := c.config(p)
				cfg.TS.PreemptCost = cost
				if cost == 0 {
					cfg.TS.PreemptCost = -1 // free preemptions (zero takes the default)
				}
				vs = append(vs, variant{label: label(p, cost), x: float64(cost), cfg: cfg})
			}
		}
		return append(vs, variant{label: "darc", cfg: c.config(darc.NameDARC)})
	}
	return c.experiment(Experiment{
		Name:  "fig10",
		Title: "Figure 10: preemption overhead: time sharing and Shinjuku with 0-2us per preemption (5us quantum) against DARC on High Bimodal (simulated)",
		Setup: "High Bimodal, 14 workers, ts and shinjuku at 0, 0.25, 0.5, 1, 2us per preemption, and darc, loads 0.1-0.95, 3 seeds of 1 s",
	}, func(r *curveRun) error {
		_, sp := sloTable(r.pts, r.labels, c.slo, "")
		d := sp["darc"]
		t := Table{Title: "highest load with " + c.slo.String(), Header: []string{"cost per preemption", "ts", "shinjuku", "darc"},
			Note: spreadNote(r.nseeds)}
		for _, cost := range costs {
			t.Rows = append(t.Rows, []string{cost.String(), sp[label(sim.PolicyTS, cost)].cell(fmtLoad), sp[label(sim.PolicyShinjuku, cost)].cell(fmtLoad), d.cell(fmtLoad)})
		}
		r.x.table(t)
		var lines []report.Line
		for _, p := range policies {
			ln := report.Line{Label: p}
			for _, cost := range costs {
				addSpread(&ln, cost.Seconds()*1e6, sp[label(p, cost)])
			}
			lines = append(lines, ln)
		}
		last := costs[len(costs)-1]
		lines = append(lines, levelLine("darc (no preemption)", last.Seconds()*1e6, d))
		if err := r.maxLoadChart("cost per preemption (µs)", lines...); err != nil {
			return err
		}
		r.x.res.Summaries = report.SummarizeSLO(r.pts, c.slo)
		r.x.res.Measured = fmt.Sprintf("highest load with %s on High Bimodal (%d workers, 5us quantum, %d seeds of %v) as a preemption costs 0 to %v: ts %s to %s, shinjuku %s to %s; darc %s",
			c.slo, c.workers, r.nseeds, r.dur, last,
			sp[label(sim.PolicyTS, 0)].cell(fmtLoad), sp[label(sim.PolicyTS, last)].cell(fmtLoad),
			sp[label(sim.PolicyShinjuku, 0)].cell(fmtLoad), sp[label(sim.PolicyShinjuku, last)].cell(fmtLoad), d.cell(fmtLoad))
		return nil
	})
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
