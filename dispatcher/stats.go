package dispatcher

import (
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
	// Overload: Spec.MaxRequests requests were already held.
	Overload uint64 `json:"overload"`
	// App: the application refused the request (no reply).
	App uint64 `json:"app"`
	// Panic: the application panicked on the request (the worker goes on).
	Panic uint64 `json:"panic"`
	// TxError: the reply could not be transmitted.
	TxError uint64 `json:"tx_error"`
	// Shutdown: still queued when the graceful shutdown timed out.
	Shutdown uint64 `json:"shutdown"`
}

// Total is the sum of all reasons.
func (d Drops) Total() uint64 {
	return d.Runt + d.Truncated + d.QueueFull + d.Overload + d.App + d.Panic + d.TxError + d.Shutdown
}

// TypeStats are one request type's counters.
type TypeStats struct {
	Type     darc.Type `json:"type"`
	Name     string    `json:"name"`
	Received uint64    `json:"received"` // classified as this type
	Answered uint64    `json:"answered"`
	Dropped  uint64    `json:"dropped"` // queue full, app, tx error or shutdown
	Queued   int       `json:"queued"`  // waiting in the typed queue now
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
	// Running reports whether Run is in progress; Draining whether it is
	// shutting down.
	Running  bool `json:"running"`
	Draining bool `json:"draining"`

	Received uint64 `json:"received"` // accepted from the dataplane (every packet Recv returned)
	Answered uint64 `json:"answered"` // replies transmitted
	Dropped  uint64 `json:"dropped"`  // Drops.Total()
	InFlight uint64 `json:"in_flight"`
	Drops    Drops  `json:"drops"`
	// Queued requests wait in typed queues; Busy workers run one each.
	Queued uint64 `json:"queued"`
	Busy   int    `json:"busy"`

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
}

// typeCounters are the dispatcher goroutine's per-type counters.
type typeCounters struct {
	received   uint64
	answered   uint64
	dropped    uint64
	queued     uint64 // waiting in the policy now
	dispatched uint64
	queueingNs uint64 // sum over dispatched requests
	completed  uint64
	serviceNs  uint64 // sum over completed requests
}
