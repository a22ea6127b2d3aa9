package harness

import (
	"context"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/persephone-go/psp/loadgen"
	"github.com/persephone-go/psp/report"
	"github.com/persephone-go/psp/workload"
)

func point(source, policy string, load float64, short report.Stats) report.Point {
	return report.Point{Source: source, Policy: policy, Load: load, Sustained: true, OfferedRate: 100, AchievedRate: 100,
		Types: []report.TypeStats{{Name: "SHORT", ID: 1, Stats: short}, {Name: "LONG", ID: 2, Stats: report.Stats{Count: 10}}}}
}

func TestCompareTailsAddsTheMeasuredOverhead(t *testing.T) {
	w, _ := workload.Builtin("high-bimodal")
	const dilation = 1000 // SHORT: 1ms
	ms := int64(time.Millisecond)
	live := []report.Point{
		// Out of order on purpose: the lowest load sets the overhead.
		point("measured", "darc", 0.8, report.Stats{Count: 3000, P50Latency: ms + 300e3, P99Latency: 3 * ms, P999Latency: 4 * ms, MaxLatency: 9 * ms, P99Slowdown: 3, P999Slowdown: 4}),
		point("measured", "darc", 0.5, report.Stats{Count: 3000, P50Latency: ms + 200e3, P99Latency: 2 * ms, P999Latency: 3 * ms, MaxLatency: 3 * ms, P99Slowdown: 2, P999Slowdown: 3}),
		point("measured", "cfcfs", 0.5, report.Stats{Count: 900, P50Latency: ms + 100e3, P999Latency: 50 * ms, MaxLatency: 60 * ms, P99Slowdown: 40, P999Slowdown: 50}),
		point("measured", "fp", 0.5, report.Stats{Count: 10}), // no simulated twin
	}
	simulated := []report.Point{
		point("sim", "darc", 0.5, report.Stats{Count: 1e5, P50Latency: 1000, P99Slowdown: 1.8, P999Slowdown: 2.2}),
		point("sim", "darc", 0.8, report.Stats{Count: 1e5, P50Latency: 1000, P99Slowdown: 2, P999Slowdown: 2.5}),
		point("sim", "cfcfs", 0.5, report.Stats{Count: 1e5, P50Latency: 1000, P99Slowdown: 40, P999Slowdown: 100}),
	}
	got, err := CompareTails(live, simulated, &w, "SHORT", dilation)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 {
		t.Fatalf("%d comparisons, want 3 (darc 0.5, 0.8, cfcfs 0.5): %+v", len(got), got)
	}
	d5, d8, c5 := got[0], got[1], got[2]
	if d5.Policy != "darc" || d5.Load != 0.5 || d8.Load != 0.8 || c5.Policy != "cfcfs" {
		t.Fatalf("order %s %v, %s %v, %s %v", d5.Policy, d5.Load, d8.Policy, d8.Load, c5.Policy, c5.Load)
	}
	// darc's overhead: live p50 1.2ms - simulated 1µs x 1000 = 200µs,
	// i.e. 0.2 of SHORT's 1ms, at every load.
	if d5.OverheadNs != 200e3 || d8.OverheadNs != 200e3 || d8.ServiceNs != 1e6 {
		t.Errorf("overheads %v %v, service %v; want 200µs and 1ms", d5.OverheadNs, d8.OverheadNs, d8.ServiceNs)
	}
	if math.Abs(d8.ExpectedP999-2.7) > 1e-9 || math.Abs(d8.RatioP999-4/2.7) > 1e-9 || math.Abs(d8.RatioP99-3/2.2) > 1e-9 {
		t.Errorf("darc 0.8: expected p99.9 %v ratios %v %v", d8.ExpectedP999, d8.RatioP99, d8.RatioP999)
	}
	if !d8.Within(1.5) || d8.Problem(1.5) != "" {
		t.Errorf("darc 0.8 (ratios %.2f, %.2f) not within 1.5: %s", d8.RatioP99, d8.RatioP999, d8.Problem(1.5))
	}
	if d5.P999BelowMax || d5.Problem(1.5) == "" {
		t.Errorf("darc 0.5: a p99.9 equal to the maximum passed")
	}
	// cfcfs: live far better than the simulator is no more faithful than
	// far worse; and 900 samples are too few.
	if c5.Within(1.5) || c5.P999BelowMax {
		t.Errorf("cfcfs 0.5: ratio %.2f passed, or 900 samples make a p99.9 below the maximum", c5.RatioP999)
	}
	if _, err := CompareTails(live, simulated, &w, "NOPE", dilation); err == nil {
		t.Error("an unknown type was accepted")
	}
}

func TestDurationForSamples(t *testing.T) {
	w, _ := workload.Builtin("high-bimodal")
	p := Plan{Workload: w, Workers: 14, Load: 0.5, Spec: loadgen.Spec{Dilation: 1000}}
	// 0.5 x 14 / 50.5ms = 138.6 req/s, half SHORT; 10% warm-up.
	want := 1000 / (p.OfferedRate() * 0.5) / 0.9
	got := p.DurationFor(1000, "SHORT").Seconds()
	if got < want || got > want+0.1 {
		t.Errorf("DurationFor(1000, SHORT) = %vs, want %.2fs rounded up to 0.1s", got, want)
	}
	if d := p.DurationFor(1000, "NOPE"); d != p.Duration {
		t.Errorf("unknown type: %v, want the plan's duration", d)
	}
}

// TestReplayIsWhatWasSent checks that a sweep's replay simulates the very
// requests the load generator sent, at the times it sent them: against a
// server that never answers, every sent request is in the replay.
func TestReplayIsWhatWasSent(t *testing.T) {
	w, _ := workload.Builtin("high-bimodal")
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	p := Plan{Workload: w, Workers: 14, Load: 0.8, Duration: 300 * time.Millisecond, Seed: 7,
		Spec: loadgen.Spec{Dilation: 1000, Server: c.LocalAddr().String(), Warmup: -1, Grace: time.Millisecond}}
	res, err := p.Run(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	sw := Sweep{Plan: p}
	r, err := sw.replay(context.Background(), &p, res, "cfcfs", res.Conns)
	if err != nil {
		t.Fatal(err)
	}
	rp := r.point
	n := map[int]uint64{}
	sched := res.Schedule()
	for i := range int(res.Sent) {
		if _, ok := res.SentAt(i); ok {
			n[int(sched.Requests[i].Type)]++
		}
	}
	for i, name := range w.TypeNames() {
		st, _ := rp.TypeStat(name)
		if st.Count != n[i] || n[i] == 0 {
			t.Errorf("%s: replay has %d requests, the load generator sent %d", name, st.Count, n[i])
		}
	}
	if rp.Source != ReplaySource || rp.Load != 0.8 || r.simPolicy != "cfcfs" {
		t.Errorf("replay labelled %q at load %v under %s", rp.Source, rp.Load, r.simPolicy)
	}
	// The shortest type's replayed requests, on the live (dilated) scale:
	// as many as the replay's statistics count, none faster than its
	// service time.
	if st, _ := rp.TypeStat("SHORT"); uint64(len(r.times)) != st.Count {
		t.Errorf("%d SHORT request times, the replay counts %d", len(r.times), st.Count)
	}
	for _, q := range r.times {
		if q.ServiceNs != 1e6 || q.LatencyNs < q.ServiceNs {
			t.Fatalf("replayed SHORT request %+v: want 1ms of service, no less latency", q)
		}
	}
}

// TestReplayOverTCPKeepsTheConnections checks that a run over TCP is
// replayed on its connections: each request on the one it was sent on,
// replies in order per connection, which holds SHORT requests behind LONG
// ones of their connection; a replay without them is faster.
func TestReplayOverTCPKeepsTheConnections(t *testing.T) {
	w, _ := workload.Builtin("high-bimodal")
	// A server that reads every request and never answers.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for c, err := ln.Accept(); err == nil; c, err = ln.Accept() {
			go func() { _, _ = io.Copy(io.Discard, c); c.Close() }()
		}
	}()
	p := Plan{Workload: w, Workers: 14, Load: 0.8, Duration: 300 * time.Millisecond, Seed: 7,
		Spec: loadgen.Spec{Dilation: 1000, Server: loadgen.TCPScheme + ln.Addr().String(), Conns: 10, Warmup: -1, Grace: time.Millisecond}}
	res, err := p.Run(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	if res.Conns != 10 {
		t.Fatalf("the run reports %d connections, want 10", res.Conns)
	}
	sw := Sweep{Plan: p}
	ordered, err := sw.replay(context.Background(), &p, res, "darc", res.Conns)
	if err != nil {
		t.Fatal(err)
	}
	alone, err := sw.replay(context.Background(), &p, res, "darc", 0)
	if err != nil {
		t.Fatal(err)
	}
	if ordered.conns != 10 || alone.conns != 0 || len(ordered.times) != len(alone.times) || len(alone.times) == 0 {
		t.Fatalf("replays on %d and %d connections with %d and %d SHORT requests", ordered.conns, alone.conns, len(ordered.times), len(alone.times))
	}
	for k, r := range ordered.onConns {
		// Every request was sent: k is its id.
		if r.Prev >= 0 && res.Conn(r.Prev) != res.Conn(k) {
			t.Fatalf("request %d, sent on connection %d, replayed after request %d of connection %d", k, res.Conn(k), r.Prev, res.Conn(r.Prev))
		}
	}
	later := 0
	for i := range ordered.times {
		o, a := ordered.times[i].LatencyNs, alone.times[i].LatencyNs
		if o < a {
			t.Fatalf("SHORT request %d: %dns on its connection, %dns alone", i, o, a)
		}
		if o > a+int64(time.Millisecond) {
			later++
		}
	}
	// 10 connections at 222 requests/s, none answered, so each request
	// goes on the connection with the fewest in flight: a connection's
	// next request comes 45 ms after its last, within a LONG request's
	// 100 ms.
	if later < len(ordered.times)/10 {
		t.Errorf("%d of %d SHORT requests held up by their connection, want many", later, len(ordered.times))
	}
	so, _ := ordered.point.TypeStat("SHORT")
	sa, _ := alone.point.TypeStat("SHORT")
	if so.P99Slowdown < 3*sa.P99Slowdown {
		t.Errorf("SHORT p99 slowdown %.3g on the connections, %.3g without them", so.P99Slowdown, sa.P99Slowdown)
	}
}

// TestQuantileLevelsCoverSamples checks the sample-size range against
// samples: the p99 and p99.9 of n uniform draws fall between the levels
// QuantileLevels gives in about SampleConfidence of the trials, and the
// range narrows as n grows.
func TestQuantileLevelsCoverSamples(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, tc := range []struct {
		q float64
		n int64
	}{{0.99, 1077}, {0.999, 1077}, {0.999, 5000}} {
		lo, hi := QuantileLevels(tc.q, tc.n, SampleConfidence)
		if !(lo < tc.q && tc.q < hi && hi < 1) {
			t.Fatalf("q %v, n %d: levels %v-%v do not surround q", tc.q, tc.n, lo, hi)
		}
		const trials = 3000
		in := 0
		xs := make([]float64, tc.n)
		for range trials {
			for i := range xs {
				xs[i] = rng.Float64()
			}
			slices.Sort(xs)
			if x := xs[rank(tc.q, tc.n)-1]; x >= lo && x <= hi {
				in++
			}
		}
		// 99% of 3000: 2970, binomial sd 5.4.
		if in < 2940 {
			t.Errorf("q %v, n %d: the sample quantile fell in %v-%v in %d of %d trials, want about %.0f",
				tc.q, tc.n, lo, hi, in, trials, SampleConfidence*trials)
		}
	}
	lo1, hi1 := QuantileLevels(0.999, 1077, SampleConfidence)
	lo5, hi5 := QuantileLevels(0.999, 5000, SampleConfidence)
	if !(lo5 > lo1 && hi5 < hi1) {
		t.Errorf("p99.9 levels with 5000 samples %v-%v not inside those with 1077 %v-%v", lo5, hi5, lo1, hi1)
	}
}

// TestExpectWithOverheadJudgesTheSampleRange checks that the distribution
// model judges how far a live tail lies outside the range a sample of its
// size would show, not the ratio of point estimates.
func TestExpectWithOverheadJudgesTheSampleRange(t *testing.T) {
	const svc = int64(time.Millisecond)
	replay := make([]RequestTime, 1000)
	for i := range replay {
		replay[i] = RequestTime{LatencyNs: svc, ServiceNs: svc}
	}
	// Overheads with a heavy tail: 0.2% of them 9 ms, the rest 100 µs.
	reqs := make([]RequestTime, 2000)
	for i := range reqs {
		oh := int64(100e3)
		if i%500 == 0 {
			oh = 9 * svc
		}
		reqs[i] = RequestTime{LatencyNs: svc + oh, ServiceNs: svc}
	}
	o := NewOverheadDist(reqs)
	judge := func(samples uint64, p99, p999 float64) TailComparison {
		c := TailComparison{Samples: samples, LiveP99: p99, LiveP999: p999, P999BelowMax: true, Answered: true, ServiceNs: float64(svc)}
		c.ExpectWithOverhead(replay, &o)
		return c
	}
	// The expected p99.9 is 10 (a 9 ms overhead); the expected p99 is
	// 1.1, and a sample of 1100 puts its p99 at 1.1 too (under 0.4% of
	// its draws are 9 ms).
	c := judge(1100, 1.1, 1.2)
	if math.Abs(c.ExpectedDistP999-10) > 1e-9 || c.RatioDistP999 > 0.2 {
		t.Fatalf("expected p99.9 %v, ratio %v; want 10 and 0.12", c.ExpectedDistP999, c.RatioDistP999)
	}
	// A live p99.9 of 1.2 is a tenth of the expected one, but 1100
	// requests hold two 9 ms draws only on average: the second
	// slowest of them is 1.1 often enough, so it is within the range.
	if c.ExpectedRangeP999[0] > 1.2 || c.ExpectedRangeP999[1] < 10 || c.DeviationP999 != 1 || c.Problem(1.5) != "" {
		t.Errorf("p99.9 range %v, deviation %v: %s", c.ExpectedRangeP999, c.DeviationP999, c.Problem(1.5))
	}
	// With 50,000 samples the p99.9 is pinned at 10: 1.2 is far under.
	c = judge(50000, 1.1, 1.2)
	if c.ExpectedRangeP999[0] != 10 || c.DeviationP999 > 0.2 || c.Within(1.5) || c.Problem(1.5) == "" {
		t.Errorf("50000 samples: p99.9 range %v, deviation %v passed", c.ExpectedRangeP999, c.DeviationP999)
	}
	// Above the range: a p99 of 3 where no sample's p99 exceeds 1.1.
	c = judge(1100, 3, 10)
	if c.ExpectedRangeP99[1] != 1.1 || math.Abs(c.DeviationP99-3/1.1) > 1e-9 || c.Within(1.5) || c.Problem(1.5) == "" {
		t.Errorf("p99 3 against %v: deviation %v passed", c.ExpectedRangeP99, c.DeviationP99)
	}
}
