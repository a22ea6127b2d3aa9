package fleet

import (
	"math"
	"strings"
	"testing"
	"time"
)

func hist(bounds []float64, perBucket ...uint64) histogram {
	h := histogram{bounds: append(append([]float64{}, bounds...), math.Inf(1))}
	var c uint64
	for _, n := range perBucket {
		c += n
		h.counts = append(h.counts, c)
	}
	return h
}

func TestHistogramQuantileAndWindow(t *testing.T) {
	b := []float64{0.001, 0.002, 0.004}
	h := hist(b, 990, 9, 1, 0)
	if q := h.quantile(0.999); q != 0.002 {
		t.Errorf("p99.9 = %v, want 0.002", q)
	}
	if q := h.quantile(0.5); math.Abs(q-0.001*500/990) > 1e-12 { // interpolated in the first bucket
		t.Errorf("p50 = %v", q)
	}
	later := hist(b, 990, 9, 1, 1000)
	w := later.sub(h)
	if w.count() != 1000 || w.quantile(0.999) != 0.004 { // past the last bound: that bound, as Prometheus
		t.Errorf("window: %d samples, p99.9 %v", w.count(), w.quantile(0.999))
	}
	if !math.IsNaN(histogram{}.quantile(0.999)) {
		t.Error("empty histogram has a quantile")
	}
	if s := h.add(h); s.count() != 2000 {
		t.Errorf("sum of two: %d", s.count())
	}
}

func TestJudge(t *testing.T) {
	b := Bounds{MinLatencySamples: 1000}.WithDefaults()
	bounds := []float64{0.0001, 0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01}
	fast := hist(bounds, 1500, 500, 0, 0, 0, 0, 0, 0)
	slow := hist(bounds, 1000, 500, 0, 0, 0, 0, 500, 0)
	base := window{received: 10000, unknown: 10, faults: 0, errors: 0, latency: map[string]histogram{"default/SHORT": fast}}
	good := window{received: 5000, unknown: 6, latency: map[string]histogram{"default/SHORT": fast}}
	for _, tc := range []struct {
		name string
		w    window
		pass bool
		why  string
	}{
		{"as good", good, true, "faults +0.00%"},
		{"faults", window{received: 5000, faults: 10, unknown: 6}, false, "classifier faults 0.20%"},
		{"unknown", window{received: 5000, unknown: 500}, false, "UNKNOWN 10.00%"},
		{"errors", window{received: 5000, errors: 50}, false, "errors 1.00%"},
		{"idle", window{received: 10}, false, "fewer than the 100"},
		{"faults past 100%", window{received: 5000, faults: 5100}, false, "classifier faults 100.00%"},
		{"slow", window{received: 5000, latency: map[string]histogram{"default/SHORT": slow}}, false, "default/SHORT p99.9 9.98ms"},
		{"slow but few samples", window{received: 5000, latency: map[string]histogram{"default/SHORT": hist(bounds, 10, 0, 0, 0, 0, 0, 0, 5)}}, true, "p99.9 of 0 type(s)"},
	} {
		j := judge("s", tc.w, base, b)
		if j.Pass != tc.pass || !strings.Contains(strings.Join(j.Reasons, "; "), tc.why) {
			t.Errorf("%s: pass %v, reasons %q; want pass %v and %q", tc.name, j.Pass, j.Reasons, tc.pass, tc.why)
		}
	}
	// Within the ratio plus the slack: 2x a 200µs p99.9 + 1ms.
	ok := hist(bounds, 1000, 0, 0, 999, 1, 0, 0, 0)
	if j := judge("s", window{received: 5000, latency: map[string]histogram{"default/SHORT": ok}}, base, b); !j.Pass || j.Worst != "default/SHORT" {
		t.Errorf("p99.9 1ms against 200µs (limit 1.4ms): %+v", j)
	}
}

// TestBaselineSpread: the baseline's p99.9 is the highest of its servers'
// own, so a canary within the spread the old module shows passes.
func TestBaselineSpread(t *testing.T) {
	b := Bounds{MinLatencySamples: 1000}.WithDefaults()
	bounds := []float64{0.001, 0.002, 0.004, 0.008, 0.016}
	at := func(bucket int) histogram { // 2000 answers, the top 0.5% in bucket
		per := make([]uint64, len(bounds)+1)
		per[0], per[bucket] = 1990, 10
		return hist(bounds, per...)
	}
	quiet := window{received: 5000, latency: map[string]histogram{"t/SHORT": hist(bounds, 2000, 0, 0, 0, 0, 0)}}
	noisy := window{received: 5000, latency: map[string]histogram{"t/SHORT": at(2)}}
	var base window
	base = base.plus(quiet).plus(noisy)
	if len(base.parts) != 2 {
		t.Fatalf("%d parts", len(base.parts))
	}
	p, ok := base.p999("t/SHORT", b.MinLatencySamples)
	if !ok || p != noisy.latency["t/SHORT"].quantile(0.999) {
		t.Fatalf("baseline p99.9 %v (%v), want the noisy server's %v", p, ok, noisy.latency["t/SHORT"].quantile(0.999))
	}
	canary := window{received: 5000, latency: map[string]histogram{"t/SHORT": at(3)}} // ~2x the noisy one
	if j := judge("c", canary, base, b); !j.Pass {
		t.Errorf("canary within 2x of the noisiest baseline server failed: %v", j.Reasons)
	}
	if j := judge("c", canary, quiet, b); j.Pass {
		t.Errorf("the same canary against the quiet server alone passed")
	}
}

func TestWaves(t *testing.T) {
	p := Plan{Servers: []string{"a", "b", "c", "d", "e"}, Tenant: "t", Bake: time.Second}
	got := func(p Plan) string {
		var s []string
		for _, w := range p.Waves() {
			s = append(s, strings.Join(w, ""))
		}
		return strings.Join(s, "|")
	}
	if g := got(p); g != "a|bcd|e" {
		t.Errorf("default (one control server): %s", g)
	}
	p.Canary, p.Wave = 2, 2
	if g := got(p); g != "ab|cd|e" {
		t.Errorf("canary 2 wave 2: %s", g)
	}
	p.Canary, p.Wave, p.Control = 1, 1, 2
	if g := got(p); g != "a|b|c|de" || p.kind(3, p.Waves()) != "control" {
		t.Errorf("canary 1 wave 1 control 2: %s", g)
	}
	p.Control = -1
	if g := got(p); g != "a|b|c|d|e" || p.kind(4, p.Waves()) != "wave" {
		t.Errorf("no control group: %s", g)
	}
	p.Canary = 9
	if g := got(p); g != "abcde" {
		t.Errorf("canary 9: %s", g)
	}
	p.Servers = []string{"a", "a"}
	if err := p.Validate(); err == nil {
		t.Error("a server twice accepted")
	}
}

// TestBoundsValidate: a NaN or infinite bound turned its gate off (d > NaN
// is false), a negative ratio failed every canary.
func TestBoundsValidate(t *testing.T) {
	for _, tc := range []struct {
		b  Bounds
		ok bool
	}{
		{Bounds{}, true},
		{Bounds{FaultRate: 0.01, UnknownShare: 1, ErrorRate: 1e-12, LatencyRatio: 1, LatencySlack: time.Hour}, true},
		{Bounds{LatencyRatio: MaxLatencyRatio}, true},
		{Bounds{FaultRate: math.NaN()}, false},
		{Bounds{FaultRate: -0.1}, false},
		{Bounds{FaultRate: math.Inf(1)}, false},
		{Bounds{UnknownShare: 1.5}, false},
		{Bounds{ErrorRate: math.NaN()}, false},
		{Bounds{LatencyRatio: -1}, false},
		{Bounds{LatencyRatio: 0.5}, false},
		{Bounds{LatencyRatio: math.NaN()}, false},
		{Bounds{LatencyRatio: math.Inf(1)}, false},
		{Bounds{LatencyRatio: MaxLatencyRatio + 1}, false},
		{Bounds{LatencySlack: -time.Second}, false},
		{Bounds{LatencySlack: MaxLatencySlack + 1}, false},
	} {
		err := tc.b.Validate()
		if (err == nil) != tc.ok {
			t.Errorf("%+v: %v, want ok %v", tc.b, err, tc.ok)
		}
		p := Plan{Servers: []string{"a"}, Tenant: "t", Bake: time.Second, Bounds: tc.b}
		if err := p.Validate(); (err == nil) != tc.ok {
			t.Errorf("plan with %+v: %v, want ok %v", tc.b, err, tc.ok)
		}
	}
}

// TestMixDivergence: a module that types every request LONG where the
// baseline sees half SHORT, half LONG fails on the type mix, however few
// requests; the same mix with sampling noise passes.
func TestMixDivergence(t *testing.T) {
	b := Bounds{}.WithDefaults()
	base := window{received: 2000, types: map[string]uint64{"UNKNOWN": 0, "SHORT": 1000, "LONG": 1000}}
	for _, tc := range []struct {
		name  string
		types map[string]uint64
		pass  bool
	}{
		{"same mix, noisy", map[string]uint64{"SHORT": 530, "LONG": 470}, true},
		{"few, noisy", map[string]uint64{"SHORT": 60, "LONG": 40}, true},
		{"all LONG", map[string]uint64{"LONG": 1000}, false},
		{"all SHORT, few", map[string]uint64{"SHORT": 100}, false},
		{"a third UNKNOWN", map[string]uint64{"UNKNOWN": 333, "SHORT": 333, "LONG": 334}, false},
	} {
		var n uint64
		for _, c := range tc.types {
			n += c
		}
		j := judge("s", window{received: n, unknown: tc.types["UNKNOWN"], types: tc.types}, base, Bounds{UnknownShare: 1}.WithDefaults())
		if j.Pass != tc.pass {
			t.Errorf("%s: divergence %.3f (allowed %.3f), pass %v, want %v: %v", tc.name, j.MixDivergence, j.MixAllowed, j.Pass, tc.pass, j.Reasons)
		}
	}
	if d, _, worst, a, w := mixDivergence(map[string]uint64{"LONG": 10}, base.types, b.MixDivergence); d != 0.5 || worst != "LONG" || a != 1 || w != 0.5 {
		t.Errorf("all LONG against half and half: %v, worst %s %v (%v)", d, worst, a, w)
	}
}
