package tests

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/persephone-go/psp/report"
)

// regexpStopped matches the line psp serve prints after a graceful stop.
var regexpStopped = regexp.MustCompile(`stopped: received \d+, answered \d+, dropped 0`)

// TestSweepCommand runs psp sweep end to end: it starts a server per
// policy, measures, stops them and writes the results and charts.
func TestSweepCommand(t *testing.T) {
	out := t.TempDir()
	cmd := exec.Command(pspBinary, "sweep", "--policies", "darc,cfcfs", "--loads", "0.5",
		"--workload", "high-bimodal", "--workers", "14", "--dilation", "1000",
		"--duration", "1s", "--prewarm", "500ms", "--min-samples", "50", "--max-lag", "1s",
		"--with-sim", "--out", out)
	b, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("psp sweep: %v\n%s", err, b)
	}
	t.Logf("psp sweep:\n%s", b)
	for _, f := range []string{"results.csv", "results.json", "sim.json", "slowdown.png",
		"latency-SHORT.png", "latency-LONG.png", "server-darc.log", "server-cfcfs.log"} {
		if st, err := os.Stat(filepath.Join(out, f)); err != nil || st.Size() == 0 {
			t.Errorf("%s: missing or empty (%v)", f, err)
		}
	}
	pts, err := report.ReadFile(filepath.Join(out, "results.csv"))
	if err != nil {
		t.Fatal(err)
	}
	if len(pts) != 2 || pts[0].Policy != "darc" || pts[1].Policy != "cfcfs" || pts[0].Source != "measured" {
		t.Fatalf("results.csv: %+v", pts)
	}
	for _, p := range pts {
		if p.Load != 0.5 || p.Overall.Count == 0 || p.Overall.Lost != 0 {
			t.Errorf("%s: load %v, %d requests measured, %d lost", p.Policy, p.Load, p.Overall.Count, p.Overall.Lost)
		}
	}
	log, _ := os.ReadFile(filepath.Join(out, "server-darc.log"))
	if !regexpStopped.Match(log) {
		t.Errorf("the darc server did not stop gracefully:\n%s", log)
	}
}

// TestCompletionAndVersion runs the built binary's shell completion and
// --version (both read the real command line).
func TestCompletionAndVersion(t *testing.T) {
	out, err := exec.Command(pspBinary, "--generate-bash-completion").Output()
	if err != nil || !strings.Contains(string(out), "serve\n") || !strings.Contains(string(out), "sweep\n") {
		t.Errorf("psp --generate-bash-completion: %v\n%s", err, out)
	}
	out, err = exec.Command(pspBinary, "sim", "--wor", "--generate-bash-completion").Output()
	if err != nil || !strings.Contains(string(out), "--workers") || !strings.Contains(string(out), "--workload") {
		t.Errorf("psp sim --wor --generate-bash-completion: %v\n%s", err, out)
	}
	out, err = exec.Command(pspBinary, "--version").Output()
	if err != nil || !strings.HasPrefix(string(out), "psp version ") || !strings.Contains(string(out), "go1.") {
		t.Errorf("psp --version: %v\n%s", err, out)
	}
}
