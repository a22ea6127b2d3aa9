package darc

import (
	"fmt"
	"math"
)

// plan is a reservation (Algorithm 2): groups of active types, shortest
// first, each with its reserved and stealable workers. All its slices are
// allocated once; compute overwrites them.
type plan struct {
	lo       int // the workers it places are lo..lo+workers-1
	workers  int
	nwords   int
	ngroups  int
	types    []Type    // active types, ascending mean, ties by id
	end      []int     // group g holds types[end[g-1]:end[g]]
	demand   []float64 // per group, in workers, before rounding
	want     []int     // per group, workers asked for (rounded demand, held, or static)
	alloc    []int     // per group, workers reserved (want, or fewer/more when workers ran out)
	spillway []bool    // per group: given the spillway worker(s)
	res      bitset    // ngroups*nwords: reserved workers per group
	steal    bitset    // ngroups*nwords: stealable workers per group
	groupOf  []int32   // per type id: group index, -1 when inactive
	all      bitset
	taken    bitset
}

func newPlan(numTypes, workers int) *plan {
	nw := words(workers)
	maxGroups := max(numTypes-1, 1)
	p := &plan{
		workers:  workers,
		nwords:   nw,
		types:    make([]Type, 0, numTypes),
		end:      make([]int, maxGroups),
		demand:   make([]float64, maxGroups),
		want:     make([]int, maxGroups),
		alloc:    make([]int, maxGroups),
		spillway: make([]bool, maxGroups),
		res:      make(bitset, maxGroups*nw),
		steal:    make(bitset, maxGroups*nw),
		groupOf:  make([]int32, numTypes),
		all:      make(bitset, nw),
		taken:    make(bitset, nw),
	}
	p.all.setRange(0, workers)
	return p
}

// setRange makes the plan place workers lo..lo+n-1 only (a tenant's home
// workers; bitsets keep their size). compute or place must run again.
func (p *plan) setRange(lo, n int) {
	p.lo, p.workers = lo, n
	p.all.reset()
	p.all.setRange(lo, lo+n)
}

func (p *plan) resOf(g int) bitset   { return p.res[g*p.nwords : (g+1)*p.nwords] }
func (p *plan) stealOf(g int) bitset { return p.steal[g*p.nwords : (g+1)*p.nwords] }

func (p *plan) start(g int) int {
	if g == 0 {
		return 0
	}
	return p.end[g-1]
}

// roundDemand is Algorithm 2's rounding: below 1 worker gives 1; otherwise
// floor when the fractional part is at most 0.5, ceil above.
func roundDemand(d float64) int {
	if d < 1 {
		return 1
	}
	f := math.Floor(d)
	if d-f <= 0.5 {
		return int(f)
	}
	return int(f) + 1
}

// compute fills p from per-type means and ratios (indexed by type id; a type
// is active when both are > 0). With static < 0 it is DARC's Algorithm 2:
// group by delta, round, assign lowest ids shortest group first, the spillway
// workers to a group left short. With static >= 0 it is DARC-static: the
// shortest type alone gets workers 0..static-1 and every other type shares
// the rest (the spillway workers if none are left).
func (p *plan) compute(mean, ratio []float64, spill bitset, delta float64, static int) {
	p.types = p.types[:0]
	for t := 1; t < len(mean); t++ {
		p.groupOf[t] = -1
		if mean[t] > 0 && ratio[t] > 0 {
			p.types = append(p.types, Type(t))
		}
	}
	p.groupOf[0] = -1
	sortByMean(p.types, mean)
	p.ngroups = 0
	if len(p.types) == 0 {
		return
	}

	// Group.
	first := mean[p.types[0]]
	for i, t := range p.types {
		newGroup := false
		if static >= 0 {
			newGroup = i == 1
		} else {
			newGroup = i > 0 && !(mean[t]-first < delta*first)
		}
		if newGroup {
			p.end[p.ngroups] = i
			p.ngroups++
			first = mean[t]
		}
		p.groupOf[t] = int32(p.ngroups)
	}
	p.end[p.ngroups] = len(p.types)
	p.ngroups++

	// Demands.
	total := 0.0
	for _, t := range p.types {
		total += mean[t] * ratio[t]
	}
	for g := 0; g < p.ngroups; g++ {
		sum := 0.0
		for _, t := range p.types[p.start(g):p.end[g]] {
			sum += mean[t] * ratio[t]
		}
		p.demand[g] = float64(p.workers) * sum / total
	}

	// Worker counts: Algorithm 2's rounding, or DARC-static's split.
	for g := 0; g < p.ngroups; g++ {
		p.want[g] = roundDemand(p.demand[g])
		if static >= 0 {
			p.want[g] = p.workers - static
			if g == 0 {
				p.want[g] = static
			}
		}
	}
	p.place(spill, static >= 0)
}

// place fills the reserved and stealable sets from p.want: lowest free ids
// first, shortest group first; a group that finds too few workers left gets
// whatever remains plus the spillway worker(s). For DARC-static (static), a
// long group asking for zero workers is given the spillway worker(s) too.
func (p *plan) place(spill bitset, static bool) {
	p.res.reset()
	p.steal.reset()
	p.taken.reset()
	next, end := p.lo, p.lo+p.workers
	for g := 0; g < p.ngroups; g++ {
		res := p.resOf(g)
		want := p.want[g]
		p.spillway[g] = false
		if want <= end-next && !(static && g > 0 && want == 0) {
			res.setRange(next, next+want)
			next += want
		} else {
			res.setRange(next, end)
			next = end
			for i := range res {
				res[i] |= spill[i]
			}
			p.spillway[g] = true
		}
		p.alloc[g] = res.count()
		// Stealable: everything not reserved by this group or a shorter one.
		for i := range res {
			p.taken[i] |= res[i]
		}
		steal := p.stealOf(g)
		for i := range steal {
			steal[i] = p.all[i] &^ p.taken[i]
		}
	}
}

// hold applies the update hysteresis (Config.Hysteresis): p and cur have the
// same shape, and a group of p keeps cur's worker count w while its demand
// stays within [w-0.5-h, w+0.5+h], instead of the count its demand rounds to.
// It reports whether some group's count changed; the caller then re-places.
func (p *plan) hold(cur *plan, h float64) bool {
	changed := false
	for g := 0; g < p.ngroups; g++ {
		if w := cur.want[g]; w != p.want[g] && math.Abs(p.demand[g]-float64(w)) <= 0.5+h {
			p.want[g] = w
			changed = true
		}
	}
	return changed
}

// sameShape reports whether p and q have the same active types in the same
// groups.
func (p *plan) sameShape(q *plan) bool {
	if p.ngroups != q.ngroups || len(p.types) != len(q.types) {
		return false
	}
	for i, t := range p.types {
		if q.types[i] != t {
			return false
		}
	}
	for g := 0; g < p.ngroups; g++ {
		if p.end[g] != q.end[g] {
			return false
		}
	}
	return true
}

// deviates reports whether some group's demand in p moved from cur's by more
// than dev times cur's allocation for it (at least one worker). Both plans
// must have the same shape.
func (p *plan) deviates(cur *plan, dev float64) bool {
	for g := 0; g < p.ngroups; g++ {
		limit := dev * float64(max(cur.alloc[g], 1))
		if math.Abs(p.demand[g]-cur.demand[g]) > limit {
			return true
		}
	}
	return false
}

// appendGroups appends p's groups to dst, reusing dst's inner slices.
func (p *plan) appendGroups(dst []Group) []Group {
	for g := 0; g < p.ngroups; g++ {
		var grp Group
		if len(dst) < cap(dst) {
			grp = dst[:len(dst)+1][len(dst)]
		}
		grp.Types = append(grp.Types[:0], p.types[p.start(g):p.end[g]]...)
		grp.Demand = p.demand[g]
		grp.Reserved = p.resOf(g).appendIDs(grp.Reserved[:0])
		grp.Stealable = p.stealOf(g).appendIDs(grp.Stealable[:0])
		grp.Spillway = p.spillway[g]
		dst = append(dst, grp)
	}
	return dst
}

// Reserve computes DARC's reservation (Algorithm 2) for the given profiles on
// workers workers, the last spillway of which are spillway workers, grouping
// types whose means are within a factor delta of their group's shortest.
// Zero spillway or delta take the Config defaults. Types with a zero ratio
// get no group. Groups come shortest first.
func Reserve(profiles []TypeProfile, workers, spillway int, delta float64) ([]Group, error) {
	cfg := Config{Workers: workers, Spillway: spillway, Delta: delta, Profile: profiles}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("darc: reserve: %w", err)
	}
	cfg = cfg.withDefaults()
	p := newPlan(cfg.NumTypes, cfg.Workers)
	mean := make([]float64, cfg.NumTypes)
	ratio := make([]float64, cfg.NumTypes)
	for _, pr := range profiles {
		mean[pr.Type], ratio[pr.Type] = pr.MeanNs, pr.Ratio
	}
	spill := make(bitset, p.nwords)
	spill.setRange(cfg.Workers-cfg.Spillway, cfg.Workers)
	p.compute(mean, ratio, spill, cfg.Delta, -1)
	return p.appendGroups(nil), nil
}
