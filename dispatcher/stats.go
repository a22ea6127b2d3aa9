package dispatcher

import (
	"slices"
	"strconv"
	"time"

	"github.com/persephone-go/psp/darc"
	"github.com/persephone-go/psp/nic"
)

// Drops counts requests dropped, by reason.
type Drops struct {
	// Runt: payload shorter than Spec.MinPayload.
	Runt uint64 `json:"runt"`
	// Truncated: the datagram did not fit a buffer (oversized).
	Truncated uint64 `json:"truncated"`
	// QueueFull: the request's typed queue was full (its type only).
	QueueFull uint64 `json:"queue_full"`
	// Budget: the request's type held its whole budget of the buffer pool
	// (its type only; see darc.Config.Pool).
	Budget uint64 `json:"budget"`
	// Expired: the request waited in its queue longer than its type's
	// deadline and was dropped before service.
	Expired uint64 `json:"expired"`
	// Overload: Spec.MaxRequests requests were already held.
	Overload uint64 `json:"overload"`
	// ServiceCap: the application refused the request because it asked
	// for more service than the application's cap (see app.OutcomeHandler).
	ServiceCap uint64 `json:"service_cap"`
	// App: the application refused the request (no reply).
	App uint64 `json:"app"`
	// Panic: the application panicked on the request (the worker goes on).
	Panic uint64 `json:"panic"`
	// TxError: the reply could not be transmitted.
	TxError uint64 `json:"tx_error"`
	// Shutdown: still queued or running when the graceful shutdown ended
	// at Spec.DrainTimeout.
	Shutdown uint64 `json:"shutdown"`
	// NoTenant: the packet's port belongs to no tenant (multi-tenant
	// dispatchers without a default tenant).
	NoTenant uint64 `json:"no_tenant"`
	// ClassifierBusy: the tenant's classifier lane held as many packets as
	// it may (its classifier fell behind); dropped before classification.
	ClassifierBusy uint64 `json:"classifier_busy"`
	// Removed: the request's tenant was removed while it waited.
	Removed uint64 `json:"removed"`
	// ClassifierFault: the tenant's classifier failed on the request and
	// the tenant fails closed (darc.Faulted); answered "overloaded" where
	// the application can.
	ClassifierFault uint64 `json:"classifier_fault"`
}

// Total is the sum of all reasons.
func (d Drops) Total() uint64 {
	return d.Runt + d.Truncated + d.QueueFull + d.Budget + d.Expired + d.Overload +
		d.ServiceCap + d.App + d.Panic + d.TxError + d.Shutdown + d.NoTenant + d.ClassifierBusy + d.Removed + d.ClassifierFault
}

// Shed is the part of the drops the server chose to make because it was
// overloaded: queue full, budget, expired, overload and classifier busy.
func (d Drops) Shed() uint64 {
	return d.QueueFull + d.Budget + d.Expired + d.Overload + d.ClassifierBusy
}

// Reason is why a request was dropped; its String is the name used in
// Drops' JSON and in metrics.
type Reason uint8

// Drop reasons, one per Drops field. Their values are stable: protocols
// may carry them (the kv application's overloaded reply does).
const (
	ReasonRunt Reason = iota
	ReasonTruncated
	ReasonQueueFull
	ReasonBudget
	ReasonExpired
	ReasonOverload
	ReasonServiceCap
	ReasonApp
	ReasonPanic
	ReasonTxError
	ReasonShutdown
	ReasonNoTenant
	ReasonClassifierBusy
	ReasonRemoved
	ReasonClassifierFault
	numReasons
)

var reasonNames = [numReasons]string{"runt", "truncated", "queue_full", "budget", "expired", "overload",
	"service_cap", "app", "panic", "tx_error", "shutdown", "no_tenant", "classifier_busy", "removed", "classifier_fault"}

// String returns the reason's name, as in Drops' JSON.
func (r Reason) String() string {
	if r < numReasons {
		return reasonNames[r]
	}
	return "unknown"
}

// Reasons lists every drop reason, in the order of Drops' fields.
func Reasons() []Reason {
	rs := make([]Reason, numReasons)
	for i := range rs {
		rs[i] = Reason(i)
	}
	return rs
}

// Since returns the drops counted after earlier (an older copy of the same
// counters), reason by reason.
func (d Drops) Since(earlier Drops) Drops {
	for r := range numReasons {
		f := d.field(r)
		*f -= min(*f, earlier.Count(r))
	}
	return d
}

// String lists the non-zero reasons with their counts, "budget 12,
// expired 3", or returns "none".
func (d Drops) String() string {
	var b []byte
	for r := range numReasons {
		if n := d.Count(r); n > 0 {
			if len(b) > 0 {
				b = append(b, ", "...)
			}
			b = append(b, r.String()...)
			b = append(b, ' ')
			b = strconv.AppendUint(b, n, 10)
		}
	}
	if len(b) == 0 {
		return "none"
	}
	return string(b)
}

// Count returns the drops for reason r.
func (d *Drops) Count(r Reason) uint64 { return *d.field(r) }

func (d *Drops) add(r Reason) { *d.field(r)++ }

func (d *Drops) field(r Reason) *uint64 {
	switch r {
	case ReasonRunt:
		return &d.Runt
	case ReasonTruncated:
		return &d.Truncated
	case ReasonQueueFull:
		return &d.QueueFull
	case ReasonBudget:
		return &d.Budget
	case ReasonExpired:
		return &d.Expired
	case ReasonOverload:
		return &d.Overload
	case ReasonServiceCap:
		return &d.ServiceCap
	case ReasonApp:
		return &d.App
	case ReasonPanic:
		return &d.Panic
	case ReasonTxError:
		return &d.TxError
	case ReasonNoTenant:
		return &d.NoTenant
	case ReasonClassifierBusy:
		return &d.ClassifierBusy
	case ReasonRemoved:
		return &d.Removed
	case ReasonClassifierFault:
		return &d.ClassifierFault
	}
	return &d.Shutdown
}

// TypeStats are one request type's counters.
type TypeStats struct {
	Type     darc.Type `json:"type"`
	Name     string    `json:"name"`
	Received uint64    `json:"received"` // classified as this type
	Answered uint64    `json:"answered"`
	Dropped  uint64    `json:"dropped"` // Drops.Total()
	Drops    Drops     `json:"drops"`   // by reason (runts and truncated datagrams have no type)
	Queued   int       `json:"queued"`  // waiting in the typed queue now
	Running  int       `json:"running"` // on a worker now
	// Parked counts the requests parked now (app.Reply.Park): waiting,
	// on no worker and in no queue, for the application to let them run
	// again.
	Parked int `json:"parked,omitempty"`
	// MaxWaitNs is the longest a request of this type dispatched during the
	// last stats interval waited in its queue (ns).
	MaxWaitNs int64 `json:"max_wait_ns"`
	// ShedRate is the rate of this type's shed drops (Drops.Shed) over
	// the last second, requests/s.
	ShedRate float64 `json:"shed_rate"`
	// Dispatched counts the requests handed to a worker; QueueingNsSum sums
	// their queueing delays, from enqueue to dispatch (ns, dispatcher
	// clock).
	Dispatched    uint64 `json:"dispatched"`
	QueueingNsSum uint64 `json:"queueing_ns_sum"`
	// Completed counts the requests a worker finished running, answered or
	// not; ServiceNsSum sums their measured service times (ns, worker
	// clock).
	Completed    uint64 `json:"completed"`
	ServiceNsSum uint64 `json:"service_ns_sum"`
	// InPlace counts the requests the dispatcher served itself, on the
	// chosen worker's behalf, because that worker was parked and the
	// type's expected service (ExpectedServiceNs, smoothed over its
	// recent services) was under Stats.InPlaceLimitNs; HandOffs counts
	// the others handed to a worker thread while serving in place is on,
	// by why (all three stay 0 while it is off).
	InPlace           uint64   `json:"in_place"`
	HandOffs          HandOffs `json:"hand_offs"`
	ExpectedServiceNs int64    `json:"expected_service_ns"`
}

// MeasuredMeanServiceNs is the mean measured service time of the
// completed requests (0 before the first).
func (t *TypeStats) MeasuredMeanServiceNs() float64 {
	if t.Completed == 0 {
		return 0
	}
	return float64(t.ServiceNsSum) / float64(t.Completed)
}

// MeanQueueingNs is the mean queueing delay of the dispatched requests (0
// before the first).
func (t *TypeStats) MeanQueueingNs() float64 {
	if t.Dispatched == 0 {
		return 0
	}
	return float64(t.QueueingNsSum) / float64(t.Dispatched)
}

// Stats is a snapshot of a dispatcher's counters, published periodically by
// the dispatcher goroutine. Counters are totals since Run started.
type Stats struct {
	// At is the snapshot time on the dataplane clock (ns).
	At int64 `json:"at_ns"`
	// Workers is the number of application workers.
	Workers int `json:"workers"`
	// InPlaceLimitNs is the longest expected service of a request the
	// dispatcher serves in place (0: it never does; see Spec.InPlaceLimit).
	InPlaceLimitNs int64 `json:"in_place_limit_ns"`
	// DispatcherSpinNs is how long the dispatcher polls the dataplane
	// after its last work before it parks (Spec.DispatcherSpin, at least
	// Spec.Spin; -1: it never parks, under busy-poll); DispatcherParks
	// counts the times it parked. A request that finds it parked waits
	// for its thread to wake up (StageReceive).
	DispatcherSpinNs int64  `json:"dispatcher_spin_ns"`
	DispatcherParks  uint64 `json:"dispatcher_parks"`
	// Running reports whether Run is in progress; Draining whether it is
	// shutting down.
	Running  bool `json:"running"`
	Draining bool `json:"draining"`

	Received uint64 `json:"received"` // accepted from the dataplane (every packet Recv returned)
	Answered uint64 `json:"answered"` // replies transmitted
	Dropped  uint64 `json:"dropped"`  // Drops.Total()
	InFlight uint64 `json:"in_flight"`
	Drops    Drops  `json:"drops"`
	// OverloadReplies counts the shed requests (queue full, budget,
	// expired, overload, shutdown) answered with an "overloaded" reply by an
	// application implementing app.OverloadReplier; they are counted as drops.
	OverloadReplies uint64 `json:"overload_replies"`
	// Overloaded reports that requests were shed (Drops.Shed) during the
	// last second; ShedRate is their rate over it, requests/s.
	Overloaded bool    `json:"overloaded"`
	ShedRate   float64 `json:"shed_rate"`
	// Pool is the number of requests the policy may hold at once (the
	// dataplane's request buffers split into per-type budgets), 0 when
	// unbounded. Held is how many it holds now (queued + busy).
	Pool int `json:"pool"`
	// Abandoned is the number of requests still running on workers when
	// the drain timed out: Run returned without waiting for them (they are
	// counted in Drops.Shutdown).
	Abandoned int `json:"abandoned"`
	// Queued requests wait in typed queues; Busy workers run one each.
	Queued uint64 `json:"queued"`
	Busy   int    `json:"busy"`
	// Parked requests wait for the application to let them run again
	// (app.Reply.Park), in InFlight too.
	Parked int `json:"parked,omitempty"`

	// IdleWorkers is the time-weighted mean number of idle workers over the
	// last stats interval; CPUWaste the same restricted to the time when some
	// request was waiting in a queue (cores idling while work waits).
	IdleWorkers float64 `json:"idle_workers"`
	CPUWaste    float64 `json:"cpu_waste"`
	// CPUWasteTotal is CPUWaste averaged over the whole run.
	CPUWasteTotal float64 `json:"cpu_waste_total"`
	// IdleWorkerSeconds integrates the number of idle workers over the
	// whole run (worker-seconds); WasteWorkerSeconds the same while some
	// request waited. Their rates are the mean idle workers and CPU waste.
	IdleWorkerSeconds  float64 `json:"idle_worker_seconds"`
	WasteWorkerSeconds float64 `json:"waste_worker_seconds"`

	Types     []TypeStats   `json:"types"`
	Policy    darc.Snapshot `json:"policy"`
	Dataplane nic.Stats     `json:"dataplane"`

	// Classifying is the number of packets on tenants' classifier lanes
	// (in InFlight too); Tenants has one entry per tenant of a
	// multi-tenant dispatcher, removed ones included.
	Classifying uint64        `json:"classifying,omitempty"`
	Tenants     []TenantStats `json:"tenants,omitempty"`
}

// typeCounters are the dispatcher goroutine's per-type counters.
type typeCounters struct {
	received   uint64
	answered   uint64
	drops      Drops
	queued     uint64 // waiting in the policy now
	running    int    // on a worker now
	maxWait    int64  // longest wait dispatched this stats interval
	dispatched uint64
	queueingNs uint64 // sum over dispatched requests
	completed  uint64
	serviceNs  uint64 // sum over completed requests
	inPlace    uint64 // served by the dispatcher itself
	parked     uint64 // parked now (park.go)
	handOffs   HandOffs
	expect     darc.ServiceEstimate
}

// TenantStats are one tenant's counters: its packets (Received = Answered
// + Dropped + Queued + Running + Parked + Classifying), its types' sums,
// its lane and its share in the policy.
type TenantStats struct {
	Name     string    `json:"name"`
	Ports    []uint16  `json:"ports,omitempty"`
	Base     darc.Type `json:"base"`
	NumTypes int       `json:"num_types"`
	// Isolation is the tenant's setting; OnLane whether its classifier
	// runs on its lane now, Escalations how many times it was moved there.
	Isolation   string `json:"isolation"`
	OnLane      bool   `json:"on_lane,omitempty"`
	Escalations uint64 `json:"escalations,omitempty"`
	// Probation is the clean lane calls an IsolateAuto tenant needs, once
	// on its lane, to be classified inline again: Spec.LaneProbation,
	// doubled by each escalation soon after the previous one.
	Probation uint64 `json:"probation,omitempty"`
	Removed   bool   `json:"removed,omitempty"`
	// Received counts the packets routed to the tenant.
	Received uint64 `json:"received"`
	Answered uint64 `json:"answered"`
	Dropped  uint64 `json:"dropped"`
	Drops    Drops  `json:"drops"`
	Queued   int    `json:"queued"`
	Running  int    `json:"running"`
	Parked   int    `json:"parked,omitempty"`
	// Classifying is the number of its packets on its lane now.
	Classifying int `json:"classifying"`
	// ClassifierCalls and ClassifierBusyNs count its classifier's calls
	// (batches), inline and on its lane, and their time (not measured for
	// an IsolateInline tenant: nothing depends on it).
	ClassifierCalls  uint64 `json:"classifier_calls"`
	ClassifierBusyNs uint64 `json:"classifier_busy_ns"`
	// Policy is its state in the policy (home workers, busy, borrowed,
	// lent, pool share).
	Policy darc.TenantState `json:"policy"`
}

// plus returns the reason-by-reason sum of d and o.
func (d Drops) plus(o Drops) Drops {
	for r := range numReasons {
		*d.field(r) += o.Count(r)
	}
	return d
}

// statsPerType: a stats publish reads every type (BenchmarkPublish), and a
// classifier may declare 65,535, during whose publish nothing is
// dispatched, so publishes are at least this long per type apart (65,536
// types: 1.6 s; up to 4,000 types, the stats interval decides), about 1% of
// the dispatcher's time at BenchmarkPublish's cost per type. It counts
// types, not the time a publish took, which the OS preempting the
// dispatcher would stretch at random.
const statsPerType = 25 * time.Microsecond

// statsEvery is how long after a stats publish the next one comes.
func (d *Dispatcher) statsEvery() time.Duration {
	return max(d.spec.StatsInterval, time.Duration(d.numTypes)*statsPerType)
}

// shedWindow is the span over which Stats.ShedRate is measured and
// Stats.Overloaded decided; shedSlots is how many stats intervals the ring
// of past totals keeps to cover it.
const (
	shedWindow = time.Second
	shedSlots  = 64
)

// publish builds a Stats snapshot and makes it visible to Stats.
func (d *Dispatcher) publish(now int64) {
	snap := &d.snapshotBuffer
	d.policy.Snapshot(snap)
	d.inPlaceStages.publish(now)
	s := &Stats{
		InPlaceLimitNs:   d.inPlaceLimit,
		DispatcherSpinNs: d.dispatcherSpin(),
		DispatcherParks:  d.parks,
		At:               now,
		Workers:          len(d.workers),
		Running:          d.ran.Load() && !d.stop.Load(),
		Draining:         d.draining,
		Received:         d.received,
		Answered:         d.answered,
		Drops:            d.drops,
		Dropped:          d.drops.Total(),
		OverloadReplies:  d.replied,
		Queued:           d.queued,
		Busy:             d.busy,
		Parked:           len(d.parked),
		InFlight:         d.queued + uint64(d.busy) + uint64(d.classifying()) + uint64(len(d.parked)),
		Pool:             d.pool,
		Abandoned:        d.abandon,
		Types:            make([]TypeStats, d.numTypes),
		Policy:           cloneSnapshot(snap),
		Dataplane:        d.dp.Stats(),
	}
	if window := float64(now - d.windowStart); window > 0 {
		s.IdleWorkers = d.idleAcc / window
		s.CPUWaste = d.wasteAcc / window
	}
	if run := float64(now - d.runStart); run > 0 && d.runStart != 0 {
		s.CPUWasteTotal = d.wasteTotal / run
	}
	s.IdleWorkerSeconds = d.idleTotal / 1e9
	s.WasteWorkerSeconds = d.wasteTotal / 1e9
	d.idleAcc, d.wasteAcc, d.windowStart = 0, 0, now
	for t := range s.Types {
		c := &d.counters[t]
		if *c == (typeCounters{}) { // never seen: a name, all zeros
			s.Types[t].Type, s.Types[t].Name = darc.Type(t), d.names[t]
			continue
		}
		ts := TypeStats{Type: darc.Type(t), Name: d.names[t], Received: c.received, Answered: c.answered,
			Dropped: c.drops.Total(), Drops: c.drops, Queued: int(c.queued), Running: c.running, MaxWaitNs: c.maxWait,
			Dispatched: c.dispatched, QueueingNsSum: c.queueingNs, Completed: c.completed, ServiceNsSum: c.serviceNs,
			InPlace: c.inPlace, HandOffs: c.handOffs, ExpectedServiceNs: c.expect.Ns(), Parked: int(c.parked)}
		c.maxWait = 0
		s.Types[t] = ts
	}
	d.shedRates(s, now)
	d.tenantStats(s)
	d.retireRemoved()
	d.stats.Store(s)
}

// shedRates fills s's shed rates over the last shedWindow from a ring of
// the shed totals recorded at most every shedWindow/32 (so the ring covers
// the window whatever the stats interval).
func (d *Dispatcher) shedRates(s *Stats, now int64) {
	stride := d.numTypes + 1
	total := func(t int) uint64 { // t = -1: all types
		if t < 0 {
			return s.Drops.Shed()
		}
		return s.Types[t].Drops.Shed()
	}
	// The oldest recorded slot within the window, else the newest before it.
	base := -1
	for i := 1; i <= d.shedCount; i++ {
		j := (d.shedNext - i + shedSlots) % shedSlots
		base = j
		if now-d.shedAt[j] > int64(shedWindow) {
			break
		}
	}
	if base >= 0 {
		if span := float64(now-d.shedAt[base]) / 1e9; span > 0 {
			b := d.shedRing[base*stride : (base+1)*stride]
			s.ShedRate = float64(total(-1)-b[0]) / span
			s.Overloaded = total(-1) > b[0]
			for t := range s.Types {
				if x := total(t) - b[t+1]; x != 0 {
					s.Types[t].ShedRate = float64(x) / span
				}
			}
		}
	}
	last := (d.shedNext - 1 + shedSlots) % shedSlots
	if d.shedCount > 0 && now-d.shedAt[last] < int64(shedWindow)/32 {
		return
	}
	slot := d.shedRing[d.shedNext*stride : (d.shedNext+1)*stride]
	slot[0] = total(-1)
	for t := range s.Types {
		slot[t+1] = total(t)
	}
	d.shedAt[d.shedNext] = now
	d.shedNext = (d.shedNext + 1) % shedSlots
	d.shedCount = min(d.shedCount+1, shedSlots)
}

// cloneSnapshot deep-copies s so the published copy shares nothing with the
// dispatcher's reused buffer.
func cloneSnapshot(s *darc.Snapshot) darc.Snapshot {
	c := *s
	c.Groups = make([]darc.Group, len(s.Groups))
	for i, g := range s.Groups {
		g.Types = append([]darc.Type(nil), g.Types...)
		g.Reserved = append([]int(nil), g.Reserved...)
		g.Stealable = append([]int(nil), g.Stealable...)
		c.Groups[i] = g
	}
	c.Types = append([]darc.TypeState(nil), s.Types...)
	c.Busy = append([]bool(nil), s.Busy...)
	if s.Tenants != nil {
		c.Tenants = make([]darc.TenantState, len(s.Tenants))
		for i, t := range s.Tenants {
			t.Home = append([]int(nil), t.Home...)
			c.Tenants[i] = t
		}
	}
	return c
}

// tenantStats fills s.Tenants (publish).
func (d *Dispatcher) tenantStats(s *Stats) {
	mt := d.mt
	s.Tenants = make([]TenantStats, 0, len(mt.tenants))
	for _, t := range mt.tenants {
		if t.retired {
			continue
		}
		ts := TenantStats{Name: t.spec.Name, Ports: slices.Clone(t.spec.Ports), Base: t.base, NumTypes: t.numTypes,
			Isolation: t.spec.Isolation.String(), OnLane: t.onLane, Escalations: t.escalations, Probation: t.probation, Removed: t.removed,
			Received: t.received, ClassifierCalls: t.calls, ClassifierBusyNs: t.busyNs}
		for typ := int(t.base); typ < int(t.base)+t.numTypes && typ < len(s.Types); typ++ {
			x := &s.Types[typ]
			if x.Answered == 0 && x.Dropped == 0 && x.Queued == 0 && x.Running == 0 && x.Parked == 0 {
				continue
			}
			ts.Answered += x.Answered
			ts.Drops = ts.Drops.plus(x.Drops)
			ts.Queued += x.Queued
			ts.Running += x.Running
			ts.Parked += x.Parked
		}
		ts.Dropped = ts.Drops.Total()
		if l := t.lane; l != nil {
			ts.Classifying = l.inflight
			ts.ClassifierCalls += l.calls.Load()
			ts.ClassifierBusyNs += l.busyNs.Load()
		}
		for _, p := range s.Policy.Tenants {
			if p.Base == t.base {
				ts.Policy = p
			}
		}
		s.Tenants = append(s.Tenants, ts)
	}
	s.Classifying = uint64(mt.classifying)
}
