package darc

import (
	"fmt"
	"math"
)

// Policy names accepted by New.
const (
	NameCFCFS      = "cfcfs"
	NameDFCFS      = "dfcfs"
	NameFP         = "fp"
	NameDARCStatic = "darc-static"
	NameDARC       = "darc"
)

// PolicyNames lists the names New accepts.
func PolicyNames() []string {
	return []string{NameCFCFS, NameDFCFS, NameFP, NameDARCStatic, NameDARC}
}

// New returns the policy called name, configured by cfg.
func New(name string, cfg Config) (Policy, error) {
	if len(cfg.Tenants) > 0 {
		if _, ok := map[string]bool{NameCFCFS: true, NameDFCFS: true, NameFP: true, NameDARCStatic: true, NameDARC: true}[name]; !ok {
			return nil, fmt.Errorf("darc: new policy %q: %w (valid: %v)", name, ErrUnknownPolicy, PolicyNames())
		}
		return NewTenants(name, cfg)
	}
	switch name {
	case NameCFCFS:
		return NewCFCFS(cfg)
	case NameDFCFS:
		return NewDFCFS(cfg)
	case NameFP:
		return NewFP(cfg)
	case NameDARCStatic:
		return NewDARCStatic(cfg)
	case NameDARC:
		return NewDARC(cfg)
	}
	return nil, fmt.Errorf("darc: new policy %q: %w (valid: %v)", name, ErrUnknownPolicy, PolicyNames())
}

// window accumulates completions per type over a profiling window.
type window struct {
	sum   []int64  // service ns per type
	count []uint64 // completions per type
	total uint64   // completions of known types
}

func newWindow(numTypes int) window {
	return window{sum: make([]int64, numTypes), count: make([]uint64, numTypes)}
}

func (w *window) mean(t int) float64 {
	if w.count[t] == 0 {
		return 0
	}
	return float64(w.sum[t]) / float64(w.count[t])
}

func (w *window) ratio(t int) float64 {
	if w.total == 0 {
		return 0
	}
	return float64(w.count[t]) / float64(w.total)
}

func (w *window) reset() {
	clear(w.sum)
	clear(w.count)
	w.total = 0
}

// core holds what every policy shares: configuration, the idle-worker set,
// per-type counters, budgets and deadlines, and a profiling window.
type core struct {
	cfg       Config
	name      string
	numTypes  int
	idle      bitset // idle workers (in a multi-tenant policy, shared by the tenants)
	idleCount int    // idle workers among lo..hi-1
	spill     bitset // spillway workers
	names     []string
	// lo..hi-1 are the workers the policy dispatches to on its own: all of
	// them, or a tenant's home workers in a multi-tenant policy.
	lo, hi int

	total      int // requests waiting, all types
	queueFull  []uint64
	overBudget []uint64
	expiredN   []uint64

	limits
	win window
}

func newCore(name string, cfg Config) (core, error) {
	if err := cfg.Validate(); err != nil {
		return core{}, fmt.Errorf("darc: new %s: %w", name, err)
	}
	cfg = cfg.withDefaults()
	nw := words(cfg.Workers)
	c := core{
		cfg:        cfg,
		name:       name,
		numTypes:   cfg.NumTypes,
		idle:       make(bitset, nw),
		idleCount:  cfg.Workers,
		hi:         cfg.Workers,
		spill:      make(bitset, nw),
		names:      make([]string, cfg.NumTypes),
		queueFull:  make([]uint64, cfg.NumTypes),
		overBudget: make([]uint64, cfg.NumTypes),
		expiredN:   make([]uint64, cfg.NumTypes),
		limits:     newLimits(&cfg),
		win:        newWindow(cfg.NumTypes),
	}
	c.idle.setRange(0, cfg.Workers)
	c.spill.setRange(cfg.Workers-cfg.Spillway, cfg.Workers)
	for t := range c.names {
		c.names[t] = cfg.typeName(t)
	}
	return c, nil
}

// Name implements Policy.
func (c *core) Name() string { return c.name }

// setHome restricts the policy to workers lo..hi-1 (a tenant's home
// workers; hi == lo: none): the last Spillway of them are its spillway
// workers, and its idle count is recounted from the (shared) idle set.
func (c *core) setHome(lo, hi int) {
	c.lo, c.hi = lo, hi
	c.spill.reset()
	c.spill.setRange(max(hi-c.cfg.Spillway, lo), hi)
	c.idleCount = 0
	for w := lo; w < hi; w++ {
		if c.idle.has(w) {
			c.idleCount++
		}
	}
}

// typeOf maps out-of-range type ids to Unknown.
func (c *core) typeOf(t Type) Type {
	if uint64(t) >= uint64(c.numTypes) {
		return Unknown
	}
	return t
}

// assign records the dispatch of e to worker w in out[n].
func (c *core) assign(out []Assignment, n, w int, e entry) {
	c.idle.clear(w)
	c.idleCount--
	c.assignAway(out, n, w, e)
}

// assignAway records the dispatch of e to worker w, one of another
// tenant's workers lent by a multi-tenant policy, which tracks the worker.
func (c *core) assignAway(out []Assignment, n, w int, e entry) {
	l := &c.lim[e.req.Type]
	l.queued--
	l.dispatched++
	c.total--
	out[n] = Assignment{Worker: w, Request: e.req, Enqueued: e.enq}
}

// drop records the drop of e, queued, in out[n]: as worker Removed (its
// tenant was removed) or Expired.
func (c *core) drop(out []Assignment, n int, e entry, worker int) {
	t := e.req.Type
	c.lim[t].queued--
	c.total--
	c.unhold(t)
	out[n] = Assignment{Worker: worker, Request: e.req, Enqueued: e.enq}
}

// expire records the drop of e, past its deadline, in out[n].
func (c *core) expire(out []Assignment, n int, e entry) {
	c.expiredN[e.req.Type]++
	c.drop(out, n, e, Expired)
}

// admit is the budget check of an arrival whose type's state is l: below
// its guarantee it is in; past it, it needs room under its budget and in
// the shared part. A refusal is counted with over.
func (c *core) admit(l *typeLimit) bool {
	return l.held < l.guarantee || (l.held < l.budget && c.borrowed < c.shared)
}

// over counts an arrival of type t refused by admit.
func (c *core) over(t Type) Verdict {
	c.overBudget[t]++
	return OverBudget
}

// accepted and full update the per-type counters of an enqueue.
func (c *core) accepted(l *typeLimit, now int64) Verdict {
	l.queued++
	c.total++
	if l.held >= l.guarantee {
		c.borrowed++
	}
	l.held++
	l.enqueued++
	if x := now + l.deadline; x < c.nextExpiry {
		c.nextExpiry = x
	}
	return Accepted
}

func (c *core) full(t Type) Verdict {
	c.queueFull[t]++
	return QueueFull
}

// release marks worker idle and profiles the completion. It panics on a
// worker id out of range, a driver bug.
func (c *core) release(worker int, typ Type, service int64) {
	if uint(worker) >= uint(c.cfg.Workers) {
		panic(fmt.Sprintf("darc: complete: worker %d out of range [0,%d)", worker, c.cfg.Workers))
	}
	if !c.idle.has(worker) {
		c.idle.set(worker)
		c.idleCount++
	}
	c.profile(typ, service)
}

// profile records the completion of a request of type typ that ran for
// service ns, without touching the workers: a multi-tenant policy frees
// the worker itself (it may belong to another tenant).
func (c *core) profile(typ Type, service int64) {
	typ = c.typeOf(typ)
	c.unhold(typ)
	if typ == Unknown {
		return
	}
	c.win.sum[typ] += service
	c.win.count[typ]++
	c.win.total++
	if c.completions++; c.completions >= c.nextRefresh {
		c.refreshProfile(&c.cfg, &c.win)
	}
}

// snapshot fills the fields every policy shares. Types get the window's mean
// and ratio; DARC overrides them with its current profile.
func (c *core) snapshot(s *Snapshot, phase string) {
	s.Policy = c.name
	s.Workers = c.cfg.Workers
	s.Phase = phase
	s.Groups = s.Groups[:0]
	s.Reservations = 0
	s.IdleWorkers = c.idleCount
	s.Pool, s.Shared, s.Borrowed = c.cfg.Pool, c.shared, c.borrowed
	s.Busy = resize(s.Busy, c.cfg.Workers)
	for w := range s.Busy {
		s.Busy[w] = !c.idle.has(w)
	}
	s.Types = resize(s.Types, c.numTypes)
	for t := range s.Types {
		s.Types[t] = TypeState{
			Type:        Type(t),
			Name:        c.names[t],
			MeanService: c.win.mean(t),
			Count:       c.win.count[t],
			Ratio:       c.win.ratio(t),
			Queued:      c.lim[t].queued,
			Held:        c.lim[t].held,
			Enqueued:    c.lim[t].enqueued,
			Dropped:     c.queueFull[t] + c.overBudget[t],
			QueueFull:   c.queueFull[t],
			OverBudget:  c.overBudget[t],
			Expired:     c.expiredN[t],
			Dispatched:  c.lim[t].dispatched,
			Capacity:    c.capacity[t],
		}
		if c.lim[t].budget != math.MaxInt {
			s.Types[t].Budget = c.lim[t].budget
			s.Types[t].Guarantee = c.lim[t].guarantee
		}
		if d := c.lim[t].deadline; d != noDeadline {
			s.Types[t].DeadlineNs = d
		}
	}
}

// resize returns s with length n, reusing its array when large enough.
func resize[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}
