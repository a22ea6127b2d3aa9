package darc

import (
	"strconv"

	"github.com/persephone-go/psp/app"
)

// This file holds the contract between the policy and its two drivers (the
// runtime dispatcher and the simulator). Keep it stable: both depend on it.

// Type is a request type id in the scheduler's global type space: the
// application contract's app.Type. Type 0 is Unknown; known types are
// 1..Config.NumTypes-1.
type Type = app.Type

// Unknown and Faulted are app.Unknown (requests the classifier did not
// recognise, served by spillway workers at the lowest priority) and
// app.Faulted (a classifier's own fault under a fail-closed tenant: never a
// queue; a policy given it treats it as any type out of range).
const (
	Unknown = app.Unknown
	Faulted = app.Faulted
)

// Request is what a driver enqueues: an opaque handle (an index into the
// driver's own request table) and the request's type.
type Request struct {
	Handle uint64
	Type   Type
}

// Assignment is one dispatch decision: run Request on Worker, or, when
// Worker is Expired, drop it: it waited in its queue longer than its type's
// deadline. Enqueued is the time (ns, the driver's clock) at which the
// request was enqueued.
type Assignment struct {
	Worker   int
	Request  Request
	Enqueued int64
}

// Expired is the Worker of an Assignment that drops its request: the request
// waited longer than its type's deadline (see Config.DeadlineFactor) and
// must not be served. The driver releases it and counts it as expired.
const Expired = -1

// Removed is the Worker of an Assignment that drops its request because
// the request's tenant was removed (Tenants.RemoveTenant) while it waited
// in its queue. The driver releases it and counts it as removed.
const Removed = -2

// Verdict is Enqueue's answer.
type Verdict uint8

// Enqueue's verdicts.
const (
	// Accepted: the request is queued.
	Accepted Verdict = iota
	// QueueFull: the request's queue is full (its type's, or for d-FCFS
	// its worker's); it is dropped and counted against its type.
	QueueFull
	// OverBudget: the request's type holds its guarantee of the pool
	// (Config.Pool) and can borrow no more: it reached its budget or the
	// shared part is used up. It is dropped and counted against its type.
	OverBudget
	// NoTenant: in a multi-tenant policy, the request's type belongs to no
	// tenant (or to one that was removed). It is dropped.
	NoTenant
)

// String returns "accepted", "queue_full", "over_budget" or "no_tenant".
func (v Verdict) String() string {
	switch v {
	case Accepted:
		return "accepted"
	case QueueFull:
		return "queue_full"
	case OverBudget:
		return "over_budget"
	case NoTenant:
		return "no_tenant"
	}
	return "verdict(" + strconv.Itoa(int(v)) + ")"
}

// Policy is what a dispatcher drives. All times are nanoseconds on the
// driver's clock; the policy has no clock of its own, no goroutines and no I/O.
//
// A Policy is not safe for concurrent use: one goroutine (the dispatcher, or
// the simulator's event loop) owns it.
type Policy interface {
	// Enqueue appends r to the queue the policy picks for it (its typed
	// queue; for d-FCFS a worker's queue) and returns Accepted, or drops it
	// and says why: its type holds its whole budget (OverBudget) or its
	// queue is full (QueueFull). A drop is counted against r's type only.
	Enqueue(r Request, now int64) Verdict

	// Dispatch fills out with decisions and returns how many it wrote (at
	// most len(out)): (worker, request) pairs for idle workers, following
	// the policy, which it marks busy, and requests that waited longer than
	// their type's deadline, with Worker == Expired, which it forgets (the
	// driver drops them). It allocates nothing.
	Dispatch(now int64, out []Assignment) int

	// Complete tells the policy that worker finished a request of type typ
	// (the type it was dispatched with) that ran for service ns. The worker
	// becomes idle and the request stops counting against its type's
	// budget. Profiling, deadline and re-reservation updates happen here
	// and in Dispatch.
	Complete(worker int, typ Type, service int64, now int64)

	// Snapshot copies the policy's observable state into s, reusing s's
	// slices. It is meant for status pages and tests, not the hot path.
	Snapshot(s *Snapshot)

	// Name is the policy's short name: "darc", "cfcfs", "dfcfs", "fp",
	// "darc-static".
	Name() string
}

// Snapshot is a copy of a policy's observable state.
type Snapshot struct {
	Policy  string
	Workers int
	// Phase is "startup" while DARC still runs c-FCFS to collect its first
	// profile, "darc" after; baselines report their own name.
	Phase string
	// Groups is the current reservation (DARC and DARC-static), shortest
	// group first.
	Groups []Group
	// Types has one entry per type id, Unknown included.
	Types []TypeState
	// Reservations counts how many times the reservation was (re)computed.
	Reservations uint64
	// IdleWorkers is the number of idle workers at snapshot time.
	IdleWorkers int
	// Busy[w] reports whether worker w is running a request.
	Busy []bool
	// Pool is Config.Pool (0: none); Shared the part of it not guaranteed
	// to any type (with tenants: to any tenant), Borrowed how much of that
	// is in use.
	Pool, Shared, Borrowed int
	// Tenants has one entry per tenant of a multi-tenant policy (removed
	// tenants included, flagged), in the order of their type ranges; nil
	// otherwise.
	Tenants []TenantState
}

// TenantState is one tenant's share and use of the workers and the pool in
// a multi-tenant policy.
type TenantState struct {
	Name string
	// Base is the global id of the tenant's local type 0 (its UNKNOWN);
	// its types are Base..Base+NumTypes-1.
	Base     Type
	NumTypes int
	// Phase is the tenant's own DARC phase: "startup" or "darc".
	Phase        string
	Reservations uint64
	// Home lists the tenant's guaranteed (home) workers; Weight, MaxWorkers
	// (0: no ceiling) as configured.
	Home       []int
	Weight     float64
	MaxWorkers int
	// Busy is the number of workers running its requests now, Borrowed how
	// many of them are not its own, Lent how many of its own run another
	// tenant's requests.
	Busy, Borrowed, Lent int
	// Queued and Held are its requests waiting, and waiting or running;
	// Guarantee and Budget its part of the pool (0 without a pool).
	Queued, Held      int
	Guarantee, Budget int
	// Removed: the tenant was removed; its running requests finish.
	Removed bool
}

// Group is a set of types of similar service time sharing reserved workers.
type Group struct {
	Types     []Type
	Demand    float64 // in workers, before rounding
	Reserved  []int   // worker ids reserved for the group
	Stealable []int   // worker ids the group may steal when idle
	Spillway  bool    // the group was given the spillway worker(s)
	Tenant    string  // the tenant whose group it is (multi-tenant policies)
}

// TypeState is one type's profile, queue, budget and deadline.
type TypeState struct {
	Type        Type
	Name        string
	MeanService float64 // ns, mean over the current profile
	Count       uint64  // completions in the current profiling window
	Ratio       float64 // occurrence ratio in the current profile
	Queued      int     // requests waiting now
	Held        int     // requests held now: queued or running
	Enqueued    uint64  // total accepted
	Dropped     uint64  // total dropped by Enqueue: QueueFull + OverBudget
	QueueFull   uint64  // total dropped because the queue was full
	OverBudget  uint64  // total dropped because the type held its whole budget
	Expired     uint64  // total dropped by Dispatch: waited past the deadline
	Dispatched  uint64  // total dispatched to a worker
	// Budget is the most requests of the type held at once (queued or
	// running), Guarantee how many it can always hold whatever the other
	// types do; 0 when the policy has no pool (Config.Pool).
	Budget    int
	Guarantee int
	// Capacity is the most requests of the type queued at once.
	Capacity int
	// DeadlineNs is the longest a request of the type may wait in its queue
	// (ns); 0 when it has none (yet: automatic deadlines need a profile).
	DeadlineNs int64
}
