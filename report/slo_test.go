package report

import (
	"bytes"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLatencySLO: an SLO on the p99.9 latency of the short type only.
// SHORT's p99.9 latency is short999 x 1us in samplePoints: cfcfs 5us,
// 50us, 8us; darc 2us, 3us, 4us (not sustained at 0.6).
func TestLatencySLO(t *testing.T) {
	slo := SLO{LatencyNs: 20e3, Types: []string{"SHORT"}}
	if err := slo.Validate(); err != nil {
		t.Fatal(err)
	}
	sums := SummarizeSLO(samplePoints(), slo)
	if len(sums) != 2 {
		t.Fatalf("%d summaries", len(sums))
	}
	if s := sums[0]; s.Policy != "cfcfs" || s.MaxLoad != 0.2 || s.Metric != "latency" || s.SLO != 20e3 ||
		!strings.Contains(s.Breaker, "SHORT p99.9 latency 50us at load 0.4") {
		t.Errorf("cfcfs: %+v", s)
	}
	if s := sums[1]; s.MaxLoad != 0.4 || !strings.Contains(s.Breaker, "not sustained at load 0.6") {
		t.Errorf("darc: %+v", s)
	}
	if line := sums[0].String(); !strings.Contains(line, "highest load with p99.9 latency <= 20us for SHORT: 0.2") {
		t.Errorf("line %q", line)
	}
	if o := sums[0].Objective(); o.LatencyNs != 20e3 || o.Slowdown != 0 || o.Types[0] != "SHORT" {
		t.Errorf("objective %+v", o)
	}
	// LONG's latency (long999 x 100us: 110us to 3ms) is not bounded here.
	if ok, why := slo.Holds(&samplePoints()[4]); !ok {
		t.Errorf("darc at 0.4: %s", why)
	}
	// A type named but without samples fails; all requests' latency.
	p := samplePoints()[0]
	p.Types[0].Count = 0
	if ok, why := slo.Holds(&p); ok || !strings.Contains(why, "no SHORT requests") {
		t.Errorf("no samples: %v %q", ok, why)
	}
	if ok, _ := (SLO{LatencyNs: 100e3}).Holds(&samplePoints()[0]); ok {
		t.Error("overall p99.9 latency 200us held a 100us SLO")
	}
	for _, bad := range []SLO{{}, {Slowdown: 10, LatencyNs: 1}, {Slowdown: -1}, {LatencyNs: math.NaN()}} {
		if bad.Validate() == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}

// TestPerTypeNotSustained: a type's own reason breaks a per-type SLO and
// survives CSV.
func TestPerTypeNotSustained(t *testing.T) {
	pts := samplePoints()
	pts[1].Sustained = false
	pts[1].Types[1].NotSustained = "backlog grew by 551 requests (13% of its arrivals)"
	pts[1].WastedWorkers, pts[1].Seed = 0.25, 7
	s := SummarizeSLO(pts, SLO{Slowdown: 100, PerType: true})
	if !strings.Contains(s[0].Breaker, "LONG not sustained at load 0.4 (backlog grew by 551") {
		t.Errorf("breaker %q", s[0].Breaker)
	}
	var buf bytes.Buffer
	if err := WriteCSV(&buf, pts); err != nil {
		t.Fatal(err)
	}
	got, err := ReadCSV(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if got[1].Types[1].NotSustained != pts[1].Types[1].NotSustained || got[1].WastedWorkers != 0.25 || got[1].Seed != 7 {
		t.Errorf("csv round trip: %+v", got[1])
	}
	var table bytes.Buffer
	if err := WriteTable(&table, pts[:2]); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(table.String(), "LONG !") || !strings.Contains(table.String(), "waste") {
		t.Errorf("table:\n%s", table.String())
	}
}

func TestTimelineRecorder(t *testing.T) {
	r := NewTimelineRecorder([]string{"A", "B"}, 100)
	r.Phase(0, "one")
	r.Reserve(5, []ReservedGroup{{Types: []string{"A"}, Workers: 1}, {Types: []string{"B"}, Workers: 3, Spillway: true}})
	for i := int64(0); i < 1000; i++ {
		r.Record(0, 10+i%50, 1000+i, 1000) // bucket 0: latency up to 1999
	}
	r.Record(1, 250, 5000, 100) // bucket 2; bucket 1 empty
	r.Phase(200, "two")
	r.Reserve(210, []ReservedGroup{{Types: []string{"A", "B"}, Workers: 4}})
	tl := r.Finish(260)
	if len(tl.Buckets) != 3 || tl.BucketSec != 1e-7 {
		t.Fatalf("%d buckets of %v s: %+v", len(tl.Buckets), tl.BucketSec, tl.Buckets)
	}
	b0 := tl.Buckets[0].Types[0]
	if b0.Count != 1000 || b0.P999Latency < 1980 || b0.P999Latency > 2020 || b0.P999Slowdown < 1.9 || b0.P999Slowdown > 2.1 {
		t.Errorf("bucket 0: %+v", b0)
	}
	if tl.Buckets[1].Types[0].Count != 0 || tl.Buckets[2].Types[1].Count != 1 || tl.Buckets[2].Types[1].P999Slowdown < 49 {
		t.Errorf("buckets: %+v", tl.Buckets)
	}
	if r := tl.ReservationAt(100e-9); r == nil || r.ReservedFor("A") != 1 || r.ReservedFor("C") != 0 || r.String() != "A: 1; B: 3+spillway" {
		t.Errorf("reservation at 100ns: %+v", r)
	}
	if r := tl.ReservationAt(1e-9); r != nil {
		t.Errorf("reservation before the first: %+v", r)
	}
	a, b := tl.Reservations[0], tl.Reservations[0]
	b.Groups = append([]ReservedGroup(nil), a.Groups...)
	b.Groups[1].Spillway = false
	if !a.Equal(&b) || a.Equal(&tl.Reservations[1]) {
		t.Error("Equal: spillway marks must not count, groups must")
	}
	// Charts: latency over time and the reservations.
	dir := t.TempDir()
	path := filepath.Join(dir, "timeline.png")
	if err := PlotTimeline(tl, "test", path, PlotOptions{}); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(path); err != nil || st.Size() < 5000 {
		t.Errorf("%s: %v", path, err)
	}
	if charts := TimelineCharts(tl, "x"); len(charts) != 2 || len(charts[1].Lines) != 2 {
		t.Errorf("%d charts", len(charts))
	}
}

func TestChartBands(t *testing.T) {
	c := &Chart{Title: "t", XLabel: "x", YLabel: "y", LogY: true, HLine: 10, Lines: []Line{
		{Label: "a", X: []float64{0.1, 0.2, 0.3}, Y: []float64{1, 5, math.NaN()}, Lo: []float64{0.5, 4, 1}, Hi: []float64{2, 9, 1}},
		{Label: "b", X: []float64{0.1, 0.3}, Y: []float64{0, 20}},
	}, Marks: []Mark{{X: 0.2, Label: "here"}}}
	path := filepath.Join(t.TempDir(), "c.png")
	if err := c.Save(path, PlotOptions{}); err != nil {
		t.Fatal(err)
	}
	empty := &Chart{Title: "none", Lines: []Line{{Label: "a", X: []float64{1}, Y: []float64{math.NaN()}}}}
	if err := empty.Save(path, PlotOptions{}); err == nil {
		t.Error("a chart without points saved")
	}
}

// TestChartWidensForItsTitle: a title wider than the default figure's
// plot area widens the figure instead of being cut off (gonum/plot
// centres it over the plot area).
func TestChartWidensForItsTitle(t *testing.T) {
	width := func(title string) int {
		t.Helper()
		c := &Chart{Title: title, XLabel: "x", YLabel: "y", Lines: []Line{{Label: "a line with a long legend label", X: []float64{1, 2}, Y: []float64{1, 2}}}}
		path := filepath.Join(t.TempDir(), "c.png")
		if err := c.Save(path, PlotOptions{}); err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		cfg, err := png.DecodeConfig(f)
		if err != nil {
			t.Fatal(err)
		}
		return cfg.Width
	}
	short := width("short")
	long := strings.Repeat("a title much longer than the figure is wide ", 4)
	wide := width(long + "\nsecond line")
	if wide <= short {
		t.Errorf("a %d-character title: figure %d px wide, as wide as with a short title (%d px): the title is cut", len(long), wide, short)
	}
	c := &Chart{Title: long}
	ch, err := (&Chart{Title: c.Title, Lines: []Line{{Label: "a", X: []float64{1}, Y: []float64{1}}}}).build()
	if err != nil {
		t.Fatal(err)
	}
	if need := ch.p.Title.TextStyle.Width(long); float64(wide) < float64(need.Dots(96)) {
		t.Errorf("figure %d px narrower than its title (%.0f px)", wide, need.Dots(96))
	}
}
