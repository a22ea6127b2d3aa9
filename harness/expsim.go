package harness

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"gonum.org/v1/plot/vg"

	"github.com/persephone-go/psp/report"
	"github.com/persephone-go/psp/sim"
	"github.com/persephone-go/psp/workload"
)

// The paper's testbed, as the simulator models it: a network round trip
// of about 10us between clients and server, and a dispatcher of 7 million
// requests per second.
const (
	TestbedRTT            = 10 * time.Microsecond
	TestbedDispatcherRate = 7e6
)

// variant is one line of an experiment: a label and the simulation it
// runs (Load and Seed are set per run).
type variant struct {
	label string
	cfg   sim.Config
	x     float64 // its value on an x axis other than load, if any
}

// simGrid simulates every variant at every load for every seed, for
// duration each, and returns the points with Policy set to the variant's
// label, in variant, load, seed order.
func (x *expRun) simGrid(ctx context.Context, variants []variant, loads []float64, seeds []uint64, duration time.Duration) ([]report.Point, error) {
	var cfgs []sim.Config
	var labels []string
	for _, v := range variants {
		for _, l := range loads {
			for _, s := range seeds {
				c := v.cfg
				c.Load, c.Seed = l, s
				if len(c.Phases.Phases) == 0 {
					c.Duration = duration
				}
				cfgs = append(cfgs, c)
				labels = append(labels, v.label)
			}
		}
	}
	x.logf("simulating %d runs (%d variants x %d loads x %d seeds)", len(cfgs), len(variants), len(loads), len(seeds))
	start := time.Now()
	next := 0.1
	pts, err := sim.RunAll(ctx, cfgs, x.opt.Parallel, func(done, total int, _ report.Point) {
		if f := float64(done) / float64(total); f >= next || done == total {
			x.logf("  %d/%d runs (%v)", done, total, time.Since(start).Round(100*time.Millisecond))
			for next <= f {
				next += 0.1
			}
		}
	})
	if err != nil {
		return nil, err
	}
	for i := range pts {
		pts[i].Policy = labels[i]
	}
	x.res.Points = append(x.res.Points, pts...)
	return pts, nil
}

// group is one label's points: per load, the points of every seed.
type group struct {
	label  string
	loads  []float64
	points [][]report.Point
}

// groups splits points by label (in order of appearance), then by load
// (ascending).
func groups(points []report.Point) []group {
	var out []group
	idx := map[string]int{}
	for _, p := range points {
		i, ok := idx[p.Policy]
		if !ok {
			i = len(out)
			idx[p.Policy] = i
			out = append(out, group{label: p.Policy})
		}
		g := &out[i]
		j := slices.Index(g.loads, p.Load)
		if j < 0 {
			g.loads = append(g.loads, p.Load)
			g.points = append(g.points, nil)
			j = len(g.loads) - 1
		}
		g.points[j] = append(g.points[j], p)
	}
	for i := range out {
		g := &out[i]
		order := make([]int, len(g.loads))
		for k := range order {
			order[k] = k
		}
		sort.SliceStable(order, func(a, b int) bool { return g.loads[order[a]] < g.loads[order[b]] })
		loads, pts := make([]float64, len(order)), make([][]report.Point, len(order))
		for k, o := range order {
			loads[k], pts[k] = g.loads[o], g.points[o]
		}
		g.loads, g.points = loads, pts
	}
	return out
}

// metric extracts one value from a point; ok is false without samples.
type metric struct {
	name   string
	f      func(p *report.Point) (float64, bool)
	format func(v float64) string
}

func fmtSlowdown(v float64) string {
	switch {
	case v >= 1000:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case v >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	}
	return strconv.FormatFloat(v, 'f', 2, 64)
}

func fmtLatency(v float64) string { return report.FormatNs(v) }

// slowdownMetric is the p99.9 slowdown of type typ ("" for all requests).
func slowdownMetric(typ string) metric {
	return typeMetric("p99.9 slowdown", typ, fmtSlowdown, func(s report.Stats) float64 { return s.P999Slowdown })
}

// latencyMetric is the p99.9 latency (ns) of type typ ("" for all).
func latencyMetric(typ string) metric {
	return typeMetric("p99.9 latency", typ, fmtLatency, func(s report.Stats) float64 { return float64(s.P999Latency) })
}

// typeMetric is the statistic stat, called name, of type typ's requests
// ("" for all requests); a point without such requests has none.
func typeMetric(name, typ string, format func(float64) string, stat func(report.Stats) float64) metric {
	if typ != "" {
		name = typ + " " + name
	}
	return metric{name: name, format: format, f: func(p *report.Point) (float64, bool) {
		if typ == "" {
			return stat(p.Overall), p.Overall.Count > 0
		}
		s, ok := p.TypeStat(typ)
		return stat(s), ok && s.Count > 0
	}}
}

// worstMetric is the largest p99.9 slowdown over the types with samples.
func worstMetric() metric {
	return metric{name: "worst type's p99.9 slowdown", format: fmtSlowdown, f: func(p *report.Point) (float64, bool) {
		v, ok := 0.0, false
		for _, t := range p.Types {
			if t.Count > 0 {
				v, ok = max(v, t.P999Slowdown), true
			}
		}
		return v, ok
	}}
}

func wasteMetric() metric {
	return metric{name: "CPU waste (workers)", format: func(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) },
		f: func(p *report.Point) (float64, bool) { return p.WastedWorkers, !math.IsNaN(p.WastedWorkers) }}
}

// spread is a metric over seeds: median, minimum, maximum and count.
type spread struct {
	med, lo, hi float64
	n           int
	unsustained int // seeds whose point was not sustained
}

func spreadOf(pts []report.Point, m metric) spread {
	var vs []float64
	s := spread{}
	for i := range pts {
		if !pts[i].Sustained {
			s.unsustained++
		}
		if v, ok := m.f(&pts[i]); ok && !math.IsNaN(v) {
			vs = append(vs, v)
		}
	}
	s.n = len(vs)
	if s.n == 0 {
		s.med, s.lo, s.hi = math.NaN(), math.NaN(), math.NaN()
		return s
	}
	s.med, s.lo, s.hi = median(vs), slices.Min(vs), slices.Max(vs)
	return s
}

func median(vs []float64) float64 {
	v := slices.Clone(vs)
	slices.Sort(v)
	n := len(v)
	if n%2 == 1 {
		return v[n/2]
	}
	return (v[n/2-1] + v[n/2]) / 2
}

// cell formats a spread: "4.2 [3.9-4.6]", or "4.2" for one seed; "!" when
// some seed's point was not sustained, "-" without samples.
func (s spread) cell(format func(float64) string) string {
	if s.n == 0 {
		return "-"
	}
	out := format(s.med)
	if s.n > 1 && s.hi > s.lo {
		out += " [" + format(s.lo) + "-" + format(s.hi) + "]"
	}
	if s.unsustained > 0 {
		out += " !"
	}
	return out
}

// column is one column of a per-load table: a label's metric.
type column struct {
	header string
	label  string
	m      metric
}

// loadTable is a table with one row per load and one column per (label,
// metric): the spread over seeds.
func loadTable(title string, gs []group, cols []column, note string) Table {
	t := Table{Title: title, Header: []string{"load"}, Note: note}
	var loads []float64
	for _, g := range gs {
		for _, l := range g.loads {
			if !slices.Contains(loads, l) {
				loads = append(loads, l)
			}
		}
	}
	slices.Sort(loads)
	for _, c := range cols {
		t.Header = append(t.Header, c.header)
	}
	for _, l := range loads {
		row := []string{strconv.FormatFloat(l, 'g', 3, 64)}
		for _, c := range cols {
			cell := "-"
			for _, g := range gs {
				if g.label != c.label {
					continue
				}
				if j := slices.Index(g.loads, l); j >= 0 {
					cell = spreadOf(g.points[j], c.m).cell(c.m.format)
				}
			}
			row = append(row, cell)
		}
		t.Rows = append(t.Rows, row)
	}
	return t
}

// spreadNote explains the cells of spread tables.
func spreadNote(seeds int) string {
	if seeds <= 1 {
		return "(one seed; ! = not sustained)"
	}
	return fmt.Sprintf("(median over %d seeds [min-max]; ! = not sustained with some seed)", seeds)
}

// maxLoads returns, per label, the highest load at which slo holds (every
// load up to it holding) with each seed; 0 when it fails at the lowest.
func maxLoads(points []report.Point, slo report.SLO) map[string][]float64 {
	bySeed := map[uint64][]report.Point{}
	var seeds []uint64
	for _, p := range points {
		if _, ok := bySeed[p.Seed]; !ok {
			seeds = append(seeds, p.Seed)
		}
		bySeed[p.Seed] = append(bySeed[p.Seed], p)
	}
	out := map[string][]float64{}
	for _, s := range seeds {
		for _, sum := range report.SummarizeSLO(bySeed[s], slo) {
			v := 0.0
			if sum.Found {
				v = sum.MaxLoad
			}
			out[sum.Policy] = append(out[sum.Policy], v)
		}
	}
	return out
}

// loadSpread is the spread of the highest loads over seeds. Its median of
// an even count is the lower middle value, so that it is a measured load.
func loadSpread(vs []float64) spread {
	if len(vs) == 0 {
		return spread{med: math.NaN()}
	}
	v := slices.Clone(vs)
	slices.Sort(v)
	return spread{med: v[(len(v)-1)/2], lo: v[0], hi: v[len(v)-1], n: len(v)}
}

func fmtLoad(v float64) string {
	if v == 0 {
		return "none"
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}

// sloTable tells, per label, the highest load meeting slo (spread over
// seeds) and its ratio to ref's (median to median).
func sloTable(points []report.Point, labels []string, slo report.SLO, ref string) (Table, map[string]spread) {
	ml := maxLoads(points, slo)
	t := Table{Title: "highest load with " + slo.String(), Header: []string{"policy", "highest load"}}
	if ref != "" {
		t.Header = append(t.Header, ref+" / policy")
	}
	out := map[string]spread{}
	for _, l := range labels {
		s := loadSpread(ml[l])
		out[l] = s
		row := []string{l, s.cell(fmtLoad)}
		if ref != "" {
			r := loadSpread(ml[ref])
			switch {
			case s.med > 0 && r.med > 0:
				row = append(row, strconv.FormatFloat(r.med/s.med, 'f', 2, 64)+"x")
			default:
				row = append(row, "-")
			}
		}
		t.Rows = append(t.Rows, row)
	}
	t.Note = "(the largest measured load up to which every load meets the SLO and is sustained; none: not even the lowest)"
	if len(ml) > 0 {
		for _, v := range ml {
			if len(v) > 1 {
				t.Note = fmt.Sprintf("(median over %d seeds [min-max] of the largest measured load up to which every load meets the SLO and is sustained; none: not even the lowest)", len(v))
			}
			break
		}
	}
	return t, out
}

// curveChart draws a metric against load, one line per label with its
// spread over seeds as a band.
func curveChart(gs []group, m metric, title, ylabel string, hline float64, scale float64) *report.Chart {
	c := &report.Chart{Title: title, XLabel: "offered load", YLabel: ylabel, LogY: true, HLine: hline, LoadX: true}
	if hline > 0 {
		c.HLineLabel = "SLO " + strconv.FormatFloat(hline, 'g', -1, 64)
		if scale == 1e3 {
			c.HLineLabel += "µs"
		}
	}
	for _, g := range gs {
		ln := report.Line{Label: g.label}
		for j, l := range g.loads {
			s := spreadOf(g.points[j], m)
			ln.X = append(ln.X, l)
			ln.Y = append(ln.Y, s.med/scale)
			ln.Lo = append(ln.Lo, s.lo/scale)
			ln.Hi = append(ln.Hi, s.hi/scale)
		}
		c.Lines = append(c.Lines, ln)
	}
	return c
}

// saveChart saves c as name in the output directory.
func (x *expRun) saveChart(c *report.Chart, name string) error {
	if err := c.Save(x.path(name), report.PlotOptions{Width: 18 * vg.Centimeter}); err != nil {
		return fmt.Errorf("chart %s: %w", name, err)
	}
	return nil
}

// subtitle is the second line of the experiments' chart titles.
func subtitle(w string, workers int, duration time.Duration, seeds int) string {
	s := fmt.Sprintf("%s, %d workers, %v per point", w, workers, duration)
	if seeds > 1 {
		s += fmt.Sprintf(", %d seeds (median, range)", seeds)
	}
	return s
}

// builtin returns a built-in workload (the names are constants here).
func builtin(name string) workload.Workload {
	w, err := workload.Builtin(name)
	if err != nil {
		panic(err)
	}
	return w
}

// joinLoads describes the highest loads of labels, e.g. "darc 0.9, cfcfs
// 0.3".
func joinLoads(labels []string, sp map[string]spread) string {
	var parts []string
	for _, l := range labels {
		parts = append(parts, l+" "+sp[l].cell(fmtLoad))
	}
	return strings.Join(parts, ", ")
}
