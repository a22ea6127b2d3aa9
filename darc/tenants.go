package darc

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"time"
)

// This file holds the multi-tenant policy: tenant shares of the workers
// and of the pool, nested around one DARC (or DARC-static) per tenant.
//
// Workers. Every tenant has home workers, a contiguous range of ids: its
// guaranteed share (TenantConfig.Workers, or a part of the workers nobody
// claims by count, in proportion to TenantConfig.Weight). Within its home
// the tenant's own DARC profiles its own types and reserves by type exactly
// as Algorithm 2 does (its spillway is its home's last worker). Dispatch
// has two phases. First each tenant dispatches on its own idle home
// workers, following its own DARC. Then idle workers that remain, whoever's
// home they are in (and workers in nobody's home), are lent: the tenant
// furthest below its guarantee (busy workers minus home workers) with a
// known request waiting and below its ceiling (MaxWorkers) takes the
// highest-numbered idle worker outside its home for its next request
// (shortest type first), and so on. A lent worker runs one request, then
// is idle again, and at the next Dispatch its home tenant comes first: a
// tenant over its share delays another by at most one service time of the
// worker it borrowed (dispatch is non-preemptive). A worker a tenant's DARC
// reserves for one of its shorter groups is lent only to requests ten
// times shorter than that group's, and each such tenant keeps one idle
// worker for its short types (unless Config.LendAll): as within a tenant,
// long never takes a short type's worker, so a tenant's short requests wait
// for a borrowed worker at most a tenth of their own service time; its
// long requests at most one of the borrower's. Lending highest ids first
// lends the longest types' workers first.
//
// Pool. With Config.Pool, the pool nests the per-type split one level up:
// Config.Guaranteed of the pool is divided into tenant guarantees
// (TenantConfig.Buffers, or by weight), the rest is shared by the tenants;
// a lone tenant (without Buffers) is guaranteed the whole pool.
// Within its guarantee each tenant splits as a single-tenant policy does:
// per-type guarantees, and a part shared by its types. A request is
// admitted when its type is below its guarantee; past it, when its type is
// below its budget, its tenant below its own (MaxBuffers, by default its
// guarantee plus the shared part), and either its tenant's shared part or
// the tenants' shared part has room. The pool as a whole is never exceeded.
//
// Lifecycle. AddTenant, UpdateTenant and RemoveTenant change the tenants
// between two calls of Dispatch (they allocate; call them off the hot
// path, from the goroutine that owns the policy). A new tenant's range
// starts after every other, or in the range of a retired tenant (a removed
// one its driver forgot with Retire once it held nothing), so tenants can
// come and go without end. Type 0 is the
// UNKNOWN of packets of no tenant, or, with a default tenant
// (TenantConfig.Default), that tenant's UNKNOWN: then one tenant's policy
// numbers and names its types exactly as a policy without tenants would. A removed
// tenant's queued requests come out of the next Dispatch calls with Worker
// == Removed, its running requests complete normally, and its arrivals are
// refused (NoTenant).

// TenantConfig is one tenant of a multi-tenant policy (Config.Tenants).
// The tenant's DARC takes its other parameters (Delta, Spillway,
// MinSamples, DelayFactor, DemandDeviation, Hysteresis, deadlines,
// Guaranteed, QueueCapacity) from the Config.
type TenantConfig struct {
	// Name identifies the tenant; non-empty and unique.
	Name string
	// NumTypes is the size of the tenant's own type space: local ids
	// 0..NumTypes-1, 0 being the tenant's UNKNOWN. Global ids are the
	// tenant's base (TenantState.Base) plus its local ids. Required.
	NumTypes int
	// TypeNames optionally names the local types.
	TypeNames []string
	// Workers is the number of workers guaranteed to the tenant (its home
	// workers); 0: a part of the workers no tenant claims by count, in
	// proportion to Weight. Every tenant has at least one.
	Workers int
	// Weight is the tenant's share of the workers and of the pool that are
	// not claimed by count (Workers, Buffers). Default 1.
	Weight float64
	// MaxWorkers is the tenant's ceiling: the most workers running its
	// requests at once, home and borrowed (it borrows at most MaxWorkers
	// less its home workers). 0: no ceiling; else at least its home
	// workers.
	MaxWorkers int
	// Buffers is the tenant's guarantee of the pool: requests it can
	// always hold, queued or running; 0: a part of Config.Guaranteed of the
	// pool, in proportion to Weight. Needs a pool.
	Buffers int
	// MaxBuffers is the tenant's budget: the most requests it holds at
	// once. 0: its guarantee plus the tenants' shared part. Needs a pool.
	MaxBuffers int
	// Profile, Guarantees, Budgets and Deadlines are per local type, as
	// in Config: type guarantees are parts of the tenant's guarantee, type
	// budgets at most the tenant's budget.
	Profile    []TypeProfile
	Guarantees []int
	Budgets    []int
	Deadlines  []int64
	// StaticReserved is DARC-static's reserved workers within the home
	// (capped to it); 0: Config.StaticReserved.
	StaticReserved int
	// Default makes the tenant the policy's default tenant, the one a
	// server with a single classifier runs: its range starts at type 0,
	// so its UNKNOWN is the policy's, and its TypeNames are used as they
	// are (not prefixed with its name). Only the first tenant added to a
	// policy can be the default; others always get ranges of their own.
	Default bool
}

// ErrUnknownTenant is returned by UpdateTenant and RemoveTenant for a name
// no live tenant has.
var ErrUnknownTenant = errors.New("unknown tenant")

// Tenants is the multi-tenant policy: one DARC (or DARC-static) per tenant
// over its home workers, lending idle workers across tenants; see the
// comment at the top of tenants.go and Config.Tenants. Build it with New
// (or NewTenants) and a Config with Tenants.
type Tenants struct {
	name    string
	cfg     Config // Tenants dropped; a tenant's inner config is derived from it
	workers int
	static  bool

	idle    bitset  // every worker's idle bit, shared by the tenants' policies
	slots   *arena  // the slots of every tenant's queues: the pool's worth (no bound without a pool)
	idleN   int     // idle workers, all of them
	owner   []int32 // per worker: its home tenant, or -1
	running []int32 // per worker: the tenant whose request it runs, or -1

	tenants    []*tenant
	typeTenant []int32 // per global type: its tenant, or -1 (type 0)
	numTypes   int
	free       []typeRange // ranges of retired tenants, for new ones

	held   int  // requests held, queued or running, all tenants
	lone   bool // one live tenant, whose home is every worker
	shared int  // the pool's part not guaranteed to any tenant

	skip     []bool    // Dispatch's scratch: tenants that cannot borrow now
	lendable bitset    // Dispatch's scratch: idle workers that may be lent
	limit    []float64 // Dispatch's scratch, per worker: the longest mean service time of a request it may be lent to
	snap     Snapshot
}

// tenant is one tenant of a Tenants policy.
type tenant struct {
	cfg     TenantConfig
	p       *DARC
	base    Type
	lo, hi  int    // home workers
	away    bitset // every worker not in the home
	busy    int    // workers running its requests
	borrow  int    // of which outside its home
	lent    int    // home workers running another tenant's requests
	budget  int    // most requests held (MaxInt without a pool)
	guar    int    // its guarantee of the pool
	removed bool
	// reclaimed: removed, and its queues freed once it held nothing.
	reclaimed bool
	// retired: reclaimed and forgotten (Retire): its slot and its type
	// ids are free for a tenant added later.
	retired bool
}

// reclaim closes a removed tenant's queues once it holds no request,
// queued or running: nothing reads or writes them again. It allocates
// nothing.
func (t *tenant) reclaim() {
	if !t.removed || t.reclaimed || t.p.total != 0 || t.busy != 0 {
		return
	}
	t.reclaimed = true
	t.p.dropQueues()
}

// held is the tenant's requests held, queued or running.
func (t *tenant) held() int { return t.p.total + t.busy }

// NewTenants returns the multi-tenant policy called name ("darc" or
// "darc-static": the policy each tenant runs) for cfg's Tenants, which may
// be empty (tenants are then added with AddTenant).
func NewTenants(name string, cfg Config) (*Tenants, error) {
	if name != NameDARC && name != NameDARCStatic {
		return nil, fmt.Errorf("darc: new %s: %w: tenant shares need policy %s or %s", name, ErrInvalidConfig, NameDARC, NameDARCStatic)
	}
	if err := cfg.validateTenants(); err != nil {
		return nil, fmt.Errorf("darc: new %s: %w", name, err)
	}
	tcs := cfg.Tenants
	cfg.Tenants = nil
	cfg = cfg.withTenantDefaults()
	p := &Tenants{
		name:     name,
		cfg:      cfg,
		workers:  cfg.Workers,
		static:   name == NameDARCStatic,
		idle:     make(bitset, words(cfg.Workers)),
		slots:    newArena(cfg.Pool),
		lendable: make(bitset, words(cfg.Workers)),
		limit:    make([]float64, cfg.Workers),
		idleN:    cfg.Workers,
		owner:    make([]int32, cfg.Workers),
		running:  make([]int32, cfg.Workers),
		numTypes: 1,
	}
	p.idle.setRange(0, cfg.Workers)
	for w := range p.running {
		p.running[w] = -1
	}
	p.typeTenant = append(p.typeTenant, -1)
	for _, tc := range tcs {
		if _, err := p.add(tc, nil); err != nil {
			return nil, fmt.Errorf("darc: new %s: %w", name, err)
		}
	}
	if err := p.rebalance(); err != nil {
		return nil, fmt.Errorf("darc: new %s: %w", name, err)
	}
	return p, nil
}

// withTenantDefaults is withDefaults for a multi-tenant config (which has
// no type space of its own).
func (c Config) withTenantDefaults() Config {
	c.NumTypes = 1
	return c.withDefaults()
}

// validateTenants checks c as the config of a multi-tenant policy.
func (c Config) validateTenants() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...)
	}
	switch {
	case c.NumTypes != 0 || len(c.TypeNames) > 0 || len(c.Profile) > 0:
		return bad("with tenants, types belong to the tenants (set TenantConfig.NumTypes, TypeNames, Profile)")
	case len(c.Budgets) > 0 || len(c.Guarantees) > 0 || len(c.Deadlines) > 0:
		return bad("with tenants, per-type budgets, guarantees and deadlines belong to the tenants")
	}
	base := c
	base.Tenants = nil
	base = base.withTenantDefaults()
	if err := base.Validate(); err != nil {
		return err
	}
	p := &Tenants{cfg: base, workers: base.Workers, idle: make(bitset, words(base.Workers)),
		owner: make([]int32, base.Workers), running: make([]int32, base.Workers), numTypes: 1, typeTenant: []int32{-1}}
	p.idle.setRange(0, base.Workers)
	for w := range p.running {
		p.running[w] = -1
	}
	for _, tc := range c.Tenants {
		if _, err := p.add(tc, nil); err != nil {
			return err
		}
	}
	return p.rebalance()
}

// checkTenant validates one tenant's own settings.
func (p *Tenants) checkTenant(tc TenantConfig) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: tenant %q: "+format, append([]any{ErrInvalidConfig, tc.Name}, args...)...)
	}
	// New ids, or a free range (add takes the first that fits).
	room := max(maxTypes-p.numTypes, largestFree(p.free)) // not p.numTypes+tc.NumTypes: it may overflow
	if tc.Default {
		room++ // its UNKNOWN is the policy's type 0
	}
	switch {
	case tc.Name == "":
		return fmt.Errorf("%w: a tenant has no name", ErrInvalidConfig)
	case tc.NumTypes < 1:
		return bad("numtypes = %d (at least 1: its UNKNOWN)", tc.NumTypes)
	case tc.NumTypes > room:
		return bad("%d types, and the tenants' type space (%d ids in all) has room for %d more", tc.NumTypes, maxTypes, room)
	case len(tc.TypeNames) > tc.NumTypes:
		return bad("%d type names for %d types", len(tc.TypeNames), tc.NumTypes)
	case tc.Workers < 0 || tc.Workers > p.workers:
		return bad("workers = %d (must be 0..%d)", tc.Workers, p.workers)
	case !(tc.Weight >= 0 && tc.Weight <= MaxWeight): // NaN too
		return bad("weight = %v (must be in (0, %g], or 0 for the default 1)", tc.Weight, float64(MaxWeight))
	case tc.MaxWorkers < 0 || tc.MaxWorkers > p.workers:
		return bad("max workers = %d (must be 0..%d)", tc.MaxWorkers, p.workers)
	case tc.MaxWorkers > 0 && tc.MaxWorkers < tc.Workers:
		return bad("max workers %d below its %d guaranteed workers", tc.MaxWorkers, tc.Workers)
	case tc.Buffers < 0 || tc.MaxBuffers < 0:
		return bad("buffers %d, max buffers %d (must be >= 0)", tc.Buffers, tc.MaxBuffers)
	case (tc.Buffers > 0 || tc.MaxBuffers > 0 || len(tc.Budgets) > 0 || len(tc.Guarantees) > 0) && p.cfg.Pool == 0:
		return bad("buffers, budgets and guarantees need a pool (set Config.Pool)")
	case tc.Buffers > 0 && tc.MaxBuffers > 0 && tc.MaxBuffers < tc.Buffers:
		return bad("max buffers %d below its guarantee of %d", tc.MaxBuffers, tc.Buffers)
	case tc.Buffers > p.cfg.Pool || tc.MaxBuffers > p.cfg.Pool:
		return bad("buffers %d, max buffers %d: more than the pool's %d", tc.Buffers, tc.MaxBuffers, p.cfg.Pool)
	case len(tc.Budgets) > tc.NumTypes || len(tc.Guarantees) > tc.NumTypes || len(tc.Deadlines) > tc.NumTypes:
		return bad("%d budgets, %d guarantees and %d deadlines for %d types", len(tc.Budgets), len(tc.Guarantees), len(tc.Deadlines), tc.NumTypes)
	case tc.StaticReserved < 0 || tc.StaticReserved > p.workers:
		return bad("static reserved = %d (must be 0..%d)", tc.StaticReserved, p.workers)
	}
	for _, b := range tc.Budgets {
		if b < 0 || b > p.cfg.Pool {
			return bad("a type budget of %d (must be 1..%d, or 0 for the default)", b, p.cfg.Pool)
		}
	}
	for _, g := range tc.Guarantees {
		if g < 0 || g > p.cfg.Pool {
			return bad("a type guarantee of %d (must be 1..%d, or 0 for the default)", g, p.cfg.Pool)
		}
	}
	for _, d := range tc.Deadlines {
		if d > MaxDeadline {
			return bad("a deadline of %dns (at most %dns, %v; negative: none)", d, MaxDeadline, time.Duration(MaxDeadline))
		}
	}
	for _, t := range p.tenants {
		if t.cfg.Name == tc.Name && !t.removed {
			return bad("listed twice")
		}
	}
	if err := validateProfiles(tc.Profile, tc.NumTypes); err != nil {
		return bad("%v", err)
	}
	return nil
}

// innerConfig is the config of a tenant's own policy: the whole worker set
// (its home is set apart), no pool of its own (Tenants sets its budgets),
// queues as deep as the pool (at most DefaultQueueCapacity).
func (p *Tenants) innerConfig(tc TenantConfig) Config {
	c := p.cfg
	c.NumTypes = tc.NumTypes
	c.TypeNames = tc.TypeNames
	c.Profile = tc.Profile
	c.Deadlines = tc.Deadlines
	c.Pool, c.Guarantees, c.Budgets = 0, nil, nil
	if p.cfg.Pool > 0 && c.QueueCapacity == 0 {
		// A queue as deep as the pool, up to the single-tenant default:
		// budgets bound what a type holds (the slots of every tenant's
		// queues come from the policy's one arena, as large as the pool).
		c.QueueCapacity = min(p.cfg.Pool, DefaultQueueCapacity)
	}
	if tc.StaticReserved > 0 {
		c.StaticReserved = tc.StaticReserved
	}
	return c
}

// PreparedTenant is a tenant's own policy built ahead of AddPrepared: its
// per-type state (about 0.5 MB for 1,024 types) is allocated by the caller
// of PrepareTenant, not by the goroutine running the policy.
type PreparedTenant struct {
	cfg  TenantConfig
	in   *DARC
	away bitset
}

// PrepareTenant builds tc's own policy for AddPrepared. It reads only the
// policy's configuration, which never changes: it is safe to call while
// another goroutine uses the policy.
func (p *Tenants) PrepareTenant(tc TenantConfig) (*PreparedTenant, error) {
	in, err := p.newInner(tc)
	if err != nil {
		return nil, fmt.Errorf("darc: prepare tenant: %w", err)
	}
	return &PreparedTenant{cfg: tc, in: in, away: make(bitset, words(p.workers))}, nil
}

// AddPrepared is AddTenant with the tenant's policy built ahead
// (PrepareTenant on this policy, with the same config): it allocates
// little. A PreparedTenant is used once.
func (p *Tenants) AddPrepared(pt *PreparedTenant) (Type, error) {
	if pt == nil || pt.in == nil {
		return 0, fmt.Errorf("darc: add tenant: %w: not prepared, or used already", ErrInvalidConfig)
	}
	return p.addTenant(pt.cfg, pt)
}

// newInner builds tc's own policy (a DARC over the whole worker set, its
// types named tenant/type); it reads only p's configuration.
func (p *Tenants) newInner(tc TenantConfig) (*DARC, error) {
	if tc.Weight == 0 {
		tc.Weight = 1
	}
	static := -1
	if p.static {
		static = p.innerConfig(tc).StaticReserved
	}
	name := NameDARC
	if p.static {
		name = NameDARCStatic
	}
	in, err := newDARC(name, p.innerConfig(tc), static, p.slots)
	if err != nil {
		return nil, fmt.Errorf("tenant %q: %w", tc.Name, err)
	}
	if !tc.Default {
		for t := range in.names {
			in.names[t] = tc.Name + "/" + in.names[t]
		}
	}
	return in, nil
}

// add appends a tenant (without rebalancing) and returns its base type;
// pt, when not nil, is its policy built ahead.
func (p *Tenants) add(tc TenantConfig, pt *PreparedTenant) (Type, error) {
	if err := p.checkTenant(tc); err != nil {
		return 0, err
	}
	if tc.Default && len(p.tenants) > 0 {
		return 0, fmt.Errorf("%w: tenant %q: only the first tenant can be the default (the one owning type 0)", ErrInvalidConfig, tc.Name)
	}
	if tc.Weight == 0 {
		tc.Weight = 1
	}
	var in *DARC
	away := bitset(nil)
	if pt != nil {
		in, away = pt.in, pt.away
		pt.in = nil // used once
	} else {
		var err error
		if in, err = p.newInner(tc); err != nil {
			return 0, err
		}
		away = make(bitset, words(p.workers))
	}
	in.idle = p.idle // shared: the tenants' policies see every worker's state
	t := &tenant{cfg: tc, p: in, base: Type(p.numTypes), away: away, budget: math.MaxInt}
	// A retired tenant's slot and a free range of ids are used first.
	k := int32(slices.IndexFunc(p.tenants, func(o *tenant) bool { return o.retired }))
	if k < 0 {
		k = int32(len(p.tenants))
		p.tenants = append(p.tenants, t)
		p.skip = append(p.skip, false)
	} else {
		p.tenants[k] = t
	}
	switch i := slices.IndexFunc(p.free, func(r typeRange) bool { return r.n >= tc.NumTypes }); {
	case tc.Default: // checkTenant: the first tenant, type 0 is free
		t.base = 0
		p.typeTenant[0] = k
		for range tc.NumTypes - 1 {
			p.typeTenant = append(p.typeTenant, k)
		}
		p.numTypes += tc.NumTypes - 1
	case i >= 0:
		r := p.free[i]
		t.base = r.base
		for id := int(r.base); id < int(r.base)+tc.NumTypes; id++ {
			p.typeTenant[id] = k
		}
		if r.n > tc.NumTypes {
			p.free[i] = typeRange{base: r.base + Type(tc.NumTypes), n: r.n - tc.NumTypes}
		} else {
			p.free = slices.Delete(p.free, i, i+1)
		}
	default:
		for range tc.NumTypes {
			p.typeTenant = append(p.typeTenant, k)
		}
		p.numTypes += tc.NumTypes
	}
	return t.base, nil
}

// typeRange is a range of global type ids: base..base+n-1.
type typeRange struct {
	base Type
	n    int
}

// freeRange adds r to free (sorted by base, no two ranges adjacent),
// merged with its neighbours: tenants of other sizes then fit where
// several retired tenants were.
func freeRange(free []typeRange, r typeRange) []typeRange {
	i, _ := slices.BinarySearchFunc(free, r.base, func(f typeRange, b Type) int { return cmp.Compare(f.base, b) })
	free = slices.Insert(free, i, r)
	if i+1 < len(free) && free[i].base+Type(free[i].n) == free[i+1].base {
		free[i].n += free[i+1].n
		free = slices.Delete(free, i+1, i+2)
	}
	if i > 0 && free[i-1].base+Type(free[i-1].n) == free[i].base {
		free[i-1].n += free[i].n
		free = slices.Delete(free, i, i+1)
	}
	return free
}

// largestFree returns the most ids of one free range.
func largestFree(free []typeRange) int {
	n := 0
	for _, r := range free {
		n = max(n, r.n)
	}
	return n
}

// Retire forgets a removed tenant that holds nothing, queued or running
// (the one whose range starts at base): its slot and its range of type ids
// are reused by tenants added later, so that tenants can come and go
// without end. Until then a removed tenant stays in Snapshot with its
// counters. The driver retires a tenant once nothing of its own refers to
// the tenant's ids any more. It fails with ErrUnknownTenant when no removed
// tenant has that base, ErrInvalidConfig while it still holds requests.
func (p *Tenants) Retire(base Type) error {
	for _, t := range p.tenants {
		if t.base != base || t.retired || !t.removed {
			continue
		}
		t.reclaim()
		if !t.reclaimed {
			return fmt.Errorf("darc: retire tenant %q: %w: it still holds %d requests", t.cfg.Name, ErrInvalidConfig, t.held())
		}
		t.retired = true
		for id := int(base); id < int(base)+t.cfg.NumTypes; id++ {
			p.typeTenant[id] = -1
		}
		p.free = freeRange(p.free, typeRange{base: base, n: t.cfg.NumTypes})
		return nil
	}
	return fmt.Errorf("darc: retire the tenant of type %d: %w (no removed tenant starts there)", base, ErrUnknownTenant)
}

// AddTenant adds a tenant and returns the global id of its local type 0.
// Every tenant's home and pool share are recomputed. On error nothing
// changes. It allocates: call it between Dispatch calls, off the hot path.
func (p *Tenants) AddTenant(tc TenantConfig) (Type, error) { return p.addTenant(tc, nil) }

func (p *Tenants) addTenant(tc TenantConfig, pt *PreparedTenant) (Type, error) {
	// What add changes, to roll it back.
	tenants, types, numTypes := slices.Clone(p.tenants), slices.Clone(p.typeTenant), p.numTypes
	free, skip := slices.Clone(p.free), len(p.skip)
	base, err := p.add(tc, pt)
	if err == nil {
		if err = p.rebalance(); err == nil {
			return base, nil
		}
		p.tenants, p.typeTenant, p.numTypes, p.free, p.skip = tenants, types, numTypes, free, p.skip[:skip]
		_ = p.rebalance() // the previous state was balanced
	}
	return 0, fmt.Errorf("darc: add tenant: %w", err)
}

// UpdateTenant changes a live tenant's shares and limits (Workers, Weight,
// MaxWorkers, Buffers, MaxBuffers, Guarantees, Budgets, Deadlines); its
// name and type space stay. On error nothing changes.
func (p *Tenants) UpdateTenant(tc TenantConfig) error {
	t := p.live(tc.Name)
	if t == nil {
		return fmt.Errorf("darc: update tenant %q: %w", tc.Name, ErrUnknownTenant)
	}
	if tc.NumTypes != t.cfg.NumTypes || tc.Default != t.cfg.Default {
		return fmt.Errorf("darc: update tenant %q: %w: %d types, default %v; it has %d, %v (neither can change)", tc.Name, ErrInvalidConfig, tc.NumTypes, tc.Default, t.cfg.NumTypes, t.cfg.Default)
	}
	old := t.cfg
	t.removed = true // not a duplicate of itself
	err := p.checkTenant(tc)
	t.removed = false
	if err != nil {
		return fmt.Errorf("darc: update tenant: %w", err)
	}
	if tc.Weight == 0 {
		tc.Weight = 1
	}
	t.cfg = tc
	if err := p.rebalance(); err != nil {
		t.cfg = old
		_ = p.rebalance()
		return fmt.Errorf("darc: update tenant: %w", err)
	}
	t.p.fixed = t.p.fixed[:0]
	for i := range t.cfg.NumTypes {
		d := int64(0)
		if i < len(tc.Deadlines) {
			d = tc.Deadlines[i]
		}
		t.p.fixed = append(t.p.fixed, d)
	}
	t.p.setDeadlines(&t.p.cfg)
	return nil
}

// RemoveTenant removes a live tenant: its arrivals are refused from now on
// (NoTenant), its queued requests come out of the next Dispatch calls with
// Worker == Removed, its running requests complete normally, and the other
// tenants' homes and pool shares are recomputed.
func (p *Tenants) RemoveTenant(name string) error {
	t := p.live(name)
	if t == nil {
		return fmt.Errorf("darc: remove tenant %q: %w", name, ErrUnknownTenant)
	}
	t.removed = true
	if err := p.rebalance(); err != nil {
		// Fewer tenants always fit where more did.
		return fmt.Errorf("darc: remove tenant %q: %w", name, err)
	}
	t.reclaim() // at once when it holds nothing; else by Dispatch or Complete
	return nil
}

// live returns the live tenant called name, or nil.
func (p *Tenants) live(name string) *tenant {
	for _, t := range p.tenants {
		if t.cfg.Name == name && !t.removed {
			return t
		}
	}
	return nil
}

// Base returns the global id of a live tenant's local type 0, and whether
// there is such a tenant.
func (p *Tenants) Base(name string) (Type, bool) {
	if t := p.live(name); t != nil {
		return t.base, true
	}
	return 0, false
}

// NumTypes returns the size of the global type space (every tenant's,
// removed ones included, plus type 0).
func (p *Tenants) NumTypes() int { return p.numTypes }

// rebalance recomputes every tenant's home workers and pool share from
// their configs. On error nothing changes.
func (p *Tenants) rebalance() error {
	counts, err := p.partition()
	if err != nil {
		return err
	}
	sp, err := p.split()
	if err != nil {
		return err
	}
	// Homes.
	lo := 0
	for i := range p.owner {
		p.owner[i] = -1
	}
	for k, t := range p.tenants {
		t.lo, t.hi = lo, lo+counts[k]
		lo = t.hi
		for w := t.lo; w < t.hi; w++ {
			p.owner[w] = int32(k)
		}
		t.away.reset()
		t.away.setRange(0, p.workers)
		for w := t.lo; w < t.hi; w++ {
			t.away.clear(w)
		}
		t.p.setHome(t.lo, t.hi)
	}
	p.lone = false
	if p.liveCount() == 1 {
		for _, t := range p.tenants {
			// Every worker is its home: there is no one to lend to and
			// nothing to borrow (Dispatch skips its lending phase).
			p.lone = p.lone || (!t.removed && t.lo == 0 && t.hi == p.workers)
		}
	}
	for _, t := range p.tenants {
		t.lent = 0
		t.borrow = 0
	}
	for w, k := range p.running {
		if k < 0 {
			continue
		}
		if o := p.owner[w]; o != k {
			p.tenants[k].borrow++
			if o >= 0 {
				p.tenants[o].lent++
			}
		}
	}
	// Pool.
	p.shared = sp.shared
	for k, t := range p.tenants {
		t.guar, t.budget = sp.guar[k], sp.budget[k]
		in := t.p
		in.shared = sp.innerShared[k]
		in.borrowed = 0
		for lt := range in.lim {
			l := &in.lim[lt]
			l.guarantee, l.budget = sp.typeGuar[k][lt], sp.typeBudget[k][lt]
			if l.held > l.guarantee {
				in.borrowed += l.held - l.guarantee
			}
		}
	}
	return nil
}

// partition returns each tenant's number of home workers: fixed counts
// first, then the workers left in proportion to weight (largest deficit
// first), at least one per live tenant; removed tenants get none. Without
// weighted tenants the workers left are nobody's (lent to all).
func (p *Tenants) partition() ([]int, error) {
	counts := make([]int, len(p.tenants))
	fixed, weighted, sumW := 0, 0, 0.0
	for k, t := range p.tenants {
		switch {
		case t.removed:
		case t.cfg.Workers > 0:
			counts[k] = t.cfg.Workers
			fixed += t.cfg.Workers
		default:
			counts[k] = 1
			weighted++
			sumW += t.cfg.Weight
		}
	}
	rest := p.workers - fixed
	if rest < weighted {
		return nil, fmt.Errorf("%w: tenants claim %d workers by count and %d more need at least one each, of %d workers", ErrInvalidConfig, fixed, weighted, p.workers)
	}
	if weighted > 0 {
		if !(sumW > 0 && sumW <= float64(MaxWeight)*float64(len(p.tenants))) {
			// checkTenant bounds every weight: this is a policy bug, not a
			// config to apply (and no shares to compute from NaN).
			return nil, fmt.Errorf("%w: tenant weights sum to %v", ErrInvalidConfig, sumW)
		}
		for left := rest - weighted; left > 0; left-- {
			best, bestDef := -1, math.Inf(-1)
			for k, t := range p.tenants {
				if t.removed || t.cfg.Workers > 0 {
					continue
				}
				if def := float64(rest)*(t.cfg.Weight/sumW) - float64(counts[k]); def > bestDef {
					best, bestDef = k, def
				}
			}
			if best < 0 {
				return nil, fmt.Errorf("%w: no tenant to give a worker to (weights %v)", ErrInvalidConfig, sumW)
			}
			counts[best]++
		}
	}
	for k, t := range p.tenants {
		if t.removed {
			continue
		}
		if t.cfg.MaxWorkers > 0 && t.cfg.MaxWorkers < counts[k] {
			return nil, fmt.Errorf("%w: tenant %q: max workers %d below its %d home workers", ErrInvalidConfig, t.cfg.Name, t.cfg.MaxWorkers, counts[k])
		}
		if static := p.innerConfig(t.cfg).StaticReserved; p.static && static > counts[k] {
			return nil, fmt.Errorf("%w: tenant %q: darc-static reserves %d workers of its %d home workers", ErrInvalidConfig, t.cfg.Name, static, counts[k])
		}
	}
	return counts, nil
}

// liveCount is the number of tenants not removed.
func (p *Tenants) liveCount() int {
	n := 0
	for _, t := range p.tenants {
		if !t.removed {
			n++
		}
	}
	return n
}

// poolSplit is the pool's division over the tenants and their types.
type poolSplit struct {
	shared               int
	guar, budget         []int
	innerShared          []int
	typeGuar, typeBudget [][]int
}

// split divides the pool: tenant guarantees (fixed, else by weight of the
// guaranteed share), the tenants' shared part, tenant budgets, and within
// each tenant's guarantee its types' guarantees and shared part.
func (p *Tenants) split() (poolSplit, error) {
	n := len(p.tenants)
	sp := poolSplit{guar: make([]int, n), budget: make([]int, n), innerShared: make([]int, n),
		typeGuar: make([][]int, n), typeBudget: make([][]int, n)}
	pool := p.cfg.Pool
	if pool == 0 {
		for k, t := range p.tenants {
			sp.budget[k] = math.MaxInt
			sp.typeGuar[k] = make([]int, t.cfg.NumTypes)
			sp.typeBudget[k] = make([]int, t.cfg.NumTypes)
			for lt := range t.cfg.NumTypes {
				sp.typeGuar[k][lt], sp.typeBudget[k][lt] = math.MaxInt, math.MaxInt
			}
		}
		return sp, nil
	}
	fixed, sumW := 0, 0.0
	for _, t := range p.tenants {
		switch {
		case t.removed:
		case t.cfg.Buffers > 0:
			fixed += t.cfg.Buffers
		default:
			sumW += t.cfg.Weight
		}
	}
	if fixed > pool {
		return sp, fmt.Errorf("%w: tenant guarantees add up to %d buffers, more than the pool's %d", ErrInvalidConfig, fixed, pool)
	}
	left := max(int(p.cfg.Guaranteed*float64(pool))-fixed, 0)
	if live := p.liveCount(); live == 1 && fixed == 0 {
		// A lone tenant shares the pool with nobody: it is guaranteed all
		// of it, and splits it over its types as a policy without
		// tenants does (a server of one classifier schedules as one).
		left = pool
	}
	total := 0
	for k, t := range p.tenants {
		switch {
		case t.removed:
		case t.cfg.Buffers > 0:
			sp.guar[k] = t.cfg.Buffers
		default:
			// t.cfg.Weight/sumW is in (0, 1]: checkTenant bounds weights,
			// so the sum is finite and positive here.
			sp.guar[k] = min(int(float64(left)*(t.cfg.Weight/sumW)), left)
		}
		total += sp.guar[k]
	}
	sp.shared = pool - total
	for k, t := range p.tenants {
		nt := t.cfg.NumTypes
		sp.typeGuar[k] = make([]int, nt)
		sp.typeBudget[k] = make([]int, nt)
		if t.removed {
			continue // refuses every arrival: guarantees and budgets 0
		}
		sp.budget[k] = sp.guar[k] + sp.shared
		if t.cfg.MaxBuffers > 0 {
			sp.budget[k] = t.cfg.MaxBuffers
		}
		if sp.budget[k] < sp.guar[k] {
			return sp, fmt.Errorf("%w: tenant %q: max buffers %d below its guarantee of %d", ErrInvalidConfig, t.cfg.Name, sp.budget[k], sp.guar[k])
		}
		if sp.guar[k] < 1 {
			return sp, fmt.Errorf("%w: tenant %q: a pool of %d buffers leaves it no guarantee (give it buffers, or the dataplane more)", ErrInvalidConfig, t.cfg.Name, pool)
		}
		sh, err := splitPool(sp.guar[k], p.cfg.Guaranteed, t.cfg.Guarantees, nil, nt)
		if err != nil {
			return sp, fmt.Errorf("%w: tenant %q: its guarantee of %d buffers: %w", ErrInvalidConfig, t.cfg.Name, sp.guar[k], err)
		}
		sp.innerShared[k] = sh.shared
		for lt := range nt {
			sp.typeGuar[k][lt] = sh.guarantee[lt]
			b := sh.guarantee[lt] + sh.shared + sp.shared
			if lt < len(t.cfg.Budgets) && t.cfg.Budgets[lt] > 0 {
				b = t.cfg.Budgets[lt]
				if b < sh.guarantee[lt] {
					return sp, fmt.Errorf("%w: tenant %q: type %d: budget %d below its guarantee of %d", ErrInvalidConfig, t.cfg.Name, lt, b, sh.guarantee[lt])
				}
			}
			sp.typeBudget[k][lt] = min(b, sp.budget[k])
		}
	}
	return sp, nil
}

// Name implements Policy: the policy each tenant runs.
func (p *Tenants) Name() string { return p.name }

// Enqueue implements Policy: a request of a live tenant's type is queued
// by the tenant's policy if both its type and its tenant are admitted;
// type 0 and removed tenants' types are refused (NoTenant).
func (p *Tenants) Enqueue(r Request, now int64) Verdict {
	if uint64(r.Type) >= uint64(len(p.typeTenant)) {
		return NoTenant
	}
	k := p.typeTenant[r.Type]
	if k < 0 {
		return NoTenant
	}
	t := p.tenants[k]
	if t.removed {
		return NoTenant
	}
	in := t.p
	local := r.Type - t.base
	l := &in.lim[local]
	if !p.admit(t, l) {
		return in.over(local)
	}
	i, ok := in.queues[local].push(entry{req: Request{Handle: r.Handle, Type: local}, enq: now})
	if !ok {
		return in.full(local)
	}
	in.queued(local, i)
	p.held++
	return in.accepted(l, now)
}

// admit is the two-level budget check of an arrival whose type's state is
// l, of tenant t.
func (p *Tenants) admit(t *tenant, l *typeLimit) bool {
	if p.cfg.Pool == 0 {
		return true
	}
	switch {
	case p.held >= p.cfg.Pool: // only right after a rebalance shrank guarantees
		return false
	case l.held < l.guarantee:
		return true
	case l.held >= l.budget || t.held() >= t.budget:
		return false
	case t.p.borrowed < t.p.shared:
		return true
	}
	return p.borrowed() < p.shared
}

// borrowed is the tenants' shared part in use: what each tenant holds
// beyond its types' guarantees and its own shared part (all of a removed
// tenant's).
func (p *Tenants) borrowed() int {
	b := 0
	for _, t := range p.tenants {
		if t.removed {
			b += t.held()
		} else if x := t.p.borrowed - t.p.shared; x > 0 {
			b += x
		}
	}
	return b
}

// Dispatch implements Policy: each tenant on its own idle workers, then
// idle workers lent to the tenants furthest below their share, then the
// queued requests of removed tenants, dropped (Worker == Removed).
func (p *Tenants) Dispatch(now int64, out []Assignment) int {
	n := 0
	for k, t := range p.tenants {
		in := t.p
		if in.total == 0 {
			continue
		}
		if t.removed {
			for n < len(out) {
				e, ok := in.popNext(true)
				if !ok {
					break
				}
				in.drop(out, n, e, Removed)
				out[n].Request.Type += t.base
				p.held--
				n++
			}
			t.reclaim()
			if n == len(out) {
				return n
			}
			continue
		}
		m := in.Dispatch(now, out[n:])
		for i := n; i < n+m; i++ {
			a := &out[i]
			a.Request.Type += t.base
			if a.Worker < 0 {
				p.held--
				continue
			}
			p.idleN--
			p.running[a.Worker] = int32(k)
			t.busy++
		}
		if n += m; n == len(out) {
			return n
		}
	}
	if p.idleN == 0 || p.lone {
		return n
	}
	clear(p.skip)
	p.lendableIdle()
	for n < len(out) && p.idleN > 0 {
		k := p.borrower()
		if k < 0 {
			break
		}
		t := p.tenants[k]
		in := t.p
		typ, _ := in.peekNext(false) // borrower checked it has one
		w := p.lendTo(t, in.typeMean(typ))
		if w < 0 {
			p.skip[k] = true
			continue
		}
		e := in.popType(typ)
		if in.expired(&e, now) {
			in.expire(out, n, e)
			p.held--
		} else {
			in.assignAway(out, n, w, e)
			p.idle.clear(w)
			p.lendable.clear(w)
			p.idleN--
			if o := p.owner[w]; o >= 0 {
				p.tenants[o].p.idleCount--
				p.tenants[o].lent++
			}
			p.running[w] = int32(k)
			t.busy++
			t.borrow++
		}
		out[n].Request.Type += t.base
		n++
	}
	return n
}

// lendShare bounds how long a request may be to borrow a worker reserved
// for one of a tenant's shorter groups: a tenth of the group's shortest
// mean service time, so that the group's requests wait at most a tenth of
// their own service time for it to come back.
const lendShare = 0.1

// lendableIdle sets p.lendable to the idle workers that may be lent, and
// p.limit to the longest request each may be lent to. DARC keeps the
// workers it reserves for a tenant's shorter groups idle for them (short
// may take a longer type's worker, never the reverse): across tenants such
// a worker goes only to requests at most lendShare of the group's shortest
// mean, and the tenant also keeps one idle worker of its longest group (a
// spare) that its short types may steal. The longest group's other workers,
// and every worker of a tenant in its startup phase or with a single
// group, or of nobody, go to any request; with Config.LendAll every idle
// worker goes to any request.
func (p *Tenants) lendableIdle() {
	copy(p.lendable, p.idle)
	for w := range p.limit {
		p.limit[w] = math.Inf(1)
	}
	if p.cfg.LendAll {
		return
	}
	for _, t := range p.tenants {
		in := t.p
		if in.startup || in.cur.ngroups < 2 || t.hi == t.lo {
			continue
		}
		cur := in.cur
		for g := 0; g < cur.ngroups-1; g++ {
			shortest := math.Inf(1)
			for _, typ := range cur.types[cur.start(g):cur.end[g]] {
				shortest = min(shortest, in.mean[typ])
			}
			res := cur.resOf(g)
			for i, word := range res {
				word &= in.all[i]
				for word != 0 {
					w := i<<6 + bits.TrailingZeros64(word)
					word &= word - 1
					p.limit[w] = shortest * lendShare
				}
			}
		}
		for w := t.lo; w < t.hi; w++ { // the spare
			if p.lendable.has(w) && math.IsInf(p.limit[w], 1) {
				p.lendable.clear(w)
				break
			}
		}
	}
}

// lendTo returns the highest-numbered lendable worker outside t's home
// that may run a request of mean service time mean (0: not profiled yet,
// only workers without a limit), or -1.
func (p *Tenants) lendTo(t *tenant, mean float64) int {
	for i := len(p.lendable) - 1; i >= 0; i-- {
		word := p.lendable[i] & t.away[i]
		for word != 0 {
			w := i<<6 + 63 - bits.LeadingZeros64(word)
			word &^= 1 << (uint(w) & 63)
			if l := p.limit[w]; math.IsInf(l, 1) || (mean > 0 && mean <= l) {
				return w
			}
		}
	}
	return -1
}

// borrower returns the live tenant that borrows next: the furthest below
// its guarantee (busy workers minus home workers) among those with a known
// request waiting, borrowing fewer than their ceiling less their home
// workers, and not skipped; -1 if none.
func (p *Tenants) borrower() int {
	best, bestX := -1, math.MaxInt
	for k, t := range p.tenants {
		if t.removed || p.skip[k] || t.p.knownQueued() == 0 {
			continue
		}
		if t.cfg.MaxWorkers > 0 && t.borrow >= t.cfg.MaxWorkers-(t.hi-t.lo) {
			continue // its home workers may all be busy too: at most the ceiling
		}
		if x := t.busy - (t.hi - t.lo); x < bestX {
			best, bestX = k, x
		}
	}
	return best
}

// Complete implements Policy: the tenant whose request ran on worker
// profiles it, and the worker goes back to its home tenant's idle workers.
func (p *Tenants) Complete(worker int, typ Type, service int64, now int64) {
	if uint(worker) >= uint(p.workers) {
		panic(fmt.Sprintf("darc: complete: worker %d out of range [0,%d)", worker, p.workers))
	}
	if k := p.running[worker]; k >= 0 {
		t := p.tenants[k]
		local := Unknown
		if typ >= t.base && typ < t.base+Type(t.cfg.NumTypes) {
			local = typ - t.base
		}
		t.p.completed(local, service)
		p.running[worker] = -1
		t.busy--
		p.held--
		if t.removed {
			t.reclaim()
		}
		if o := p.owner[worker]; o != k {
			t.borrow--
			if o >= 0 {
				p.tenants[o].lent--
			}
		}
	}
	if !p.idle.has(worker) {
		p.idle.set(worker)
		p.idleN++
		if o := p.owner[worker]; o >= 0 {
			p.tenants[o].p.idleCount++
		}
	}
}

// Snapshot implements Policy: the global type space (type 0, then each
// tenant's types named "tenant/type"), every tenant's groups (with global
// ids), and one TenantState per tenant.
func (p *Tenants) Snapshot(s *Snapshot) {
	s.Policy = p.name
	s.Workers = p.workers
	s.Phase = "darc"
	s.Groups = s.Groups[:0]
	s.Reservations = 0
	s.IdleWorkers = p.idleN
	s.Pool, s.Shared, s.Borrowed = p.cfg.Pool, p.shared, p.borrowed()
	s.Busy = resize(s.Busy, p.workers)
	for w := range s.Busy {
		s.Busy[w] = !p.idle.has(w)
	}
	s.Types = resize(s.Types, p.numTypes)
	for i := range s.Types {
		s.Types[i] = TypeState{Type: Type(i)} // a retired tenant's range: nobody's now
	}
	s.Types[0].Name = "UNKNOWN"
	s.Tenants = s.Tenants[:0]
	in := &p.snap
	for _, t := range p.tenants {
		if t.retired {
			continue
		}
		t.p.Snapshot(in)
		if !t.removed && in.Phase == "startup" {
			s.Phase = "startup"
		}
		s.Reservations += in.Reservations
		for lt, ts := range in.Types {
			ts.Type += t.base
			if ts.Budget == math.MaxInt || p.cfg.Pool == 0 {
				ts.Budget, ts.Guarantee = 0, 0
			}
			s.Types[int(t.base)+lt] = ts
		}
		for _, g := range in.Groups {
			for i := range g.Types {
				g.Types[i] += t.base
			}
			g.Tenant = t.cfg.Name
			s.Groups = append(s.Groups, Group{Types: append([]Type(nil), g.Types...), Demand: g.Demand,
				Reserved: append([]int(nil), g.Reserved...), Stealable: append([]int(nil), g.Stealable...), Spillway: g.Spillway, Tenant: g.Tenant})
		}
		var home []int
		if i := len(s.Tenants); i < cap(s.Tenants) {
			home = s.Tenants[:i+1][i].Home[:0]
		}
		ts := TenantState{Name: t.cfg.Name, Base: t.base, NumTypes: t.cfg.NumTypes, Phase: in.Phase, Reservations: in.Reservations,
			Home: home, Weight: t.cfg.Weight, MaxWorkers: t.cfg.MaxWorkers,
			Busy: t.busy, Borrowed: t.borrow, Lent: t.lent, Queued: t.p.total, Held: t.held(), Removed: t.removed}
		for w := t.lo; w < t.hi; w++ {
			ts.Home = append(ts.Home, w)
		}
		if p.cfg.Pool > 0 {
			ts.Guarantee, ts.Budget = t.guar, t.budget
		}
		s.Tenants = append(s.Tenants, ts)
	}
}
