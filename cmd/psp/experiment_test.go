package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	json "github.com/goccy/go-json"

	"github.com/persephone-go/psp/harness"
	"github.com/persephone-go/psp/internal/testenv"
	"github.com/persephone-go/psp/report"
)

func TestExperimentList(t *testing.T) {
	out, err := runApp(t, "experiment", "list")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, name := range harness.ExperimentNames() {
		if !strings.Contains(out, name) {
			t.Errorf("list lacks %s:\n%s", name, out)
		}
	}
	for _, want := range []string{"fig1", "fig3-live", "fig7", "tpcc", "rocksdb", "full size:", "live", "simulated"} {
		if !strings.Contains(out, want) {
			t.Errorf("list lacks %q", want)
		}
	}
	js, err := runApp(t, "experiment", "list", "--json")
	var list []struct{ Name, Title, Setup string }
	if err != nil || json.Unmarshal([]byte(js), &list) != nil || len(list) != len(harness.Experiments()) {
		t.Errorf("list --json: %v\n%s", err, js)
	}
	for _, args := range [][]string{
		{"experiment"},
		{"experiment", "fig2"},
		{"experiment", "fig1", "--size", "huge"},
		{"experiment", "fig1", "--seeds", "0"},
		{"experiment", "fig1", "--duration", "0s"},
		{"experiment", "list", "extra"},
	} {
		if out, err := runApp(t, args...); err == nil {
			t.Errorf("psp %v accepted\n%s", args, out)
		}
	}
}

// TestExperimentsSmall runs every experiment at its small size (the live
// ones with servers in process): each prints its tables and what it
// measured, and writes its results and charts.
func TestExperimentsSmall(t *testing.T) {
	dir := t.TempDir()
	for _, e := range harness.Experiments() {
		t.Run(e.Name, func(t *testing.T) {
			if e.Live && testing.Short() {
				t.Skip("live experiment in -short mode")
			}
			start := time.Now()
			app := newApp()
			var out, errOut bytes.Buffer
			app.Writer, app.ErrWriter = &out, &errOut
			err := app.Run([]string{"psp", "experiment", e.Name, "--size", "small", "--in-process", "--out", dir})
			if err != nil {
				t.Fatalf("%v\n%s\n%s", err, out.String(), errOut.String())
			}
			t.Logf("%s in %v", e.Name, time.Since(start).Round(10*time.Millisecond))
			text := out.String()
			for _, want := range []string{e.Title, "(small size)", "\nmeasured: ", "experiment.json"} {
				if !strings.Contains(text, want) {
					t.Errorf("output lacks %q:\n%s", want, text)
				}
			}
			if !strings.Contains(errOut.String(), "psp experiment "+e.Name) {
				t.Errorf("no progress on stderr: %q", errOut.String())
			}
			sub := filepath.Join(dir, e.Name)
			var res harness.ExperimentResult
			b, err := os.ReadFile(filepath.Join(sub, "experiment.json"))
			if err != nil || json.Unmarshal(b, &res) != nil {
				t.Fatalf("experiment.json: %v", err)
			}
			if res.Name != e.Name || res.Measured == "" || len(res.Tables) == 0 || len(res.Points) == 0 {
				t.Errorf("experiment.json: %s, measured %q, %d tables, %d points", res.Name, res.Measured, len(res.Tables), len(res.Points))
			}
			if pts, err := report.ReadFile(filepath.Join(sub, "results.csv")); err != nil || len(pts) != len(res.Points) {
				t.Errorf("results.csv: %v, %d points (json: %d)", err, len(pts), len(res.Points))
			}
			pngs := 0
			for _, f := range res.Files {
				if filepath.Ext(f) != ".png" {
					continue
				}
				pngs++
				if st, err := os.Stat(f); err != nil || st.Size() < 5000 {
					t.Errorf("%s: %v", f, err)
				}
			}
			if pngs == 0 && e.Name != "darc-defaults" {
				t.Errorf("no chart among %v", res.Files)
			}
		})
	}
}

func TestExperimentJSON(t *testing.T) {
	dir := t.TempDir()
	out, err := runApp(t, "experiment", "fig9", "--size", "small", "--json", "-q", "--out", dir, "--seeds", "2", "--duration", "20ms")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var res harness.ExperimentResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("stdout is not the result's JSON: %v\n%s", err, out)
	}
	seeds := map[uint64]bool{}
	for _, p := range res.Points {
		seeds[p.Seed] = true
		if p.DurationSec > 0.02 {
			t.Errorf("point of %v s with --duration 20ms", p.DurationSec)
		}
	}
	if res.Name != "fig9" || len(seeds) != 2 || !strings.Contains(res.Measured, "2 seeds") {
		t.Errorf("name %s, seeds %v, measured %q", res.Name, seeds, res.Measured)
	}
}

// TestSweepPhases: psp sweep plays a phase list against a live server and
// records each point's timeline with the server's reservations.
func TestSweepPhases(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	dir := t.TempDir()
	phases := filepath.Join(dir, "swap.yaml")
	if err := os.WriteFile(phases, []byte("phases:\n  - {name: before, duration: 1500ms, use: high-bimodal}\n"+
		"  - name: after\n    duration: 1s\n    types:\n"+
		"      - {name: SHORT, id: 1, share: 0.5, service: {kind: fixed, value: 100us}}\n"+
		"      - {name: LONG, id: 2, share: 0.5, service: {kind: fixed, value: 1us}}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := runApp(t, "sweep", "--phases", phases, "--policies", "darc", "--loads", "0.8", "--workers", "4",
		"--dilation", "500", "--min-samples", "20", "--prewarm", "0s", "--timeline", "500ms", "--in-process", "--out", dir, "--max-lag", "1s")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	pts, err := report.ReadFile(filepath.Join(dir, "results.json"))
	if err != nil || len(pts) != 1 {
		t.Fatalf("%v %d points", err, len(pts))
	}
	tl := pts[0].Timeline
	if pts[0].Workload != "swap" || tl == nil || len(tl.Phases) != 2 || tl.Phases[1].StartSec != 1.5 || len(tl.Buckets) < 4 || len(tl.Reservations) == 0 {
		t.Fatalf("point %s, timeline %+v", pts[0].Workload, tl)
	}
	if st, err := os.Stat(filepath.Join(dir, "timeline-darc-0.8.png")); err != nil || st.Size() < 5000 {
		t.Errorf("timeline chart: %v", err)
	}
	if _, err := runApp(t, "sweep", "--phases", phases, "--workload", "tpcc", "--out", dir); err == nil {
		t.Error("--phases with --workload accepted")
	}
}

// TestExperimentStopsOnSignal runs psp experiment in a child process (this
// test binary, re-executed) on points of 60 s of simulated time, which take
// minutes, and sends SIGTERM: the experiment stops within its simulations
// and the process exits with an error (it ran on until SIGKILL).
func TestExperimentStopsOnSignal(t *testing.T) {
	if os.Getenv("PSP_TEST_EXPERIMENT_CHILD") == "1" {
		exitWithPSP("experiment", "fig1", "--size", "small", "--duration", "60s", "--parallel", "1", "-q",
			"--out", os.Getenv("PSP_TEST_OUT"))
	}
	if testing.Short() {
		t.Skip("starts a child process")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestExperimentStopsOnSignal$")
	cmd.Env = append(os.Environ(), "PSP_TEST_EXPERIMENT_CHILD=1", "PSP_TEST_OUT="+t.TempDir())
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	exited := testenv.Start(t, cmd)
	time.Sleep(time.Second) // running its first simulation
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-exited:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(stderr.String(), "context canceled") {
			t.Fatalf("after SIGTERM the experiment exited with %v, want status 1 and its error:\n%s", err, stderr.String())
		}
	case <-time.After(15 * time.Second):
		cmd.Process.Kill()
		<-exited
		t.Fatal("the experiment did not stop within 15s of SIGTERM")
	}
}

func TestExperimentBounds(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--seeds", "999999999"}, "--seeds 999999999: at most 1000"},
		{[]string{"--seeds", "1001"}, "--seeds 1001: at most 1000"},
		{[]string{"--duration", "25h"}, "--duration 25h0m0s: at most 24h0m0s"},
		{[]string{"--duration", "2562047h"}, "at most 24h0m0s"},
		{[]string{"--seeds", "-1"}, "must not be negative"},
	} {
		args := append([]string{"experiment", "fig1", "--size", "small", "-q", "--out", t.TempDir()}, tc.args...)
		if out, err := runApp(t, args...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want an error with %q\n%s", tc.args, err, tc.want, out)
		}
	}
}
