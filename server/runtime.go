package server

import (
	"math"
	"runtime"
	"runtime/metrics"
)

// schedLatencies is the runtime metric of goroutine scheduling latency.
const schedLatencies = "/sched/latencies:seconds"

// runtimeStatus reads the Go runtime's GOMAXPROCS and scheduling latency.
func runtimeStatus() RuntimeStatus {
	rs := RuntimeStatus{GOMAXPROCS: runtime.GOMAXPROCS(0)}
	sample := []metrics.Sample{{Name: schedLatencies}}
	metrics.Read(sample)
	if sample[0].Value.Kind() == metrics.KindFloat64Histogram {
		rs.SchedLatency = summarizeRuntimeHistogram(sample[0].Value.Float64Histogram())
	}
	return rs
}

// summarizeRuntimeHistogram summarizes a runtime/metrics histogram of
// seconds: quantiles are the upper bounds of their buckets, the mean takes
// each bucket's middle (its finite bound for the open-ended ones).
func summarizeRuntimeHistogram(h *metrics.Float64Histogram) LatencySummary {
	var s LatencySummary
	for _, c := range h.Counts {
		s.Count += c
	}
	if s.Count == 0 {
		return s
	}
	sum := 0.0
	for i, c := range h.Counts {
		lo, hi := h.Buckets[i], h.Buckets[i+1]
		switch {
		case math.IsInf(lo, -1):
			lo = hi
		case math.IsInf(hi, 1):
			hi = lo
		}
		sum += float64(c) * (lo + hi) / 2
	}
	s.MeanNs = sum / float64(s.Count) * 1e9
	quantile := func(q float64) int64 {
		rank := uint64(math.Ceil(q * float64(s.Count)))
		var seen uint64
		for i, c := range h.Counts {
			seen += c
			if seen >= max(rank, 1) {
				hi := h.Buckets[i+1]
				if math.IsInf(hi, 1) {
					return -1
				}
				return int64(hi * 1e9)
			}
		}
		return -1
	}
	s.P50Ns, s.P99Ns, s.P999Ns = quantile(0.5), quantile(0.99), quantile(0.999)
	return s
}
