package main

import (
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"

	"github.com/persephone-go/psp/harness"
	"github.com/persephone-go/psp/report"
)

// policyTitle is how the verdict names a policy.
func policyTitle(policy string) string {
	switch policy {
	case "darc":
		return "DARC"
	case "cfcfs":
		return "c-FCFS"
	}
	return policy
}

// demoCell is one policy's SHORT tails at one load: live and, when the
// point was replayed, the simulator's expectation (replay plus the host's
// overhead).
type demoCell struct {
	live, expected [2]float64 // p99, p99.9; expected NaN when unknown
	measured       bool
	sustained      bool
	judged         bool // the comparison with the simulator is a valid check
	agrees         bool // ... and the live tails are within its bound
}

// demoCells gathers the cells of the verdict, by policy then load.
func demoCells(sw *harness.Sweep, res *harness.SweepResult) map[string][]demoCell {
	short := harness.ShortestType(&sw.Plan.Workload)
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-6 }
	cells := map[string][]demoCell{}
	for _, policy := range sw.Policies {
		row := make([]demoCell, len(sw.Loads))
		for i, load := range sw.Loads {
			c := &row[i]
			c.expected = [2]float64{math.NaN(), math.NaN()}
			for _, t := range res.Tails {
				if t.Policy == policy && near(t.Load, load) {
					c.live = [2]float64{t.LiveP99, t.LiveP999}
					c.expected[0], c.expected[1] = t.Expected()
					c.measured = true
					c.judged = t.Problem(math.Inf(1)) == "" // enough samples, answered: only the bound left
					c.agrees = t.Problem(harness.DefaultTailBound) == ""
				}
			}
			for _, p := range res.Points {
				if p.Policy != policy || !pointAt(p, sw, load) {
					continue
				}
				c.sustained = p.Sustained
				if !c.measured {
					if ts := typeStats(p, short); ts != nil {
						c.live, c.measured = [2]float64{ts.P99Slowdown, ts.P999Slowdown}, true
					}
				}
			}
		}
		cells[policy] = row
	}
	return cells
}

// pointAt reports whether p is the sweep's point at load: points carry the
// load they offered, which can differ from the plan's in the last digits.
func pointAt(p report.Point, sw *harness.Sweep, load float64) bool {
	best, bestDiff := 0.0, math.Inf(1)
	for _, l := range sw.Loads {
		if d := math.Abs(p.Load - l); d < bestDiff {
			best, bestDiff = l, d
		}
	}
	return best == load
}

func typeStats(p report.Point, name string) *report.TypeStats {
	for i := range p.Types {
		if p.Types[i].Name == name {
			return &p.Types[i]
		}
	}
	return nil
}

// printVerdict prints the demo's first screen: SHORT's p99 and p99.9
// slowdown under each policy at each load, live with the simulator's
// expectation beside it, and a one-line answer.
func printVerdict(w io.Writer, sw *harness.Sweep, res *harness.SweepResult) {
	short := harness.ShortestType(&sw.Plan.Workload)
	cells := demoCells(sw, res)
	fmt.Fprintf(w, "%s slowdown (time in the server / service time), live (simulator's expectation):\n", short)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	var head strings.Builder
	head.WriteString("load")
	for _, q := range []string{"p99", "p99.9"} {
		for _, policy := range sw.Policies {
			fmt.Fprintf(&head, "\t%s %s", policyTitle(policy), q)
		}
	}
	fmt.Fprintln(tw, head.String())
	unsustained := false
	for i, load := range sw.Loads {
		fmt.Fprintf(tw, "%.2g", load)
		for q := range 2 {
			for _, policy := range sw.Policies {
				c := cells[policy][i]
				mark := ""
				if c.measured && !c.sustained {
					mark, unsustained = " !", true
				}
				fmt.Fprintf(tw, "\t%s%s", formatCell(c.live[q], c.expected[q], c.measured), mark)
			}
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
	if unsustained {
		fmt.Fprintln(w, "! not sustained (requests lost, or the client behind its schedule on a busy machine)")
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, verdictLine(sw, cells, short))
}

func formatCell(live, expected float64, measured bool) string {
	if !measured {
		return "-"
	}
	if math.IsNaN(expected) || expected == 0 {
		return fmt.Sprintf("%.3g", live)
	}
	return fmt.Sprintf("%.3g (%.3g)", live, expected)
}

// verdictLine answers the demo's question in one line: does DARC keep the
// short type's p99.9 slowdown below c-FCFS's at each load, by how much,
// as the simulator expects, and did the live points agree with it.
func verdictLine(sw *harness.Sweep, cells map[string][]demoCell, short string) string {
	darc, other := cells["darc"], cells["cfcfs"]
	if darc == nil || other == nil {
		return "No verdict: the demo compares darc with cfcfs."
	}
	var won, lost []string
	lo, hi := math.Inf(1), 0.0
	simLo, simHi := math.Inf(1), 0.0
	for i, load := range sw.Loads {
		d, c := darc[i], other[i]
		if !d.measured || !c.measured {
			continue
		}
		r := c.live[1] / d.live[1]
		if r > 1 {
			won = append(won, fmt.Sprintf("%.2g", load))
			lo, hi = math.Min(lo, r), math.Max(hi, r)
		} else {
			lost = append(lost, fmt.Sprintf("%.2g", load))
		}
		if e := c.expected[1] / d.expected[1]; !math.IsNaN(e) && !math.IsInf(e, 0) {
			simLo, simHi = math.Min(simLo, e), math.Max(simHi, e)
		}
	}
	factor := func(lo, hi float64) string {
		if l, h := times(lo), times(hi); l != h {
			return l + "-" + h + "x"
		}
		return times(lo) + "x"
	}
	disagree, unjudged := 0, 0
	for _, policy := range sw.Policies {
		for _, c := range cells[policy] {
			switch {
			case !c.judged:
				unjudged++
			case !c.agrees:
				disagree++
			}
		}
	}
	sim := ""
	if simHi > 0 {
		sim = fmt.Sprintf(" (simulator: %s)", factor(simLo, simHi))
	}
	var answer string
	switch {
	case len(won) == 0 && len(lost) == 0:
		return "No verdict: no point was measured under both policies."
	case len(lost) == 0:
		answer = fmt.Sprintf("Verdict: DARC keeps %s's p99.9 slowdown %s lower than c-FCFS at every load%s", short, factor(lo, hi), sim)
	case len(won) == 0:
		answer = fmt.Sprintf("Verdict: DARC did not beat c-FCFS on %s's p99.9 slowdown at any load here%s", short, sim)
	default:
		answer = fmt.Sprintf("Verdict: DARC keeps %s's p99.9 slowdown %s lower than c-FCFS at loads %s, not at %s%s",
			short, factor(lo, hi), strings.Join(won, ", "), strings.Join(lost, ", "), sim)
	}
	switch {
	case disagree > 0:
		answer += fmt.Sprintf("; %d point(s) outside %gx of the simulator's range (--verbose says how far).", disagree, harness.DefaultTailBound)
	case unjudged > 0:
		answer += fmt.Sprintf("; %d point(s) too short or unsustained to judge against the simulator.", unjudged)
	default:
		answer += fmt.Sprintf("; every point within %gx of the simulator's range.", harness.DefaultTailBound)
	}
	return answer
}

// times formats a factor: one decimal under 10, none from there.
func times(x float64) string {
	if x < 10 {
		return fmt.Sprintf("%.1f", x)
	}
	return fmt.Sprintf("%.0f", x)
}
