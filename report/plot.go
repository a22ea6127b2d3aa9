package report

import (
	"fmt"
	"image/color"
	"io"
	"math"
	"path/filepath"
	"sort"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
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
	var names []string
	seen := map[string]bool{}
	for _, p := range points {
		if !seen[p.Workload] {
			seen[p.Workload] = true
			names = append(names, p.Workload)
		}
	}
	return strings.Join(names, ", ")
}

// metricFunc extracts one value from a point; ok is false when the point has
// no samples for it.
type metricFunc func(p *Point) (v float64, ok bool)

func draw(points []Point, title, ylabel string, metric metricFunc, opt PlotOptions) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "offered load"
	p.Y.Label.Text = ylabel
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Legend.Top = true
	p.Legend.Left = true
	p.Legend.XOffs = vg.Points(10)
	p.Legend.YOffs = -vg.Points(24)
	p.Add(plotter.NewGrid())
	labels, byLabel := lines(points)
	drawn := 0
	minX, maxX := 1e300, -1e300
	for i, label := range labels {
		var xys plotter.XYs
		for j := range byLabel[label] {
			pt := &byLabel[label][j]
			v, ok := metric(pt)
			if !ok || v <= 0 {
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
		p.Legend.Add(label, l, s)
		drawn++
	}
	if drawn == 0 {
		return nil, fmt.Errorf("plot %q: no data points with samples", title)
	}
	// Leave the top of the log axis free for the legend: a fraction f of the
	// height, about one legend row per line.
	if opt.SLO > 0 {
		p.Y.Min, p.Y.Max = math.Min(p.Y.Min, opt.SLO), math.Max(p.Y.Max, opt.SLO)
	}
	decades := math.Max(1, math.Log10(p.Y.Max/p.Y.Min))
	f := math.Min(0.5, 0.07*float64(drawn+1))
	p.Y.Max = p.Y.Min * math.Pow(10, decades/(1-f))
	if opt.SLO > 0 {
		slo, err := plotter.NewLine(plotter.XYs{{X: minX, Y: opt.SLO}, {X: maxX, Y: opt.SLO}})
		if err != nil {
			return nil, fmt.Errorf("plot slo line: %w", err)
		}
		slo.Color = color.Gray{Y: 96}
		slo.Dashes = []vg.Length{vg.Points(4), vg.Points(4)}
		p.Add(slo)
		p.Legend.Add(fmt.Sprintf("SLO %g", opt.SLO), slo)
	}
	return p, nil
}

func save(p *plot.Plot, opt PlotOptions, path string) error {
	w, h := opt.size()
	if err := p.Save(w, h, path); err != nil {
		return fmt.Errorf("save plot %s: %w", path, err)
	}
	return nil
}

// writePlot renders the chart to w in the given format ("png", "svg", "pdf").
func writePlot(p *plot.Plot, opt PlotOptions, format string, w io.Writer) error {
	wd, ht := opt.size()
	wt, err := p.WriterTo(wd, ht, format)
	if err != nil {
		return fmt.Errorf("render plot: %w", err)
	}
	if _, err := wt.WriteTo(w); err != nil {
		return fmt.Errorf("write plot: %w", err)
	}
	return nil
}

func slowdownPlot(points []Point, opt PlotOptions) (*plot.Plot, error) {
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
		title = fmt.Sprintf("%s: p99.9 slowdown (%s)", workloadsOf(points), scope)
	}
	metric := func(p *Point) (float64, bool) {
		if typ == "" {
			return p.Overall.P999Slowdown, p.Overall.Count > 0
		}
		s, ok := p.TypeStat(typ)
		return s.P999Slowdown, ok && s.Count > 0
	}
	return draw(points, title, "p99.9 slowdown (log)", metric, opt)
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
// requests) against offered load, one line per policy (and source), log y
// axis in microseconds, and saves it to path.
func PlotLatency(points []Point, typeName, path string, opt PlotOptions) error {
	title := opt.Title
	if title == "" {
		title = fmt.Sprintf("%s: p99.9 latency of %s", workloadsOf(points), typeName)
	}
	metric := func(p *Point) (float64, bool) {
		if typeName == AllTypes || typeName == "" {
			return float64(p.Overall.P999Latency) / 1e3, p.Overall.Count > 0
		}
		s, ok := p.TypeStat(typeName)
		return float64(s.P999Latency) / 1e3, ok && s.Count > 0
	}
	if opt.SLO > 0 {
		opt.SLO /= 1e3
	}
	p, err := draw(points, title, "p99.9 latency (us, log)", metric, opt)
	if err != nil {
		return err
	}
	return save(p, opt, path)
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
