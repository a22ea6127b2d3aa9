package harness

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestSumSlowdownQuantileIsExact compares SumSlowdownQuantile with the
// k-th smallest of every pair's slowdown, enumerated, on random samples
// with ties, heavy tails and mixed service times.
func TestSumSlowdownQuantileIsExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 60 {
		n, m := 1+rng.IntN(300), 1+rng.IntN(300)
		reqs := make([]RequestTime, n)
		for i := range reqs {
			svc := int64(1000)
			if trial%3 == 1 {
				svc = int64(1 + rng.IntN(5000))
			}
			lat := svc + int64(rng.ExpFloat64()*float64(svc))
			if rng.IntN(50) == 0 {
				lat += int64(rng.IntN(100_000))
			}
			if trial%5 == 0 {
				lat = svc + 100*int64(rng.IntN(3)) // ties
			}
			reqs[i] = RequestTime{LatencyNs: lat, ServiceNs: svc}
		}
		cal := make([]RequestTime, m)
		for j := range cal {
			o := int64(200 + rng.IntN(100))
			if rng.IntN(100) < 3 {
				o += int64(rng.IntN(3000)) // host stalls
			}
			if trial%7 == 0 {
				o = -int64(rng.IntN(50)) // clock skew: negative overheads
			}
			cal[j] = RequestTime{LatencyNs: 1000 + o, ServiceNs: 1000}
		}
		od := NewOverheadDist(cal)
		var all []float64
		for _, r := range reqs {
			for _, o := range od.Ns {
				all = append(all, float64(r.LatencyNs+o)/float64(r.ServiceNs))
			}
		}
		slices.Sort(all)
		for _, q := range []float64{0.001, 0.5, 0.9, 0.99, 0.999, 1} {
			want := all[int(math.Ceil(q*float64(len(all))-1e-9*float64(len(all))))-1]
			if got := SumSlowdownQuantile(reqs, &od, q); math.Abs(got-want) > 1e-9*math.Abs(want) {
				t.Fatalf("trial %d (%d x %d pairs) q %v: got %v, want %v", trial, n, m, q, got, want)
			}
		}
	}
	od := NewOverheadDist([]RequestTime{{LatencyNs: 5, ServiceNs: 1}})
	if !math.IsNaN(SumSlowdownQuantile(nil, &od, 0.99)) || !math.IsNaN(SumSlowdownQuantile([]RequestTime{{1, 1}}, &OverheadDist{}, 0.99)) {
		t.Error("an empty side gave a quantile")
	}
	if q := od.Quantile(0.999); q != 4 {
		t.Errorf("overhead quantile %d, want 4", q)
	}
}

// BenchmarkSumSlowdownQuantile is the p99.9 of a full-size point: 5000
// replayed requests against 5000 overheads (25 million pairs).
func BenchmarkSumSlowdownQuantile(b *testing.B) {
	rng := rand.New(rand.NewPCG(3, 4))
	reqs := make([]RequestTime, 5000)
	cal := make([]RequestTime, 5000)
	for i := range reqs {
		reqs[i] = RequestTime{LatencyNs: 1e6 + int64(rng.ExpFloat64()*3e5), ServiceNs: 1e6}
		cal[i] = RequestTime{LatencyNs: 1e6 + 2e5 + int64(rng.ExpFloat64()*1e5), ServiceNs: 1e6}
	}
	od := NewOverheadDist(cal)
	for b.Loop() {
		SumSlowdownQuantile(reqs, &od, 0.999)
	}
}
