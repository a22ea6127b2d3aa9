package main

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	json "github.com/goccy/go-json"

	"github.com/persephone-go/psp/report"
)

func runSimApp(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	app := newApp()
	var out, errOut bytes.Buffer
	app.Writer, app.ErrWriter = &out, &errOut
	err = app.Run(append([]string{"psp", "sim"}, args...))
	return out.String(), errOut.String(), err
}

func TestSimCommand(t *testing.T) {
	dir := t.TempDir()
	js, csv, png := filepath.Join(dir, "results.json"), filepath.Join(dir, "results.csv"), filepath.Join(dir, "slowdown.png")
	out, stderr, err := runSimApp(t, "--workload", "high-bimodal", "-w", "14", "--policies", "cfcfs,ts,darc",
		"--loads", "0.3,0.8", "--duration", "50ms", "--seed", "1", "--slo", "10", "--slo-per-type",
		"--out", dir, "--progress")
	if err != nil {
		t.Fatalf("psp sim: %v\n%s%s", err, out, stderr)
	}
	for _, want := range []string{
		"load 0.3:", "load 0.8:", "slow p99.9", "SHORT", "LONG",
		"darc                 highest load with p99.9 slowdown <= 10 for every type: 0.8",
		"wrote " + js, "wrote " + png, "latency-SHORT.png",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(out, "cfcfs") || !strings.Contains(out, "ts ") {
		t.Errorf("missing policies:\n%s", out)
	}
	if !strings.Contains(stderr, "simulating high-bimodal on 14 workers") || !strings.Contains(stderr, "(5/6)") {
		t.Errorf("--progress showed no progress bar: %q", stderr)
	}
	a, err := report.ReadFile(js)
	if err != nil {
		t.Fatal(err)
	}
	b, err := report.ReadFile(csv)
	if err != nil {
		t.Fatal(err)
	}
	if len(a) != 6 || !reflect.DeepEqual(a, b) {
		t.Fatalf("json and csv differ or are incomplete: %d points", len(a))
	}
	if a[0].Policy != "cfcfs" || a[0].Load != 0.3 || a[0].Source != "sim" || a[5].Policy != "darc" {
		t.Errorf("points out of order: %+v", a[0])
	}
	for _, f := range []string{png, filepath.Join(dir, "latency-LONG.png")} {
		if st, err := os.Stat(f); err != nil || st.Size() < 5000 {
			t.Errorf("%s: %v", f, err)
		}
	}
	// Same seed, same results.
	out2, _, err := runSimApp(t, "--workload", "high-bimodal", "--workers", "14", "--policies", "cfcfs,ts,darc",
		"--loads", "0.3,0.8", "--duration", "50ms", "--seed", "1", "--slo", "10", "--slo-per-type", "--quiet")
	if err != nil || strings.Contains(out2, "load 0.3:") || !strings.Contains(out2, "for every type") {
		t.Fatalf("--quiet: %v\n%s", err, out2)
	}
	if !strings.Contains(out, strings.TrimSpace(out2)) {
		t.Errorf("rerun with the same seed gave other summaries:\n%s\nvs\n%s", out2, out)
	}
	// --json prints the same points on stdout, nothing else.
	out3, _, err := runSimApp(t, "--workload", "high-bimodal", "--workers", "14", "--policies", "cfcfs,ts,darc",
		"--loads", "0.3,0.8", "--duration", "50ms", "--seed", "1", "--json")
	if err != nil {
		t.Fatal(err)
	}
	c, err := report.ReadJSON(strings.NewReader(out3))
	if err != nil || !reflect.DeepEqual(a, c) {
		t.Errorf("--json: %v; %d points, want the %d of --out", err, len(c), len(a))
	}
}

func TestSimCommandWorkloadFile(t *testing.T) {
	out, _, err := runSimApp(t, "--workload", "../../workload/testdata/kv-mix.yaml", "--workers", "4",
		"--policies", "fp,darc-static,ts-mq,preempt", "--loads", "0.5", "--duration", "10ms", "--static-reserved", "1")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{"kv-mix", "GET", "SCAN", "darc-static", "preempt", "p99.9 slowdown <= 10 for all requests"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestSimCommandErrors(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--policies", "cfcfs,sjf"}, `unknown policy "sjf"`},
		{[]string{"--loads", "0.9:0.1:0.1"}, "end 0.1 is below start 0.9"},
		{[]string{"--loads", "0.1:0.9"}, "START:END:STEP"},
		{[]string{"--loads", "0.5,x"}, `"x" is not a number`},
		{[]string{"--workload", "nope"}, "built-ins: extreme-bimodal, high-bimodal, memcached, rocksdb, tpcc"},
		{[]string{"--workload", "missing.yaml"}, "no such file"},
		{[]string{"--workers", "0"}, "--workers 0: zero is not a value"},
		{[]string{"--workers", "-1"}, "want 1..1024"},
		{[]string{"--duration", "0s"}, "--duration 0s: zero is not a value"},
		{[]string{"--duration", "-1s"}, "want > 0"},
		{[]string{"--policies", "darc-static", "--static-reserved", "40", "--loads", "0.5", "--duration", "1ms"}, "invalid darc config"},
		{[]string{"--phases", "phase-change", "--workload", "tpcc"}, "not both"},
		{[]string{"--phases", "phase-change", "--duration", "1s"}, "the phases give the duration"},
		{[]string{"--phases", "nope"}, "built-in: phase-change"},
		{[]string{"--latency-slo", "20us", "--slo", "5"}, "not both"},
		{[]string{"--latency-slo", "0s"}, "zero is not a value"},
		{[]string{"--latency-slo", "20us", "--slo-types", "NOPE", "--loads", "0.5", "--duration", "1ms"}, `no type "NOPE"`},
		{[]string{"--network-rtt", "-1us", "--loads", "0.5", "--duration", "1ms"}, "network round trip"},
		{[]string{"--dispatcher-rate", "-5", "--loads", "0.5", "--duration", "1ms"}, "dispatcher rate"},
		{[]string{"--misclassify", "2", "--loads", "0.5", "--duration", "1ms"}, "misclassify"},
		{[]string{"--max-window", "10", "--min-samples", "100", "--loads", "0.5", "--duration", "1ms"}, "max window"},
	}
	for _, c := range cases {
		out, stderr, err := runSimApp(t, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("psp sim %v: error %v, want %q\n%s%s", c.args, err, c.want, out, stderr)
		}
	}
}

func TestSimHelp(t *testing.T) {
	out, _, err := runSimApp(t, "--help")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"--workload", "--policies", "--loads", "--slo-per-type", "--quantum", "--preempt-cost", "--delta", "--out", "--json", "ts-mq"} {
		if !strings.Contains(out, f) {
			t.Errorf("help lacks %s", f)
		}
	}
}

// TestSimTestbedFlags: the round trip, the dispatcher, a latency SLO for
// some types, phases with a timeline, a classifier that errs and the
// profiling window limit.
func TestSimTestbedFlags(t *testing.T) {
	out, _, err := runSimApp(t, "--workload", "high-bimodal", "-w", "14", "--policies", "darc,cfcfs", "--loads", "0.3,0.9",
		"--duration", "30ms", "--network-rtt", "10us", "--dispatcher-rate", "7e6", "--latency-slo", "20us", "--slo-types", "SHORT", "--json")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var f report.File
	if err := json.Unmarshal([]byte(out), &f); err != nil {
		t.Fatal(err)
	}
	if len(f.Summaries) != 2 || f.Summaries[0].Metric != "latency" || f.Summaries[0].SLO != 20e3 || f.Summaries[0].Types[0] != "SHORT" ||
		f.Summaries[0].MaxLoad != 0.9 || f.Summaries[1].MaxLoad != 0.3 {
		t.Errorf("summaries %+v", f.Summaries)
	}
	if s, _ := f.Points[0].TypeStat("SHORT"); s.P50Latency < 11000 {
		t.Errorf("SHORT p50 latency %d ns: no round trip", s.P50Latency)
	}
	dir := t.TempDir()
	phases := filepath.Join(dir, "swap.yaml")
	os.WriteFile(phases, []byte(`phases:
  - {name: before, duration: 100ms, use: high-bimodal}
  - name: after
    duration: 100ms
    types:
      - {name: SHORT, id: 1, share: 0.5, service: {kind: fixed, value: 100us}}
      - {name: LONG, id: 2, share: 0.5, service: {kind: fixed, value: 1us}}
`), 0o644)
	out, _, err = runSimApp(t, "--phases", phases, "-w", "14", "--policies", "darc", "--loads", "0.8", "--timeline", "10ms",
		"--misclassify", "0.01", "--max-window", "0", "--min-samples", "2000", "--out", dir, "-q")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	pts, err := report.ReadFile(filepath.Join(dir, "results.json"))
	if err != nil || len(pts) != 1 || pts[0].Workload != "swap" || pts[0].Timeline == nil || len(pts[0].Timeline.Buckets) < 20 ||
		len(pts[0].Timeline.Phases) != 2 || len(pts[0].Timeline.Reservations) < 2 {
		t.Fatalf("phases: %v %+v", err, pts)
	}
	if r := pts[0].Timeline.Reservations; r[len(r)-1].Groups[0].Types[0] != "LONG" {
		t.Errorf("after the swap DARC reserves %s", r[len(r)-1].String())
	}
	if st, err := os.Stat(filepath.Join(dir, "timeline-darc-0.8.png")); err != nil || st.Size() < 5000 {
		t.Errorf("timeline chart: %v", err)
	}
}
