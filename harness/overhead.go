package harness

import (
	"math"
	"slices"
	"sort"
)

// RequestTime is one request's latency and service time on one time scale
// (ns): a replayed request, for the overhead-distribution model.
type RequestTime struct {
	LatencyNs, ServiceNs int64
}

// OverheadDist is a server's overhead measured request by request: for
// each request of a calibration run in which requests cannot queue (see
// Sweep.Calibrate), its latency minus its service time. It holds what
// every request pays that the simulator does not model: the network, the
// dispatcher, the wake-ups of the dispatcher, the worker and the client,
// the end of the emulated service running late, and the host's stalls
// that fall into any of them.
type OverheadDist struct {
	// Ns are the overheads, sorted ascending.
	Ns []int64
	// Sent and Lost count the calibration's requests: lost ones are
	// missing from Ns.
	Sent, Lost int64
}

// NewOverheadDist returns the overheads of calibration requests (latency
// minus service time, on the server's time scale).
func NewOverheadDist(reqs []RequestTime) OverheadDist {
	ns := make([]int64, len(reqs))
	for i, r := range reqs {
		ns[i] = r.LatencyNs - r.ServiceNs
	}
	slices.Sort(ns)
	return OverheadDist{Ns: ns}
}

// Quantile returns the q-quantile (0 < q <= 1) of the overheads by the
// nearest-rank definition; 0 when there are none.
func (o *OverheadDist) Quantile(q float64) int64 {
	if len(o.Ns) == 0 {
		return 0
	}
	return o.Ns[rank(q, int64(len(o.Ns)))-1]
}

// rank is the nearest rank of quantile q (0 < q <= 1) among n values:
// ceil(q x n), within 1..n. The small allowance keeps a product that
// floating point puts just above an integer (0.999 x 1000) on it.
func rank(q float64, n int64) int64 {
	k := int64(math.Ceil(q*float64(n) - 1e-9*float64(n)))
	return min(max(k, 1), n)
}

// SumSlowdownQuantile returns the q-quantile (0 < q <= 1, nearest rank) of
// the slowdown (R.LatencyNs + O) / R.ServiceNs over every pair of a request
// R of reqs and an overhead O of o: the slowdown of a request drawn from
// reqs that also pays an independent draw of the overhead, each of the
// len(reqs) x len(o.Ns) pairs counting once. The result is exact (one
// pair's value) and deterministic: the distribution of the sum is counted,
// not sampled. It returns NaN when either side is empty; service times
// below 1 count as 1.
func SumSlowdownQuantile(reqs []RequestTime, o *OverheadDist, q float64) float64 {
	ov := o.Ns
	if len(reqs) == 0 || len(ov) == 0 {
		return math.NaN()
	}
	n := int64(len(reqs)) * int64(len(ov))
	k := rank(q, n)
	svc := func(r RequestTime) float64 { return float64(max(r.ServiceNs, 1)) }
	// count returns how many pairs have a slowdown of at most x.
	count := func(x float64) int64 {
		c := int64(0)
		for _, r := range reqs {
			limit := x*svc(r) - float64(r.LatencyNs)
			c += int64(sort.Search(len(ov), func(j int) bool { return float64(ov[j]) > limit }))
		}
		return c
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, r := range reqs {
		lo = min(lo, float64(r.LatencyNs+ov[0])/svc(r))
		hi = max(hi, float64(r.LatencyNs+ov[len(ov)-1])/svc(r))
	}
	// count(hi) >= k; below lo there is no pair. Bisect until the
	// interval holds the one value sought.
	hi = bisect(lo, hi, func(x float64) bool { return count(x) >= k })
	// The largest pair's value at most hi: the k-th smallest.
	best := math.Inf(-1)
	for _, r := range reqs {
		limit := hi*svc(r) - float64(r.LatencyNs)
		if j := sort.Search(len(ov), func(j int) bool { return float64(ov[j]) > limit }); j > 0 {
			best = max(best, float64(r.LatencyNs+ov[j-1])/svc(r))
		}
	}
	return best
}

// bisect returns the least x in [lo, hi], to the float's precision, at
// which enough(x) holds, enough being false below some x and true from
// it on, and true at hi. The bounds are first widened a little, which
// absorbs the rounding of the products they came from.
func bisect(lo, hi float64, enough func(x float64) bool) float64 {
	lo -= 1e-12*math.Abs(lo) + 1e-300
	hi += 1e-12*math.Abs(hi) + 1e-300
	for range 200 {
		mid := lo + (hi-lo)/2
		if mid <= lo || mid >= hi {
			break
		}
		if enough(mid) {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi
}
