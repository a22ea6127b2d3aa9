package darc

import (
	"fmt"
	"math"
)

// This file holds the isolation every policy shares: per-type budgets of
// the pool (admission) and per-type queue deadlines (expiry).
//
// Budgets partition the pool statically: a type's budget is always there
// for it, whatever the other types do, and the budgets never add up to more
// than the pool, so the driver never runs out of buffers because of what is
// queued or running. A later layer of tenant budgets partitions the pool
// among tenants first and each tenant's budget among its types the same way
// (splitPool on the tenant's share); admission stays one comparison per
// request.

// noDeadline is the deadline of a type without one.
const noDeadline = int64(math.MaxInt64)

// splitPool returns the per-type budgets of a pool of pool requests over n
// types: fixed[t] when > 0, and for the others an equal part of what the
// fixed ones leave, UNKNOWN getting one part for every UnknownBudgetShare
// parts of a known type. Every budget is at least 1 and their sum at most
// pool, or it returns an error saying what does not fit.
func splitPool(pool int, fixed []int, n int) ([]int, error) {
	budgets := make([]int, n)
	left := pool
	weights := 0
	for t := 0; t < n; t++ {
		f := 0
		if t < len(fixed) {
			f = fixed[t]
		}
		switch {
		case f < 0:
			return nil, fmt.Errorf("budget of type %d is %d (must be >= 1, or 0 for a share of the pool)", t, f)
		case f > 0:
			budgets[t] = f
			left -= f
		case t == int(Unknown):
			weights++
		default:
			weights += UnknownBudgetShare
		}
	}
	if left < 0 {
		return nil, fmt.Errorf("budgets add up to %d, more than the pool's %d buffers (lower them or give the dataplane more buffers)", pool-left, pool)
	}
	if weights == 0 {
		return budgets, nil
	}
	unit := left / weights
	if unit < 1 {
		return nil, fmt.Errorf("a pool of %d buffers (%d left by fixed budgets) cannot give each of %d types a budget of its own (give the dataplane more buffers or declare fewer types)", pool, left, n)
	}
	for t := range budgets {
		if budgets[t] != 0 {
			continue
		}
		if t == int(Unknown) {
			budgets[t] = unit
		} else {
			budgets[t] = unit * UnknownBudgetShare
		}
	}
	return budgets, nil
}

// limits is the budget and deadline state of a policy, per type.
type limits struct {
	budget   []int   // most requests held, queued or running (MaxInt without a pool)
	capacity []int   // most requests queued
	held     []int   // requests held now
	deadline []int64 // effective deadline, ns (noDeadline: none)
	fixed    []int64 // configured deadline: > 0 fixed, < 0 none, 0 automatic
	scale    []float64

	// nextExpiry is a lower bound of the time at which some queued request
	// passes its deadline: Dispatch looks for expired requests only from
	// then on.
	nextExpiry int64

	// Automatic deadlines follow a profile refreshed on the 1st, 2nd, 4th,
	// ... completion, then every refreshEvery completions, unless the
	// policy sets the scales itself (DARC once it reserves).
	completions  uint64
	nextRefresh  uint64
	profMean     []float64
	policyScales bool
}

// refreshEvery is the period, in completions, of the automatic deadlines'
// profile refresh once past the first doublings.
const refreshEvery = 1024

func newLimits(cfg *Config) limits {
	n := cfg.NumTypes
	l := limits{
		budget:      make([]int, n),
		capacity:    make([]int, n),
		held:        make([]int, n),
		deadline:    make([]int64, n),
		fixed:       make([]int64, n),
		scale:       make([]float64, n),
		profMean:    make([]float64, n),
		nextExpiry:  noDeadline,
		nextRefresh: 1,
	}
	budgets := l.budget
	if cfg.Pool > 0 {
		budgets, _ = splitPool(cfg.Pool, cfg.Budgets, n) // validated
	}
	for t := range n {
		if cfg.Pool > 0 {
			l.budget[t] = budgets[t]
			l.capacity[t] = budgets[t]
			if cfg.QueueCapacity > 0 {
				l.capacity[t] = min(cfg.QueueCapacity, budgets[t])
			}
		} else {
			l.budget[t] = math.MaxInt
			l.capacity[t] = cfg.QueueCapacity
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
	for t := range l.deadline {
		d := noDeadline
		switch f := l.fixed[t]; {
		case f > 0:
			d = f
		case f < 0:
		case cfg.DeadlineFactor > 0 && l.scale[t] > 0:
			v := cfg.DeadlineFactor * l.scale[t]
			if v < float64(cfg.DeadlineFloor) {
				v = float64(cfg.DeadlineFloor)
			}
			if v < float64(noDeadline) {
				d = int64(v)
			}
		}
		l.deadline[t] = d
	}
	l.nextExpiry = math.MinInt64
}

// refreshProfile is the automatic deadlines' profile refresh for policies
// that do not set scales themselves: every type's scale becomes the longest
// mean service time seen among the known types (each type's latest window
// mean).
func (l *limits) refreshProfile(cfg *Config, w *window) {
	if l.completions < refreshEvery {
		l.nextRefresh = 2 * l.completions
	} else {
		l.nextRefresh = l.completions + refreshEvery
	}
	if l.policyScales {
		return
	}
	longest := 0.0
	for t := 1; t < len(l.profMean); t++ {
		if w.count[t] > 0 {
			l.profMean[t] = w.mean(t)
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
	return now-e.enq > l.deadline[e.req.Type]
}

// noteQueued lowers nextExpiry for an entry of type t queued at enq.
func (l *limits) noteQueued(t Type, enq int64) {
	if d := l.deadline[t]; d != noDeadline && enq+d < l.nextExpiry {
		l.nextExpiry = enq + d
	}
}

// sweepHead expires the entries at the head of q whose deadline has passed,
// writing them to out from n on, and returns the new n. It stops at the
// first fresh entry (lowering *next to its expiry time) or when out is full
// (setting *next to now, so the next Dispatch goes on).
func (c *core) sweepHead(q *ring, now int64, out []Assignment, n int, next *int64) int {
	for q.n > 0 {
		e := q.at(0)
		d := c.deadline[e.req.Type]
		if now-e.enq <= d {
			if d != noDeadline && e.enq+d < *next {
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
func (c *core) sweepQueues(queues []ring, now int64, out []Assignment) int {
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
