package harness

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// randomOverheads returns m overheads around 250ns with a heavy tail.
func randomOverheads(rng *rand.Rand, m int) OverheadDist {
	cal := make([]RequestTime, m)
	for j := range cal {
		o := int64(200 + rng.IntN(100))
		if rng.IntN(100) < 5 {
			o += int64(rng.IntN(5000)) // host stalls
		}
		cal[j] = RequestTime{LatencyNs: 1000 + o, ServiceNs: 1000}
	}
	return NewOverheadDist(cal)
}

// connRequests returns n requests sent round robin on conns connections,
// a tenth of them long, completed in sent order plus their service (no
// queueing: what matters here is the order of replies), the short ones
// after the first tenth measured.
func connRequests(rng *rand.Rand, n, conns int) []ConnRequest {
	reqs := make([]ConnRequest, n)
	last := make([]int, conns)
	for i := range last {
		last[i] = -1
	}
	at := int64(0)
	for i := range reqs {
		at += int64(rng.ExpFloat64() * 300)
		svc, long := int64(1000), rng.IntN(10) == 0
		if long {
			svc = 10_000
		}
		c := i % conns
		reqs[i] = ConnRequest{SentNs: at, DoneNs: at + svc + int64(rng.IntN(200)), ServiceNs: svc, Prev: last[c], Measured: !long && i >= n/10}
		if rng.IntN(100) == 0 {
			reqs[i].DoneNs = -1 // dropped
		}
		last[c] = i
	}
	return reqs
}

// TestConnSlowdownQuantileAlone: with a connection per request the model
// is SumSlowdownQuantile's, and with a zero overhead it is the quantile of
// the replies' order alone.
func TestConnSlowdownQuantileAlone(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for trial := range 20 {
		reqs := connRequests(rng, 1+rng.IntN(400), 1+rng.IntN(8))
		od := randomOverheads(rng, 1+rng.IntN(300))
		alone := slices.Clone(reqs)
		var times []RequestTime
		for i := range alone {
			alone[i].Prev = -1
			if r := alone[i]; r.Measured && r.DoneNs >= 0 {
				times = append(times, RequestTime{LatencyNs: r.DoneNs - r.SentNs, ServiceNs: r.ServiceNs})
			}
		}
		zero := OverheadDist{Ns: []int64{0}}
		// The replies' order alone: each measured request's reply at the
		// latest completion of its connection so far.
		var ordered []float64
		for _, r := range reqs {
			if !r.Measured || r.DoneNs < 0 {
				continue
			}
			latest := r.DoneNs
			for j := r.Prev; j >= 0; j = reqs[j].Prev {
				latest = max(latest, reqs[j].DoneNs)
			}
			ordered = append(ordered, float64(latest-r.SentNs)/float64(r.ServiceNs))
		}
		slices.Sort(ordered)
		for _, q := range []float64{0.01, 0.5, 0.9, 0.99, 0.999, 1} {
			if len(times) == 0 {
				if !math.IsNaN(ConnSlowdownQuantile(reqs, &od, q)) {
					t.Fatalf("trial %d: a quantile without measured requests", trial)
				}
				continue
			}
			want := SumSlowdownQuantile(times, &od, q)
			if got := ConnSlowdownQuantile(alone, &od, q); math.Abs(got-want) > 1e-9*math.Abs(want) {
				t.Fatalf("trial %d q %v, a connection each: %v, SumSlowdownQuantile %v", trial, q, got, want)
			}
			want = ordered[rank(q, int64(len(ordered)))-1]
			if got := ConnSlowdownQuantile(reqs, &zero, q); math.Abs(got-want) > 1e-9*math.Abs(want) {
				t.Fatalf("trial %d q %v, no overhead: %v, replies in order %v", trial, q, got, want)
			}
		}
	}
	if !math.IsNaN(ConnSlowdownQuantile(nil, &OverheadDist{Ns: []int64{1}}, 0.5)) ||
		!math.IsNaN(ConnSlowdownQuantile(connRequests(rng, 10, 2), &OverheadDist{}, 0.5)) {
		t.Error("an empty side gave a quantile")
	}
}

// TestConnSlowdownQuantileSampled compares the model with its definition
// played out: many rounds in which every request draws its own overhead
// and replies leave in order per connection; the pooled slowdowns'
// quantiles match the model's to the sampling's precision.
func TestConnSlowdownQuantileSampled(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	reqs := connRequests(rng, 300, 4)
	od := randomOverheads(rng, 200)
	const rounds = 2000
	var pooled []float64
	reply := make([]int64, len(reqs))
	for range rounds {
		for k, r := range reqs {
			at := int64(math.MinInt64)
			if r.DoneNs >= 0 {
				at = r.DoneNs + od.Ns[rng.IntN(len(od.Ns))]
			}
			if r.Prev >= 0 {
				at = max(at, reply[r.Prev])
			}
			reply[k] = at
			if r.Measured && r.DoneNs >= 0 {
				pooled = append(pooled, float64(at-r.SentNs)/float64(r.ServiceNs))
			}
		}
	}
	slices.Sort(pooled)
	for _, q := range []float64{0.5, 0.9, 0.99, 0.999} {
		got := ConnSlowdownQuantile(reqs, &od, q)
		// The sampled quantile's own spread: the levels a sample of this
		// size puts it between, widened a little.
		lo, hi := QuantileLevels(q, int64(len(pooled)), 0.9999)
		n := float64(len(pooled))
		low, high := pooled[max(int(lo*n)-1, 0)], pooled[min(int(math.Ceil(hi*n)), len(pooled)-1)]
		if got < low*0.999 || got > high*1.001 {
			t.Errorf("q %v: model %.4g, sampled %.4g (%.4g-%.4g)", q, got, pooled[rank(q, int64(n))-1], low, high)
		}
	}
	// The order matters here: the model is far from one that ignores it.
	var times []RequestTime
	for _, r := range reqs {
		if r.Measured && r.DoneNs >= 0 {
			times = append(times, RequestTime{LatencyNs: r.DoneNs - r.SentNs, ServiceNs: r.ServiceNs})
		}
	}
	if a, b := ConnSlowdownQuantile(reqs, &od, 0.9), SumSlowdownQuantile(times, &od, 0.9); a < 2*b {
		t.Errorf("p90 %.3g on connections, %.3g without: the order made no difference", a, b)
	}
}

// BenchmarkConnSlowdownQuantile is the p99.9 of a full-size point over
// TCP: 10000 replayed requests on 20 connections (5000 measured) against
// 5000 overheads.
func BenchmarkConnSlowdownQuantile(b *testing.B) {
	rng := rand.New(rand.NewPCG(3, 4))
	reqs := connRequests(rng, 10000, 20)
	od := randomOverheads(rng, 5000)
	for b.Loop() {
		ConnSlowdownQuantile(reqs, &od, 0.999)
	}
}
