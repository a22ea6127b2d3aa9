package main

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

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
		{[]string{"--workers", "-1"}, "want at least 1"},
		{[]string{"--duration", "0s"}, "--duration 0s: zero is not a value"},
		{[]string{"--duration", "-1s"}, "want > 0"},
		{[]string{"--policies", "darc-static", "--static-reserved", "40", "--loads", "0.5", "--duration", "1ms"}, "invalid darc config"},
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
