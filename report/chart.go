package report

import (
	"errors"
	"fmt"
	"image/color"
	"math"
	"path/filepath"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Line is one line of a Chart: the points (X[i], Y[i]), and optionally a
// shaded band from Lo[i] to Hi[i] around it (e.g. the spread over seeds).
// Points whose Y is not positive are left out of a log axis; NaN values
// are left out everywhere.
type Line struct {
	Label  string
	X, Y   []float64
	Lo, Hi []float64
	// Step draws the line as a step function: each value holds until the
	// next X (e.g. reserved workers over time).
	Step bool
}

// Mark is a labelled vertical line on a chart (e.g. a phase change).
type Mark struct {
	X     float64
	Label string
}

// Chart is a generic line chart: the charts of the experiments that are
// not "p99.9 against load" (reserved workers over time, p99.9 against a
// reserved count or a preemption cost).
type Chart struct {
	Title, XLabel, YLabel string
	// LogY draws the y axis in log scale.
	LogY  bool
	Lines []Line
	// HLine, when > 0, draws a dashed horizontal line labelled HLineLabel
	// (an SLO).
	HLine      float64
	HLineLabel string
	// Marks are vertical lines, labelled at the top.
	Marks []Mark
	// YMin, when set with YMax > YMin, fixes the y range (linear axes).
	YMin, YMax float64
	// LoadX labels the x axis as offered loads are (every 0.1).
	LoadX bool
}

// band is the shading of a line's spread, lighter than its line.
func band(c color.Color) color.Color {
	r, g, b, _ := c.RGBA()
	mix := func(v uint32) uint8 { return uint8((v>>8)/3 + 170) }
	return color.NRGBA{R: mix(r), G: mix(g), B: mix(b), A: 160}
}

func finitePositive(v float64, log bool) bool {
	return !math.IsNaN(v) && !math.IsInf(v, 0) && (!log || v > 0)
}

// build draws c into a chart (plot and legend).
func (c *Chart) build() (*chart, error) {
	p := plot.New()
	p.Title.Text = shortenTitle(c.Title)
	p.Title.Padding = vg.Points(6)
	p.X.Label.Text = shorten(c.XLabel, maxLabelRunes)
	p.Y.Label.Text = shorten(c.YLabel, maxLabelRunes)
	if c.LogY {
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = logTicks{}
	}
	if c.LoadX {
		p.X.Tick.Marker = loadTicks{}
	}
	p.Add(plotter.NewGrid())
	legend := plot.NewLegend()
	legend.Top = true
	legend.Left = true
	var labels []string
	minX, maxX := math.Inf(1), math.Inf(-1)
	drawn := 0
	for i, ln := range c.Lines {
		ln.Label = shorten(ln.Label, maxLabelRunes)
		var xys, lo, hi plotter.XYs
		for j := range ln.X {
			x, y := ln.X[j], ln.Y[j]
			if !finitePositive(x, false) || !finitePositive(y, c.LogY) {
				continue
			}
			if ln.Step && len(xys) > 0 {
				xys = append(xys, plotter.XY{X: x, Y: xys[len(xys)-1].Y})
			}
			xys = append(xys, plotter.XY{X: x, Y: y})
			minX, maxX = min(minX, x), max(maxX, x)
			if j < len(ln.Lo) && j < len(ln.Hi) && finitePositive(ln.Lo[j], c.LogY) && finitePositive(ln.Hi[j], c.LogY) {
				lo = append(lo, plotter.XY{X: x, Y: ln.Lo[j]})
				hi = append(hi, plotter.XY{X: x, Y: ln.Hi[j]})
			}
		}
		if len(xys) == 0 {
			continue
		}
		col := plotutil.Color(i)
		if len(lo) > 1 {
			ring := append(plotter.XYs(nil), lo...)
			for k := len(hi) - 1; k >= 0; k-- {
				ring = append(ring, hi[k])
			}
			poly, err := plotter.NewPolygon(ring)
			if err != nil {
				return nil, fmt.Errorf("chart %s: %w", ln.Label, err)
			}
			poly.Color = band(col)
			poly.LineStyle.Width = 0
			p.Add(poly)
		}
		l, err := plotter.NewLine(xys)
		if err != nil {
			return nil, fmt.Errorf("chart %s: %w", ln.Label, err)
		}
		l.Color = col
		l.Dashes = plotutil.Dashes(i / 7)
		l.Width = vg.Points(1.5)
		p.Add(l)
		if ln.Step || len(ln.X) > 40 {
			legend.Add(ln.Label, l)
		} else {
			s, err := plotter.NewScatter(xys)
			if err != nil {
				return nil, fmt.Errorf("chart %s: %w", ln.Label, err)
			}
			s.Color = col
			s.Shape = plotutil.Shape(i)
			p.Add(s)
			legend.Add(ln.Label, l, s)
		}
		labels = append(labels, ln.Label)
		drawn++
	}
	if drawn == 0 {
		return nil, fmt.Errorf("chart %q: no data points", shorten(firstLine(c.Title), maxLabelRunes))
	}
	if finitePositive(c.HLine, true) {
		p.Y.Min, p.Y.Max = math.Min(p.Y.Min, c.HLine), math.Max(p.Y.Max, c.HLine)
		h, err := plotter.NewLine(plotter.XYs{{X: minX, Y: c.HLine}, {X: maxX, Y: c.HLine}})
		if err != nil {
			return nil, err
		}
		h.Color = color.Gray{Y: 96}
		h.Dashes = []vg.Length{vg.Points(4), vg.Points(4)}
		p.Add(h)
		label := shorten(c.HLineLabel, maxLabelRunes)
		if label == "" {
			label = formatTick(c.HLine)
		}
		legend.Add(label, h)
		labels = append(labels, label)
	}
	if c.LogY {
		p.Y.Min, p.Y.Max = decades(p.Y.Min, p.Y.Max)
	} else if c.YMax > c.YMin {
		p.Y.Min, p.Y.Max = c.YMin, c.YMax
	}
	for _, m := range c.Marks {
		v, err := plotter.NewLine(plotter.XYs{{X: m.X, Y: p.Y.Min}, {X: m.X, Y: p.Y.Max}})
		if err != nil {
			return nil, err
		}
		v.Color = color.Gray{Y: 150}
		v.Dashes = []vg.Length{vg.Points(2), vg.Points(3)}
		p.Add(v)
		if m.Label != "" {
			y := p.Y.Max
			if c.LogY {
				y = p.Y.Max / 1.5
			} else {
				y -= (p.Y.Max - p.Y.Min) * 0.04
			}
			lb, err := plotter.NewLabels(plotter.XYLabels{XYs: []plotter.XY{{X: m.X, Y: y}}, Labels: []string{" " + shorten(m.Label, maxLabelRunes)}})
			if err != nil {
				return nil, err
			}
			for i := range lb.TextStyle {
				lb.TextStyle[i].Font.Size = vg.Points(8)
			}
			p.Add(lb)
		}
	}
	return &chart{p: p, legend: legend, labels: labels}, nil
}

func firstLine(s string) string {
	first, _, _ := strings.Cut(s, "\n")
	return first
}

// Save draws c and saves it to path (.png, .svg or .pdf).
func (c *Chart) Save(path string, opt PlotOptions) error {
	ch, err := c.build()
	if err != nil {
		return err
	}
	return save(ch, opt, path)
}

// SaveStacked draws charts one above the other (sharing the width; each
// gets opt's height, default 10 cm) and saves them to path.
func SaveStacked(path string, charts []*Chart, opt PlotOptions) error {
	if len(charts) == 0 {
		return errors.New("save chart: nothing to draw")
	}
	built := make([]*chart, len(charts))
	var lw vg.Length
	for i, c := range charts {
		ch, err := c.build()
		if err != nil {
			return err
		}
		built[i] = ch
		lw = max(lw, ch.legendWidth())
	}
	w, h := opt.size()
	for _, ch := range built {
		w = max(w, ch.minWidth()-ch.legendWidth()+lw)
	}
	w = min(w, maxCanvas)
	h = min(h, maxCanvas/vg.Length(len(charts)))
	total := h * vg.Length(len(charts))
	format := strings.ToLower(strings.TrimPrefix(filepath.Ext(path), "."))
	cw, err := draw.NewFormattedCanvas(w, total, format)
	if err != nil {
		return fmt.Errorf("save chart %s: %w", path, err)
	}
	dc := draw.New(cw)
	for i, ch := range built {
		top := h * vg.Length(i)
		panel := draw.Crop(dc, 0, 0, total-top-h, -top)
		ch.p.Draw(draw.Crop(panel, 0, -lw, 0, 0))
		ch.legend.Draw(draw.Crop(panel, w-lw+vg.Points(8), 0, 0, -vg.Points(40)))
	}
	return writeCanvas(cw, path)
}

// Timeline charts: the p99.9 latency of each type per bucket, and the
// workers reserved for each type, over time.

// TimelineCharts returns the two panels of a timeline chart: p99.9 latency
// (µs or ms, log) of each type per bucket with the phases marked, and the
// workers reserved for each type (when the policy reserved any).
func TimelineCharts(t *Timeline, title string) []*Chart {
	hi := int64(0)
	for _, b := range t.Buckets {
		for _, s := range b.Types {
			hi = max(hi, s.P999Latency)
		}
	}
	unit, scale := latencyUnit(hi, 0)
	var marks []Mark
	for _, ph := range t.Phases {
		marks = append(marks, Mark{X: ph.StartSec, Label: ph.Name})
	}
	lat := &Chart{Title: title, XLabel: "time (s)", YLabel: "p99.9 latency (" + unit + ", log)", LogY: true, Marks: marks}
	for i, name := range t.Types {
		ln := Line{Label: name}
		for _, b := range t.Buckets {
			y := math.NaN()
			if b.Types[i].Count > 0 {
				y = float64(b.Types[i].P999Latency) / scale
			}
			ln.X = append(ln.X, b.StartSec+t.BucketSec/2)
			ln.Y = append(ln.Y, y)
		}
		lat.Lines = append(lat.Lines, ln)
	}
	charts := []*Chart{lat}
	if len(t.Reservations) == 0 {
		return charts
	}
	end := 0.0
	if n := len(t.Buckets); n > 0 {
		end = t.Buckets[n-1].StartSec + t.BucketSec
	}
	res := &Chart{Title: "workers reserved per type", XLabel: "time (s)", YLabel: "reserved workers", Marks: marks}
	top := 0
	for _, name := range t.Types {
		ln := Line{Label: name, Step: true}
		for _, r := range t.Reservations {
			n := r.ReservedFor(name)
			top = max(top, n)
			ln.X = append(ln.X, r.AtSec)
			ln.Y = append(ln.Y, float64(n))
		}
		ln.X = append(ln.X, max(end, ln.X[len(ln.X)-1]))
		ln.Y = append(ln.Y, ln.Y[len(ln.Y)-1])
		res.Lines = append(res.Lines, ln)
	}
	res.YMin, res.YMax = -0.5, float64(top)+1.5
	return append(charts, res)
}

// PlotTimeline saves t's timeline charts (see TimelineCharts), stacked, to
// path.
func PlotTimeline(t *Timeline, title, path string, opt PlotOptions) error {
	return SaveStacked(path, TimelineCharts(t, title), opt)
}

// FormatSeconds formats a time in seconds for tables: "0.25", "12".
func FormatSeconds(s float64) string { return strconv.FormatFloat(s, 'g', 4, 64) }
