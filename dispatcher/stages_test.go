package dispatcher

import (
	"math/rand/v2"
	"sort"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestBucketOfMatchesBounds(t *testing.T) {
	// Every value lands in the first bucket whose bound is >= the value,
	// checked against a linear search over values around every bound and
	// random ones over the whole range.
	linear := func(v int64) int {
		for i, b := range bucketBounds {
			if v <= b {
				return i
			}
		}
		return NumBuckets - 1
	}
	var vals []int64
	for _, b := range bucketBounds {
		vals = append(vals, b-1, b, b+1)
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 100000 {
		vals = append(vals, int64(r.Uint64()>>uint(r.IntN(64))))
	}
	vals = append(vals, -5, 0, 1, 1<<62, 1<<63-1)
	for _, v := range vals {
		want := linear(max(v, 0))
		if got := bucketOf(v); got != want {
			t.Fatalf("bucketOf(%d) = %d, want %d", v, got, want)
		}
	}
	if bucketBounds[0] != 100 || bucketBounds[numBounds-1] != 100e9 {
		t.Errorf("bounds run from %d to %d ns, want 100ns to 100s", bucketBounds[0], bucketBounds[numBounds-1])
	}
	for i := 1; i < numBounds; i++ {
		if r := float64(bucketBounds[i]) / float64(bucketBounds[i-1]); r < 1.2 || r > 1.3 {
			t.Errorf("bound %d/%d ratio %.3f, want about 1.26", bucketBounds[i], bucketBounds[i-1], r)
		}
	}
}

func TestHistogramQuantilesBoundTheExactOnes(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	var h Histogram
	var vals []int64
	for range 20000 {
		v := int64(r.ExpFloat64() * 1e6) // mean 1ms
		vals = append(vals, v)
		h.record(v)
	}
	sort.Slice(vals, func(i, j int) bool { return vals[i] < vals[j] })
	for _, q := range []float64{0.5, 0.9, 0.99, 0.999, 1} {
		exact := vals[int(q*float64(len(vals))+0.999999)-1]
		got := h.QuantileNs(q)
		if got < exact || float64(got) > 1.27*float64(max(exact, 100)) {
			t.Errorf("p%g = %d, want in [%d, 1.27 x %d]", q*100, got, exact, exact)
		}
	}
	var sum uint64
	for _, v := range vals {
		sum += uint64(v)
	}
	if h.Count != uint64(len(vals)) || h.SumNs != sum {
		t.Errorf("count %d sum %d, want %d %d", h.Count, h.SumNs, len(vals), sum)
	}
	var empty Histogram
	if empty.QuantileNs(0.99) != 0 || empty.MeanNs() != 0 {
		t.Errorf("empty histogram: quantile %d mean %v, want 0", empty.QuantileNs(0.99), empty.MeanNs())
	}
	var huge Histogram
	huge.record(1 << 62)
	if huge.QuantileNs(0.5) != -1 {
		t.Errorf("a quantile above the last bound = %d, want -1", huge.QuantileNs(0.5))
	}
}

func TestPromBoundsAreCumulativeBuckets(t *testing.T) {
	pb := PromBounds()
	want := []int64{100, 200, 500, 1e3}
	for i, w := range want {
		if pb[i] != w {
			t.Fatalf("PromBounds()[:4] = %v, want %v", pb[:4], want)
		}
	}
	if len(pb) != 3*decades+1 || pb[len(pb)-1] != 100e9 {
		t.Fatalf("PromBounds() = %v, want 1-2-5 from 100ns to 100s", pb)
	}
	var h Histogram
	for _, v := range []int64{50, 100, 101, 199, 200, 201, 499, 5e8} {
		h.record(v)
	}
	for _, c := range []struct {
		bound int64
		want  uint64
	}{{100, 2}, {200, 5}, {500, 7}, {1e9, 8}} {
		if n, ok := h.Cumulative(c.bound); !ok || n != c.want {
			t.Errorf("Cumulative(%d) = %d, %v; want %d", c.bound, n, ok, c.want)
		}
	}
	if _, ok := h.Cumulative(150); ok {
		t.Errorf("Cumulative accepted 150, not a bound")
	}
}

func TestStageRecorderPublishes(t *testing.T) {
	r := newStageRecorder(3)
	st := stamps{received: 1000, accepted: 2000, dispatched: 5000, started: 6000, finished: 106000, sent: 107000}
	r.record(2, &st)
	var h TypeStages
	if !r.addTo(2, &h) || h[StageService].Count != 0 {
		t.Fatalf("before publishing: count %d, want a published zero", h[StageService].Count)
	}
	r.maybePublish(publishEvery - 1) // not yet: the last publication was at 0
	r.addTo(2, &h)
	if h[StageService].Count != 0 {
		t.Fatalf("published before publishEvery")
	}
	r.maybePublish(publishEvery)
	h = TypeStages{}
	r.addTo(2, &h)
	want := [NumStages]int64{1000, 3000, 1000, 100000, 1000, 106000}
	for s, w := range want {
		if h[s].Count != 1 || h[s].SumNs != uint64(w) {
			t.Errorf("%v: count %d sum %d, want 1, %d", Stage(s), h[s].Count, h[s].SumNs, w)
		}
	}
	// A request without a reply has no transmit or latency.
	st.sent = 0
	r.record(2, &st)
	r.publish(2 * publishEvery)
	h = TypeStages{}
	r.addTo(2, &h)
	if h[StageService].Count != 2 || h[StageTransmit].Count != 1 || h[StageLatency].Count != 1 {
		t.Errorf("service %d transmit %d latency %d, want 2 1 1", h[StageService].Count, h[StageTransmit].Count, h[StageLatency].Count)
	}
	if r.addTo(1, &h) {
		t.Errorf("type 1 reported as run")
	}
}

// BenchmarkStageRecord compares recording a request's six stage times in
// the worker's plain histograms (what workers do, publishing every
// millisecond) with atomic adds on shared ones and with the Prometheus
// client's histograms.
func BenchmarkStageRecord(b *testing.B) {
	st := stamps{received: 1000, accepted: 2000, dispatched: 5000, started: 6000, finished: 106000, sent: 107000}
	b.Run("plain+publish", func(b *testing.B) {
		r := newStageRecorder(HeaderNumTypes)
		now := int64(0)
		for b.Loop() {
			r.record(1, &st)
			now += 1000 // a request per µs: one publication per 1000
			r.maybePublish(now)
		}
	})
	b.Run("atomic", func(b *testing.B) {
		var h shared
		rec := func(s Stage, ns int64) {
			h[s].buckets[bucketOf(ns)].Add(1)
			h[s].sum.Add(uint64(ns))
		}
		for b.Loop() {
			rec(StageReceive, st.accepted-st.received)
			rec(StageQueueing, st.dispatched-st.accepted)
			rec(StageHandoff, st.started-st.dispatched)
			rec(StageService, st.finished-st.started)
			rec(StageTransmit, st.sent-st.finished)
			rec(StageLatency, st.sent-st.received)
		}
	})
	b.Run("prometheus", func(b *testing.B) {
		var bounds []float64
		for _, v := range PromBounds() {
			bounds = append(bounds, float64(v)/1e9)
		}
		var hs [NumStages]prometheus.Histogram
		for i := range hs {
			hs[i] = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "x", Buckets: bounds})
		}
		for b.Loop() {
			hs[StageReceive].Observe(float64(st.accepted-st.received) / 1e9)
			hs[StageQueueing].Observe(float64(st.dispatched-st.accepted) / 1e9)
			hs[StageHandoff].Observe(float64(st.started-st.dispatched) / 1e9)
			hs[StageService].Observe(float64(st.finished-st.started) / 1e9)
			hs[StageTransmit].Observe(float64(st.sent-st.finished) / 1e9)
			hs[StageLatency].Observe(float64(st.sent-st.received) / 1e9)
		}
	})
}
