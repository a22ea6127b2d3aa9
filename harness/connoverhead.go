package harness

import (
	"math"
	"sort"
)

// ConnRequest is one request of a run over TCP replayed in the simulator,
// for the overhead model with connections (ConnSlowdownQuantile): each
// request pays its own overhead before its reply, which then waits for
// the replies of its connection's earlier requests, each late by its own
// overhead. Times are ns on the live server's scale.
type ConnRequest struct {
	// SentNs is when the request was sent; DoneNs when the replay
	// completed it, before any wait for its connection (negative: not
	// served, so it holds up no reply).
	SentNs, DoneNs int64
	ServiceNs      int64
	// Prev is the index of the previous request of its connection, -1
	// for the first.
	Prev int
	// Measured says that the request counts in the distribution (the
	// shortest type, served, after the warm-up).
	Measured bool
}

// ConnSlowdownQuantile returns the q-quantile (0 < q <= 1) of the
// slowdown of a measured request of reqs whose requests each pay an
// independent draw of the overhead o before their reply: request k's
// reply leaves at the latest of DoneNs_j + O_j over k and the earlier
// requests j of its connection, so its latency is at most x service
// times with probability the product over those j of
// P(O <= SentNs_k + x ServiceNs_k - DoneNs_j), and the distribution is
// the mixture of those over the measured requests, each counting once.
// It is computed exactly (to the float's precision) by bisection, not
// sampled. With one request per connection it is SumSlowdownQuantile's.
// It returns NaN when no request is measured or o is empty; service
// times below 1 count as 1.
func ConnSlowdownQuantile(reqs []ConnRequest, o *OverheadDist, q float64) float64 {
	ov := o.Ns
	if len(ov) == 0 {
		return math.NaN()
	}
	oMin, oMax := float64(ov[0]), float64(ov[len(ov)-1])
	// The longest a served request took: an earlier request sent before
	// the reply's earliest time less it and the overhead's spread cannot
	// hold the reply up.
	longest := int64(0)
	for _, r := range reqs {
		if r.DoneNs >= 0 {
			longest = max(longest, r.DoneNs-r.SentNs)
		}
	}
	// For each measured request: its send, service and the completions
	// its reply may wait for (its own first), flattened.
	type measured struct {
		sent, svc  float64
		start, end int // in done
	}
	var ms []measured
	var done []float64
	for k, r := range reqs {
		if !r.Measured || r.DoneNs < 0 {
			continue
		}
		m := measured{sent: float64(r.SentNs), svc: float64(max(r.ServiceNs, 1)), start: len(done)}
		done = append(done, float64(r.DoneNs))
		earliest := float64(r.DoneNs) + oMin - oMax // the reply's earliest, less the most a predecessor may add
		for j := reqs[k].Prev; j >= 0 && float64(reqs[j].SentNs+longest) > earliest; j = reqs[j].Prev {
			if reqs[j].DoneNs >= 0 && float64(reqs[j].DoneNs) > earliest {
				done = append(done, float64(reqs[j].DoneNs))
			}
		}
		m.end = len(done)
		ms = append(ms, m)
	}
	if len(ms) == 0 {
		return math.NaN()
	}
	m := float64(len(ov))
	// cdf is the overheads' distribution function: the share of them at
	// most t.
	cdf := func(t float64) float64 {
		return float64(sort.Search(len(ov), func(j int) bool { return float64(ov[j]) > t })) / m
	}
	// share returns the mixture's distribution function at slowdown x,
	// times the number of measured requests.
	share := func(x float64) float64 {
		s := 0.0
		for _, r := range ms {
			p := 1.0
			at := r.sent + x*r.svc
			for _, d := range done[r.start:r.end] {
				if p *= cdf(at - d); p == 0 {
					break
				}
			}
			s += p
		}
		return s
	}
	want := q * float64(len(ms))
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, r := range ms {
		lo = min(lo, (done[r.start]+oMin-r.sent)/r.svc)
		latest := done[r.start]
		for _, d := range done[r.start:r.end] {
			latest = max(latest, d)
		}
		hi = max(hi, (latest+oMax-r.sent)/r.svc)
	}
	// share(hi) >= want (every reply has left by hi); below lo none has.
	return bisect(lo, hi, func(x float64) bool { return share(x) >= want*(1-1e-12) })
}
