package tests

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/persephone-go/psp/harness"
	"github.com/persephone-go/psp/internal/connpick"
	pspserver "github.com/persephone-go/psp/server"
)

// fidelitySizes are, by PSP_FIDELITY, the SHORT requests measured per
// point by TestLiveTailsMatchSimulator and TestLiveTCPTailsMatchSimulator:
// "ci" (2 to 5 minutes for the first, under 2 for the second: just over
// 1000 per point, so that the p99.9 is not the sample's maximum) and
// "full" (about 8 minutes). The server's overhead is measured during each
// point on a twin server beside it (harness.Sweep.CalibrateAlongside), so
// that a burst of the host's other work falls in both. A point passes when
// its live tails are within 1.5x either way of the range a sample of its
// size would show (harness.TailComparison.Problem): with 1100 requests
// the p99.9 is their second slowest, anywhere from the expected
// distribution's p99.3 to its p99.99, which the larger size narrows.
var fidelitySizes = map[string]int{
	"ci":   1100,
	"full": 5000,
}

// fidelityRetries is how many times a policy whose points are not all
// within the bound is measured again (new servers and schedule): a burst
// of the host's other work can stall one server's threads more than its
// twin's, which shows in a p99.9 of a thousand requests, and during a
// long burst the other policy's replay plus that overhead comes close to
// the live tail (the contrast fails). A point passes when one attempt's
// measurement of it does; the bound itself never changes.
const fidelityRetries = 3

// TestLiveTailsMatchSimulator checks that a live server shows its policy,
// not its host: with High Bimodal on 14 emulated workers (dilation 1000,
// the demo's setup) at loads 0.5, 0.8 and 0.9, SHORT's live p99 and p99.9
// slowdowns under DARC and c-FCFS are within 1.5x either way of the
// simulator's replay of the same requests plus the server's overhead
// distribution, measured during each point on a twin server, allowing
// for the sample's size (see harness.CompareTails); and, as a negative
// control, far from the other policy's replay of the very same requests.
// It runs only when PSP_FIDELITY is set, alone in its own CI step: other
// tests running beside it would be the host noise it rules out.
func TestLiveTailsMatchSimulator(t *testing.T) {
	samples := fidelitySamples(t)
	fidelityCheck{
		loads: []float64{0.5, 0.8, 0.9},
		sweep: func(out string, loads []float64, seed uint64) *harness.Sweep {
			return demoSweep(t, out, loads, samples, seed)
		},
		firstRun: func(sw *harness.Sweep, res *harness.SweepResult) {
			logTails(t, "contrast: each live point against the other policy's replay of its requests", res.Contrasts)
			if want := len(sw.Policies) * len(sw.Loads); len(res.Contrasts) != want {
				t.Fatalf("%d contrasts, want %d", len(res.Contrasts), want)
			}
		},
		control: func(c harness.TailComparison, res *harness.SweepResult) string {
			return contrastProblem(c, pick(res.Contrasts, c.Policy))
		},
		logControl: func(title string, res *harness.SweepResult) { logTails(t, title+", contrast", res.Contrasts) },
	}.run(t)
}

// tcpConns is the number of connections of TestLiveTCPTailsMatchSimulator:
// psp client's default. Requests go round robin (--conn-pick round-robin;
// the default sends on an idle connection, where the order rarely shows),
// so a connection gets a request every 45 to 90 ms at loads 0.8 to 0.5,
// within a LONG request's 100 ms, and SHORT requests wait for LONG
// replies of their connection.
const tcpConns = 20

// tcpControlLoad is the load at which TestLiveTCPTailsMatchSimulator's
// points must be told from the replay without connections.
const tcpControlLoad = 0.8

// TestLiveTCPTailsMatchSimulator is TestLiveTailsMatchSimulator over TCP,
// reduced: the demo's setup served on tcp:// to a client on tcpConns
// connections, DARC at loads 0.5 and 0.8. SHORT's live p99 and p99.9
// slowdowns are within 1.5x either way of the simulator's replay of the
// same requests on the same connections (a reply leaves after the earlier
// ones of its connection) plus the overhead measured on a twin server;
// and, as a negative control, outside 1.5x of the replay that ignores the
// connections wherever the two replays, the overhead included, differ by
// more than that (at load 0.8 on a quiet host by tens of times: SHORT
// requests wait for the LONG replies ahead of them on their connection;
// at load 0.8 a point where they do not is measured again). It runs with
// PSP_FIDELITY, in the same CI step.
func TestLiveTCPTailsMatchSimulator(t *testing.T) {
	samples := fidelitySamples(t)
	fidelityCheck{
		loads: []float64{0.5, tcpControlLoad},
		sweep: func(out string, loads []float64, seed uint64) *harness.Sweep {
			sw := demoSweep(t, out, loads, samples, seed)
			sw.Policies = []string{"darc"}
			sw.Server.Transport = pspserver.TransportTCP
			sw.Plan.Spec.Conns = tcpConns
			sw.Plan.Spec.ConnPick = connpick.RoundRobin
			return sw
		},
		firstRun: func(sw *harness.Sweep, res *harness.SweepResult) {
			for _, c := range res.Tails {
				if c.Conns != tcpConns {
					t.Fatalf("%s at load %.2g replayed on %d connections, want %d", c.Policy, c.Load, c.Conns, tcpConns)
				}
			}
			logTails(t, "policy contrast (not judged: on in-order connections the policies' SHORT tails are close)", res.Contrasts)
		},
		control: func(c harness.TailComparison, res *harness.SweepResult) string {
			o, ok := find(res.WithoutConns, c)
			if !ok || !o.Distribution() || o.Conns != 0 {
				return "no comparison with the replay without connections"
			}
			// The expected tails, overhead included, are what the live
			// ones are judged against: where the host's overhead swamps
			// what the connections add, a live tail within the bound of
			// one is within it of the other, and the point tells nothing.
			// At load 0.8 the point must tell them apart: one that
			// cannot is measured again.
			if ratio := max(c.ExpectedDistP99/o.ExpectedDistP99, c.ExpectedDistP999/o.ExpectedDistP999); ratio <= harness.DefaultTailBound {
				if c.Load == tcpControlLoad {
					return fmt.Sprintf("the expected tails with and without connections are within %.2fx (the host's overhead swamps what the connections add): the point cannot tell the connections' order", ratio)
				}
				t.Logf("%s at load %.2g: the expected tails with and without connections are within %.2fx: no control", c.Policy, c.Load, ratio)
				return ""
			}
			if o.Within(harness.DefaultTailBound) {
				p99, p999 := o.Ratios()
				return fmt.Sprintf("within %gx of the replay without connections too (ratios %.2f, %.2f): the check cannot tell the connections' order",
					harness.DefaultTailBound, p99, p999)
			}
			return ""
		},
		logControl: func(title string, res *harness.SweepResult) {
			logTails(t, title+", against the replay without connections", res.WithoutConns)
		},
	}.run(t)
}

// fidelitySamples returns the SHORT requests per point PSP_FIDELITY asks
// for, and skips the test when it is not set.
func fidelitySamples(t *testing.T) int {
	samples, ok := fidelitySizes[os.Getenv("PSP_FIDELITY")]
	if !ok {
		t.Skip("set PSP_FIDELITY=ci (about 3 minutes) or PSP_FIDELITY=full (about 8); .ci/run runs it in a step of its own")
	}
	return samples
}

// demoSweep builds psp demo's sweep at loads, measuring about samples
// SHORT requests per point, with the schedule's seed.
func demoSweep(t *testing.T, out string, loads []float64, samples int, seed uint64) *harness.Sweep {
	t.Helper()
	sw, err := harness.Demo(harness.DemoOptions{Out: out, Loads: loads, Samples: samples,
		Seed: seed, Launcher: harness.Exec{Path: pspBinary}})
	if err != nil {
		t.Fatal(err)
	}
	sw.Log = testWriter{t}
	return sw
}

// fidelityCheck runs a sweep and judges each policy's points: a point
// passes when its live tails are within the bound of the replay
// (TailComparison.Problem) and its negative control passes. A policy with
// points that did not pass is measured again, up to fidelityRetries times
// (new servers and schedule); a point passes when one attempt's
// measurement of it does.
type fidelityCheck struct {
	loads []float64
	// sweep builds the sweep at loads into out with the schedule's seed.
	sweep func(out string, loads []float64, seed uint64) *harness.Sweep
	// firstRun, when set, checks the first run as a whole.
	firstRun func(sw *harness.Sweep, res *harness.SweepResult)
	// control is the negative control of the live point c of res: ""
	// when it passes.
	control func(c harness.TailComparison, res *harness.SweepResult) string
	// logControl logs the comparisons the control judges by.
	logControl func(title string, res *harness.SweepResult)
}

func (f fidelityCheck) run(t *testing.T) {
	ctx := context.Background()
	out := t.TempDir()
	run := func(sw *harness.Sweep) *harness.SweepResult {
		t.Helper()
		res, err := sw.Run(ctx)
		if err != nil {
			t.Fatalf("sweep: %v", err)
		}
		return res
	}
	sw := f.sweep(out, f.loads, 1)
	first := run(sw)
	logTails(t, "first run", first.Tails)
	if f.logControl != nil {
		f.logControl("first run", first)
	}
	if f.firstRun != nil {
		f.firstRun(sw, first)
	}
	for _, policy := range sw.Policies {
		res := first
		tails := pick(res.Tails, policy)
		if len(tails) != len(f.loads) {
			t.Fatalf("%s: %d comparisons, want %d", policy, len(tails), len(f.loads))
		}
		passed := map[float64]bool{}
		problems := map[float64]string{}
		for attempt := 1; ; attempt++ {
			for _, c := range tails {
				if !c.Distribution() {
					t.Fatalf("%s at load %.2g: no overhead distribution (the calibration did not run)", c.Policy, c.Load)
				}
				problem := c.Problem(harness.DefaultTailBound)
				if problem == "" {
					problem = f.control(c, res)
				}
				passed[c.Load] = passed[c.Load] || problem == ""
				problems[c.Load] = problem
			}
			var bad []float64
			for _, l := range f.loads {
				if !passed[l] {
					bad = append(bad, l)
				}
			}
			if len(bad) == 0 {
				break
			}
			if attempt > fidelityRetries {
				for _, l := range bad {
					t.Errorf("%s at load %.2g (last of %d attempts): %s", policy, l, attempt, problems[l])
				}
				break
			}
			t.Logf("%s: loads %v outside the bound: measuring again (attempt %d of %d)", policy, bad, attempt+1, fidelityRetries+1)
			again := f.sweep(out, f.loads, 1+uint64(attempt))
			again.Policies = []string{policy}
			res = run(again)
			tails = res.Tails
			logTails(t, fmt.Sprintf("%s, attempt %d", policy, attempt+1), tails)
			if f.logControl != nil {
				f.logControl(fmt.Sprintf("%s, attempt %d", policy, attempt+1), res)
			}
		}
	}
}

// find returns the comparison in tails of c's policy and load.
func find(tails []harness.TailComparison, c harness.TailComparison) (harness.TailComparison, bool) {
	for _, o := range tails {
		if o.Policy == c.Policy && o.Load == c.Load {
			return o, true
		}
	}
	return harness.TailComparison{}, false
}

// contrastProblem is the negative control for the live point c: compared
// with the other policy's replay of its very requests (its contrast, from
// the same attempt), it must be outside the bound either way (DARC's SHORT
// tail is 5 to 50 times below c-FCFS's at these loads), or the check could
// not tell a server showing the wrong policy. "" when it is.
func contrastProblem(c harness.TailComparison, contrasts []harness.TailComparison) string {
	for _, o := range contrasts {
		if o.Load != c.Load {
			continue
		}
		if !o.Distribution() || o.SimPolicy == "" || o.SimPolicy == o.Policy {
			return fmt.Sprintf("contrast against %q without an overhead distribution (%d samples)", o.SimPolicy, o.OverheadSamples)
		}
		if o.Within(harness.DefaultTailBound) {
			p99, p999 := o.Ratios()
			d99, d999 := o.Deviations()
			return fmt.Sprintf("within %gx of %s's replay too (ratios %.2f, %.2f; outside its range by %.2f, %.2f): the check cannot tell the policies apart",
				harness.DefaultTailBound, o.SimPolicy, p99, p999, d99, d999)
		}
		return ""
	}
	return "no contrast"
}

// pick returns the comparisons of one policy.
func pick(tails []harness.TailComparison, policy string) []harness.TailComparison {
	var out []harness.TailComparison
	for _, c := range tails {
		if c.Policy == policy {
			out = append(out, c)
		}
	}
	return out
}

// logTails logs a comparison table with the machine's load average: live
// p99 and p99.9 slowdowns against the expected ones under the overhead
// distribution (dist; range: where a sample of that many requests puts
// the tail, out: how far outside it the live one is) and, for
// comparison, the constant median overhead (const).
func logTails(t *testing.T, title string, tails []harness.TailComparison) {
	t.Helper()
	la, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(la))
	var b strings.Builder
	fmt.Fprintf(&b, "%s (load average %s):\n", title, strings.Join(f[:min(3, len(f))], " "))
	fmt.Fprintf(&b, "  %-6s %-6s %4s %7s %7s %17s | %6s %6s %11s %5s %5s %6s %5s | %6s %6s %11s %5s %5s %6s %5s\n", "policy", "sim", "load", "samples",
		"ovh n", "ovh p50/p99.9", "p99", "dist", "range", "ratio", "out", "const", "ratio", "p99.9", "dist", "range", "ratio", "out", "const", "ratio")
	us := func(ns int64) string { return time.Duration(ns).Round(10 * time.Microsecond).String() }
	span := func(r [2]float64) string { return fmt.Sprintf("%.3g-%.3g", r[0], r[1]) }
	for _, c := range tails {
		simPol := c.SimPolicy
		if simPol == "" {
			simPol = c.Policy
		}
		fmt.Fprintf(&b, "  %-6s %-6s %4.2g %7d %7d %17s | %6.3g %6.3g %11s %5.2f %5.2f %6.3g %5.2f | %6.3g %6.3g %11s %5.2f %5.2f %6.3g %5.2f %s\n",
			c.Policy, simPol, c.Load, c.Samples, c.OverheadSamples, us(c.OverheadP50Ns)+"/"+us(c.OverheadP999Ns),
			c.LiveP99, c.ExpectedDistP99, span(c.ExpectedRangeP99), c.RatioDistP99, c.DeviationP99, c.ExpectedP99, c.RatioP99,
			c.LiveP999, c.ExpectedDistP999, span(c.ExpectedRangeP999), c.RatioDistP999, c.DeviationP999, c.ExpectedP999, c.RatioP999,
			c.Problem(harness.DefaultTailBound))
	}
	t.Log(b.String())
}

// testWriter sends a sweep's progress lines to the test log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
