package report

import (
	"fmt"
	"image/color"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// PlotOptions tune a chart. The zero value is a sensible default.
type PlotOptions struct {
	// Title overrides the chart title.
	Title string
	// Type restricts the metric to one request type; "" or "all" means all
	// requests (PlotSlowdown only).
	Type string
	// SLO, if > 0, draws a horizontal dashed line at that slowdown
	// (PlotSlowdown) or latency in ns (PlotLatency).
	SLO float64
	// Width and Height of the image; default 16cm x 10cm.
	Width, Height vg.Length
}

func (o PlotOptions) size() (vg.Length, vg.Length) {
	w, h := o.Width, o.Height
	if w <= 0 {
		w = 16 * vg.Centimeter
	}
	if h <= 0 {
		h = 10 * vg.Centimeter
	}
	return w, h
}

// Bounds on a chart's text and size: a label or title taken from the data
// (a policy, workload or type name, any length) is cut to them, with an
// ellipsis, so that the figure stays a sane size.
const (
	// maxLabelRunes bounds a legend entry, an axis label, a mark.
	maxLabelRunes = 80
	// maxTitleLineRunes bounds each line of a title; maxTitleLines its
	// lines.
	maxTitleLineRunes = 200
	maxTitleLines     = 4
	// maxCanvas bounds each side of a figure.
	maxCanvas = 100 * vg.Centimeter
)

// shorten cuts s to at most n runes, the last an ellipsis, on one line.
func shorten(s string, n int) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	i := 0
	for j := range s {
		if i == n-1 {
			return s[:j] + "…"
		}
		i++
	}
	return s
}

// shortenTitle cuts a title to maxTitleLines lines of maxTitleLineRunes.
func shortenTitle(s string) string {
	lines := strings.SplitN(s, "\n", maxTitleLines+1)
	if len(lines) > maxTitleLines {
		lines = lines[:maxTitleLines]
		lines[maxTitleLines-1] += " …"
	}
	for i, l := range lines {
		lines[i] = shorten(l, maxTitleLineRunes)
	}
	return strings.Join(lines, "\n")
}

// series groups points by line label, keeping order of first appearance
// and sorting each line by load.
func lines(points []Point) (labels []string, byLabel map[string][]Point) {
	withSource := len(sources(points)) > 1
	byLabel = map[string][]Point{}
	for _, p := range points {
		l := p.Label(withSource)
		if _, ok := byLabel[l]; !ok {
			labels = append(labels, l)
		}
		byLabel[l] = append(byLabel[l], p)
	}
	for _, pts := range byLabel {
		sort.SliceStable(pts, func(i, j int) bool { return pts[i].Load < pts[j].Load })
	}
	return labels, byLabel
}

// TypeNames lists the request type names found in points, in order of
// first appearance.
func TypeNames(points []Point) []string {
	var out []string
	seen := map[string]bool{}
	for _, p := range points {
		for _, t := range p.Types {
			if !seen[t.Name] {
				seen[t.Name] = true
				out = append(out, t.Name)
			}
		}
	}
	return out
}

func workloadsOf(points []Point) string {
	return strings.Join(distinct(points, func(p *Point) string { return p.Workload }), ", ")
}

// metricFunc extracts one value from a point; ok is false when the point has
// no samples for it.
type metricFunc func(p *Point) (v float64, ok bool)

// chart is a plot and its legend, drawn beside the plot area so that it
// never covers data.
type chart struct {
	p      *plot.Plot
	legend plot.Legend
	labels []string // the legend's entries
}

func newChart(points []Point, title, ylabel string, metric metricFunc, opt PlotOptions) (*chart, error) {
	title = shortenTitle(title)
	p := plot.New()
	p.Title.Text = title
	p.Title.Padding = vg.Points(6)
	p.X.Label.Text = "offered load"
	p.Y.Label.Text = shorten(ylabel, maxLabelRunes)
	p.X.Tick.Marker = loadTicks{}
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = logTicks{}
	p.Add(plotter.NewGrid())
	legend := plot.NewLegend()
	legend.Top = true
	legend.Left = true
	lineLabels, byLabel := lines(points)
	var labels []string
	drawn := 0
	minX, maxX := 1e300, -1e300
	for i, key := range lineLabels {
		label := shorten(key, maxLabelRunes)
		var xys plotter.XYs
		for j := range byLabel[key] {
			pt := &byLabel[key][j]
			v, ok := metric(pt)
			if !ok || !finitePositive(v, true) || !finitePositive(pt.Load, false) {
				continue
			}
			xys = append(xys, plotter.XY{X: pt.Load, Y: v})
			minX, maxX = min(minX, pt.Load), max(maxX, pt.Load)
		}
		if len(xys) == 0 {
			continue
		}
		l, s, err := plotter.NewLinePoints(xys)
		if err != nil {
			return nil, fmt.Errorf("plot %s: %w", label, err)
		}
		l.Color = plotutil.Color(i)
		l.Dashes = plotutil.Dashes(i / 7)
		s.Color = plotutil.Color(i)
		s.Shape = plotutil.Shape(i)
		p.Add(l, s)
		legend.Add(label, l, s)
		labels = append(labels, label)
		drawn++
	}
	if drawn == 0 {
		return nil, fmt.Errorf("plot %q: no data points with samples", title)
	}
	if finitePositive(opt.SLO, true) {
		p.Y.Min, p.Y.Max = math.Min(p.Y.Min, opt.SLO), math.Max(p.Y.Max, opt.SLO)
		slo, err := plotter.NewLine(plotter.XYs{{X: minX, Y: opt.SLO}, {X: maxX, Y: opt.SLO}})
		if err != nil {
			return nil, fmt.Errorf("plot slo line: %w", err)
		}
		slo.Color = color.Gray{Y: 96}
		slo.Dashes = []vg.Length{vg.Points(4), vg.Points(4)}
		p.Add(slo)
		sloLabel := "SLO " + formatTick(opt.SLO)
		legend.Add(sloLabel, slo)
		labels = append(labels, sloLabel)
	}
	// Whole decades on the log axis, so that it has labelled ticks at both
	// ends.
	p.Y.Min, p.Y.Max = decades(p.Y.Min, p.Y.Max)
	return &chart{p: p, legend: legend, labels: labels}, nil
}

// render draws c at the size of opt in format ("png", "svg", "pdf"): the
// legend in a column right of the plot.
func (c *chart) render(opt PlotOptions, format string) (vg.CanvasWriterTo, error) {
	w, h := opt.size()
	w = min(max(w, c.minWidth()), maxCanvas)
	h = min(h, maxCanvas)
	cw, err := draw.NewFormattedCanvas(w, h, format)
	if err != nil {
		return nil, fmt.Errorf("render plot: %w", err)
	}
	dc := draw.New(cw)
	lw := c.legendWidth()
	plotArea := draw.Crop(dc, 0, -lw, 0, 0)
	c.p.Draw(plotArea)
	legendArea := draw.Crop(dc, w-lw+vg.Points(8), 0, 0, -vg.Points(40))
	c.legend.Draw(legendArea)
	return cw, nil
}

// minWidth is the narrowest figure whose plot area (beside the legend)
// holds the title's widest line: gonum/plot centres the title over the
// plot area and cuts what does not fit on both sides.
func (c *chart) minWidth() vg.Length {
	var widest vg.Length
	for _, line := range strings.Split(c.p.Title.Text, "\n") {
		widest = max(widest, c.p.Title.TextStyle.Width(line))
	}
	if widest == 0 {
		return 0
	}
	return widest + c.legendWidth() + vg.Points(24)
}

// legendWidth is the room the legend column takes.
func (c *chart) legendWidth() vg.Length {
	var widest vg.Length
	for _, l := range c.labels {
		widest = max(widest, c.legend.TextStyle.Width(l))
	}
	return widest + c.legend.ThumbnailWidth + vg.Points(24)
}

func save(c *chart, opt PlotOptions, path string) error {
	format := strings.ToLower(strings.TrimPrefix(filepath.Ext(path), "."))
	if format == "" {
		return fmt.Errorf("save plot %s: no file extension (.png, .svg, .pdf)", path)
	}
	wt, err := c.render(opt, format)
	if err != nil {
		return fmt.Errorf("save plot %s: %w", path, err)
	}
	return writeCanvas(wt, path)
}

// writeCanvas writes a rendered canvas to path.
func writeCanvas(wt vg.CanvasWriterTo, path string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("save plot: %w", err)
	}
	if _, err := wt.WriteTo(f); err != nil {
		f.Close()
		return fmt.Errorf("save plot %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("save plot %s: %w", path, err)
	}
	return nil
}

// writePlot renders the chart to w in the given format ("png", "svg", "pdf").
func writePlot(c *chart, opt PlotOptions, format string, w io.Writer) error {
	wt, err := c.render(opt, format)
	if err != nil {
		return err
	}
	if _, err := wt.WriteTo(w); err != nil {
		return fmt.Errorf("write plot: %w", err)
	}
	return nil
}

// logTicks labels the decades of a log axis, all in one notation
// (formatTick), with unlabelled minor ticks between them. Past
// maxLogDecadeTicks decades it labels every 2nd, 4th, ... decade without
// minor ticks, so that a range of any size gets a bounded number of ticks.
type logTicks struct{}

// maxLogDecadeTicks bounds the labelled decades of a log axis.
const maxLogDecadeTicks = 24

// Ticks implements plot.Ticker. A bound that is not positive and finite
// (gonum/plot passes 0 for an infinite one) is replaced by the smallest or
// largest float64, so the loop always ends.
func (logTicks) Ticks(lo, hi float64) []plot.Tick {
	if !(lo > 0) {
		lo = math.SmallestNonzeroFloat64
	}
	if !(hi <= math.MaxFloat64) { // +Inf or NaN
		hi = math.MaxFloat64
	}
	if !(lo <= hi) {
		return nil
	}
	first, last := math.Floor(math.Log10(lo)), math.Ceil(math.Log10(hi))
	step := 1.0
	for (last-first)/step > maxLogDecadeTicks {
		step *= 2
	}
	var ticks []plot.Tick
	for e := first; e <= last; e += step {
		v := math.Pow10(int(e))
		if v > hi*(1+1e-9) {
			break
		}
		if v >= lo*(1-1e-9) {
			ticks = append(ticks, plot.Tick{Value: v, Label: formatTick(v)})
		}
		if step > 1 {
			continue
		}
		for i := 2; i < 10; i++ {
			if m := v * float64(i); m > lo && m < hi {
				ticks = append(ticks, plot.Tick{Value: m})
			}
		}
	}
	return ticks
}

// decades widens [lo, hi] (0 < lo <= hi, finite) to whole decades, so that
// a log axis has labelled ticks at both ends, and to at least one decade,
// staying within the positive finite float64s (a log axis cannot hold 0
// or infinity).
func decades(lo, hi float64) (float64, float64) {
	if l := math.Pow10(int(math.Floor(math.Log10(lo)))); l > 0 && l <= lo {
		lo = l
	}
	if h := math.Pow10(int(math.Ceil(math.Log10(hi)))); h >= hi && h <= math.MaxFloat64 {
		hi = h
	}
	if hi <= lo {
		if hi*10 <= math.MaxFloat64 {
			hi *= 10
		} else {
			lo = hi / 10
		}
	}
	return lo, hi
}

// loadTicks labels offered loads every 0.1 (0.2 past 12 ticks), with the
// same number of decimals on every label.
type loadTicks struct{}

// Ticks implements plot.Ticker.
func (loadTicks) Ticks(lo, hi float64) []plot.Tick {
	step := 0.1
	for (hi-lo)/step > 12 {
		step *= 2
	}
	var ticks []plot.Tick
	for v := math.Ceil(lo/step-1e-9) * step; v <= hi+1e-9; v += step {
		ticks = append(ticks, plot.Tick{Value: v, Label: strconv.FormatFloat(math.Round(v*10)/10, 'f', 1, 64)})
	}
	if len(ticks) < 2 { // a single load: label it
		ticks = append(ticks[:0], plot.Tick{Value: lo, Label: strconv.FormatFloat(lo, 'f', -1, 64)})
	}
	return ticks
}

// formatTick writes a tick value in one notation for every chart: plain
// numbers below 10,000 (0.1, 1, 10, 1000), then k and M (10k, 100k, 1M).
func formatTick(v float64) string {
	switch {
	case v >= 1e6:
		return strconv.FormatFloat(v/1e6, 'f', -1, 64) + "M"
	case v >= 1e4:
		return strconv.FormatFloat(v/1e3, 'f', -1, 64) + "k"
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

// subtitle says what the points were measured on: workers and the measured
// time per point, per source when there are several, e.g. "14 workers,
// 6.3 s per point (measured), 450 ms (sim)".
func subtitle(points []Point) string {
	var workers, durations []string
	seenW, seenD := map[int]bool{}, map[string]bool{}
	withSource := len(sources(points)) > 1
	for _, p := range points {
		if p.Workers > 0 && !seenW[p.Workers] {
			seenW[p.Workers] = true
			workers = append(workers, strconv.Itoa(p.Workers))
		}
		if p.DurationSec > 0 {
			d := formatSeconds(p.DurationSec)
			if withSource && p.Source != "" {
				d += " (" + p.Source + ")"
			}
			if !seenD[d] {
				seenD[d] = true
				durations = append(durations, d)
			}
		}
	}
	var parts []string
	if len(workers) > 0 {
		parts = append(parts, strings.Join(workers, "/")+" workers")
	}
	switch {
	case len(durations) == 1:
		parts = append(parts, durations[0]+" measured per point")
	case len(durations) > 1:
		parts = append(parts, "per point "+strings.Join(durations, ", "))
	}
	return strings.Join(parts, ", ")
}

// formatSeconds writes a duration in s or ms with 2 significant digits.
func formatSeconds(s float64) string {
	unit := " s"
	if s < 1 {
		s, unit = s*1e3, " ms"
	}
	e := int(math.Floor(math.Log10(s))) - 1 // two significant digits
	return strconv.FormatFloat(math.Round(s/math.Pow10(e))*math.Pow10(e), 'f', max(0, -e), 64) + unit
}

// titled joins a title and the points' subtitle.
func titled(title string, points []Point) string {
	if sub := subtitle(points); sub != "" {
		return title + "\n" + sub
	}
	return title
}

func slowdownPlot(points []Point, opt PlotOptions) (*chart, error) {
	typ := opt.Type
	if typ == AllTypes {
		typ = ""
	}
	title := opt.Title
	if title == "" {
		scope := "all requests"
		if typ != "" {
			scope = typ
		}
		title = titled(fmt.Sprintf("%s: p99.9 slowdown (%s)", workloadsOf(points), scope), points)
	}
	metric := func(p *Point) (float64, bool) {
		if typ == "" {
			return p.Overall.P999Slowdown, p.Overall.Count > 0
		}
		s, ok := p.TypeStat(typ)
		return s.P999Slowdown, ok && s.Count > 0
	}
	return newChart(points, title, "p99.9 slowdown (log)", metric, opt)
}

// PlotSlowdown draws the p99.9 slowdown against offered load, one line per
// policy (per policy and source when the points come from several sources),
// with a log y axis, like the paper's figures, and saves it to path (the
// format follows the extension: .png, .svg, .pdf).
func PlotSlowdown(points []Point, path string, opt PlotOptions) error {
	p, err := slowdownPlot(points, opt)
	if err != nil {
		return err
	}
	return save(p, opt, path)
}

// WriteSlowdownPlot is PlotSlowdown writing a PNG to w.
func WriteSlowdownPlot(w io.Writer, points []Point, opt PlotOptions) error {
	p, err := slowdownPlot(points, opt)
	if err != nil {
		return err
	}
	return writePlot(p, opt, "png", w)
}

// PlotLatency draws the p99.9 latency of one request type (AllTypes for all
// requests) against offered load, one line per policy (and source), on a log
// y axis in µs, ms or s (whichever keeps the labels short), and saves it to
// path.
func PlotLatency(points []Point, typeName, path string, opt PlotOptions) error {
	title := opt.Title
	if title == "" {
		title = titled(fmt.Sprintf("%s: p99.9 latency of %s", workloadsOf(points), typeName), points)
	}
	latency := func(p *Point) (int64, bool) {
		if typeName == AllTypes || typeName == "" {
			return p.Overall.P999Latency, p.Overall.Count > 0
		}
		s, ok := p.TypeStat(typeName)
		return s.P999Latency, ok && s.Count > 0
	}
	var hi int64
	for i := range points {
		if v, ok := latency(&points[i]); ok {
			hi = max(hi, v)
		}
	}
	unit, scale := latencyUnit(hi, opt.SLO)
	metric := func(p *Point) (float64, bool) {
		v, ok := latency(p)
		return float64(v) / scale, ok
	}
	if opt.SLO > 0 {
		opt.SLO /= scale
	}
	c, err := newChart(points, title, "p99.9 latency ("+unit+", log)", metric, opt)
	if err != nil {
		return err
	}
	return save(c, opt, path)
}

// latencyUnit picks the unit of a latency axis whose largest value is hi
// ns: µs up to 10 ms, then ms up to 10 s, then s.
func latencyUnit(hi int64, slo float64) (string, float64) {
	top := max(float64(hi), slo)
	switch {
	case top < 1e7:
		return "µs", 1e3
	case top < 1e10:
		return "ms", 1e6
	}
	return "s", 1e9
}

// PlotLatencies writes one PlotLatency chart per request type found in
// points, as <prefix><type>.png (e.g. prefix "out/latency-" gives
// out/latency-SHORT.png), and returns the paths written.
func PlotLatencies(points []Point, prefix string, opt PlotOptions) ([]string, error) {
	var paths []string
	for _, name := range TypeNames(points) {
		safe := strings.Map(func(r rune) rune {
			if r == '/' || r == '\\' || r == filepath.Separator || r == ' ' {
				return '_'
			}
			return r
		}, name)
		path := prefix + safe + ".png"
		if err := PlotLatency(points, name, path, opt); err != nil {
			return paths, err
		}
		paths = append(paths, path)
	}
	return paths, nil
}
