package report

import (
	"math"
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
	// NotSustained, when not empty, says why the type's load was not
	// sustained (simulated runs judge every type: its requests dropped, or
	// its backlog grew over the window), e.g. "backlog grew by 5,400
	// requests (12% of its arrivals)". A point with such a type is not
	// sustained.
	NotSustained string `json:"not_sustained,omitempty"`
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
	MeanIdleWorkers float64 `json:"mean_idle_workers"`
	// WastedWorkers is the paper's CPU waste: the mean number of workers
	// idle while some request waited in a queue (reserved for other
	// types, or, under d-FCFS, holding an empty queue). It is 0 for a
	// work-conserving policy such as c-FCFS. NaN when unknown.
	WastedWorkers float64     `json:"wasted_workers"`
	DurationSec   float64     `json:"duration_s"` // measured window (after warm-up)
	Overall       Stats       `json:"overall"`
	Types         []TypeStats `json:"types"`
	// Seed is the seed of a simulated run (0 when not given).
	Seed uint64 `json:"seed,omitempty"`
	// Timeline, when recorded, is the run's statistics over time.
	Timeline *Timeline `json:"timeline,omitempty"`
	// Tenant names the tenant a point describes (one of a multi-tenant
	// point's Tenants); Tenants has one point per tenant of a multi-tenant
	// run, with the tenant's own load, rates and types.
	Tenant  string  `json:"tenant,omitempty"`
	Tenants []Point `json:"tenants,omitempty"`
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

// sources returns the distinct sources of points, in order of appearance.
func sources(points []Point) []string {
	return distinct(points, func(p *Point) string { return p.Source })
}

// distinct returns the distinct values of field over points, in order of
// first appearance.
func distinct(points []Point, field func(*Point) string) []string {
	var out []string
	seen := map[string]bool{}
	for i := range points {
		if v := field(&points[i]); !seen[v] {
			seen[v] = true
			out = append(out, v)
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
