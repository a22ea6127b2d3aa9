package harness

import (
	"fmt"
	"math"
	"sort"
	"time"

	"gonum.org/v1/gonum/stat/distuv"

	"github.com/persephone-go/psp/loadgen"
	"github.com/persephone-go/psp/report"
	"github.com/persephone-go/psp/workload"
)

// DefaultTailBound is how far live tail slowdowns may be from the
// simulator's (plus the fixed overhead) for a server to show its policy
// rather than its host: within 1.5x either way.
const DefaultTailBound = 1.5

// TailComparison compares one request type's live tail slowdowns at one
// load point with the simulator's replay of the same requests (see
// Sweep.Simulate) plus what the live server adds to every request that the
// simulator does not model: the network, the dispatcher's and emulation's
// costs, and the host's stalls in any of its wake-ups. It holds that
// expectation under two models of the overhead:
//
//   - A distribution (when the sweep calibrated, Sweep.Calibrate): each
//     request's overhead measured in a calibration run against the same
//     server where requests cannot queue (OverheadDist). The expected
//     latency of a request is its replayed latency plus an independent
//     draw of that overhead, and the expected quantiles are those of the
//     sum, computed exactly (SumSlowdownQuantile). This is the model the
//     check judges by.
//   - A constant, for comparison: the live median latency of the type
//     minus the simulated median at the policy's lowest load (where a
//     median request does not queue), added to every simulated latency:
//     the expected slowdown at a quantile is the simulated one plus
//     overhead / the type's mean service time. A median cannot carry the
//     host's rare millisecond stalls, which a short type's p99.9 shows.
type TailComparison struct {
	Policy string  `json:"policy"`
	Load   float64 `json:"load"`
	Type   string  `json:"type"`
	// Samples is the number of live requests of the type measured; the live
	// p99.9 is the sample's maximum unless P999BelowMax.
	Samples      uint64 `json:"samples"`
	P999BelowMax bool   `json:"p999_below_max"`
	// Answered reports that the server answered the requests sent (at
	// least loadgen.SustainedFraction of them). A sender that fell behind
	// its schedule does not spoil the comparison: the simulator replays the
	// times requests were actually sent.
	Answered bool `json:"answered"`
	// ServiceNs is the type's mean (dilated) service time, OverheadNs the
	// fixed overhead added to the simulated latencies.
	ServiceNs  float64 `json:"service_ns"`
	OverheadNs float64 `json:"overhead_ns"`
	// Slowdowns: live, simulated, expected (simulated + overhead) and the
	// ratios live / expected.
	LiveP99      float64 `json:"live_p99_slowdown"`
	LiveP999     float64 `json:"live_p999_slowdown"`
	SimP99       float64 `json:"sim_p99_slowdown"`
	SimP999      float64 `json:"sim_p999_slowdown"`
	ExpectedP99  float64 `json:"expected_p99_slowdown"`
	ExpectedP999 float64 `json:"expected_p999_slowdown"`
	RatioP99     float64 `json:"ratio_p99"`
	RatioP999    float64 `json:"ratio_p999"`

	// SimPolicy, when set, is the policy the replay ran instead of Policy:
	// a contrast (SweepResult.Contrasts), the check's negative control.
	SimPolicy string `json:"sim_policy,omitempty"`
	// Conns is the number of connections the replay modelled: a run over
	// TCP is replayed with its own (replies in order per connection), 0
	// over UDP and in SweepResult.WithoutConns.
	Conns int `json:"conns,omitempty"`

	// The overhead-distribution model (zero OverheadSamples: not
	// calibrated, and the constant model judges). OverheadSamples
	// overheads were measured (OverheadLost calibration requests went
	// unanswered); their quantiles, in ns, are OverheadP50Ns...
	// OverheadMaxNs. ExpectedDist* are the expected slowdowns (replay plus
	// an independent overhead), RatioDist* the ratios live / expected.
	OverheadSamples  int     `json:"overhead_samples,omitempty"`
	OverheadLost     int64   `json:"overhead_lost,omitempty"`
	OverheadP50Ns    int64   `json:"overhead_p50_ns,omitempty"`
	OverheadP99Ns    int64   `json:"overhead_p99_ns,omitempty"`
	OverheadP999Ns   int64   `json:"overhead_p999_ns,omitempty"`
	OverheadMaxNs    int64   `json:"overhead_max_ns,omitempty"`
	ExpectedDistP99  float64 `json:"expected_dist_p99_slowdown,omitempty"`
	ExpectedDistP999 float64 `json:"expected_dist_p999_slowdown,omitempty"`
	RatioDistP99     float64 `json:"ratio_dist_p99,omitempty"`
	RatioDistP999    float64 `json:"ratio_dist_p999,omitempty"`

	// The sample's precision, under the distribution model: the live p99
	// of Samples requests drawn from the expected distribution falls in
	// ExpectedRangeP99 with probability SampleConfidence (likewise p99.9);
	// Deviation* is how far the live tail lies outside that range (live /
	// the range's top above it, live / its bottom below it, 1 inside).
	// The judgement is on the deviations: a p99.9 of a thousand requests is
	// the second slowest of them, which can read anywhere from the expected
	// distribution's p99.3 to its p99.99, and a ratio of point estimates
	// would blame the server for the sample's size.
	ExpectedRangeP99  [2]float64 `json:"expected_range_p99,omitempty"`
	ExpectedRangeP999 [2]float64 `json:"expected_range_p999,omitempty"`
	DeviationP99      float64    `json:"deviation_p99,omitempty"`
	DeviationP999     float64    `json:"deviation_p999,omitempty"`
}

// SampleConfidence is the probability with which a live tail drawn from
// the expected distribution falls in the comparison's expected range
// (TailComparison.ExpectedRangeP99): 99%, so that a check of a dozen
// tails rarely fails one by chance.
const SampleConfidence = 0.99

// QuantileLevels returns the levels [lo, hi] between which the
// nearest-rank q-quantile of n independent draws from a continuous
// distribution F lies with probability conf: it is the k-th smallest draw
// (k = ceil(q n)), whose level F(X_(k)) is Beta(k, n-k+1) distributed, so
// lo and hi are that Beta's (1-conf)/2 and (1+conf)/2 quantiles. The
// sample's q-quantile is then between F's lo- and hi-quantiles with
// probability conf, whatever F is.
func QuantileLevels(q float64, n int64, conf float64) (lo, hi float64) {
	k := float64(rank(q, n))
	b := distuv.Beta{Alpha: k, Beta: float64(n) - k + 1}
	return b.Quantile((1 - conf) / 2), b.Quantile((1 + conf) / 2)
}

// Distribution reports whether the overhead-distribution model is set (and
// judges the comparison).
func (c *TailComparison) Distribution() bool { return c.OverheadSamples > 0 }

// Ratios returns the ratios of the live tails to the expected ones: the
// distribution model's when it is set, else the constant model's.
func (c *TailComparison) Ratios() (p99, p999 float64) {
	if c.Distribution() {
		return c.RatioDistP99, c.RatioDistP999
	}
	return c.RatioP99, c.RatioP999
}

// Deviations returns what the comparison is judged by: under the
// distribution model, how far the live tails are outside the range a
// sample of their size would show (DeviationP99, DeviationP999); else the
// constant model's ratios.
func (c *TailComparison) Deviations() (p99, p999 float64) {
	if c.Distribution() {
		return c.DeviationP99, c.DeviationP999
	}
	return c.RatioP99, c.RatioP999
}

// Expected returns the expected slowdowns (see Ratios).
func (c *TailComparison) Expected() (p99, p999 float64) {
	if c.Distribution() {
		return c.ExpectedDistP99, c.ExpectedDistP999
	}
	return c.ExpectedP99, c.ExpectedP999
}

// ExpectWithOverhead sets the overhead-distribution model: replay holds
// the replayed requests of the type (latency and service time on the live
// server's scale) and o the server's calibrated overheads. c.Samples
// must be set: the expected ranges are those of a sample of that size.
func (c *TailComparison) ExpectWithOverhead(replay []RequestTime, o *OverheadDist) {
	if len(replay) == 0 {
		return
	}
	c.expect(o, func(q float64) float64 { return SumSlowdownQuantile(replay, o, q) })
}

// ExpectOnConnsWithOverhead is ExpectWithOverhead for a run over TCP:
// replay holds every replayed request with its connection, and each
// request's reply pays its own overhead and then waits for those of its
// connection's earlier requests (ConnSlowdownQuantile).
func (c *TailComparison) ExpectOnConnsWithOverhead(replay []ConnRequest, o *OverheadDist) {
	measured := false
	for _, r := range replay {
		measured = measured || (r.Measured && r.DoneNs >= 0)
	}
	if !measured {
		return
	}
	c.expect(o, func(q float64) float64 { return ConnSlowdownQuantile(replay, o, q) })
}

// expect sets the overhead-distribution model from the expected
// distribution's quantile function.
func (c *TailComparison) expect(o *OverheadDist, quantile func(q float64) float64) {
	if len(o.Ns) == 0 {
		return
	}
	c.OverheadSamples, c.OverheadLost = len(o.Ns), o.Lost
	c.OverheadP50Ns, c.OverheadP99Ns, c.OverheadP999Ns = o.Quantile(0.5), o.Quantile(0.99), o.Quantile(0.999)
	c.OverheadMaxNs = o.Ns[len(o.Ns)-1]
	c.ExpectedDistP99 = quantile(0.99)
	c.ExpectedDistP999 = quantile(0.999)
	c.RatioDistP99 = ratio(c.LiveP99, c.ExpectedDistP99)
	c.RatioDistP999 = ratio(c.LiveP999, c.ExpectedDistP999)
	n := max(int64(c.Samples), 1)
	expectRange := func(q, live float64) (r [2]float64, deviation float64) {
		lo, hi := QuantileLevels(q, n, SampleConfidence)
		r = [2]float64{quantile(lo), quantile(hi)}
		switch {
		case live > r[1]:
			return r, ratio(live, r[1])
		case live < r[0]:
			return r, ratio(live, r[0])
		}
		return r, 1
	}
	c.ExpectedRangeP99, c.DeviationP99 = expectRange(0.99, c.LiveP99)
	c.ExpectedRangeP999, c.DeviationP999 = expectRange(0.999, c.LiveP999)
}

// Within reports whether both judged tails (Deviations) are within bound
// either way (between 1/bound and bound).
func (c *TailComparison) Within(bound float64) bool {
	in := func(r float64) bool { return r >= 1/bound && r <= bound }
	p99, p999 := c.Deviations()
	return in(p99) && in(p999)
}

// Problem explains why c does not make a valid check at bound ("" when it
// does): too few samples for a p99.9 that is not the maximum (live or in
// the calibration), an unsustained run or calibration, or a live tail
// outside the bound (Within): under the distribution model, more than
// bound outside the range a sample of its size would show.
func (c *TailComparison) Problem(bound float64) string {
	const want = "within %gx either way"
	oh := c.OverheadNs
	if c.Distribution() {
		oh = float64(c.OverheadP50Ns)
	}
	p99, p999 := c.Ratios()
	switch {
	case !c.Answered:
		return "requests lost or late"
	case !c.P999BelowMax:
		return fmt.Sprintf("only %d samples: p99.9 is the sample's maximum", c.Samples)
	case c.Distribution() && c.OverheadSamples <= 1000:
		return fmt.Sprintf("only %d overhead samples: the overhead's p99.9 is their maximum", c.OverheadSamples)
	case c.Distribution() && float64(c.OverheadLost) > (1-loadgen.SustainedFraction)*float64(int64(c.OverheadSamples)+c.OverheadLost):
		return fmt.Sprintf("%d calibration requests lost", c.OverheadLost)
	case oh > c.ServiceNs:
		return fmt.Sprintf("fixed overhead %v exceeds the type's service time %v: the server is not keeping up",
			time.Duration(oh).Round(time.Microsecond), time.Duration(c.ServiceNs).Round(time.Microsecond))
	case !c.Within(bound) && c.Distribution():
		return fmt.Sprintf("live p99 %.3g, p99.9 %.3g against %.3g-%.3g and %.3g-%.3g for %d samples (%.2f, %.2f outside), want "+want,
			c.LiveP99, c.LiveP999, c.ExpectedRangeP99[0], c.ExpectedRangeP99[1], c.ExpectedRangeP999[0], c.ExpectedRangeP999[1],
			c.Samples, c.DeviationP99, c.DeviationP999, bound)
	case !c.Within(bound):
		return fmt.Sprintf("live/expected %.2f (p99), %.2f (p99.9), want "+want, p99, p999, bound)
	}
	return ""
}

// ShortestType returns the name of the workload's type with the shortest
// mean service time: the one DARC protects, whose tail shows the policy.
func ShortestType(w *workload.Workload) string {
	best, name := math.Inf(1), ""
	for _, t := range w.Types {
		if m := t.Service.MeanNs(); m < best {
			best, name = m, t.Name
		}
	}
	return name
}

// CompareTails compares type typ's tails in the live points with the
// simulated points of the same policy and load (see TailComparison).
// dilation is the live server's time dilation (simulated times are
// nominal). Live points without a simulated twin are left out; the result
// is in policy then load order.
func CompareTails(live, sim []report.Point, w *workload.Workload, typ string, dilation float64) ([]TailComparison, error) {
	if dilation <= 0 {
		dilation = 1
	}
	mean := -1.0
	for _, t := range w.Types {
		if t.Name == typ {
			mean = t.Service.MeanNs() * dilation
		}
	}
	if mean <= 0 {
		return nil, fmt.Errorf("compare tails: workload %s has no type %q with a positive service time", w.Name, typ)
	}
	type key struct {
		policy string
		load   float64
	}
	sims := map[key]report.Stats{}
	for _, p := range sim {
		if st, ok := p.TypeStat(typ); ok {
			sims[key{p.Policy, round(p.Load)}] = st
		}
	}
	pts := append([]report.Point(nil), live...)
	sort.SliceStable(pts, func(i, j int) bool { return pts[i].Load < pts[j].Load })
	overhead := map[string]float64{}
	var out []TailComparison
	for _, p := range pts {
		lv, ok := p.TypeStat(typ)
		sv, ok2 := sims[key{p.Policy, round(p.Load)}]
		if !ok || !ok2 || lv.Count == 0 || sv.Count == 0 {
			continue
		}
		oh, seen := overhead[p.Policy]
		if !seen { // the policy's lowest load
			oh = max(0, float64(lv.P50Latency)-float64(sv.P50Latency)*dilation)
			overhead[p.Policy] = oh
		}
		c := TailComparison{
			Policy: p.Policy, Load: p.Load, Type: typ,
			Samples:      lv.Count,
			P999BelowMax: lv.Count > 1000 && lv.P999Latency < lv.MaxLatency,
			Answered:     p.AchievedRate >= loadgen.SustainedFraction*p.OfferedRate,
			ServiceNs:    mean,
			OverheadNs:   oh,
			LiveP99:      lv.P99Slowdown,
			LiveP999:     lv.P999Slowdown,
			SimP99:       sv.P99Slowdown,
			SimP999:      sv.P999Slowdown,
			ExpectedP99:  sv.P99Slowdown + oh/mean,
			ExpectedP999: sv.P999Slowdown + oh/mean,
		}
		c.RatioP99 = ratio(c.LiveP99, c.ExpectedP99)
		c.RatioP999 = ratio(c.LiveP999, c.ExpectedP999)
		out = append(out, c)
	}
	sort.SliceStable(out, func(i, j int) bool { return policyRank(live, out[i].Policy) < policyRank(live, out[j].Policy) })
	return out, nil
}

// round makes loads comparable as map keys.
func round(l float64) float64 { return math.Round(l*1e6) / 1e6 }

func ratio(a, b float64) float64 {
	if b <= 0 {
		return math.Inf(1)
	}
	return a / b
}

// policyRank is the position of policy's first point in pts.
func policyRank(pts []report.Point, policy string) int {
	for i, p := range pts {
		if p.Policy == policy {
			return i
		}
	}
	return len(pts)
}
