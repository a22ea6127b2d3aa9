package report

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestRecorderStats(t *testing.T) {
	r := NewRecorder([]string{"SHORT", "LONG"}, []uint32{1, 2})
	// SHORT: 1000 requests of 1us service with latencies 1..1000 us.
	for i := 1; i <= 1000; i++ {
		r.Record(0, int64(i)*1000, 1000)
	}
	// LONG: 10 requests of 100us at slowdown 1.
	for range 10 {
		r.Record(1, 100000, 100000)
	}
	r.Drop(1)
	var p Point
	r.Fill(&p)
	s := p.Types[0].Stats
	if s.Count != 1000 || s.MaxLatency != 1000000 {
		t.Fatalf("short: %+v", s)
	}
	if want := 500.5e3; s.MeanLatency != want || s.MeanSlowdown != 500.5 {
		t.Errorf("short mean latency %v slowdown %v", s.MeanLatency, s.MeanSlowdown)
	}
	near := func(got, want float64) bool { return math.Abs(got-want) <= 0.002*want }
	if !near(float64(s.P50Latency), 500e3) || !near(float64(s.P99Latency), 990e3) || !near(float64(s.P999Latency), 999e3) {
		t.Errorf("short latency quantiles %d %d %d", s.P50Latency, s.P99Latency, s.P999Latency)
	}
	if !near(s.P50Slowdown, 500) || !near(s.P999Slowdown, 999) {
		t.Errorf("short slowdown quantiles %v %v", s.P50Slowdown, s.P999Slowdown)
	}
	l := p.Types[1]
	if l.ID != 2 || l.Count != 10 || l.Dropped != 1 || l.P999Slowdown != 1 || l.P50Latency != 100000 {
		t.Errorf("long: %+v", l)
	}
	if p.Overall.Count != 1010 || p.Overall.Dropped != 1 {
		t.Errorf("overall: %+v", p.Overall)
	}
	// Merge doubles counts; Reset empties.
	r2 := NewRecorder([]string{"SHORT", "LONG"}, nil)
	r2.Merge(r)
	r2.Merge(r)
	if r2.Count() != 2020 {
		t.Errorf("merged count %d", r2.Count())
	}
	r2.Reset()
	var e Point
	r2.Fill(&e)
	if e.Overall.Count != 0 || e.Overall.P999Latency != 0 {
		t.Errorf("after reset: %+v", e.Overall)
	}
}

func TestRecordNoAlloc(t *testing.T) {
	r := NewRecorder([]string{"A"}, nil)
	if n := testing.AllocsPerRun(1000, func() { r.Record(0, 12345, 1000) }); n != 0 {
		t.Fatalf("%v allocs per Record", n)
	}
}

func BenchmarkRecord(b *testing.B) {
	r := NewRecorder([]string{"A", "B"}, nil)
	b.ReportAllocs()
	i := int64(0)
	for b.Loop() {
		i++
		r.Record(int(i&1), 1000+i%100000, 1000)
	}
}

func point(source, policy string, load, short999, long999 float64, sustained bool) Point {
	return Point{
		Source: source, Policy: policy, Workload: "high-bimodal", Workers: 14, Load: load,
		OfferedRate: load * 277227, AchievedRate: load * 277227, Sustained: sustained,
		MeanIdleWorkers: 1.5, DurationSec: 0.9,
		Overall: Stats{Count: 200, P50Latency: 1000, P99Latency: 90000, P999Latency: 200000,
			P999Slowdown: max(short999, long999), P50Slowdown: 1.5, MeanLatency: 1234.5},
		Types: []TypeStats{
			{Name: "SHORT", ID: 1, Stats: Stats{Count: 100, P999Slowdown: short999, P999Latency: int64(short999 * 1000)}},
			{Name: "LONG", ID: 2, Stats: Stats{Count: 100, Dropped: 3, P999Slowdown: long999, P999Latency: int64(long999 * 100000)}},
		},
	}
}

func samplePoints() []Point {
	return []Point{
		point("sim", "cfcfs", 0.2, 5, 1.1, true),
		point("sim", "cfcfs", 0.4, 50, 1.2, true),
		point("sim", "cfcfs", 0.6, 8, 1.3, true), // below the SLO again: must not count
		point("sim", "darc", 0.2, 2, 1.1, true),
		point("sim", "darc", 0.4, 3, 4, true),
		point("sim", "darc", 0.6, 4, 30, false),
	}
}

func TestSummarize(t *testing.T) {
	perType := Summarize(samplePoints(), 10, true)
	if len(perType) != 2 {
		t.Fatalf("%d summaries", len(perType))
	}
	if s := perType[0]; s.Policy != "cfcfs" || !s.Found || s.MaxLoad != 0.2 || !strings.Contains(s.Breaker, "SHORT p99.9 slowdown 50 at load 0.4") {
		t.Errorf("cfcfs: %+v", s)
	}
	if s := perType[1]; s.Policy != "darc" || s.MaxLoad != 0.4 || !strings.Contains(s.Breaker, "not sustained at load 0.6") {
		t.Errorf("darc: %+v", s)
	}
	if s := Summarize(samplePoints(), 1, false); s[0].Found || !strings.Contains(s[0].String(), "not met") {
		t.Errorf("SLO 1: %+v", s[0])
	}
	line := perType[1].String()
	if !strings.Contains(line, "highest load with p99.9 slowdown <= 10 for every type: 0.4") {
		t.Errorf("summary line %q", line)
	}
}

func TestJSONRoundTrip(t *testing.T) {
	pts := samplePoints()
	pts[0].Overall.MeanSlowdown = math.NaN() // not representable in JSON: written as 0
	var buf bytes.Buffer
	if err := WriteJSON(&buf, pts, Summarize(pts, 10, true)); err != nil {
		t.Fatal(err)
	}
	if !math.IsNaN(pts[0].Overall.MeanSlowdown) {
		t.Fatal("WriteJSON modified its input")
	}
	got, err := ReadJSON(&buf)
	if err != nil {
		t.Fatal(err)
	}
	pts[0].Overall.MeanSlowdown = 0
	if !reflect.DeepEqual(got, pts) {
		t.Fatalf("round trip differs:\n got %+v\nwant %+v", got[0], pts[0])
	}
	// a bare array is accepted too
	arr, err := ReadJSON(strings.NewReader(`[{"policy":"darc","load":0.5}]`))
	if err != nil || len(arr) != 1 || arr[0].Policy != "darc" {
		t.Fatalf("array: %v %v", arr, err)
	}
	if _, err := ReadJSON(strings.NewReader(`{"points": 3}`)); err == nil {
		t.Fatal("malformed json accepted")
	}
}

func TestCSVRoundTrip(t *testing.T) {
	pts := samplePoints()
	var buf bytes.Buffer
	if err := WriteCSV(&buf, pts); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 1+len(pts)*3 {
		t.Fatalf("%d csv lines", len(lines))
	}
	got, err := ReadCSV(strings.NewReader(buf.String()))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, pts) {
		t.Fatalf("round trip differs:\n got %+v\nwant %+v", got[0], pts[0])
	}
	bad := []string{
		"policy,load\ndarc,0.5\n",
		strings.Join(csvHeader, ",") + "\n" + strings.Replace(lines[2], "", "", 1) + "\n", // type row first
		strings.Join(csvHeader, ",") + "\n" + strings.Replace(lines[1], "0.2", "zero", 1) + "\n",
	}
	for i, b := range bad {
		if _, err := ReadCSV(strings.NewReader(b)); err == nil {
			t.Errorf("bad csv %d accepted", i)
		}
	}
}

func TestFilesAndPlots(t *testing.T) {
	dir := t.TempDir()
	sim := samplePoints()
	measured := samplePoints()
	for i := range measured {
		measured[i].Source = "measured"
	}
	if err := WriteFile(filepath.Join(dir, "sim.json"), sim, nil); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(filepath.Join(dir, "measured.csv"), measured, nil); err != nil {
		t.Fatal(err)
	}
	a, err := ReadFile(filepath.Join(dir, "sim.json"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := ReadFile(filepath.Join(dir, "measured.csv"))
	if err != nil {
		t.Fatal(err)
	}
	all := append(a, b...)
	png := filepath.Join(dir, "slowdown.png")
	if err := PlotSlowdown(all, png, PlotOptions{SLO: 10, Type: "SHORT"}); err != nil {
		t.Fatal(err)
	}
	paths, err := PlotLatencies(all, filepath.Join(dir, "latency-"), PlotOptions{})
	if err != nil || len(paths) != 2 {
		t.Fatalf("latency plots %v: %v", paths, err)
	}
	for _, p := range append(paths, png) {
		data, err := os.ReadFile(p)
		if err != nil || !bytes.HasPrefix(data, []byte("\x89PNG")) || len(data) < 5000 {
			t.Fatalf("%s: not a PNG (%d bytes, %v)", p, len(data), err)
		}
	}
	labels, _ := lines(all)
	if want := []string{"cfcfs (sim)", "darc (sim)", "cfcfs (measured)", "darc (measured)"}; !reflect.DeepEqual(labels, want) {
		t.Errorf("labels %v, want %v", labels, want)
	}
	if err := PlotSlowdown(nil, filepath.Join(dir, "x.png"), PlotOptions{}); err == nil {
		t.Error("empty plot accepted")
	}
	if _, err := ReadFile(filepath.Join(dir, "x.txt")); err == nil {
		t.Error("unknown extension accepted")
	}
}

func TestWriteTable(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteTable(&buf, samplePoints()); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{"load 0.2: 55.4k req/s offered, high-bimodal, 14 workers", "darc !", "slow p99.9", "SHORT", "200us"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	// columns are aligned: every row of a block has the same width.
	block := strings.Split(strings.Split(out, "\n\n")[0], "\n")[1:]
	for _, l := range block[1:] {
		if len(l) != len(block[0]) {
			t.Fatalf("misaligned table:\n%s", strings.Join(block, "\n"))
		}
	}
	if FormatNs(850) != "850ns" || FormatNs(12345) != "12.3us" || FormatNs(4.56e6) != "4.56ms" || FormatNs(2e9) != "2s" {
		t.Error("FormatNs")
	}
}

// TestRecorderOutOfRange: samples beyond the histograms' range are counted
// and their quantiles are not understated as the range's top.
func TestRecorderOutOfRange(t *testing.T) {
	r := NewRecorder([]string{"A"}, nil)
	const huge = int64(2000e9) // 2000 s, above the 1000 s latency range
	for range 998 {
		r.Record(0, 1000, 1000)
	}
	r.Record(0, huge, 1)
	r.Record(0, huge, 1)
	var p Point
	r.Fill(&p)
	s := p.Overall
	if s.Count != 1000 || s.MaxLatency != huge {
		t.Fatalf("count %d max %d", s.Count, s.MaxLatency)
	}
	if s.P999Latency < huge {
		t.Errorf("p99.9 latency %d, want %d (2 of 1000 samples)", s.P999Latency, huge)
	}
	if want := float64(huge); s.P999Slowdown < want {
		t.Errorf("p99.9 slowdown %g, want %g", s.P999Slowdown, want)
	}
	if s.P50Latency != 1000 || s.P50Slowdown != 1 {
		t.Errorf("p50 %d / %g", s.P50Latency, s.P50Slowdown)
	}
}

// TestRecorderSmallSampleTail: on 600 samples one above the rest is the
// p99.9 (only 599/600 = 99.83% of the samples are at or below the others);
// rounding the rank to nearest would report the bulk's value instead.
func TestRecorderSmallSampleTail(t *testing.T) {
	r := NewRecorder([]string{"A"}, nil)
	for range 599 {
		r.Record(0, 1e6, 1e6)
	}
	r.Record(0, 100e6, 1e6)
	var p Point
	r.Fill(&p)
	near := func(got, want float64) bool { return math.Abs(got-want) <= 0.002*want }
	if s := p.Overall; s.P999Latency != 100e6 || s.P999Slowdown != 100 || !near(float64(s.P99Latency), 1e6) {
		t.Errorf("p99.9 latency %d slowdown %g, p99 latency %d; want 100ms, 100, 1ms", s.P999Latency, s.P999Slowdown, s.P99Latency)
	}
	// 160 samples: the p99 is the 159th (158.4 rounded up), not the 158th.
	r.Reset()
	for i := 1; i <= 160; i++ {
		r.Record(0, int64(i)*1000, 1000)
	}
	r.Fill(&p)
	if s := p.Overall; !near(float64(s.P99Latency), 159000) || !near(float64(s.P50Latency), 80000) {
		t.Errorf("160 samples: p99 %d (want 159us), p50 %d (want 80us)", s.P99Latency, s.P50Latency)
	}
}

// TestWriteTableMeasured: a measured point shows its lost requests and an
// unknown idle count as "-", not as 0 drops and 0.00 idle workers.
func TestWriteTableMeasured(t *testing.T) {
	p := Point{Source: "measured", Policy: "server", Sustained: true, Load: 0.5, OfferedRate: 1000, MeanIdleWorkers: math.NaN(),
		Overall: Stats{Count: 900, Lost: 37}}
	var buf bytes.Buffer
	if err := WriteTable(&buf, []Point{p}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(buf.String(), "\n")
	fields := strings.Fields(lines[2])
	if len(fields) < 6 || fields[0] != "server" || fields[4] != "37" || fields[5] != "-" {
		t.Errorf("row %q: want 37 lost and idle -\n%s", lines[2], buf.String())
	}
	// No answered request: no quantiles, rather than 0ns latencies.
	p.Overall.Count = 0
	buf.Reset()
	if err := WriteTable(&buf, []Point{p}); err != nil {
		t.Fatal(err)
	}
	if row := strings.Split(buf.String(), "\n")[2]; strings.Contains(row, "0ns") || strings.Count(row, "-") != 7 {
		t.Errorf("row without samples %q: want - for idle and the 6 quantiles", row)
	}
}
