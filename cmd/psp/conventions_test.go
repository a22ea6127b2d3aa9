package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/persephone-go/psp/report"
	"github.com/persephone-go/psp/server"
)

// allCommands walks every command of the app.
func allCommands(cmds []*cli.Command, f func(path string, c *cli.Command)) {
	var walk func(prefix string, cmds []*cli.Command)
	walk = func(prefix string, cmds []*cli.Command) {
		for _, c := range cmds {
			f(prefix+c.Name, c)
			walk(prefix+c.Name+" ", c.Subcommands)
		}
	}
	walk("", cmds)
}

func TestShortFlagsMeanOneThing(t *testing.T) {
	meaning := map[string]string{}
	allCommands(newApp().Commands, func(path string, c *cli.Command) {
		for _, f := range c.Flags {
			names := f.Names()
			for _, n := range names[1:] {
				if len(n) != 1 {
					continue
				}
				if want := shortFlags[n]; want != names[0] {
					t.Errorf("%s: -%s is --%s, but the convention makes it --%s", path, n, names[0], want)
				}
				if prev, ok := meaning[n]; ok && prev != names[0] {
					t.Errorf("-%s means --%s and --%s", n, prev, names[0])
				}
				meaning[n] = names[0]
			}
			if names[0] == "json" {
				if _, ok := f.(*cli.BoolFlag); !ok {
					t.Errorf("%s: --json is a %T, want the boolean every command has", path, f)
				}
			}
		}
	})
	if len(meaning) < 8 {
		t.Errorf("only %d short flags found: %v", len(meaning), meaning)
	}
}

func TestUnknownCommand(t *testing.T) {
	for _, args := range [][]string{{"frobnicate"}, {"classifier", "frobnicate"}} {
		out, err := runApp(t, args...)
		if err == nil || !strings.Contains(err.Error(), `unknown command "frobnicate"`) {
			t.Errorf("psp %v: %v\n%s", args, err, out)
		}
	}
	if out, err := runApp(t, "classifier"); err != nil || !strings.Contains(out, "check") {
		t.Errorf("psp classifier without a subcommand should show its help: %v\n%s", err, out)
	}
}

func TestVersion(t *testing.T) {
	out, err := runApp(t, "--version")
	if err != nil || !strings.HasPrefix(out, "psp version ") || !strings.Contains(out, runtime.Version()) {
		t.Errorf("psp --version: %v\n%s", err, out)
	}
}

func TestEnvironmentVariables(t *testing.T) {
	t.Setenv("PSP_WORKERS", "3")
	t.Setenv("PSP_ADMIN", "127.0.0.1:9191")
	out, err := runApp(t, "serve", "--print-config")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := server.ParseConfig([]byte(out))
	if err != nil || cfg.Workers != 3 || cfg.Admin.Addr != "127.0.0.1:9191" {
		t.Errorf("PSP_WORKERS/PSP_ADMIN not used: %v\n%s", err, out)
	}
	out, err = runApp(t, "serve", "--print-config", "--workers", "5")
	if cfg, _ := server.ParseConfig([]byte(out)); err != nil || cfg.Workers != 5 {
		t.Errorf("a flag must win over PSP_WORKERS: %v\n%s", err, out)
	}
	t.Setenv("PSP_WORKERS", "0")
	if _, err := runApp(t, "serve", "--print-config"); err == nil || !strings.Contains(err.Error(), "workers") {
		t.Errorf("PSP_WORKERS=0 accepted: %v", err)
	}
}

func TestExplicitZeros(t *testing.T) {
	refused := [][]string{
		{"serve", "--print-config", "--workers", "0"},
		{"serve", "--print-config", "--burst", "0"},
		{"serve", "--print-config", "--dilation", "0"},
		{"serve", "--print-config", "--min-samples", "0"},
		{"serve", "--print-config", "--admin", ""},
		{"client", "--rate", "100", "--workers", "0"},
		{"client", "--rate", "100", "--duration", "0s"},
		{"client", "--rate", "0"},
		{"sweep", "--workers", "0"},
		{"demo", "--workers", "0"},
		{"demo", "--duration", "0s"},
		{"sim", "--spillway", "0"},
		{"sim", "--latency-slo", "0s"},
		{"experiment", "fig1", "--seeds", "0"},
		{"classifier", "check", "x.wasm", "--fuel", "0"},
		{"status", "--timeout", "0s"},
	}
	for _, args := range refused {
		if out, err := runApp(t, args...); err == nil || !strings.Contains(err.Error(), "0") {
			t.Errorf("psp %v: accepted (%v)\n%s", args, err, out)
		}
	}
	// Zeros that mean something are kept with that meaning.
	out, err := runApp(t, "serve", "--print-config", "--spin", "0", "--drain-timeout", "0s", "--spin-tail", "0", "--hysteresis", "0", "--reserved", "0", "--max-window", "0")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"spin: -1ns", "drain_timeout: -1ns", "spin_tail: -1ns", "hysteresis: -1", "max_window: -1"} {
		if !strings.Contains(out, want) {
			t.Errorf("--print-config lacks %q:\n%s", want, out)
		}
	}
	if out, err := runApp(t, "serve", "--print-config", "--app", "tpcc", "--dilation", "0"); err != nil || strings.Contains(out, "dilation: 1000") {
		t.Errorf("tpcc with dilation 0 spins: %v\n%s", err, out)
	}
	// The same rules in a config file.
	dir := t.TempDir()
	for body, ok := range map[string]bool{"workers: 0\n": false, "app:\n  dilation: 0\n": false, "spin: 0s\n": true, "reserved: 0\n": true} {
		f := filepath.Join(dir, "c.yaml")
		os.WriteFile(f, []byte(body), 0o644)
		_, err := runApp(t, "serve", "--print-config", "--config", f)
		if (err == nil) != ok {
			t.Errorf("config %q: error %v, want ok=%v", body, err, ok)
		}
	}
}

// TestFlagsAfterArguments: every command with positional arguments reads
// flags written after them.
func TestFlagsAfterArguments(t *testing.T) {
	dir := t.TempDir()
	sim := filepath.Join(dir, "sim")
	if out, err := runApp(t, "sim", "--loads", "0.5,0.8", "--duration", "20ms", "--out", sim, "-q"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	charts := filepath.Join(dir, "charts")
	out, err := runApp(t, "plot", filepath.Join(sim, "results.json"), "--out", charts, "--slo", "10")
	if err != nil {
		t.Fatalf("psp plot FILE --out DIR: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(charts, "slowdown.png")); err != nil {
		t.Error(err)
	}
	wasm := filepath.Join("..", "..", "examples", "classifiers", "c", "pspheader.wasm")
	if out, err := runApp(t, "classifier", "check", wasm, "--fuel", "5000"); err != nil || !strings.Contains(out, "5000 per call") {
		t.Errorf("classifier check FILE --fuel: %v\n%s", err, out)
	}
	if out, err := runApp(t, "classifier", "check", wasm, "--nope"); err == nil {
		t.Errorf("unknown flag after FILE accepted\n%s", out)
	}
	if out, err := runApp(t, "classifier", "check", wasm, "extra.wasm"); err == nil || !strings.Contains(err.Error(), "extra.wasm") {
		t.Errorf("second FILE accepted: %v\n%s", err, out)
	}
}

func TestCompletion(t *testing.T) {
	out, err := runApp(t, "completion", "bash")
	if err != nil || !strings.Contains(out, "complete -o bashdefault -o default -F _psp_complete psp") {
		t.Errorf("completion bash: %v\n%s", err, out)
	}
	if _, err := runApp(t, "completion", "fish"); err == nil {
		t.Error("completion fish: no error")
	}
	// The completions themselves (psp --generate-bash-completion) read
	// os.Args: tests/ runs them against the built binary.
}

// TestAdminAddresses: every command that talks to the admin endpoint takes
// host:port or a URL, and refuses what is neither.
func TestAdminAddresses(t *testing.T) {
	hits := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits++
		w.Write([]byte(`{"policy":"darc","phase":"startup","workers":2,"types":[],"groups":[]}`))
	}))
	defer srv.Close()
	for _, admin := range []string{srv.URL, strings.TrimPrefix(srv.URL, "http://"), srv.URL + "/"} {
		if out, err := runApp(t, "status", "--admin", admin); err != nil || !strings.Contains(out, "policy darc") {
			t.Errorf("status --admin %s: %v\n%s", admin, err, out)
		}
	}
	for _, cmd := range [][]string{{"status"}, {"client", "--rate", "100", "--duration", "100ms"}} {
		_, err := runApp(t, append(cmd, "--admin", "http//127.0.0.1:1")...)
		if err == nil || !strings.Contains(err.Error(), "admin address") {
			t.Errorf("%v --admin http//127.0.0.1:1: %v", cmd, err)
		}
		_, err = runApp(t, append(cmd, "--admin", "http://127.0.0.1:1")...)
		if err == nil || !strings.Contains(err.Error(), `"http://127.0.0.1:1/status"`) {
			t.Errorf("%v --admin http://127.0.0.1:1: %v", cmd, err)
		}
	}
}

// TestDemoOutsideRepository runs psp demo, briefly and in process, from a
// directory that is not the repository: the classifier is built in.
func TestDemoOutsideRepository(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	dir := t.TempDir()
	t.Chdir(dir)
	app := newApp()
	var out, errOut bytes.Buffer
	app.Writer, app.ErrWriter = &out, &errOut
	err := app.RunContext(context.Background(), []string{"psp", "demo", "--in-process", "--loads", "0.5", "--duration", "500ms", "--workers", "4", "--out", "d"})
	if err != nil {
		t.Fatalf("psp demo: %v\n%s\n%s", err, out.String(), errOut.String())
	}
	pts, err := report.ReadFile(filepath.Join("d", "results.csv"))
	if err != nil || len(pts) != 2 || pts[0].Policy != "darc" || pts[1].Policy != "cfcfs" || pts[0].Overall.Count == 0 {
		t.Fatalf("results: %v %+v", err, pts)
	}
	for _, f := range []string{"pspheader.wasm", "slowdown.png", "sim.json", "server-darc.log"} {
		if _, err := os.Stat(filepath.Join("d", f)); err != nil {
			t.Error(err)
		}
	}
	if !strings.Contains(out.String(), "built-in C psp-header") {
		t.Errorf("output:\n%s", out.String())
	}
	checkDemoVerdictFirst(t, out.String(), []string{"0.5"})
	for _, f := range []string{demoReportFile, demoLogFile} {
		if b, err := os.ReadFile(filepath.Join("d", f)); err != nil || len(b) == 0 {
			t.Errorf("%s: %v, %d bytes", f, err, len(b))
		}
	}
}

// checkDemoVerdictFirst checks that the demo's output shows its verdict
// within its first 15 lines: the table's header, a row per load with each
// policy's p99 and p99.9, and the one-line answer.
func checkDemoVerdictFirst(t *testing.T, out string, loads []string) {
	t.Helper()
	lines := strings.Split(out, "\n")
	first := lines[:min(15, len(lines))]
	find := func(pred func(string) bool) int {
		for i, l := range first {
			if pred(l) {
				return i
			}
		}
		return -1
	}
	header := find(func(l string) bool {
		f := strings.Fields(l)
		return len(f) == 9 && f[0] == "load" && f[1] == "DARC" && f[3] == "c-FCFS" && f[6] == "p99.9"
	})
	if header < 0 {
		t.Fatalf("no verdict table header in the first 15 lines:\n%s", strings.Join(first, "\n"))
	}
	for i, load := range loads {
		row := header + 1 + i
		if row >= len(first) || !strings.HasPrefix(first[row], load+" ") || strings.Count(first[row], "(") != 4 {
			t.Errorf("no row for load %s, with the simulator's expectation in each of its 4 cells, under the header:\n%s", load, strings.Join(first, "\n"))
		}
	}
	if find(func(l string) bool { return strings.HasPrefix(l, "Verdict: DARC") }) < header {
		t.Errorf("no verdict line after the table in the first 15 lines:\n%s", strings.Join(first, "\n"))
	}
}

// TestSweepCalibrationFlags: the two ways of measuring the overhead are
// refused where they cannot apply, with the reason.
func TestSweepCalibrationFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"sweep", "--calibrate-alongside"}, "needs --with-sim"},
		{[]string{"sweep", "--with-sim", "--calibrate-alongside", "--server", "127.0.0.1:1", "--policies", "mine"}, "not --server"},
		{[]string{"sweep", "--with-sim", "--calibrate-alongside", "--calibrate", "2000"}, "give one"},
		{[]string{"sweep", "--calibrate", "2000"}, "needs --with-sim"},
		{[]string{"demo", "--calibrate", "-1"}, "want > 0"},
	} {
		out, err := runApp(t, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("psp %v: %v, want an error saying %q\n%s", tc.args, err, tc.want, out)
		}
	}
}

// TestHugeCountsRefused: counts far beyond what a command can serve are
// refused at once with the limit, not run for minutes or until memory
// runs out.
func TestHugeCountsRefused(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"sim", "--workers", "99999999"}, "want 1..1024"},
		{[]string{"serve", "--print-config", "--workers", "99999999"}, "1..1024"},
		{[]string{"serve", "--print-config", "--in-place", "9999h"}, "at most 24h"},
		{[]string{"client", "--server", "127.0.0.1:9", "--format", "memcached", "--workload", "memcached", "--rate", "100", "--duration", "1s", "--memcached-keys", "999999999999"}, "invalid spec"},
	} {
		out, err := runApp(t, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("psp %v: %v, want an error saying %q\n%s", c.args, err, c.want, out)
		}
	}
}

// TestRequestAddresses: an address requests travel to is written the same
// in every command: host:port or udp://host:port for datagrams,
// tcp://host:port for connections (psp serve --listen, psp client and psp
// sweep --server); another scheme is refused naming the convention.
func TestRequestAddresses(t *testing.T) {
	allCommands(newApp().Commands, func(path string, c *cli.Command) {
		for _, f := range c.Flags {
			name := f.Names()[0]
			if name != "listen" && name != "server" {
				continue
			}
			usage := f.(cli.DocGenerationFlag).GetUsage()
			if name == "server" && strings.Contains(usage, "admin") {
				continue // an admin endpoint, not requests
			}
			if !strings.Contains(usage, "tcp://") {
				t.Errorf("psp %s --%s: its help does not say tcp:// (%q)", path, name, usage)
			}
		}
	})
	for _, listen := range []string{"127.0.0.1:6789", "udp://127.0.0.1:6789", "tcp://127.0.0.1:6789", "tcp://127.0.0.1:6789,127.0.0.1:6789"} {
		if out, err := runApp(t, "serve", "--listen", listen, "--print-config"); err != nil {
			t.Errorf("serve --listen %s: %v\n%s", listen, err, out)
		}
	}
	for _, cmd := range [][]string{
		{"serve", "--print-config", "--listen"},
		{"client", "--rate", "100", "--duration", "100ms", "--server"},
	} {
		_, err := runApp(t, append(cmd, "http://127.0.0.1:6789")...)
		if err == nil || !strings.Contains(err.Error(), "tcp://") {
			t.Errorf("%v http://127.0.0.1:6789: %v, want a refusal naming the convention", cmd, err)
		}
	}
}
