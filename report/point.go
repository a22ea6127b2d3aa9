package report

import (
	"fmt"
	"math"
	"sort"
	"strings"
)

// Stats are the latency and slowdown statistics of one request type, or of
// all requests. Latencies are in nanoseconds.
type Stats struct {
	Count        uint64  `json:"count"`
	Dropped      uint64  `json:"dropped"`
	Expired      uint64  `json:"expired,omitempty"` // of Dropped: waited past the deadline (simulated runs)
	Lost         uint64  `json:"lost,omitempty"`    // sent but never answered (measured runs)
	MeanLatency  float64 `json:"mean_latency_ns"`
	P50Latency   int64   `json:"p50_latency_ns"`
	P99Latency   int64   `json:"p99_latency_ns"`
	P999Latency  int64   `json:"p999_latency_ns"`
	MaxLatency   int64   `json:"max_latency_ns"`
	MeanSlowdown float64 `json:"mean_slowdown"`
	P50Slowdown  float64 `json:"p50_slowdown"`
	P99Slowdown  float64 `json:"p99_slowdown"`
	P999Slowdown float64 `json:"p999_slowdown"`
}

// TypeStats are the statistics of one request type.
type TypeStats struct {
	Name string `json:"name"`
	ID   uint32 `json:"id"` // wire type id
	Stats
}

// Point is the result of one run at one offered load under one policy.
type Point struct {
	Source   string `json:"source"` // "sim", "measured", ...
	Policy   string `json:"policy"`
	Workload string `json:"workload"`
	Workers  int    `json:"workers"`
	// Load is the offered load as a fraction of the workers' capacity:
	// OfferedRate x mean service time / Workers.
	Load         float64 `json:"load"`
	OfferedRate  float64 `json:"offered_rps"`
	AchievedRate float64 `json:"achieved_rps"`
	Sustained    bool    `json:"sustained"`
	// MeanIdleWorkers is the mean number of idle workers; NaN when unknown
	// (tables show "-", JSON and CSV 0).
	MeanIdleWorkers float64     `json:"mean_idle_workers"`
	DurationSec     float64     `json:"duration_s"` // measured window (after warm-up)
	Overall         Stats       `json:"overall"`
	Types           []TypeStats `json:"types"`
}

// Dropped is the number of requests dropped over all types.
func (p *Point) Dropped() uint64 { return p.Overall.Dropped }

// Label is the line label of the point's series: the policy, followed by
// the source in parentheses when withSource is set.
func (p *Point) Label(withSource bool) string {
	if withSource && p.Source != "" {
		return p.Policy + " (" + p.Source + ")"
	}
	return p.Policy
}

// TypeStat returns the statistics of the named type, and whether it exists.
func (p *Point) TypeStat(name string) (Stats, bool) {
	for _, t := range p.Types {
		if t.Name == name {
			return t.Stats, true
		}
	}
	return Stats{}, false
}

// Summary tells, for one policy (and source), the highest offered load at
// which a p99.9 slowdown SLO holds.
type Summary struct {
	Source  string  `json:"source"`
	Policy  string  `json:"policy"`
	SLO     float64 `json:"slo"`      // p99.9 slowdown bound
	PerType bool    `json:"per_type"` // the SLO applies to every type, not to all requests
	// Found is false when the SLO fails at the lowest measured load.
	Found   bool    `json:"found"`
	MaxLoad float64 `json:"max_load"`
	MaxRate float64 `json:"max_rps"`
	// Breaker explains the first failing load above MaxLoad, if any:
	// e.g. "SHORT p99.9 slowdown 35.2 at load 0.70" or "not sustained at load 0.90".
	Breaker string `json:"breaker,omitempty"`
}

// String is the summary line printed by psp sim.
func (s Summary) String() string { return s.line(true) }

func (s Summary) line(withSource bool) string {
	scope := "all requests"
	if s.PerType {
		scope = "every type"
	}
	name := s.Policy
	if withSource && s.Source != "" {
		name += " (" + s.Source + ")"
	}
	var b strings.Builder
	if s.Found {
		fmt.Fprintf(&b, "%-20s highest load with p99.9 slowdown <= %g for %s: %.3g (%s req/s)", name, s.SLO, scope, s.MaxLoad, formatRate(s.MaxRate))
	} else {
		fmt.Fprintf(&b, "%-20s p99.9 slowdown <= %g for %s: not met at any measured load", name, s.SLO, scope)
	}
	if s.Breaker != "" {
		fmt.Fprintf(&b, "; %s", s.Breaker)
	}
	return b.String()
}

// sloHolds reports whether p meets the SLO, or why not.
func sloHolds(p *Point, slo float64, perType bool) (bool, string) {
	if !p.Sustained {
		return false, fmt.Sprintf("not sustained at load %.3g", p.Load)
	}
	if !perType {
		if p.Overall.P999Slowdown > slo {
			return false, fmt.Sprintf("p99.9 slowdown %.3g at load %.3g", p.Overall.P999Slowdown, p.Load)
		}
		return true, ""
	}
	for _, t := range p.Types {
		if t.Count > 0 && t.P999Slowdown > slo {
			return false, fmt.Sprintf("%s p99.9 slowdown %.3g at load %.3g", t.Name, t.P999Slowdown, p.Load)
		}
	}
	return true, ""
}

// Summarize returns one Summary per (source, policy), in order of first
// appearance. The highest load is the largest measured load L such that the
// SLO holds at every measured load up to L (so a lucky point above a failing
// one does not count). A point holds when it is sustained and its p99.9
// slowdown (overall, or of every type with samples when perType) is <= slo.
func Summarize(points []Point, slo float64, perType bool) []Summary {
	type key struct{ source, policy string }
	var order []key
	groups := map[key][]Point{}
	for _, p := range points {
		k := key{p.Source, p.Policy}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], p)
	}
	out := make([]Summary, 0, len(order))
	for _, k := range order {
		pts := groups[k]
		sort.SliceStable(pts, func(i, j int) bool { return pts[i].Load < pts[j].Load })
		s := Summary{Source: k.source, Policy: k.policy, SLO: slo, PerType: perType}
		for i := range pts {
			ok, why := sloHolds(&pts[i], slo, perType)
			if !ok {
				s.Breaker = why
				break
			}
			s.Found, s.MaxLoad, s.MaxRate = true, pts[i].Load, pts[i].OfferedRate
		}
		out = append(out, s)
	}
	return out
}

// sources returns the distinct sources of points, in order of appearance.
func sources(points []Point) []string {
	var out []string
	seen := map[string]bool{}
	for _, p := range points {
		if !seen[p.Source] {
			seen[p.Source] = true
			out = append(out, p.Source)
		}
	}
	return out
}

// finite replaces NaN and infinities (not representable in JSON) by 0.
func finite(v float64) float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0
	}
	return v
}
