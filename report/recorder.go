package report

import (
	"math"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

// Histogram ranges: latencies from 1 ns to 1000 s, slowdowns in thousandths
// from 0.001 to 1e9, both to 3 significant digits (0.1% resolution).
// Samples outside are clamped into range but counted: means and maxima stay
// exact, and quantiles falling on clamped samples report the exact maximum.
const (
	maxLatencyNs   = 1000 * 1e9
	slowdownScale  = 1000
	maxSlowdownMil = 1e9 * slowdownScale
	sigFigs        = 3
)

// series accumulates one type's (or all requests') samples.
type series struct {
	latency, slowdown *hdrhistogram.Histogram
	count, dropped    uint64
	expired, lost     uint64
	// overLatency and overSlowdown count the samples above the histograms'
	// ranges, recorded as the range's top.
	overLatency, overSlowdown uint64
	sumLatency, sumSlo        float64
	maxLatency                int64
	maxSlowdown               float64
}

func newSeries() *series {
	return &series{
		latency:  hdrhistogram.New(1, maxLatencyNs, sigFigs),
		slowdown: hdrhistogram.New(1, maxSlowdownMil, sigFigs),
	}
}

func clamp(v, lo, hi int64) int64 {
	if v < lo {
		return lo
	}
	if v > hi {
		return hi
	}
	return v
}

func (s *series) record(latencyNs, serverNs, serviceNs int64) {
	if serviceNs < 1 {
		serviceNs = 1
	}
	if latencyNs < 0 {
		latencyNs = 0
	}
	slow := float64(max(serverNs, 0)) / float64(serviceNs)
	s.count++
	s.sumLatency += float64(latencyNs)
	s.sumSlo += slow
	s.maxLatency = max(s.maxLatency, latencyNs)
	s.maxSlowdown = max(s.maxSlowdown, slow)
	// Values are clamped into range, so RecordValue cannot fail; those
	// above it are counted so that stats reports their quantiles as the
	// exact maximum rather than the range's top.
	if latencyNs > maxLatencyNs {
		s.overLatency++
	}
	sloMil := slow * slowdownScale
	if sloMil > maxSlowdownMil {
		s.overSlowdown++
		sloMil = maxSlowdownMil
	}
	_ = s.latency.RecordValue(clamp(latencyNs, 1, maxLatencyNs))
	_ = s.slowdown.RecordValue(clamp(int64(sloMil+0.5), 1, maxSlowdownMil))
}

func (s *series) stats() Stats {
	st := Stats{Count: s.count, Dropped: s.dropped, Expired: s.expired, Lost: s.lost, MaxLatency: s.maxLatency}
	if s.count == 0 {
		return st
	}
	n := float64(s.count)
	st.MeanLatency = s.sumLatency / n
	st.MeanSlowdown = s.sumSlo / n
	// HdrHistogram reports the highest value equivalent to the quantile's
	// bucket; capping by the exact maximum keeps e.g. a fixed 100us from
	// showing as 100.03us.
	// A quantile in the top bucket may be one of the samples clamped to
	// the range's top: the exact maximum bounds it from above.
	lat := func(q float64) int64 {
		v := valueAtQuantile(s.latency, q)
		if s.overLatency > 0 && v >= maxLatencyNs {
			return s.maxLatency
		}
		return min(v, s.maxLatency)
	}
	slo := func(q float64) float64 {
		v := valueAtQuantile(s.slowdown, q)
		if s.overSlowdown > 0 && v >= maxSlowdownMil {
			return s.maxSlowdown
		}
		return min(float64(v)/slowdownScale, s.maxSlowdown)
	}
	st.P50Latency, st.P99Latency, st.P999Latency = lat(50), lat(99), lat(99.9)
	st.P50Slowdown, st.P99Slowdown, st.P999Slowdown = slo(50), slo(99), slo(99.9)
	return st
}

// valueAtQuantile returns the value at percentile q (0..100] of h by the
// nearest-rank definition: the smallest recorded value (to h's precision)
// at or below which at least q% of the samples lie, i.e. the
// ceil(q/100 × n)-th smallest. HdrHistogram's ValueAtQuantile rounds the
// rank to nearest instead, which on small samples reports a lower rank
// (e.g. the second largest of 600 samples as p99.9): this passes it the
// percentile whose rounded rank is the nearest rank.
func valueAtQuantile(h *hdrhistogram.Histogram, q float64) int64 {
	n := h.TotalCount()
	if n == 0 {
		return 0
	}
	// The small tolerance keeps 99.9% of 1000 at rank 999 despite
	// floating-point error (0.999 × 1000 = 999.0000000000001).
	rank := min(max(math.Ceil(q/100*float64(n)-1e-9), 1), float64(n))
	// HdrHistogram takes int(p/100 × n + 0.5): aim a quarter above rank.
	return h.ValueAtQuantile(100 * (rank - 0.25) / float64(n))
}

func (s *series) merge(o *series) {
	s.latency.Merge(o.latency)
	s.slowdown.Merge(o.slowdown)
	s.count += o.count
	s.dropped += o.dropped
	s.expired += o.expired
	s.lost += o.lost
	s.overLatency += o.overLatency
	s.overSlowdown += o.overSlowdown
	s.sumLatency += o.sumLatency
	s.sumSlo += o.sumSlo
	s.maxLatency = max(s.maxLatency, o.maxLatency)
	s.maxSlowdown = max(s.maxSlowdown, o.maxSlowdown)
}

func (s *series) reset() {
	s.latency.Reset()
	s.slowdown.Reset()
	*s = series{latency: s.latency, slowdown: s.slowdown}
}

// Recorder collects per-type latency and slowdown samples (HdrHistogram, 3
// significant digits; means are exact). Statistics over all requests are
// merged from the types' when the point is filled. Recording allocates
// nothing. It is not safe for concurrent use.
type Recorder struct {
	names []string
	ids   []uint32
	types []*series
}

// NewRecorder returns a recorder for the given types (names and wire ids,
// same length; ids may be nil).
func NewRecorder(names []string, ids []uint32) *Recorder {
	r := &Recorder{names: names, ids: ids}
	for range names {
		r.types = append(r.types, newSeries())
	}
	return r
}

// Record adds one completed request of type index typ: its latency and
// its slowdown, latency over service time.
func (r *Recorder) Record(typ int, latencyNs, serviceNs int64) {
	r.types[typ].record(latencyNs, latencyNs, serviceNs)
}

// RecordEndToEnd adds one completed request of type index typ that spent
// serverNs in the server and networkNs on the network: its latency is the
// sum, its slowdown serverNs over its service time (the paper's slowdown
// counts the time in the server only).
func (r *Recorder) RecordEndToEnd(typ int, serverNs, networkNs, serviceNs int64) {
	r.types[typ].record(serverNs+networkNs, serverNs, serviceNs)
}

// Drop counts one request of type index typ dropped by the server.
func (r *Recorder) Drop(typ int) { r.types[typ].dropped++ }

// Expire counts a request of type typ dropped because it waited past its
// deadline (a drop: it counts in Dropped too).
func (r *Recorder) Expire(typ int) {
	r.types[typ].dropped++
	r.types[typ].expired++
}

// Lose counts one request of type index typ that got no reply.
func (r *Recorder) Lose(typ int) { r.types[typ].lost++ }

// Count is the number of requests recorded so far.
func (r *Recorder) Count() uint64 {
	n := uint64(0)
	for _, s := range r.types {
		n += s.count
	}
	return n
}

// Reset forgets every sample, keeping the histograms' memory.
func (r *Recorder) Reset() {
	for _, s := range r.types {
		s.reset()
	}
}

// Merge adds o's samples to r. Both must have the same types.
func (r *Recorder) Merge(o *Recorder) {
	for i := range r.types {
		r.types[i].merge(o.types[i])
	}
}

// Fill sets p.Overall and p.Types from the recorded samples.
func (r *Recorder) Fill(p *Point) {
	overall := newSeries()
	p.Types = make([]TypeStats, len(r.types))
	for i, s := range r.types {
		overall.merge(s)
		p.Types[i] = TypeStats{Name: r.names[i], Stats: s.stats()}
		if i < len(r.ids) {
			p.Types[i].ID = r.ids[i]
		}
	}
	p.Overall = overall.stats()
}
