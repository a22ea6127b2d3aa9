package main

import (
	"strings"
	"testing"

	"github.com/persephone-go/psp/harness"
)

// TestHostMissesTellHostFromPolicy checks the lines under the tail table
// that explain an SLO miss the simulator does not make: the host's when
// the live tail is within the bound of the replay plus the host's
// overhead, not when it is beyond it; points the simulator misses too,
// or that meet the SLO, get no line.
func TestHostMissesTellHostFromPolicy(t *testing.T) {
	comparison := func(policy string, load, live, sim, expected float64) harness.TailComparison {
		return harness.TailComparison{Policy: policy, Load: load, Type: "SHORT", Samples: 1200, P999BelowMax: true, Answered: true,
			ServiceNs: 1e6, OverheadSamples: 5000, OverheadP50Ns: 150e3, LiveP99: 2, ExpectedDistP99: 2, ExpectedRangeP99: [2]float64{1.8, 2.4},
			DeviationP99: 1, LiveP999: live, SimP999: sim, ExpectedDistP999: expected, ExpectedRangeP999: [2]float64{expected / 2, expected * 1.3},
			DeviationP999: max(1, live/(expected*1.3))}
	}
	var b strings.Builder
	printHostMisses(&b, []harness.TailComparison{
		comparison("darc", 0.5, 3, 2.2, 3.5),   // meets the SLO: no line
		comparison("darc", 0.8, 20.9, 2.5, 16), // the host's
		comparison("darc", 0.9, 60, 2.6, 5),    // beyond the host's overhead
		comparison("cfcfs", 0.8, 50, 48, 49),   // the simulator misses it too
	}, 10)
	out := b.String()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 5 || !strings.Contains(out, "over 10") {
		t.Fatalf("want a header and two points of two lines each:\n%s", out)
	}
	if !strings.Contains(lines[1], "darc at load 0.8: SHORT p99.9 20.9 live, 2.5 in the simulator's replay, 16 (8-20.8)") ||
		!strings.Contains(lines[2], "the host's stalls, not the policy") {
		t.Errorf("load 0.8 not explained as the host's:\n%s", out)
	}
	if !strings.Contains(lines[3], "darc at load 0.9") || !strings.Contains(lines[4], "more than the host's overhead explains") {
		t.Errorf("load 0.9 not explained as beyond the host's overhead:\n%s", out)
	}
	b.Reset()
	printHostMisses(&b, []harness.TailComparison{comparison("darc", 0.8, 20.9, 2.5, 16)}, 0)
	if b.Len() != 0 {
		t.Errorf("no SLO, yet:\n%s", b.String())
	}
}
