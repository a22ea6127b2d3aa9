package darc

import (
	"fmt"
	"math"
)

// This file holds the isolation every policy shares: per-type shares of the
// pool (admission) and per-type queue deadlines (expiry).
//
// The pool is split in two. The guaranteed part (Config.Guaranteed of it)
// is divided into per-type guarantees: a type holding less than its
// guarantee is always admitted, whatever the others do, so a type with work
// keeps its part even while others flood. The rest is shared: a type past
// its guarantee borrows from it, up to its budget (Config.Budgets; by
// default its guarantee plus the whole shared part), while some is left.
// Guarantees plus the shared part never exceed the pool, so the driver
// never runs out of buffers because of what is queued or running. Admission
// is two comparisons and a counter.
//
// A later layer of tenant shares nests the same split: the pool into
// tenants' guarantees and a shared part, each tenant's guarantee into its
// types'; a request is admitted when both its type and its tenant are.

// noDeadline is the deadline of a type without one: 146 years, so that a
// time plus it never overflows and needs no test on the hot path.
const noDeadline = int64(1) << 62

// share is a pool split: per-type guarantees and ceilings, and the shared
// part.
type share struct {
	guarantee []int
	budget    []int
	shared    int
}

// splitPool splits a pool of pool requests over n types: fixed guarantees
// and budgets where given (> 0), and for the other types an equal part of
// what fixed guarantees leave of the guaranteed share (guaranteed x pool),
// UNKNOWN getting one part for every UnknownBudgetShare parts of a known
// type. Every guarantee is at least 1, guarantees never exceed budgets, and
// the guarantees and the shared part add up to the pool; otherwise it
// returns an error saying what does not fit.
func splitPool(pool int, guaranteed float64, fixedGuarantees, fixedBudgets []int, n int) (share, error) {
	sh := share{guarantee: make([]int, n), budget: make([]int, n)}
	at := func(xs []int, t int) int {
		if t < len(xs) {
			return xs[t]
		}
		return 0
	}
	left := int(guaranteed * float64(pool))
	fixed, weights := 0, 0
	for t := 0; t < n; t++ {
		g, b := at(fixedGuarantees, t), at(fixedBudgets, t)
		switch {
		case g < 0 || g > pool:
			return sh, fmt.Errorf("guarantee of type %d is %d (must be 1..%d, the pool, or 0 for a share of the pool)", t, g, pool)
		case b < 0 || b > pool:
			return sh, fmt.Errorf("budget of type %d is %d (must be 1..%d, the pool, or 0 for the default)", t, b, pool)
		case b > 0 && g > b:
			return sh, fmt.Errorf("type %d: guarantee %d above its budget %d", t, g, b)
		case g > 0:
			sh.guarantee[t] = g
			fixed += g
		case t == int(Unknown):
			weights++
		default:
			weights += UnknownBudgetShare
		}
	}
	if fixed > pool {
		return sh, fmt.Errorf("guarantees add up to %d, more than the pool's %d buffers (lower them or give the dataplane more buffers)", fixed, pool)
	}
	left = max(left-fixed, 0)
	if weights > 0 {
		unit := left / weights
		if unit < 1 {
			return sh, fmt.Errorf("a pool of %d buffers cannot guarantee each of %d types a part of its own (give the dataplane more buffers, declare fewer types, or raise the guaranteed share)", pool, n)
		}
		for t := range sh.guarantee {
			if sh.guarantee[t] != 0 {
				continue
			}
			if t == int(Unknown) {
				sh.guarantee[t] = unit
			} else {
				sh.guarantee[t] = unit * UnknownBudgetShare
			}
		}
	}
	total := 0
	for t := range sh.guarantee {
		if b := at(fixedBudgets, t); b > 0 {
			sh.guarantee[t] = min(sh.guarantee[t], b)
		}
		total += sh.guarantee[t]
	}
	sh.shared = pool - total
	for t := range sh.budget {
		sh.budget[t] = sh.guarantee[t] + sh.shared
		if b := at(fixedBudgets, t); b > 0 {
			sh.budget[t] = b
		}
	}
	return sh, nil
}

// typeLimit is one type's admission and expiry state, read on every enqueue
// and dispatch: one slot, one bounds check, one cache line.
type typeLimit struct {
	queued     int    // requests waiting
	held       int    // requests held now, queued or running
	guarantee  int    // held below this: always admitted (MaxInt without a pool)
	budget     int    // most requests held (MaxInt without a pool)
	capacity   int    // most requests queued (c-FCFS checks it here)
	deadline   int64  // effective deadline, ns (noDeadline: none)
	enqueued   uint64 // accepted since start
	dispatched uint64 // dispatched to a worker since start
}

// limits is the budget and deadline state of a policy.
type limits struct {
	lim      []typeLimit // per type
	shared   int         // the pool's shared part
	borrowed int         // of it in use: the sum over types of held above guarantee
	capacity []int       // per type: most requests queued
	fixed    []int64     // per type: configured deadline: > 0 fixed, < 0 none, 0 automatic
	auto     []bool      // per type: the deadline in force is an automatic one
	scale    []float64

	// nextExpiry is a lower bound of the time at which some queued request
	// passes its deadline: Dispatch looks for expired requests only from
	// then on.
	nextExpiry int64

	// Automatic deadlines follow a profile refreshed on the 1st, 2nd, 4th,
	// ... completion, then every refreshEvery completions (or every as many
	// completions as there are types, when more: a refresh reads every
	// type), unless the policy sets the scales itself (DARC once it
	// reserves).
	completions  uint64
	nextRefresh  uint64
	profMean     []float64
	policyScales bool
}

// deadlineHysteresis is the least relative change of a type's profile
// that moves its automatic deadline.
const deadlineHysteresis = 0.25

// refreshEvery is the period, in completions, of the automatic deadlines'
// profile refresh once past the first doublings.
const refreshEvery = 1024

func newLimits(cfg *Config) limits {
	n := cfg.NumTypes
	l := limits{
		lim:         make([]typeLimit, n),
		capacity:    make([]int, n),
		fixed:       make([]int64, n),
		auto:        make([]bool, n),
		scale:       make([]float64, n),
		profMean:    make([]float64, n),
		nextExpiry:  noDeadline,
		nextRefresh: 1,
	}
	var sh share
	if cfg.Pool > 0 {
		sh, _ = splitPool(cfg.Pool, cfg.Guaranteed, cfg.Guarantees, cfg.Budgets, n) // validated
		l.shared = sh.shared
	}
	for t := range n {
		if cfg.Pool > 0 {
			l.lim[t].budget = sh.budget[t]
			l.lim[t].guarantee = sh.guarantee[t]
			l.capacity[t] = sh.budget[t]
			if cfg.QueueCapacity > 0 {
				l.capacity[t] = min(cfg.QueueCapacity, sh.budget[t])
			}
			l.lim[t].capacity = l.capacity[t]
		} else {
			l.lim[t].budget = math.MaxInt
			l.lim[t].guarantee = math.MaxInt
			l.capacity[t] = cfg.QueueCapacity
			l.lim[t].capacity = cfg.QueueCapacity
		}
		if t < len(cfg.Deadlines) {
			l.fixed[t] = cfg.Deadlines[t]
		}
	}
	l.setDeadlines(cfg)
	return l
}

// setDeadlines derives every type's deadline from its configured value or
// its scale, and makes Dispatch look for expired requests at once.
func (l *limits) setDeadlines(cfg *Config) {
	for t := range l.lim {
		d := noDeadline
		switch f := l.fixed[t]; {
		case f > 0:
			d = min(f, noDeadline) // expiry arithmetic (enqueue time + deadline) never overflows
		case f < 0:
		case cfg.DeadlineFactor > 0 && l.scale[t] > 0:
			v := cfg.DeadlineFactor * l.scale[t]
			if v < float64(cfg.DeadlineFloor) {
				v = float64(cfg.DeadlineFloor)
			}
			if v < float64(noDeadline) {
				d = int64(v)
			}
			// A profile's mean moves with the host's noise from one
			// window to the next: keep the automatic deadline until it
			// moves by more than deadlineHysteresis, so the deadline an
			// operator reads (and a client plans with) is the one applied.
			if old := l.lim[t].deadline; d != noDeadline && old != noDeadline && l.auto[t] &&
				math.Abs(float64(d-old)) <= deadlineHysteresis*float64(old) {
				d = old
			}
		}
		l.auto[t] = l.fixed[t] == 0 && d != noDeadline
		l.lim[t].deadline = d
	}
	l.nextExpiry = math.MinInt64
}

// refreshProfile is the automatic deadlines' profile refresh for policies
// that do not set scales themselves: every type's scale becomes the longest
// mean service time seen among the known types (each type's latest window
// mean). While a known type that has had requests (enqueued[t] > 0) has no
// mean yet, nobody knows how long requests may wait behind it: automatic
// deadlines stay off until its first completion.
func (l *limits) refreshProfile(cfg *Config, w *window) {
	period := max(refreshEvery, uint64(len(l.profMean)))
	if l.completions < period {
		l.nextRefresh = 2 * l.completions
	} else {
		l.nextRefresh = l.completions + period
	}
	if l.policyScales {
		return
	}
	longest := 0.0
	for t := 1; t < len(l.profMean); t++ {
		if w.count[t] > 0 {
			l.profMean[t] = w.mean(t)
		}
		if l.profMean[t] == 0 && l.lim[t].enqueued > 0 {
			longest = 0
			break
		}
		longest = max(longest, l.profMean[t])
	}
	for t := range l.scale {
		l.scale[t] = longest
	}
	l.setDeadlines(cfg)
}

// expired reports whether e has waited past its type's deadline at now.
func (l *limits) expired(e *entry, now int64) bool {
	return now-e.enq > l.lim[e.req.Type].deadline
}

// sweepHead expires the entries at the head of q whose deadline has passed,
// writing them to out from n on, and returns the new n. It stops at the
// first fresh entry (lowering *next to its expiry time) or when out is full
// (setting *next to now, so the next Dispatch goes on).
func (c *core) sweepHead(q *fifo, now int64, out []Assignment, n int, next *int64) int {
	for q.n > 0 {
		e := q.at(0)
		d := c.lim[e.req.Type].deadline
		if now-e.enq <= d {
			if e.enq+d < *next {
				*next = e.enq + d
			}
			return n
		}
		if n == len(out) {
			*next = now
			return n
		}
		c.expire(out, n, q.pop())
		n++
	}
	return n
}

// sweepQueues expires the entries past their deadline at the heads of
// per-type queues (index = type id), writes them to out and returns how
// many, and sets nextExpiry. With one deadline per queue a fresh head means
// a fresh queue, so after a complete sweep every queued request is fresh.
func (c *core) sweepQueues(queues []fifo, now int64, out []Assignment) int {
	next, n := noDeadline, 0
	for t := range queues {
		if n = c.sweepHead(&queues[t], now, out, n, &next); n == len(out) {
			next = now // out is full: go on at the next Dispatch
			break
		}
	}
	c.nextExpiry = next
	return n
}

// unhold counts one request of type t fewer held.
func (l *limits) unhold(t Type) {
	tl := &l.lim[t]
	if tl.held == 0 {
		return // a driver's completion without a dispatch: nothing held
	}
	tl.held--
	if tl.held >= tl.guarantee {
		l.borrowed--
	}
}
