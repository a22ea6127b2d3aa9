package report

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
)

// SLO is a service-level objective on the p99.9 of one metric: slowdown
// (time in the server over service time) or latency (ns, end to end: from
// the request's arrival, or its intended send time, to its reply). It
// applies to all requests together, to every type separately (PerType), or
// to the named Types only. Exactly one of Slowdown and LatencyNs is set.
type SLO struct {
	// Slowdown bounds the p99.9 slowdown.
	Slowdown float64 `json:"slowdown,omitempty"`
	// LatencyNs bounds the p99.9 latency, in nanoseconds.
	LatencyNs float64 `json:"latency_ns,omitempty"`
	// PerType applies the bound to every type with samples instead of to
	// all requests together.
	PerType bool `json:"per_type,omitempty"`
	// Types, when not empty, applies the bound to these types only (each
	// separately), e.g. the short ones.
	Types []string `json:"types,omitempty"`
}

// Validate reports whether s names one positive bound.
func (s SLO) Validate() error {
	switch {
	case math.IsNaN(s.Slowdown) || math.IsNaN(s.LatencyNs) || s.Slowdown < 0 || s.LatencyNs < 0:
		return fmt.Errorf("slo: bounds must be positive numbers (slowdown %v, latency %vns)", s.Slowdown, s.LatencyNs)
	case s.Slowdown > 0 && s.LatencyNs > 0:
		return errors.New("slo: give a slowdown or a latency bound, not both")
	case s.Slowdown == 0 && s.LatencyNs == 0:
		return errors.New("slo: no bound (give a p99.9 slowdown or latency)")
	}
	return nil
}

// metric names the bounded quantity.
func (s SLO) metric() string {
	if s.LatencyNs > 0 {
		return "latency"
	}
	return "slowdown"
}

// bound is the bound as printed: "10" or "20us".
func (s SLO) bound() string {
	if s.LatencyNs > 0 {
		return FormatNs(s.LatencyNs)
	}
	return formatSlowdown(s.Slowdown)
}

// Scope says which requests the SLO applies to: "all requests", "every
// type" or the type names.
func (s SLO) Scope() string {
	switch {
	case len(s.Types) > 0:
		return strings.Join(s.Types, ", ")
	case s.PerType:
		return "every type"
	}
	return "all requests"
}

// String is e.g. "p99.9 slowdown <= 10 for every type" or "p99.9 latency <=
// 20us for SHORT".
func (s SLO) String() string {
	return fmt.Sprintf("p99.9 %s <= %s for %s", s.metric(), s.bound(), s.Scope())
}

// value returns the bounded metric of st.
func (s SLO) value(st *Stats) float64 {
	if s.LatencyNs > 0 {
		return float64(st.P999Latency)
	}
	return st.P999Slowdown
}

func (s SLO) limit() float64 {
	if s.LatencyNs > 0 {
		return s.LatencyNs
	}
	return s.Slowdown
}

func (s SLO) format(v float64) string {
	if s.LatencyNs > 0 {
		return FormatNs(v)
	}
	return formatSlowdown(v)
}

// Holds reports whether p meets the SLO, or why not: the point must be
// sustained (every type of it, for a per-type SLO) and the bounded p99.9
// within the bound. A named type without samples fails the SLO.
func (s SLO) Holds(p *Point) (bool, string) {
	if !p.Sustained {
		for _, t := range p.Types {
			if t.NotSustained != "" && s.applies(t.Name) {
				return false, fmt.Sprintf("%s not sustained at load %.3g (%s)", t.Name, p.Load, t.NotSustained)
			}
		}
		return false, fmt.Sprintf("not sustained at load %.3g", p.Load)
	}
	if !s.PerType && len(s.Types) == 0 {
		if v := s.value(&p.Overall); v > s.limit() {
			return false, fmt.Sprintf("p99.9 %s %s at load %.3g", s.metric(), s.format(v), p.Load)
		}
		return true, ""
	}
	for _, name := range s.Types {
		if st, ok := p.TypeStat(name); !ok || st.Count == 0 {
			return false, fmt.Sprintf("no %s requests at load %.3g", name, p.Load)
		}
	}
	for _, t := range p.Types {
		if t.Count == 0 || !s.applies(t.Name) {
			continue
		}
		if v := s.value(&t.Stats); v > s.limit() {
			return false, fmt.Sprintf("%s p99.9 %s %s at load %.3g", t.Name, s.metric(), s.format(v), p.Load)
		}
	}
	return true, ""
}

// applies reports whether the SLO bounds type name.
func (s SLO) applies(name string) bool {
	return len(s.Types) == 0 || slices.Contains(s.Types, name)
}

// Summary tells, for one policy (and source), the highest offered load at
// which an SLO holds.
type Summary struct {
	Source string `json:"source"`
	Policy string `json:"policy"`
	// SLO is the bound (a slowdown, or a latency in ns when Metric is
	// "latency"); PerType and Types say which requests it applies to.
	SLO     float64  `json:"slo"`
	Metric  string   `json:"metric"`            // "slowdown" or "latency"
	PerType bool     `json:"per_type"`          // the SLO applies to every type, not to all requests
	Types   []string `json:"types,omitempty"`   // the SLO applies to these types only
	Found   bool     `json:"found"`             // false when the SLO fails at the lowest measured load
	MaxLoad float64  `json:"max_load"`          // highest load of the prefix where the SLO holds
	MaxRate float64  `json:"max_rps"`           // its offered rate
	Breaker string   `json:"breaker,omitempty"` // the first failing load above MaxLoad, e.g. "SHORT p99.9 slowdown 35.2 at load 0.70"
}

// Objective returns the SLO the summary was computed for.
func (s Summary) Objective() SLO {
	o := SLO{PerType: s.PerType, Types: s.Types}
	if s.Metric == "latency" {
		o.LatencyNs = s.SLO
	} else {
		o.Slowdown = s.SLO
	}
	return o
}

// String is the summary line printed by psp sim.
func (s Summary) String() string { return s.line(true) }

func (s Summary) line(withSource bool) string {
	name := s.Policy
	if withSource && s.Source != "" {
		name += " (" + s.Source + ")"
	}
	o := s.Objective()
	var b strings.Builder
	if s.Found {
		fmt.Fprintf(&b, "%-20s highest load with %s: %.3g (%s req/s)", name, o, s.MaxLoad, formatRate(s.MaxRate))
	} else {
		fmt.Fprintf(&b, "%-20s %s: not met at any measured load", name, o)
	}
	if s.Breaker != "" {
		fmt.Fprintf(&b, "; %s", s.Breaker)
	}
	return b.String()
}

// Summarize returns one Summary per (source, policy) for a p99.9 slowdown
// SLO over all requests, or every type (perType). See SummarizeSLO.
func Summarize(points []Point, slo float64, perType bool) []Summary {
	return SummarizeSLO(points, SLO{Slowdown: slo, PerType: perType})
}

// SummarizeSLO returns one Summary per (source, policy), in order of first
// appearance. The highest load is the largest measured load L such that the
// SLO holds at every measured load up to L (so a lucky point above a
// failing one does not count); see SLO.Holds.
func SummarizeSLO(points []Point, slo SLO) []Summary {
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
		s := Summary{Source: k.source, Policy: k.policy, SLO: slo.limit(), Metric: slo.metric(), PerType: slo.PerType, Types: slo.Types}
		for i := range pts {
			ok, why := slo.Holds(&pts[i])
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
