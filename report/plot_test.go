package report

import (
	"bytes"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestTickLabelsOneNotation(t *testing.T) {
	var got []string
	for _, tk := range (logTicks{}).Ticks(0.5, 2e6) {
		if tk.Label != "" {
			got = append(got, tk.Label)
		}
	}
	want := []string{"1", "10", "100", "1000", "10k", "100k", "1M"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("log tick labels %v, want %v", got, want)
	}
	var loads []string
	for _, tk := range (loadTicks{}).Ticks(0.1, 0.9) {
		loads = append(loads, tk.Label)
	}
	if want := []string{"0.1", "0.2", "0.3", "0.4", "0.5", "0.6", "0.7", "0.8", "0.9"}; !reflect.DeepEqual(loads, want) {
		t.Errorf("load tick labels %v, want %v", loads, want)
	}
	if got := formatSeconds(0.27); got != "270 ms" {
		t.Errorf("formatSeconds(0.27) = %q", got)
	}
	if got := formatSeconds(6.3); got != "6.3 s" {
		t.Errorf("formatSeconds(6.3) = %q", got)
	}
	for ns, want := range map[int64]string{5e5: "µs", 2e8: "ms", 3e10: "s"} {
		if u, _ := latencyUnit(ns, 0); u != want {
			t.Errorf("latencyUnit(%d) = %s, want %s", ns, u, want)
		}
	}
	if s := subtitle([]Point{{Workers: 14, DurationSec: 4.5}, {Workers: 14, DurationSec: 4.5}}); s != "14 workers, 4.5 s measured per point" {
		t.Errorf("subtitle %q", s)
	}
}

// TestLogTicksAnyRange: the log ticker ends, with a bounded number of
// finite ticks, whatever range it is given (gonum/plot passes 0 for an
// infinite bound; a p99.9 slowdown of 1e308 made the ticker loop from
// log10(0) = -Inf until memory ran out).
func TestLogTicksAnyRange(t *testing.T) {
	for _, tc := range []struct {
		lo, hi  float64
		labeled bool // at least one labelled tick
	}{
		{0, 1e308, true},
		{-1, 100, true},
		{math.Inf(-1), 100, true},
		{math.NaN(), 100, true},
		{1, math.Inf(1), true},
		{1, math.NaN(), true},
		{math.SmallestNonzeroFloat64, math.MaxFloat64, true},
		{1e-300, 1e300, true},
		{1e307, 1e308, true},
		{0, 0, false},
		{100, 1, false},
		{math.NaN(), math.NaN(), true},
	} {
		ticks := (logTicks{}).Ticks(tc.lo, tc.hi)
		labeled := 0
		for _, tk := range ticks {
			if math.IsNaN(tk.Value) || math.IsInf(tk.Value, 0) || tk.Value <= 0 {
				t.Errorf("Ticks(%g, %g): tick %g", tc.lo, tc.hi, tk.Value)
			}
			if tk.Label != "" {
				labeled++
			}
		}
		if len(ticks) > 10*maxLogDecadeTicks {
			t.Errorf("Ticks(%g, %g): %d ticks", tc.lo, tc.hi, len(ticks))
		}
		if tc.labeled && (labeled == 0 || labeled > maxLogDecadeTicks+1) {
			t.Errorf("Ticks(%g, %g): %d labelled ticks", tc.lo, tc.hi, labeled)
		}
	}
}

// TestDecades: a log axis's range stays positive, finite and at least a
// decade wide, up to the largest float64.
func TestDecades(t *testing.T) {
	for _, tc := range []struct{ lo, hi, wantLo, wantHi float64 }{
		{0.5, 2e6, 0.1, 1e7},
		{3, 3, 1, 10},
		{1e308, 1e308, 1e307, 1e308},
		{math.MaxFloat64, math.MaxFloat64, 1e308, math.MaxFloat64},
		{5e-324, 1, 5e-324, 1},
	} {
		lo, hi := decades(tc.lo, tc.hi)
		if lo != tc.wantLo || hi != tc.wantHi {
			t.Errorf("decades(%g, %g) = %g, %g, want %g, %g", tc.lo, tc.hi, lo, hi, tc.wantLo, tc.wantHi)
		}
	}
}

// TestChartTextBounded: names from the data (a policy of 1 MB, a workload
// of 100 KB), a title of 100 KB or extreme values give a chart of bounded
// size, its text cut with an ellipsis (they asked image.NewRGBA for 13 GB).
func TestChartTextBounded(t *testing.T) {
	long := func(n int) string { return strings.Repeat("w", n) }
	huge := func(pts []Point) []Point {
		for i := range pts {
			pts[i].Overall.P999Slowdown = 1e308
			for j := range pts[i].Types {
				pts[i].Types[j].P999Slowdown = 1e308
			}
		}
		return pts
	}
	for _, tc := range []struct {
		name   string
		points []Point
		opt    PlotOptions
	}{
		{"policy 1 MB", withPolicy(samplePoints(), long(1<<20)), PlotOptions{}},
		{"policy 20 KB", withPolicy(samplePoints(), long(20<<10)), PlotOptions{}},
		{"workload 100 KB", withWorkload(samplePoints(), long(100<<10)), PlotOptions{}},
		{"title 100 KB", samplePoints(), PlotOptions{Title: long(100 << 10)}},
		{"title of many lines", samplePoints(), PlotOptions{Title: strings.Repeat("line\n", 10000)}},
		{"huge size", samplePoints(), PlotOptions{Width: 1e9, Height: 1e9}},
		{"slowdown 1e308", huge(samplePoints()), PlotOptions{}},
		{"slo +Inf", samplePoints(), PlotOptions{SLO: math.Inf(1)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := slowdownPlot(tc.points, tc.opt)
			if err != nil {
				t.Fatal(err)
			}
			for _, l := range c.labels {
				if n := utf8.RuneCountInString(l); n > maxLabelRunes {
					t.Errorf("legend entry of %d runes", n)
				}
			}
			if lines := strings.Split(c.p.Title.Text, "\n"); len(lines) > maxTitleLines || len(c.p.Title.Text) > maxTitleLines*(maxTitleLineRunes+4) {
				t.Errorf("title of %d lines, %d bytes", len(lines), len(c.p.Title.Text))
			}
			var buf bytes.Buffer
			if err := writePlot(c, tc.opt, "png", &buf); err != nil {
				t.Fatal(err)
			}
			cfg, err := png.DecodeConfig(&buf)
			if err != nil {
				t.Fatal(err)
			}
			if max := int(maxCanvas.Dots(96)) + 1; cfg.Width > max || cfg.Height > max {
				t.Errorf("figure %d x %d px, more than %d", cfg.Width, cfg.Height, max)
			}
		})
	}
	// A generic chart (e.g. fed by a simulation's type and phase names).
	c := &Chart{Title: long(100 << 10), XLabel: long(1 << 20), YLabel: "y", LogY: true, HLine: 10, HLineLabel: long(1 << 20),
		Lines: []Line{{Label: long(1 << 20), X: []float64{1, 2}, Y: []float64{1, 1e308}}},
		Marks: []Mark{{X: 1.5, Label: long(1 << 20)}}}
	ch, err := c.build()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range append(ch.labels, ch.p.X.Label.Text) {
		if n := utf8.RuneCountInString(l); n > maxLabelRunes || !strings.HasSuffix(l, "…") {
			t.Errorf("label of %d runes, not cut with an ellipsis", n)
		}
	}
	path := filepath.Join(t.TempDir(), "c.png")
	if err := SaveStacked(path, []*Chart{c, c}, PlotOptions{Height: 1e9}); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Size() > 10<<20 {
		t.Errorf("stacked chart: %v", err)
	}
}

func withPolicy(pts []Point, name string) []Point {
	for i := range pts {
		pts[i].Policy = name + pts[i].Policy
	}
	return pts
}

func withWorkload(pts []Point, name string) []Point {
	for i := range pts {
		pts[i].Workload = name
	}
	return pts
}

func TestShorten(t *testing.T) {
	for _, tc := range []struct {
		in   string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"exactly10!", 10, "exactly10!"},
		{"eleven runes", 10, "eleven ru…"},
		{"ééééééééééé", 5, "éééé…"},
		{"two\nlines", 20, "two lines"},
	} {
		if got := shorten(tc.in, tc.n); got != tc.want {
			t.Errorf("shorten(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
		}
	}
}
