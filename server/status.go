package server

import (
	"github.com/persephone-go/psp/darc"
	"github.com/persephone-go/psp/dispatcher"
	"github.com/persephone-go/psp/nic"
)

// Status is the JSON document GET /status returns. Every JSON name is
// snake_case; durations carry their unit in the name.
type Status struct {
	Policy        string  `json:"policy"`
	Phase         string  `json:"phase"` // "startup" while DARC profiles, then "darc"; baselines: their name
	App           string  `json:"app"`
	Dilation      float64 `json:"dilation,omitempty"`
	Workers       int     `json:"workers"`
	Listen        string  `json:"listen"`
	Dataplane     string  `json:"dataplane"`
	UptimeSeconds float64 `json:"uptime_seconds"`
	Running       bool    `json:"running"`
	Draining      bool    `json:"draining"`

	Received uint64           `json:"received"`
	Answered uint64           `json:"answered"`
	Dropped  uint64           `json:"dropped"`
	InFlight uint64           `json:"in_flight"`
	Queued   uint64           `json:"queued"`
	Busy     int              `json:"busy"`
	Drops    dispatcher.Drops `json:"drops"`

	// IdleWorkers and CPUWaste are means over the last stats interval (about
	// 100ms); CPUWaste counts idle workers while requests waited.
	IdleWorkers   float64 `json:"idle_workers"`
	CPUWaste      float64 `json:"cpu_waste"`
	CPUWasteTotal float64 `json:"cpu_waste_total"`

	// Reservations counts reservation (re)computations.
	Reservations uint64        `json:"reservations"`
	Groups       []GroupStatus `json:"groups"`
	// Types are the request types that exist: those the loaded classifiers
	// declare, and any other that has seen a request (the native psp-header
	// classifier declares none), plus UNKNOWN; by id.
	Types   []TypeStatus `json:"types"`
	Tenants []TenantInfo `json:"tenants"`
	// Net holds the dataplane's counters.
	Net nic.Stats `json:"net"`
}

// GroupStatus is one group of the current reservation.
type GroupStatus struct {
	Types     []string    `json:"types"`
	TypeIDs   []darc.Type `json:"type_ids"`
	Demand    float64     `json:"demand"`
	Reserved  []int       `json:"reserved"`
	Stealable []int       `json:"stealable"`
	Spillway  bool        `json:"spillway"`
}

// TypeStatus is one request type's profile and counters.
type TypeStatus struct {
	ID   darc.Type `json:"id"`
	Name string    `json:"name"`
	// The policy's current profiling window: the mean service time it
	// reserves by, the completions it was computed from and the type's
	// share of them.
	ProfiledMeanServiceNs float64 `json:"profiled_mean_service_ns"`
	ProfiledSamples       uint64  `json:"profiled_samples"`
	ProfiledShare         float64 `json:"profiled_share"`
	// Counters since start.
	Queued   int    `json:"queued"`
	Received uint64 `json:"received"`
	Answered uint64 `json:"answered"`
	Dropped  uint64 `json:"dropped"`
	// MeasuredMeanServiceNs is the mean service time of every request a
	// worker ran since start (worker clock); MeanQueueingNs the mean time
	// from enqueue to dispatch.
	MeasuredMeanServiceNs float64 `json:"measured_mean_service_ns"`
	MeanQueueingNs        float64 `json:"mean_queueing_ns"`
}

// TenantInfo is one classifier tenant.
type TenantInfo struct {
	Name    string   `json:"name"`
	Version int      `json:"version"`
	Native  bool     `json:"native,omitempty"` // the built-in psp-header classifier
	Ports   []uint16 `json:"ports,omitempty"`
	Types   []string `json:"types"`
	// Faults counts classifier faults by kind (Wasm tenants only).
	Faults map[string]uint64 `json:"faults,omitempty"`
	// Restarts counts classifier instances restarted after a fault.
	Restarts    uint64 `json:"restarts,omitempty"`
	BreakerOpen bool   `json:"breaker_open,omitempty"`
}

// typeExists reports whether type t of s is shown: declared by a
// classifier (declared, by id; nil: none), UNKNOWN, or seen.
func typeExists(t *dispatcher.TypeStats, declared []bool) bool {
	return t.Type == darc.Unknown || (int(t.Type) < len(declared) && declared[t.Type]) ||
		t.Received > 0 || t.Queued > 0 || t.Completed > 0 || t.Dropped > 0
}

// buildStatus assembles a Status from the dispatcher's latest stats; types
// not declared by a classifier (declared, by id) and never seen are left
// out.
func buildStatus(s *dispatcher.Stats, declared []bool) Status {
	st := Status{
		Policy:        s.Policy.Policy,
		Phase:         s.Policy.Phase,
		Workers:       s.Workers,
		Running:       s.Running,
		Draining:      s.Draining,
		Received:      s.Received,
		Answered:      s.Answered,
		Dropped:       s.Dropped,
		InFlight:      s.InFlight,
		Queued:        s.Queued,
		Busy:          s.Busy,
		Drops:         s.Drops,
		IdleWorkers:   s.IdleWorkers,
		CPUWaste:      s.CPUWaste,
		CPUWasteTotal: s.CPUWasteTotal,
		Reservations:  s.Policy.Reservations,
		Net:           s.Dataplane,
		Groups:        []GroupStatus{},
		Types:         []TypeStatus{},
	}
	name := func(t darc.Type) string {
		if int(t) < len(s.Types) {
			return s.Types[t].Name
		}
		return ""
	}
	for _, g := range s.Policy.Groups {
		gs := GroupStatus{TypeIDs: g.Types, Demand: g.Demand, Reserved: g.Reserved, Stealable: g.Stealable, Spillway: g.Spillway}
		for _, t := range g.Types {
			gs.Types = append(gs.Types, name(t))
		}
		if gs.Reserved == nil {
			gs.Reserved = []int{}
		}
		if gs.Stealable == nil {
			gs.Stealable = []int{}
		}
		st.Groups = append(st.Groups, gs)
	}
	for i := range s.Types {
		ts := &s.Types[i]
		var p darc.TypeState
		if int(ts.Type) < len(s.Policy.Types) {
			p = s.Policy.Types[ts.Type]
		}
		if !typeExists(ts, declared) && p.Count == 0 {
			continue
		}
		st.Types = append(st.Types, TypeStatus{ID: ts.Type, Name: ts.Name,
			ProfiledMeanServiceNs: p.MeanService, ProfiledSamples: p.Count, ProfiledShare: p.Ratio,
			Queued: ts.Queued, Received: ts.Received, Answered: ts.Answered, Dropped: ts.Dropped,
			MeasuredMeanServiceNs: ts.MeasuredMeanServiceNs(), MeanQueueingNs: ts.MeanQueueingNs()})
	}
	return st
}
