package server

import (
	"github.com/persephone-go/psp/darc"
	"github.com/persephone-go/psp/dispatcher"
	"github.com/persephone-go/psp/nic"
	"github.com/persephone-go/psp/nic/tcp"
	"github.com/persephone-go/psp/nic/udp"
)

// Status is the JSON document GET /status returns. Every JSON name is
// snake_case; durations carry their unit in the name.
type Status struct {
	Policy   string  `json:"policy"`
	Phase    string  `json:"phase"` // "startup" while DARC profiles, then "darc"; baselines: their name
	App      string  `json:"app"`
	Dilation float64 `json:"dilation,omitempty"`
	Workers  int     `json:"workers"`
	// WorkersAuto: Workers followed the usable CPUs (--workers auto, the
	// default).
	WorkersAuto bool   `json:"workers_auto"`
	Listen      string `json:"listen"`
	Dataplane   string `json:"dataplane"`
	// TCP holds the TCP dataplane's connection counters (a tcp:// listen
	// address).
	TCP           *tcp.ConnStats `json:"tcp,omitempty"`
	UptimeSeconds float64        `json:"uptime_seconds"`
	// CountersAgeSeconds is how long before this status the dispatcher
	// published the counters in it (it does every stats interval); the
	// classifiers' fault counts are read as they are, so a request's fault
	// may show that long before its type's count does.
	CountersAgeSeconds float64 `json:"counters_age_seconds"`
	Running            bool    `json:"running"`
	Draining           bool    `json:"draining"`

	// Received = Answered + Dropped (Drops by reason) + InFlight; packets
	// the kernel or the device dropped before psp received them are in
	// Net.RxDropped.
	Received uint64 `json:"received"`
	Answered uint64 `json:"answered"`
	Dropped  uint64 `json:"dropped"`
	InFlight uint64 `json:"in_flight"`
	Queued   uint64 `json:"queued"`
	Busy     int    `json:"busy"`
	// Parked requests wait, in InFlight, for the application to let them
	// run again (a Redis BLPOP on an empty list).
	Parked int              `json:"parked,omitempty"`
	Drops  dispatcher.Drops `json:"drops"`
	// OverloadReplies counts shed requests answered "overloaded" (kv).
	OverloadReplies uint64 `json:"overload_replies"`
	// Overloaded reports that the server shed requests (queue full, budget,
	// expired, overload) during the last second; ShedRate is their rate.
	Overloaded bool    `json:"overloaded"`
	ShedRate   float64 `json:"shed_rate"`
	// Pool is the number of requests the policy may hold (the buffers the
	// dataplane lends to requests; 0: unbounded): the types' guarantees plus
	// a shared part, of which Borrowed is in use.
	Pool     int `json:"pool"`
	Shared   int `json:"shared"`
	Borrowed int `json:"borrowed"`
	// Abandoned counts requests still running at the drain timeout.
	Abandoned int `json:"abandoned,omitempty"`

	// InPlaceLimitNs is the longest expected service of a request the
	// dispatcher serves itself when its worker's thread is parked (0:
	// never; --in-place).
	InPlaceLimitNs int64 `json:"in_place_limit_ns"`
	// DispatcherSpinNs is how long the dispatcher polls for requests
	// after its last work before it parks (-1: never, busy-poll;
	// --dispatcher-spin); DispatcherParks counts the times it parked.
	DispatcherSpinNs int64  `json:"dispatcher_spin_ns"`
	DispatcherParks  uint64 `json:"dispatcher_parks"`
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
	// MultiTenant: the server's policy gives tenants shares (darc,
	// darc-static), so tenants are added, changed and removed at run time,
	// whether it started with one or many; false: a fixed set under a
	// policy without shares. Classifying counts packets on tenants'
	// classifier lanes (in InFlight too).
	MultiTenant bool   `json:"multi_tenant,omitempty"`
	Classifying uint64 `json:"classifying,omitempty"`
	// Net holds the dataplane's counters.
	Net nic.Stats `json:"net"`
	// KernelDrops are the datagrams the kernel dropped at each port's
	// receive socket before psp read them (the UDP dataplane; their sum,
	// with removed ports', is Net.RxDropped): a full socket buffer, the
	// server not reading fast enough.
	KernelDrops []udp.PortDrops `json:"kernel_drops,omitempty"`
	// AppCounters are the application's own figures (Application.Counters).
	AppCounters []AppCounter `json:"app_counters,omitempty"`
	// Runtime describes the Go runtime under the server.
	Runtime RuntimeStatus `json:"runtime"`
}

// RuntimeStatus shows the Go runtime's share of the requests' time: how
// long goroutines waited for a processor (P) once runnable.
type RuntimeStatus struct {
	GOMAXPROCS int `json:"gomaxprocs"`
	// SchedLatency is the runtime's /sched/latencies:seconds since start:
	// how long goroutines waited, runnable, before running (quantiles are
	// upper bounds of the runtime's buckets).
	SchedLatency LatencySummary `json:"sched_latency"`
}

// LatencySummary summarizes a distribution of durations. Quantiles are
// upper bounds of the histogram bucket holding them (at most 26% above
// for stage histograms); -1 means above the histogram's last bound.
type LatencySummary struct {
	Count  uint64  `json:"count"`
	MeanNs float64 `json:"mean_ns"`
	P50Ns  int64   `json:"p50_ns"`
	P99Ns  int64   `json:"p99_ns"`
	P999Ns int64   `json:"p999_ns"`
}

// StageBreakdown is where one type's requests spent their time in the
// server, stage by stage (see dispatcher.Stage): receive, queueing,
// handoff and service cover every request a worker ran, transmit and
// latency the answered ones. Means add up to the mean latency.
type StageBreakdown struct {
	Receive  LatencySummary `json:"receive"`
	Queueing LatencySummary `json:"queueing"`
	Handoff  LatencySummary `json:"handoff"`
	Service  LatencySummary `json:"service"`
	Transmit LatencySummary `json:"transmit"`
	Latency  LatencySummary `json:"latency"`
}

// Stage returns the summary of stage s.
func (b *StageBreakdown) Stage(s dispatcher.Stage) *LatencySummary {
	switch s {
	case dispatcher.StageReceive:
		return &b.Receive
	case dispatcher.StageQueueing:
		return &b.Queueing
	case dispatcher.StageHandoff:
		return &b.Handoff
	case dispatcher.StageService:
		return &b.Service
	case dispatcher.StageTransmit:
		return &b.Transmit
	default:
		return &b.Latency
	}
}

// ByName returns the summary of the named stage (see StageNames), or nil.
func (b *StageBreakdown) ByName(name string) *LatencySummary {
	for _, s := range dispatcher.Stages() {
		if s.String() == name {
			return b.Stage(s)
		}
	}
	return nil
}

// StageNames lists the stages in the order a request goes through them,
// named as in the JSON and the metrics (psp_request_<name>_seconds).
func StageNames() []string {
	var names []string
	for _, s := range dispatcher.Stages() {
		names = append(names, s.String())
	}
	return names
}

// newStageBreakdown summarizes a type's stage histograms.
func newStageBreakdown(h *dispatcher.TypeStages) *StageBreakdown {
	b := &StageBreakdown{}
	for s := range h {
		hs := &h[s]
		*b.Stage(dispatcher.Stage(s)) = LatencySummary{Count: hs.Count, MeanNs: hs.MeanNs(),
			P50Ns: hs.QuantileNs(0.5), P99Ns: hs.QuantileNs(0.99), P999Ns: hs.QuantileNs(0.999)}
	}
	return b
}

// GroupStatus is one group of the current reservation.
type GroupStatus struct {
	Types     []string    `json:"types"`
	TypeIDs   []darc.Type `json:"type_ids"`
	Demand    float64     `json:"demand"`
	Reserved  []int       `json:"reserved"`
	Stealable []int       `json:"stealable"`
	Spillway  bool        `json:"spillway"`
	Tenant    string      `json:"tenant,omitempty"` // the tenant whose group it is
}

// TypeStatus is one request type's profile and counters.
type TypeStatus struct {
	ID   darc.Type `json:"id"`
	Name string    `json:"name"`
	// Tenant is the tenant whose type it is ("": the UNKNOWN of packets
	// of no tenant), Local its id in the tenant's own type space (0: the
	// tenant's UNKNOWN).
	Tenant string    `json:"tenant,omitempty"`
	Local  darc.Type `json:"local"`
	// The policy's current profiling window: the mean service time it
	// reserves by, the completions it was computed from and the type's
	// share of them.
	ProfiledMeanServiceNs float64 `json:"profiled_mean_service_ns"`
	ProfiledSamples       uint64  `json:"profiled_samples"`
	ProfiledShare         float64 `json:"profiled_share"`
	// Counters since start.
	Queued   int              `json:"queued"`
	Running  int              `json:"running"`
	Parked   int              `json:"parked,omitempty"`
	Received uint64           `json:"received"`
	Answered uint64           `json:"answered"`
	Dropped  uint64           `json:"dropped"`
	Drops    dispatcher.Drops `json:"drops"`
	// MeasuredMeanServiceNs is the mean service time of every request a
	// worker ran since start (worker clock); MeanQueueingNs the mean time
	// from enqueue to dispatch.
	MeasuredMeanServiceNs float64 `json:"measured_mean_service_ns"`
	MeanQueueingNs        float64 `json:"mean_queueing_ns"`
	// Budget is the most requests of the type held at once (queued or
	// running; 0: unbounded), Guarantee how many it can always hold, Held
	// how many it holds now, Capacity its queue's bound.
	Budget    int `json:"budget"`
	Guarantee int `json:"guarantee"`
	Held      int `json:"held"`
	Capacity  int `json:"capacity"`
	// DeadlineNs is the longest a request of the type may wait in its
	// queue before it is dropped as expired (0: none); MaxWaitNs the
	// longest wait of a request dispatched in the last stats interval.
	DeadlineNs int64 `json:"deadline_ns"`
	MaxWaitNs  int64 `json:"max_wait_ns"`
	// ShedRate is the type's shed drops per second over the last second.
	ShedRate float64 `json:"shed_rate"`
	// InPlace counts the requests the dispatcher served itself because
	// their worker's thread was parked and the type's expected service
	// (ExpectedServiceNs) was under Status.InPlaceLimitNs; HandOffs the
	// others, handed to a worker's thread, by why (see
	// dispatcher.HandOffs).
	InPlace           uint64              `json:"in_place"`
	HandOffs          dispatcher.HandOffs `json:"hand_offs"`
	ExpectedServiceNs int64               `json:"expected_service_ns"`
	// Stages is where the type's requests spent their time, stage by
	// stage, since start; absent before a worker ran one.
	Stages *StageBreakdown `json:"stages,omitempty"`
}

// TenantInfo is one tenant: its classifier, its counters and, under a
// policy with shares, its share.
type TenantInfo struct {
	Name    string   `json:"name"`
	Version int      `json:"version"`
	Native  bool     `json:"native,omitempty"` // a native classifier (the application's or psp-header)
	Ports   []uint16 `json:"ports,omitempty"`
	Types   []string `json:"types"`
	// Faults counts classifier faults by kind (Wasm tenants only).
	Faults map[string]uint64 `json:"faults,omitempty"`
	// Restarts counts classifier instances restarted after a fault.
	Restarts    uint64 `json:"restarts,omitempty"`
	BreakerOpen bool   `json:"breaker_open,omitempty"`
	// Disabled: a call exceeded the time limit; the tenant's packets go to
	// its UNKNOWN until its classifier is replaced.
	Disabled bool `json:"disabled,omitempty"`
	// SHA256, Size and LoadedAt (RFC 3339) identify the running module as
	// uploaded; PreviousSHA256 is the one a rollback returns to.
	SHA256         string `json:"sha256,omitempty"`
	Size           int    `json:"size,omitempty"`
	LoadedAt       string `json:"loaded_at,omitempty"`
	PreviousSHA256 string `json:"previous_sha256,omitempty"`
	// Reference is the registry reference, pinned by digest, the running
	// module was pulled from: psp serve pulled it (the config named it), or
	// the client that swapped it into this tenant said so (its word, not
	// checked against the registry, and shown for this tenant only); ""
	// for a file.
	Reference string `json:"reference,omitempty"`
	// Provisional is set while the tenant's last swap awaits its
	// confirmation (POST /tenants/{name}/confirm).
	Provisional *ProvisionalInfo `json:"provisional,omitempty"`
	// Configured is the classifier the config names, set when the tenant
	// does not run the module the config gave it: it started from the
	// state file (what swaps and rollouts made of it before a restart),
	// or was swapped since.
	Configured string `json:"configured,omitempty"`
	// Pending says why the tenant runs a placeholder: its module, named
	// by registry reference, could not be fetched at start ("" otherwise).
	Pending string `json:"pending,omitempty"`
	// Fail is the tenant's failure policy: "open", "closed" or "reload".
	Fail string `json:"fail,omitempty"`

	// Removed tenants keep their counters while they are among the last
	// 8 removed.
	Removed bool `json:"removed,omitempty"`
	// Received counts the packets routed to the tenant: Received =
	// Answered + Dropped + Queued + Running + Parked + Classifying.
	Received    uint64            `json:"received,omitempty"`
	Answered    uint64            `json:"answered,omitempty"`
	Dropped     uint64            `json:"dropped,omitempty"`
	Drops       *dispatcher.Drops `json:"drops,omitempty"`
	Queued      int               `json:"queued,omitempty"`
	Running     int               `json:"running,omitempty"`
	Parked      int               `json:"parked,omitempty"`
	Classifying int               `json:"classifying,omitempty"`
	// Isolation is where its classifier runs (auto, lane or inline),
	// OnLane whether on its own goroutine now, Escalations how many times
	// a fault or a slow call moved it there.
	Isolation   string `json:"isolation,omitempty"`
	OnLane      bool   `json:"on_lane,omitempty"`
	Escalations uint64 `json:"escalations,omitempty"`
	// ClassifierCalls and ClassifierBusySeconds count the tenant's
	// classifier calls on its lane and their time.
	ClassifierCalls       uint64  `json:"classifier_calls,omitempty"`
	ClassifierBusySeconds float64 `json:"classifier_busy_seconds,omitempty"`
	Share                 *Share  `json:"share,omitempty"`
}

// Share is a tenant's share of the workers and of the pool, and its use of
// them now.
type Share struct {
	// HomeWorkers are its guaranteed workers; Weight and MaxWorkers (0: no
	// ceiling) as configured.
	HomeWorkers []int   `json:"home_workers"`
	Weight      float64 `json:"weight"`
	MaxWorkers  int     `json:"max_workers"`
	// Busy workers run its requests now, Borrowed of them are not its
	// own; Lent of its own run other tenants' requests.
	Busy     int `json:"busy"`
	Borrowed int `json:"borrowed"`
	Lent     int `json:"lent"`
	// Guarantee and Budget are its part of the pool (0: no pool), Held
	// what it holds now.
	Guarantee int `json:"guarantee"`
	Budget    int `json:"budget"`
	Held      int `json:"held"`
	// Phase and Reservations are its own DARC's.
	Phase        string `json:"phase"`
	Reservations uint64 `json:"reservations"`
}

// typeExists reports whether type t of s is shown: declared by a
// classifier (declared, by id; nil: none), UNKNOWN, or seen.
func typeExists(t *dispatcher.TypeStats, declared []bool) bool {
	return t.Type == darc.Unknown || (int(t.Type) < len(declared) && declared[t.Type]) ||
		t.Received > 0 || t.Queued > 0 || t.Completed > 0 || t.Dropped > 0
}

// buildStatus assembles a Status from the dispatcher's latest stats and
// the workers' stage histograms (by type id); types not declared by a
// classifier (declared, by id) and never seen are left out.
func buildStatus(s *dispatcher.Stats, stages []*dispatcher.TypeStages, declared []bool) Status {
	st := Status{
		Policy:           s.Policy.Policy,
		Phase:            s.Policy.Phase,
		Workers:          s.Workers,
		Running:          s.Running,
		Draining:         s.Draining,
		Received:         s.Received,
		Answered:         s.Answered,
		Dropped:          s.Dropped,
		InFlight:         s.InFlight,
		Queued:           s.Queued,
		Busy:             s.Busy,
		Parked:           s.Parked,
		Drops:            s.Drops,
		OverloadReplies:  s.OverloadReplies,
		Overloaded:       s.Overloaded,
		ShedRate:         s.ShedRate,
		Pool:             s.Pool,
		Shared:           s.Policy.Shared,
		Borrowed:         s.Policy.Borrowed,
		Abandoned:        s.Abandoned,
		InPlaceLimitNs:   s.InPlaceLimitNs,
		DispatcherSpinNs: s.DispatcherSpinNs,
		DispatcherParks:  s.DispatcherParks,
		IdleWorkers:      s.IdleWorkers,
		CPUWaste:         s.CPUWaste,
		CPUWasteTotal:    s.CPUWasteTotal,
		Reservations:     s.Policy.Reservations,
		Net:              s.Dataplane,
		Groups:           []GroupStatus{},
		Types:            []TypeStatus{},
	}
	name := func(t darc.Type) string {
		if int(t) < len(s.Types) {
			return s.Types[t].Name
		}
		return ""
	}
	for _, g := range s.Policy.Groups {
		gs := GroupStatus{TypeIDs: g.Types, Demand: g.Demand, Reserved: g.Reserved, Stealable: g.Stealable, Spillway: g.Spillway, Tenant: g.Tenant}
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
		tst := TypeStatus{ID: ts.Type, Name: ts.Name,
			ProfiledMeanServiceNs: p.MeanService, ProfiledSamples: p.Count, ProfiledShare: p.Ratio,
			Queued: ts.Queued, Running: ts.Running, Parked: ts.Parked, Received: ts.Received, Answered: ts.Answered, Dropped: ts.Dropped, Drops: ts.Drops,
			MeasuredMeanServiceNs: ts.MeasuredMeanServiceNs(), MeanQueueingNs: ts.MeanQueueingNs(),
			Budget: p.Budget, Guarantee: p.Guarantee, Held: p.Held, Capacity: p.Capacity, DeadlineNs: p.DeadlineNs,
			MaxWaitNs: ts.MaxWaitNs, ShedRate: ts.ShedRate,
			InPlace: ts.InPlace, HandOffs: ts.HandOffs, ExpectedServiceNs: ts.ExpectedServiceNs}
		if int(ts.Type) < len(stages) && stages[ts.Type] != nil {
			tst.Stages = newStageBreakdown(stages[ts.Type])
		}
		st.Types = append(st.Types, tst)
	}
	return st
}
