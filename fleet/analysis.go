package fleet

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"
)

// Bounds are how much worse than the baseline a server on the new module
// may be at the end of its bake. Zero fields take the defaults.
type Bounds struct {
	// FaultRate: the classifier's faults per request (every kind: traps,
	// fuel, bad answers, refused by an open breaker) may exceed the
	// baseline's by at most this much. Default 0.001 (0.1%).
	FaultRate float64
	// UnknownShare: the share of requests classified UNKNOWN may exceed
	// the baseline's by at most this much. Default 0.01 (1 point).
	UnknownShare float64
	// ErrorRate: drops for errors (app, panic, tx_error,
	// classifier_fault) per request may exceed the baseline's by at most
	// this much. Default 0.001.
	ErrorRate float64
	// LatencyRatio and LatencySlack: each type's p99.9 may be at most
	// LatencyRatio times the baseline's plus LatencySlack. Defaults 2 and
	// 1ms (the server's histograms resolve quantiles to their buckets).
	// The baseline's p99.9 is the highest of its servers' own, so the
	// spread the old module shows across servers in the same window is
	// allowed for.
	LatencyRatio float64
	LatencySlack time.Duration
	// MinRequests: a server must see at least this many requests of the
	// tenant during the bake, or there is nothing to judge it by and the
	// wave fails. Default 100.
	MinRequests uint64
	// MinLatencySamples: a type's p99.9 is compared only when both sides
	// answered at least this many of it. Default 10000: ten answers above
	// the p99.9 (with 1000, the p99.9 is one request's luck, and on a
	// shared host good modules failed).
	MinLatencySamples uint64
	// MixDivergence: the server's type mix (each type's share of the
	// tenant's requests, UNKNOWN included) may differ from the baseline's
	// by at most this much, in total variation distance (half the sum of
	// the shares' differences: 0 the same mix, 1 disjoint), on top of what
	// sampling explains (three standard deviations of the difference of
	// each share, summed and halved). Default 0.1. A module that types
	// every request alike moves it by the share of the other types.
	MixDivergence float64
}

// Limits of Bounds: the rates are fractions of requests, LatencyRatio a
// factor of at least 1 (below it a module as fast as the old one fails)
// and at most MaxLatencyRatio, LatencySlack at most MaxLatencySlack.
const (
	MaxLatencyRatio = 1000
	MaxLatencySlack = time.Hour
)

// Validate refuses bounds that would turn a gate off or fail every
// server: NaN, infinite or negative rates, a rate above 1, a latency
// ratio outside [1, MaxLatencyRatio], a slack outside [0,
// MaxLatencySlack]. Zero fields (the defaults) are valid.
func (b Bounds) Validate() error {
	for _, r := range []struct {
		name string
		v    float64
	}{{"fault rate", b.FaultRate}, {"unknown share", b.UnknownShare}, {"error rate", b.ErrorRate}, {"mix divergence", b.MixDivergence}} {
		if !(r.v >= 0 && r.v <= 1) {
			return fmt.Errorf("fleet: bounds: %s %v: want a fraction in [0, 1]", r.name, r.v)
		}
	}
	if b.LatencyRatio != 0 && !(b.LatencyRatio >= 1 && b.LatencyRatio <= MaxLatencyRatio) {
		return fmt.Errorf("fleet: bounds: latency ratio %v: want a factor in [1, %d] (0: the default, 2)", b.LatencyRatio, MaxLatencyRatio)
	}
	if !(b.LatencySlack >= 0 && b.LatencySlack <= MaxLatencySlack) {
		return fmt.Errorf("fleet: bounds: latency slack %v: want 0 to %v", b.LatencySlack, MaxLatencySlack)
	}
	return nil
}

// WithDefaults fills the zero fields.
func (b Bounds) WithDefaults() Bounds {
	if b.FaultRate == 0 {
		b.FaultRate = 0.001
	}
	if b.UnknownShare == 0 {
		b.UnknownShare = 0.01
	}
	if b.ErrorRate == 0 {
		b.ErrorRate = 0.001
	}
	if b.LatencyRatio == 0 {
		b.LatencyRatio = 2
	}
	if b.LatencySlack == 0 {
		b.LatencySlack = time.Millisecond
	}
	if b.MinRequests == 0 {
		b.MinRequests = 100
	}
	if b.MinLatencySamples == 0 {
		b.MinLatencySamples = 10000
	}
	if b.MixDivergence == 0 {
		b.MixDivergence = 0.1
	}
	return b
}

// Judgement is one server's comparison with the baseline over a bake.
type Judgement struct {
	Server   string
	Requests uint64
	// Rates of the server and of the baseline.
	FaultRate, BaseFaultRate       float64
	UnknownShare, BaseUnknownShare float64
	ErrorRate, BaseErrorRate       float64
	// Worst is the type whose p99.9 is furthest above the baseline's ("":
	// none had samples enough), with both p99.9 in seconds.
	Worst           string
	P999, BaseP999  float64
	LatencyCompared int // types with samples enough on both sides
	// MixDivergence is the total variation distance between the server's
	// type mix and the baseline's; MixAllowed what the bound and sampling
	// allowed; MixType the type whose share moved most, with both shares.
	MixDivergence, MixAllowed float64
	MixType                   string
	MixShare, BaseMixShare    float64
	Pass                      bool
	Reasons                   []string // why not, or why it passed
	BaselineServers           int      // servers the baseline came from
	BaselineRequests          uint64
	BaselineOwnWindow         bool // the baseline is this server's own window before its swap
}

// judge compares a server's window on the new module with the baseline's.
func judge(name string, w, base window, b Bounds) Judgement {
	j := Judgement{Server: name, Requests: w.received, BaselineRequests: base.received,
		FaultRate: ratio(w.faults, w.received), BaseFaultRate: ratio(base.faults, base.received),
		UnknownShare: ratio(w.unknown, w.received), BaseUnknownShare: ratio(base.unknown, base.received),
		ErrorRate: ratio(w.errors, w.received), BaseErrorRate: ratio(base.errors, base.received)}
	var fails []string
	if w.received < b.MinRequests {
		fails = append(fails, fmt.Sprintf("%d requests, fewer than the %d needed to judge", w.received, b.MinRequests))
	}
	if d := j.FaultRate - j.BaseFaultRate; d > b.FaultRate {
		fails = append(fails, fmt.Sprintf("classifier faults %s of requests, baseline %s (+%s > %s)", pct(j.FaultRate), pct(j.BaseFaultRate), pct(d), pct(b.FaultRate)))
	}
	if d := j.UnknownShare - j.BaseUnknownShare; d > b.UnknownShare {
		fails = append(fails, fmt.Sprintf("UNKNOWN %s of requests, baseline %s (+%s > %s)", pct(j.UnknownShare), pct(j.BaseUnknownShare), pct(d), pct(b.UnknownShare)))
	}
	if d := j.ErrorRate - j.BaseErrorRate; d > b.ErrorRate {
		fails = append(fails, fmt.Sprintf("errors %s of requests, baseline %s (+%s > %s)", pct(j.ErrorRate), pct(j.BaseErrorRate), pct(d), pct(b.ErrorRate)))
	}
	j.MixDivergence, j.MixAllowed, j.MixType, j.MixShare, j.BaseMixShare = mixDivergence(w.types, base.types, b.MixDivergence)
	if j.MixDivergence > j.MixAllowed {
		fails = append(fails, fmt.Sprintf("type mix %.3f from the baseline's (> %.3f): %s %s of requests, baseline %s",
			j.MixDivergence, j.MixAllowed, j.MixType, pct(j.MixShare), pct(j.BaseMixShare)))
	}
	types := make([]string, 0, len(w.latency))
	for typ := range w.latency {
		types = append(types, typ)
	}
	sort.Strings(types)
	worst := math.Inf(-1)
	for _, typ := range types {
		h := w.latency[typ]
		bp, ok := base.p999(typ, b.MinLatencySamples)
		if h.count() < b.MinLatencySamples || !ok {
			continue
		}
		j.LatencyCompared++
		p := h.quantile(0.999)
		excess := p - bp
		if excess > worst {
			worst, j.Worst, j.P999, j.BaseP999 = excess, typ, p, bp
		}
		if limit := bp*b.LatencyRatio + b.LatencySlack.Seconds(); p > limit {
			fails = append(fails, fmt.Sprintf("%s p99.9 %s, baseline %s (> %.3gx + %s)", typ, secs(p), secs(bp), b.LatencyRatio, b.LatencySlack))
		}
	}
	j.Pass = len(fails) == 0
	if j.Pass {
		j.Reasons = []string{fmt.Sprintf("faults +%s <= %s, UNKNOWN +%s <= %s, errors +%s <= %s, type mix %.3f <= %.3f, p99.9 of %d type(s) within %.3gx + %s",
			pct(max(0, j.FaultRate-j.BaseFaultRate)), pct(b.FaultRate), pct(max(0, j.UnknownShare-j.BaseUnknownShare)), pct(b.UnknownShare),
			pct(max(0, j.ErrorRate-j.BaseErrorRate)), pct(b.ErrorRate), j.MixDivergence, j.MixAllowed, j.LatencyCompared, b.LatencyRatio, b.LatencySlack)}
	} else {
		j.Reasons = fails
	}
	return j
}

func pct(f float64) string {
	return fmt.Sprintf("%.2f%%", 100*f)
}

// secs prints a duration in seconds with a unit that suits it.
func secs(s float64) string {
	switch {
	case math.IsNaN(s):
		return "-"
	case math.IsInf(s, 1):
		return "+Inf"
	}
	d := time.Duration(s * float64(time.Second))
	switch {
	case d < time.Millisecond:
		return fmt.Sprintf("%dµs", d.Microseconds())
	case d < time.Second:
		return fmt.Sprintf("%.3gms", float64(d)/1e6)
	}
	return strings.TrimSuffix(d.Round(time.Millisecond).String(), "0s")
}

// mixDivergence compares two type mixes (requests per type): their total
// variation distance, what bound and sampling allow (bound plus three
// standard deviations of each share's difference under the pooled mix,
// summed and halved), and the type whose share moved most with both
// shares. Two empty mixes are the same.
func mixDivergence(a, b map[string]uint64, bound float64) (tvd, allowed float64, worst string, wa, wb float64) {
	var na, nb float64
	for _, n := range a {
		na += float64(n)
	}
	for _, n := range b {
		nb += float64(n)
	}
	if na == 0 || nb == 0 {
		return 0, bound, "", 0, 0
	}
	types := map[string]bool{}
	for t := range a {
		types[t] = true
	}
	for t := range b {
		types[t] = true
	}
	names := make([]string, 0, len(types))
	for t := range types {
		names = append(names, t)
	}
	sort.Strings(names)
	var noise float64
	move := -1.0
	for _, t := range names {
		pa, pb := float64(a[t])/na, float64(b[t])/nb
		d := math.Abs(pa - pb)
		tvd += d / 2
		pooled := (float64(a[t]) + float64(b[t])) / (na + nb)
		noise += 3 * math.Sqrt(pooled*(1-pooled)*(1/na+1/nb)) / 2
		if d > move {
			move, worst, wa, wb = d, t, pa, pb
		}
	}
	return tvd, bound + noise, worst, wa, wb
}
