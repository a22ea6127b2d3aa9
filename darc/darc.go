package darc

// DARC is Dynamic Application-aware Reserved Cores. It starts in c-FCFS
// (startup phase) while it profiles the first MinSamples completions of known
// types, then reserves workers per group of types (Algorithm 2, see Reserve)
// and dispatches by Algorithm 1: types in ascending mean service time, each
// to the lowest idle worker reserved for its group, else to the lowest idle
// worker it may steal (reserved for a longer group, or unreserved). Unknown
// requests go only to idle spillway workers, after every known type.
//
// # Profiling and updates
//
// Completions of known types accumulate per type (count, total service time)
// in the current window. On each Dispatch, once the window holds MinSamples
// completions, DARC looks for a type whose second-oldest queued request has
// waited more than DelayFactor times the type's profiled mean (the
// prototype's trigger: one queued request is the normal state of a type whose
// workers just became busy, two show a backlog); a window that reaches
// MaxWindow completions is checked without one. It then computes the window's
// reservation and adopts it if the set of active types or their grouping
// changed, or if some group's demand moved by more than DemandDeviation times
// its current allocation. In the latter case a group keeps its worker count
// while its demand stays within Config.Hysteresis of that count's rounding
// band, so window noise around a .5 boundary does not flip it. The window is
// reset after every check, adopted or not.
//
// # Types absent from a window
//
// A type with no completion in the window that set the reservation gets no
// group. It keeps its last profiled mean for the dispatch order (so a short
// type that went quiet keeps its priority) and uses the longest group's
// reserved and stealable workers. A type never profiled comes after all
// profiled ones, in id order, on the longest group's workers too; its
// trigger threshold is zero, so its backlog prompts a check as soon as the
// window is full.
//
// # More groups than workers
//
// Every group gets at least one worker. Groups that find no worker left share
// the spillway worker(s) with the group holding them (Group.Spillway is set),
// so long types are never denied service.
//
// DARC-static (NewDARCStatic) is DARC whose reservation is fixed in shape:
// the shortest type alone gets workers 0..StaticReserved-1 and every other
// type shares the rest; profiling, startup and updates still decide which type
// is the shortest.
type DARC struct {
	core
	static  int // DARC-static's reserved count; -1 for DARC
	startup bool

	queues []fifo // per type
	// crowded marks every known type whose queue holds 2 or more (and
	// maybe some that no longer do: backlogged clears those), so the
	// update check looks at those types only, not at every type.
	crowded sparseSet
	// waiting marks every position in order whose type has requests queued
	// (and maybe some whose type no longer has: the scans clear those), so
	// Dispatch goes from one waiting type to the next, not through every
	// type; pos is each type's position in order.
	waiting  sparseSet
	pos      []int32
	arrivals arrivalOrder // startup: arrival order of queued known types
	inGroup  []float64

	cur, next *plan
	mean      []float64 // current profile, per type (0: never profiled)
	ratio     []float64
	order     []Type   // known types, dispatch order
	runEnd    []int    // per index in order: end of its run of types sharing workers
	res       []bitset // per type: Algorithm 1's reserved set
	steal     []bitset // per type: Algorithm 1's stealable set
	threshold []int64  // per type: queuing delay that triggers a check
	winMean   []float64
	winRatio  []float64
	all       bitset

	minSamples   uint64
	maxWindow    uint64 // 0: no limit
	reservations uint64
	checks       uint64
}

// NewDARC returns a DARC policy.
func NewDARC(cfg Config) (*DARC, error) { return newDARC(NameDARC, cfg, -1, nil) }

// NewDARCStatic returns a DARC-static policy reserving cfg.StaticReserved
// workers for the shortest type.
func NewDARCStatic(cfg Config) (*DARC, error) {
	return newDARC(NameDARCStatic, cfg, cfg.StaticReserved, nil)
}

// newDARC builds a DARC policy whose queues take their slots from a (nil:
// an arena of its own, as large as its pool).
func newDARC(name string, cfg Config, static int, a *arena) (*DARC, error) {
	c, err := newCore(name, cfg)
	if err != nil {
		return nil, err
	}
	if a == nil {
		a = queueArena(c.capacity, c.cfg.Pool)
	}
	n, w := c.numTypes, c.cfg.Workers
	p := &DARC{
		core:       c,
		static:     static,
		startup:    true,
		queues:     newQueues(a, c.capacity),
		arrivals:   newArrivalOrder(a),
		crowded:    newSparseSet(n),
		waiting:    newSparseSet(n),
		pos:        make([]int32, n),
		inGroup:    make([]float64, n),
		cur:        newPlan(n, w),
		next:       newPlan(n, w),
		mean:       make([]float64, n),
		ratio:      make([]float64, n),
		order:      make([]Type, 0, n-1),
		runEnd:     make([]int, n-1),
		res:        make([]bitset, n),
		steal:      make([]bitset, n),
		threshold:  make([]int64, n),
		winMean:    make([]float64, n),
		winRatio:   make([]float64, n),
		all:        make(bitset, words(w)),
		minSamples: uint64(c.cfg.MinSamples),
	}
	if c.cfg.MaxWindow > 0 {
		p.maxWindow = uint64(c.cfg.MaxWindow)
	}
	p.all.setRange(0, w)
	for t := 1; t < n; t++ {
		p.pos[t] = int32(len(p.order))
		p.order = append(p.order, Type(t))
	}
	if len(c.cfg.Profile) > 0 {
		sum := 0.0
		for _, pr := range c.cfg.Profile {
			sum += pr.Ratio
		}
		for _, pr := range c.cfg.Profile {
			p.winMean[pr.Type], p.winRatio[pr.Type] = pr.MeanNs, pr.Ratio/sum
		}
		p.next.compute(p.winMean, p.winRatio, p.spill, p.cfg.Delta, p.static)
		p.adopt()
	}
	return p, nil
}

// pending returns the number of known-type requests queued.
func (p *DARC) pending() int { return p.total - p.lim[Unknown].queued }

// Enqueue implements Policy.
func (p *DARC) Enqueue(r Request, now int64) Verdict {
	r.Type = p.typeOf(r.Type)
	l := &p.lim[r.Type]
	if !p.admit(l) {
		return p.over(r.Type)
	}
	i, ok := p.queues[r.Type].push(entry{req: r, enq: now})
	if !ok {
		return p.full(r.Type)
	}
	p.queued(r.Type, i)
	return p.accepted(l, now)
}

// Dispatch implements Policy.
func (p *DARC) Dispatch(now int64, out []Assignment) int {
	n := 0
	// A reservation update may shorten deadlines: check first, then expire
	// with the deadlines the dispatch below runs under.
	if !p.startup && p.checkDue(now) {
		p.check()
	}
	if now >= p.nextExpiry {
		if n = p.expireAll(now, out); n > 0 && n == len(out) {
			return n
		}
	}
	if p.startup {
		// c-FCFS in arrival order. The types' deadlines may differ, so a
		// request past its own can follow a fresh one: check each.
		for n < len(out) && p.arrivals.n > 0 && p.idleCount > 0 {
			t := p.arrivals.pop()
			if e := p.queues[t].pop(); p.expired(&e, now) {
				p.expire(out, n, e)
			} else {
				p.assign(out, n, firstAnd(p.idle, p.all), e)
			}
			n++
		}
		return p.dispatchUnknown(out, n)
	}
	if p.idleCount == 0 {
		return n
	}
	// From the first waiting type's run to the next: i is the first
	// position of a run with requests (the run's earlier types have none).
	for i := p.firstWaiting(0); i >= 0; i = p.firstWaiting(p.runEnd[i]) {
		// Types of one group share their workers and are served as one
		// class: oldest head first, so grouping similar types (or a
		// classifier that cannot tell them apart) costs them nothing
		// against c-FCFS.
		end := p.runEnd[i]
		res, steal := p.res[p.order[i]], p.steal[p.order[i]]
		for {
			var q *fifo
			if end == i+1 { // a run of one type
				if q = &p.queues[p.order[i]]; q.n == 0 {
					p.waiting.clear(i)
					break
				}
			} else if q = p.oldestHead(i, end); q == nil {
				break
			}
			if n == len(out) || p.idleCount == 0 {
				return n
			}
			w := firstAnd(p.idle, res)
			if w < 0 {
				if w = firstAnd(p.idle, steal); w < 0 {
					break
				}
			}
			p.assign(out, n, w, q.pop())
			n++
		}
	}
	return p.dispatchUnknown(out, n)
}

// firstWaiting returns the first position at or after i whose type may
// have requests queued; -1 when no known type has any.
func (p *DARC) firstWaiting(i int) int {
	if p.pending() == 0 {
		return -1
	}
	return p.waiting.next(i)
}

// oldestHead returns the queue, among the types at positions lo..hi-1 of
// the order, whose head has waited longest; nil when they are all empty.
func (p *DARC) oldestHead(lo, hi int) *fifo {
	var best *fifo
	for j := p.waiting.next(lo); j >= 0 && j < hi; j = p.waiting.next(j + 1) {
		q := &p.queues[p.order[j]]
		if q.n == 0 {
			p.waiting.clear(j)
			continue
		}
		if best == nil || q.at(0).enq < best.at(0).enq {
			best = q
		}
	}
	return best
}

// expireAll drops the queued requests past their deadline into out. In the
// startup phase known types leave in arrival order, so the sweep follows it
// (a request past its deadline behind a fresh one of another type is found
// when it leaves); afterwards each type's queue is swept from its head.
func (p *DARC) expireAll(now int64, out []Assignment) int {
	if !p.startup {
		return p.sweepQueues(p.queues, now, out)
	}
	next, n := noDeadline, 0
	for p.arrivals.n > 0 {
		t := p.arrivals.peek()
		q := &p.queues[t]
		e := q.at(0)
		d := p.lim[t].deadline
		if now-e.enq <= d {
			next = e.enq + d
			break
		}
		if n == len(out) {
			next = now
			break
		}
		p.arrivals.pop()
		p.expire(out, n, q.pop())
		n++
	}
	if n < len(out) {
		n = p.sweepHead(&p.queues[Unknown], now, out, n, &next)
	} else {
		next = now
	}
	p.nextExpiry = next
	return n
}

// dispatchUnknown gives Unknown requests to idle spillway workers.
func (p *DARC) dispatchUnknown(out []Assignment, n int) int {
	q := &p.queues[Unknown]
	for q.n > 0 && n < len(out) {
		w := firstAnd(p.idle, p.spill)
		if w < 0 {
			break
		}
		p.assign(out, n, w, q.pop())
		n++
	}
	return n
}

// checkDue reports whether the update check is due: the window holds
// MinSamples completions and a type is backlogged, or it holds MaxWindow.
func (p *DARC) checkDue(now int64) bool {
	if p.win.total < p.minSamples {
		return false
	}
	if p.maxWindow > 0 && p.win.total >= p.maxWindow {
		return true
	}
	return p.pending() >= 2 && p.backlogged(now)
}

// queued notes that a request of type t was pushed on its queue, in slot i.
func (p *DARC) queued(t Type, i int32) {
	if t == Unknown {
		return
	}
	if p.startup {
		p.arrivals.push(i)
	}
	switch p.queues[t].n {
	case 1:
		p.waiting.set(int(p.pos[t]))
	case 2:
		p.crowded.set(int(t))
	}
}

// backlogged reports whether some type's second-oldest queued request has
// waited longer than the type's threshold. It looks at the crowded types
// only (at 65,535 types, a loop over all of them on every Dispatch made
// DARC 70 times slower than with 4).
func (p *DARC) backlogged(now int64) bool {
	for t := p.crowded.next(0); t >= 0; t = p.crowded.next(t + 1) {
		q := &p.queues[t]
		if q.n < 2 {
			p.crowded.clear(t)
			continue
		}
		if now-q.at(1).enq > p.threshold[t] {
			return true
		}
	}
	return false
}

// Complete implements Policy.
func (p *DARC) Complete(worker int, typ Type, service int64, now int64) {
	p.release(worker, typ, service)
	if p.startup && p.win.total >= p.minSamples {
		p.planWindow()
		p.adopt()
		p.arrivals.reset()
		p.win.reset()
	}
}

// completed profiles a request of type typ that ran for service ns on a
// worker the caller frees itself (a multi-tenant policy), and leaves the
// startup phase as Complete does.
func (p *DARC) completed(typ Type, service int64) {
	p.profile(typ, service)
	if p.startup && p.win.total >= p.minSamples {
		p.planWindow()
		p.adopt()
		p.arrivals.reset()
		p.win.reset()
	}
}

// setHome makes the policy reserve among workers lo..hi-1 only (a
// tenant's home workers; none when hi == lo) and re-places its current
// reservation there, from the profile it was computed from.
func (p *DARC) setHome(lo, hi int) {
	p.core.setHome(lo, hi)
	p.all.reset()
	p.all.setRange(lo, hi)
	p.cur.setRange(lo, hi-lo)
	p.next.setRange(lo, hi-lo)
	if p.static >= 0 {
		p.static = min(p.cfg.StaticReserved, hi-lo)
	}
	if p.startup {
		return
	}
	copy(p.winMean, p.mean)
	copy(p.winRatio, p.ratio)
	p.next.compute(p.winMean, p.winRatio, p.spill, p.cfg.Delta, p.static)
	p.adopt()
}

// knownQueued returns the number of known-type requests queued.
func (p *DARC) knownQueued() int { return p.total - p.lim[Unknown].queued }

// peekNext returns the type of the request that would be dispatched next
// to a worker outside the policy's reservation (one lent by another
// tenant): the oldest request during startup, else the oldest head of the
// shortest group with requests (a group's types are one class, as
// Dispatch serves them). Unknown requests stay (they run on the spillway
// only); with unknown set, they are taken too, last (a removed tenant's).
// ok is false when nothing is queued.
func (p *DARC) peekNext(unknown bool) (t Type, ok bool) {
	switch {
	case p.startup && p.arrivals.n > 0:
		return p.arrivals.peek(), true
	case !p.startup:
		for i := p.firstWaiting(0); i >= 0; i = p.firstWaiting(p.runEnd[i]) {
			if q := p.oldestHead(i, p.runEnd[i]); q != nil {
				return q.at(0).req.Type, true
			}
		}
	}
	if unknown && p.queues[Unknown].n > 0 {
		return Unknown, true
	}
	return 0, false
}

// popType removes the head of type t's queue, which peekNext returned.
func (p *DARC) popType(t Type) entry {
	if p.startup && t != Unknown {
		p.arrivals.pop()
	}
	return p.queues[t].pop()
}

// popNext removes the request peekNext names.
func (p *DARC) popNext(unknown bool) (e entry, ok bool) {
	t, ok := p.peekNext(unknown)
	if !ok {
		return entry{}, false
	}
	return p.popType(t), true
}

// typeMean returns type t's mean service time: its profiled one, else the
// current window's; 0 when it has none yet.
func (p *DARC) typeMean(t Type) float64 {
	if m := p.mean[t]; m > 0 {
		return m
	}
	return p.win.mean(int(t))
}

// planWindow computes the window's reservation into p.next.
func (p *DARC) planWindow() {
	for t := 1; t < p.numTypes; t++ {
		p.winMean[t], p.winRatio[t] = p.win.mean(t), p.win.ratio(t)
	}
	p.next.compute(p.winMean, p.winRatio, p.spill, p.cfg.Delta, p.static)
}

// check is the update check: adopt the window's reservation if it differs
// enough from the current one, and start a new window.
func (p *DARC) check() {
	p.checks++
	p.planWindow()
	if !p.next.sameShape(p.cur) {
		p.adopt()
	} else if p.next.deviates(p.cur, p.cfg.DemandDeviation) {
		if p.static < 0 && p.cfg.Hysteresis > 0 && p.next.hold(p.cur, p.cfg.Hysteresis) {
			p.next.place(p.spill, false)
		}
		p.adopt()
	}
	p.win.reset()
}

// adopt makes p.next (computed from winMean/winRatio) the current
// reservation and derives the dispatch order and per-type worker sets.
func (p *DARC) adopt() {
	p.cur, p.next = p.next, p.cur
	p.startup = false
	p.reservations++
	for t := 1; t < p.numTypes; t++ {
		if p.winRatio[t] > 0 {
			p.mean[t] = p.winMean[t]
		}
		p.ratio[t] = p.winRatio[t]
		p.threshold[t] = int64(p.cfg.DelayFactor * p.mean[t])
	}
	sortByMean(p.order, p.mean)
	p.waiting.reset()
	for j, t := range p.order {
		p.pos[t] = int32(j)
		if p.queues[t].n > 0 {
			p.waiting.set(j)
		}
	}
	longest := p.cur.ngroups - 1
	for _, t := range p.order {
		g := int(p.cur.groupOf[t])
		if g < 0 {
			g = longest
		}
		if g < 0 { // no group at all: any worker
			p.res[t], p.steal[t] = p.all, p.all
			continue
		}
		p.res[t], p.steal[t] = p.cur.resOf(g), p.cur.stealOf(g)
	}
	// A group's types are consecutive in the order: each run of them is
	// dispatched together. A type without a group of its own (absent from
	// the window) keeps its place and is served alone.
	for i := len(p.order) - 1; i >= 0; i-- {
		p.runEnd[i] = i + 1
		g := p.cur.groupOf[p.order[i]]
		if i+1 < len(p.order) && g >= 0 && p.cur.groupOf[p.order[i+1]] == g {
			p.runEnd[i] = p.runEnd[i+1]
		}
	}
	p.groupScales()
}

// groupScales sets the automatic deadlines from the reservation: a type
// waits only for its own group's workers (it steals idle ones only), so its
// deadline scales with its group's longest mean; a type without a group, and
// Unknown, run on the longest group's workers and the spillway, behind every
// type: they scale with the longest mean of all.
func (p *DARC) groupScales() {
	p.policyScales = true
	clear(p.inGroup)
	longest := 0.0
	for t := 1; t < p.numTypes; t++ {
		longest = max(longest, p.mean[t])
		if g := p.cur.groupOf[t]; g >= 0 {
			p.inGroup[g] = max(p.inGroup[g], p.mean[t])
		}
	}
	for t := range p.scale {
		p.scale[t] = longest
		if g := p.cur.groupOf[t]; t > 0 && g >= 0 {
			p.scale[t] = p.inGroup[g]
		}
	}
	p.setDeadlines(&p.cfg)
}

// Snapshot implements Policy. Types report the current profile's mean and
// ratio (the window's during startup) and the window's count.
func (p *DARC) Snapshot(s *Snapshot) {
	phase := "darc"
	if p.startup {
		phase = "startup"
	}
	p.snapshot(s, phase)
	s.Reservations = p.reservations
	if p.startup {
		return
	}
	for t := 1; t < p.numTypes; t++ {
		s.Types[t].MeanService = p.mean[t]
		s.Types[t].Ratio = p.ratio[t]
	}
	s.Groups = p.cur.appendGroups(s.Groups)
}

// Reservations returns how many times the reservation was (re)computed, as
// Snapshot's Reservations does, without copying the state: a driver can
// poll it on every event to notice a new reservation.
func (p *DARC) Reservations() uint64 { return p.reservations }

// dropQueues closes the (empty) queues of a policy that will queue nothing
// again (a removed tenant's): every queue keeps a capacity of 0, so a push
// is refused rather than given a slot.
func (p *DARC) dropQueues() {
	for i := range p.queues {
		p.queues[i] = newFIFO(p.queues[i].a, 0)
	}
	p.arrivals.reset()
	p.crowded.reset()
	p.waiting.reset()
}
