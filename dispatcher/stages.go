package dispatcher

import "math/bits"

// Stage is one part of a request's time in the server. The stages of a
// request follow each other without gaps, so a request's Latency is the sum
// of the others:
//
//	received --receive--> accepted --queueing--> dispatched --handoff-->
//	started --service--> finished --transmit--> sent
type Stage int

// The stages, in the order a request goes through them.
const (
	// StageReceive runs from the packet's arrival (Buffer.RxTime: the
	// kernel's receive timestamp on the UDP dataplane, the poll that
	// returned it on DPDK) until the dispatcher accepted it from the
	// dataplane: the time a request waited for the dispatcher to wake up
	// and read it.
	StageReceive Stage = iota
	// StageQueueing runs from acceptance (classification and enqueue in
	// the policy) until the policy dispatched the request to a worker.
	StageQueueing
	// StageHandoff runs from dispatch until the worker started running the
	// request: the ring transfer and, for a parked worker, its wake-up.
	StageHandoff
	// StageService is the application's run time, measured by the worker.
	StageService
	// StageTransmit runs from the end of the application's run until the
	// dataplane accepted the reply.
	StageTransmit
	// StageLatency is the whole time in the server, from arrival to reply:
	// the sum of the stages above.
	StageLatency
	// NumStages is the number of stages.
	NumStages
)

var stageNames = [NumStages]string{"receive", "queueing", "handoff", "service", "transmit", "latency"}

// String returns the stage's name as used in metrics and status
// ("receive", "queueing", "handoff", "service", "transmit", "latency").
func (s Stage) String() string {
	if s < 0 || s >= NumStages {
		return "stage?"
	}
	return stageNames[s]
}

// Stages lists every stage in order.
func Stages() []Stage {
	s := make([]Stage, NumStages)
	for i := range s {
		s[i] = Stage(i)
	}
	return s
}

// Histogram buckets: ten per decade on the R10 preferred numbers (1, 1.25,
// 1.6, 2, 2.5, 3.15, 4, 5, 6.3, 8: each about 1.26 times the previous one),
// from 100ns to 100s, plus one bucket above. Each bound is a bucket's
// inclusive upper end. The 1-2-5 bounds among them are the ones exported to
// Prometheus (PromBounds).
const (
	bucketsPerDecade = 10
	firstBoundNs     = 100
	decades          = 9 // 100ns .. 100s
	numBounds        = decades*bucketsPerDecade + 1
	// NumBuckets is the number of histogram buckets: one per bound and one
	// for larger values.
	NumBuckets = numBounds + 1
)

var r10 = [bucketsPerDecade]int64{100, 125, 160, 200, 250, 315, 400, 500, 630, 800}

// bucketBounds are the buckets' upper bounds in ns; bucketStart[n] is the
// first bucket that can hold a value of bit length n.
var bucketBounds, bucketStart = makeBounds()

func makeBounds() ([numBounds]int64, [65]uint8) {
	var b [numBounds]int64
	scale := int64(firstBoundNs / r10[0])
	for d := 0; d < decades; d++ {
		for i, v := range r10 {
			b[d*bucketsPerDecade+i] = v * scale
		}
		scale *= 10
	}
	b[numBounds-1] = r10[0] * scale
	var start [65]uint8
	for n := range start {
		// The smallest value of bit length n is 1<<(n-1) (0 for n = 0).
		lo := int64(0)
		if n > 0 && n < 64 {
			lo = 1 << (n - 1)
		} else if n == 64 {
			lo = 1<<63 - 1
		}
		i := 0
		for i < numBounds && b[i] < lo {
			i++
		}
		start[n] = uint8(i)
	}
	return b, start
}

// BucketBound returns bucket i's inclusive upper bound in ns (i <
// NumBuckets-1); the last bucket has no bound.
func BucketBound(i int) int64 { return bucketBounds[i] }

// bucketOf returns the bucket of a duration in ns (negative counts as 0).
func bucketOf(ns int64) int {
	if ns < 0 {
		ns = 0
	}
	i := int(bucketStart[bits.Len64(uint64(ns))])
	for i < numBounds && ns > bucketBounds[i] {
		i++
	}
	return i
}

// Histogram is a distribution of one stage's durations (ns).
type Histogram struct {
	// Buckets[i] counts the durations in (BucketBound(i-1), BucketBound(i)];
	// the last bucket those above the last bound.
	Buckets [NumBuckets]uint64
	// Count is the number of durations (the sum of Buckets), SumNs their
	// sum.
	Count uint64
	SumNs uint64
}

// record adds one duration.
func (h *Histogram) record(ns int64) {
	if ns < 0 {
		ns = 0
	}
	h.Buckets[bucketOf(ns)]++
	h.Count++
	h.SumNs += uint64(ns)
}

// add adds o's counts to h.
func (h *Histogram) add(o *Histogram) {
	for i, v := range o.Buckets {
		h.Buckets[i] += v
	}
	h.Count += o.Count
	h.SumNs += o.SumNs
}

// MeanNs is the mean duration (0 without samples).
func (h *Histogram) MeanNs() float64 {
	if h.Count == 0 {
		return 0
	}
	return float64(h.SumNs) / float64(h.Count)
}

// QuantileNs returns an upper bound of the q-quantile (0 < q <= 1): the upper
// bound of the bucket holding the ceil(q x Count)-th smallest duration,
// at most 26% above it. A quantile in the last, unbounded bucket returns
// -1; without samples it returns 0.
func (h *Histogram) QuantileNs(q float64) int64 {
	if h.Count == 0 {
		return 0
	}
	rank := uint64(q*float64(h.Count) + 0.999999)
	rank = min(max(rank, 1), h.Count)
	var seen uint64
	for i, v := range h.Buckets {
		seen += v
		if seen >= rank {
			if i >= numBounds {
				return -1
			}
			return bucketBounds[i]
		}
	}
	return -1
}

// Cumulative returns the number of durations at or below bound ns, which
// must be one of the buckets' bounds (e.g. a PromBounds value); ok is false
// for any other value.
func (h *Histogram) Cumulative(boundNs int64) (n uint64, ok bool) {
	for i, b := range bucketBounds {
		n += h.Buckets[i]
		if b == boundNs {
			return n, true
		}
		if b > boundNs {
			break
		}
	}
	return 0, false
}

// PromBounds returns the 1-2-5 bucket bounds (ns) from 100ns to 100s that
// Prometheus histograms export: a subset of the buckets' bounds.
func PromBounds() []int64 {
	var out []int64
	for _, b := range bucketBounds {
		m := b
		for m >= 10 && m%10 == 0 {
			m /= 10
		}
		if m == 1 || m == 2 || m == 5 {
			out = append(out, b)
		}
	}
	return out
}

// TypeStages are one request type's stage histograms.
type TypeStages [NumStages]Histogram

// Stages returns each type's stage histograms (index = type id), summed
// over the workers: what the workers published, at most a millisecond
// behind the requests they finished (and never behind once they are idle).
// Types no worker ran are nil. Safe from any goroutine; it allocates and
// reads every worker's histograms, so call it at scrape time, not per
// request.
func (d *Dispatcher) Stages() []*TypeStages {
	out := make([]*TypeStages, d.stageTypes.Load())
	recorders := []*stageRecorder{d.inPlaceStages}
	for _, w := range d.workers {
		recorders = append(recorders, w.stages)
	}
	pending := make([][][2]int, len(recorders))
	for i, r := range recorders {
		pending[i] = r.pendingResets()
	}
	var h TypeStages
	for t := range out {
		ran := false
		for i, r := range recorders {
			if !inRanges(pending[i], t) && r.addTo(t, &h) {
				ran = true
			}
		}
		if ran {
			c := h
			out[t] = &c
			h = TypeStages{}
		}
	}
	return out
}
