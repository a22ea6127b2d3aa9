package dispatcher

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/persephone-go/psp/app"
	"github.com/persephone-go/psp/darc"
	"github.com/persephone-go/psp/nic"
)

// TenantSpec is one tenant of a dispatcher (Spec.Tenants, AddTenant, or the
// default tenant New makes of a lone classifier): its ports, its
// classifier and, for AddTenant, its share.
type TenantSpec struct {
	// Name is the tenant's name in the policy (darc.TenantConfig.Name).
	Name string
	// Ports are the UDP destination ports of the tenant's packets; empty:
	// the default tenant, which gets the packets of every port no tenant
	// lists (at most one). Packets of no tenant are dropped (no_tenant).
	Ports []uint16
	// Classifier maps the tenant's payloads to its own type ids (0 its
	// UNKNOWN, up to its darc.TenantConfig.NumTypes-1; larger ids count as
	// 0). It is called by one goroutine at a time (the dispatcher's or
	// the tenant's lane, never both), so it must not be shared between
	// tenants.
	Classifier app.Classifier
	// Isolation says where Classifier runs: IsolateAuto (the default),
	// IsolateLane or IsolateInline.
	Isolation Isolation
	// Share is the tenant's configuration in the policy, for AddTenant and
	// UpdateTenant (Spec.Tenants' tenants are already in the policy).
	Share darc.TenantConfig
	// Release, when set, is called once the tenant's classifier will not be
	// called again (its lane stopped after its last call: the tenant was
	// removed or Run ended): on its lane's goroutine, or for a tenant
	// without a lane (IsolateInline) on RemoveTenant's caller's once the
	// dispatcher has applied the removal. Close the classifier there.
	Release func()
}

// Isolation says where a tenant's classifier runs.
type Isolation uint8

const (
	// IsolateAuto classifies a tenant's packets on the dispatcher
	// goroutine, in a call of their own, while its classifier behaves, and
	// on the tenant's lane, a goroutine of its own, from the first call
	// that faults or takes longer than Spec.InlineLimit; it comes back
	// after Spec.LaneProbation clean batches on the lane, a probation that
	// doubles with every escalation within laneProbationReset of the last
	// (up to maxProbationDoublings times), so a classifier that is slow
	// again and again stays on its lane longer each time. One misbehaving
	// call costs the other tenants at most that call's time, which the
	// classifier's fuel bounds; afterwards nothing.
	IsolateAuto Isolation = iota
	// IsolateLane always classifies on the tenant's lane: a hand-off per
	// burst, no other tenant ever waits for this one's classifier.
	IsolateLane
	// IsolateInline always classifies on the dispatcher goroutine: for
	// trusted classifiers (native code).
	IsolateInline
)

// String returns "auto", "lane" or "inline".
func (i Isolation) String() string {
	switch i {
	case IsolateLane:
		return "lane"
	case IsolateInline:
		return "inline"
	}
	return "auto"
}

// faultCounter is implemented by classifiers that count their faults
// (wasmclass.Caller): IsolateAuto moves a tenant to its lane when the
// count grows during an inline call.
type faultCounter interface {
	FaultTotal() uint64
}

// TenantPolicy is a policy with tenants: darc.Tenants (with shares, and
// tenants that come and go) or darc.Shared (a fixed set, or the lone
// default tenant New puts any other policy under).
type TenantPolicy interface {
	darc.Policy
	Base(name string) (darc.Type, bool)
	NumTypes() int
	AddTenant(darc.TenantConfig) (darc.Type, error)
	UpdateTenant(darc.TenantConfig) error
	RemoveTenant(name string) error
}

// DefaultTenant is the name of the tenant New makes of a lone classifier.
const DefaultTenant = "default"

// Errors of the tenant lifecycle.
var (
	// ErrStopped: the dispatcher has stopped.
	ErrStopped = errors.New("dispatcher: stopped")
	// ErrTenant wraps refused tenant changes (unknown tenant, ports in
	// use, a share that does not fit).
	ErrTenant = errors.New("dispatcher: tenant")
)

// routedTenant is a tenant as the dispatcher routes and classifies its
// packets, owned by the dispatcher goroutine.
type routedTenant struct {
	spec     TenantSpec
	base     darc.Type
	numTypes int
	removed  bool
	// removal orders the removed tenants (the oldest are retired first);
	// retired: forgotten, its slot and type ids free (retireRemoved).
	removal  uint64
	retired  bool
	lane     *lane // nil: always inline
	onLane   bool  // classified on the lane now
	faults   faultCounter
	received uint64
	// Inline calls (the lane counts its own).
	calls, busyNs uint64
	escalations   uint64
	// probation is the clean lane calls the tenant needs to come back
	// inline; lastEscalation when it last went to its lane (dispatcher
	// clock).
	probation      uint64
	lastEscalation int64
	// Inline classification scratch, one burst.
	bufs  []*nic.Buffer
	pays  [][]byte
	types []darc.Type
	n     int
}

// tenantRouter is the dispatcher's tenants, the routes of their ports
// and their lanes.
type tenantRouter struct {
	policy      TenantPolicy
	route       []int32 // port -> tenant index, -1: none
	dflt        int32   // default tenant, -1: none
	sole        int32   // the only tenant, live and routed every port, or -1
	tenants     []*routedTenant
	inline      []int // tenants with inline packets in the current burst
	classifying int
	laneCap     int
	cmds        chan command
	lanes       sync.WaitGroup
	removals    uint64 // tenants removed so far
}

// command is a lifecycle change applied by the dispatcher goroutine.
type command struct {
	apply func(d *Dispatcher) error
	done  chan error
}

// newTenantRouter sets up tenants for d (New): every tenant must be in the
// policy.
func newTenantRouter(d *Dispatcher, tp TenantPolicy, tenants []TenantSpec) (*tenantRouter, error) {
	mt := &tenantRouter{policy: tp, route: make([]int32, 1<<16), dflt: -1, sole: -1, laneCap: d.spec.LaneCapacity,
		cmds: make(chan command, 16)}
	for i := range mt.route {
		mt.route[i] = -1
	}
	for _, t := range tenants {
		if _, err := mt.add(d, t); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrSpec, err)
		}
	}
	return mt, nil
}

// add registers tenant t (already in the policy) and routes its ports.
func (mt *tenantRouter) add(d *Dispatcher, t TenantSpec) (*routedTenant, error) {
	base, ok := mt.policy.Base(t.Name)
	if !ok {
		return nil, fmt.Errorf("tenant %q is not in the policy", t.Name)
	}
	if t.Classifier == nil {
		return nil, fmt.Errorf("tenant %q has no classifier", t.Name)
	}
	if err := mt.checkPorts(t.Name, t.Ports); err != nil {
		return nil, err
	}
	var snap darc.Snapshot
	mt.policy.Snapshot(&snap)
	rt := &routedTenant{spec: t, base: base, numTypes: 1}
	for _, ts := range snap.Tenants {
		if ts.Base == base {
			rt.numTypes = ts.NumTypes
		}
	}
	rt.bufs = make([]*nic.Buffer, d.spec.Burst)
	rt.pays = make([][]byte, d.spec.Burst)
	rt.types = make([]darc.Type, d.spec.Burst)
	rt.faults, _ = t.Classifier.(faultCounter)
	if t.Isolation != IsolateInline {
		rt.lane = newLane(t.Classifier, mt.laneCap, d.spec.Burst, d.spec, d.dp.Now)
		rt.lane.release = t.Release
		rt.lane.inlineLimit = int64(d.spec.InlineLimit)
		rt.lane.faults = rt.faults
		rt.onLane = t.Isolation == IsolateLane
	}
	k := int32(slices.IndexFunc(mt.tenants, func(o *routedTenant) bool { return o.retired }))
	if k < 0 {
		k = int32(len(mt.tenants))
		mt.tenants = append(mt.tenants, rt)
	} else {
		mt.tenants[k] = rt // a retired tenant's slot (it has no routes)
	}
	mt.setRoutes(k, t.Ports)
	return rt, nil
}

// checkPorts refuses ports another live tenant has, and a second default.
func (mt *tenantRouter) checkPorts(name string, ports []uint16) error {
	var others []TenantSpec
	for _, t := range mt.tenants {
		if !t.removed {
			others = append(others, TenantSpec{Name: t.spec.Name, Ports: t.spec.Ports})
		}
	}
	return CheckPorts(TenantSpec{Name: name, Ports: ports}, others)
}

// CheckPorts is the one check of a tenant's ports against the other
// tenants' (a tenant of t's name among them is t itself, ignored): port
// 0, a port listed twice or another tenant has, and a second default
// tenant (one without ports: it gets every port no one has) are refused.
// The dispatcher applies it to every tenant it adds or updates; a server
// applies it to its configuration before it opens anything.
func CheckPorts(t TenantSpec, others []TenantSpec) error {
	for i, p := range t.Ports {
		switch {
		case p == 0:
			return errors.New("port 0")
		case slices.Contains(t.Ports[:i], p):
			return fmt.Errorf("port %d listed twice", p)
		}
	}
	for _, o := range others {
		if o.Name == t.Name {
			continue
		}
		for _, p := range t.Ports {
			if slices.Contains(o.Ports, p) {
				return fmt.Errorf("port %d belongs to tenant %q", p, o.Name)
			}
		}
		if len(t.Ports) == 0 && len(o.Ports) == 0 {
			return fmt.Errorf("tenant %q is already the default tenant (the one without ports)", o.Name)
		}
	}
	return nil
}

// setRoutes routes ports (none: every port no one has) to tenant k,
// dropping k's previous routes.
func (mt *tenantRouter) setRoutes(k int32, ports []uint16) {
	mt.clearRoutes(k)
	for _, p := range ports {
		mt.route[p] = k
	}
	if len(ports) == 0 {
		mt.dflt = k
	}
	mt.tenants[k].spec.Ports = slices.Clone(ports)
	mt.findSole()
}

// findSole sets sole: the tenant that gets every packet, if one does
// (the only live tenant, the default, with no ports of its own).
func (mt *tenantRouter) findSole() {
	mt.sole = -1
	live := 0
	for _, t := range mt.tenants {
		if !t.removed {
			live++
		}
	}
	if live == 1 && mt.dflt >= 0 && len(mt.tenants[mt.dflt].spec.Ports) == 0 && !mt.tenants[mt.dflt].removed {
		mt.sole = mt.dflt
	}
}

func (mt *tenantRouter) clearRoutes(k int32) {
	for _, p := range mt.tenants[k].spec.Ports {
		if mt.route[p] == k {
			mt.route[p] = -1
		}
	}
	if mt.dflt == k {
		mt.dflt = -1
	}
	mt.findSole()
}

// runCommands applies the pending lifecycle changes (dispatcher goroutine).
func (d *Dispatcher) runCommands() {
	for {
		select {
		case c := <-d.mt.cmds:
			err := safeApply(c.apply, d)
			// Stats show the change before its caller hears of it (an
			// added tenant's share, its types; a removed one's state).
			d.publish(d.dp.Now())
			c.done <- err
		default:
			return
		}
	}
}

// safeApply runs a lifecycle change and turns a panic in it into a refusal:
// a change the policy cannot apply (a bug, or a value validation missed)
// must cost the caller an error, not the server its dispatcher goroutine.
// It is the last line: the policy validates every value before it changes
// anything (darc.Tenants.checkTenant), so no change known to the tests
// gets here.
func safeApply(apply func(d *Dispatcher) error, d *Dispatcher) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: change refused: it could not be applied (%v)", ErrTenant, r)
		}
	}()
	return apply(d)
}

// do runs apply on the dispatcher goroutine and waits for it: before Run,
// at once (nothing else runs); after Run, ErrStopped.
func (d *Dispatcher) do(ctx context.Context, apply func(d *Dispatcher) error) error {
	d.lifeMu.Lock()
	switch {
	case d.stopped:
		d.lifeMu.Unlock()
		return ErrStopped
	case !d.started:
		defer d.lifeMu.Unlock()
		err := safeApply(apply, d)
		d.publish(d.dp.Now())
		return err
	}
	d.lifeMu.Unlock()
	c := command{apply: apply, done: make(chan error, 1)}
	select {
	case d.mt.cmds <- c:
		if d.waker != nil {
			d.waker.WakeRecv() // do not wait out an idle receive
		}
	case <-ctx.Done():
		return ctx.Err()
	case <-d.loopDone:
		return ErrStopped
	}
	select {
	case err := <-c.done:
		return err
	case <-d.loopDone:
		// The loop may have applied it on its way out.
		select {
		case err := <-c.done:
			return err
		default:
			return ErrStopped
		}
	}
}

// AddTenant adds a tenant without stopping: the policy gives it a type
// range and a share (t.Share, whose Name is t.Name), its ports are routed
// to it and its lane starts. It returns the global id of its local type 0.
// Safe for concurrent use; it waits for the dispatcher goroutine (at most
// one loop iteration) or ctx.
func (d *Dispatcher) AddTenant(ctx context.Context, t TenantSpec) (darc.Type, error) {
	var base darc.Type
	t.Share.Name = t.Name
	// The tenant's own policy (its per-type state: hundreds of KiB for
	// 1,024 types) is built here, on the caller's goroutine, not the
	// dispatcher's.
	var prep *darc.PreparedTenant
	if tp, ok := d.policyPreparer(); ok {
		var err error
		if prep, err = tp.PrepareTenant(t.Share); err != nil {
			return 0, fmt.Errorf("%w: add %q: %w", ErrTenant, t.Name, err)
		}
	}
	err := d.do(ctx, func(d *Dispatcher) error {
		mt := d.mt
		if err := mt.checkPorts(t.Name, t.Ports); err != nil {
			return fmt.Errorf("%w: add %q: %w", ErrTenant, t.Name, err)
		}
		for _, rt := range mt.tenants {
			if rt.spec.Name == t.Name && !rt.removed {
				return fmt.Errorf("%w: add %q: it exists", ErrTenant, t.Name)
			}
		}
		if t.Classifier == nil {
			return fmt.Errorf("%w: add %q: no classifier", ErrTenant, t.Name)
		}
		d.retireRemoved() // their ids may serve this tenant
		var b darc.Type
		var err error
		if prep != nil {
			b, err = d.mt.policy.(tenantPreparer).AddPrepared(prep)
		} else {
			b, err = mt.policy.AddTenant(t.Share)
		}
		if err != nil {
			return fmt.Errorf("%w: add %q: %w", ErrTenant, t.Name, err)
		}
		rt, err := mt.add(d, t)
		if err != nil {
			_ = mt.policy.RemoveTenant(t.Name)
			return fmt.Errorf("%w: add %q: %w", ErrTenant, t.Name, err)
		}
		d.growTypes()
		if rt.lane != nil && d.started {
			rt.lane.start(&mt.lanes, d.lockThread)
		}
		base = b
		return nil
	})
	return base, err
}

// tenantPreparer is a TenantPolicy that builds a tenant's own policy ahead
// of adding it (darc.Tenants), off the goroutine running the policy.
type tenantPreparer interface {
	PrepareTenant(darc.TenantConfig) (*darc.PreparedTenant, error)
	AddPrepared(*darc.PreparedTenant) (darc.Type, error)
}

// policyPreparer returns the policy as a tenantPreparer, if it is one.
func (d *Dispatcher) policyPreparer() (tenantPreparer, bool) {
	tp, ok := d.mt.policy.(tenantPreparer)
	return tp, ok
}

// UpdateTenant changes a live tenant's ports and share (t.Share; its
// classifier changes by a hot swap of the classifier itself).
func (d *Dispatcher) UpdateTenant(ctx context.Context, t TenantSpec) error {
	t.Share.Name = t.Name
	return d.do(ctx, func(d *Dispatcher) error {
		mt := d.mt
		k := mt.live(t.Name)
		if k < 0 {
			return fmt.Errorf("%w: update %q: %w", ErrTenant, t.Name, darc.ErrUnknownTenant)
		}
		if err := mt.checkPorts(t.Name, t.Ports); err != nil {
			return fmt.Errorf("%w: update %q: %w", ErrTenant, t.Name, err)
		}
		if err := mt.policy.UpdateTenant(t.Share); err != nil {
			return fmt.Errorf("%w: update %q: %w", ErrTenant, t.Name, err)
		}
		mt.tenants[k].spec.Share = t.Share
		mt.setRoutes(int32(k), t.Ports)
		return nil
	})
}

// RemoveTenant removes a live tenant without stopping: its ports are no
// longer routed (their packets are dropped, no_tenant), its queued requests
// and those its lane still classifies are dropped (removed), its running
// requests are answered; its lane stops. Its counters stay in Stats while
// it is one of the keepRemoved tenants removed last; older ones are
// retired once they hold nothing (retireRemoved).
func (d *Dispatcher) RemoveTenant(ctx context.Context, name string) error {
	var release func() // an inline tenant's: run here, not on the dispatcher goroutine
	err := d.do(ctx, func(d *Dispatcher) error {
		mt := d.mt
		k := mt.live(name)
		if k < 0 {
			return fmt.Errorf("%w: remove %q: %w", ErrTenant, name, darc.ErrUnknownTenant)
		}
		if err := mt.policy.RemoveTenant(name); err != nil {
			return fmt.Errorf("%w: remove %q: %w", ErrTenant, name, err)
		}
		t := mt.tenants[k]
		t.removed = true
		t.removal = mt.removals
		mt.removals++
		mt.clearRoutes(int32(k))
		if t.lane != nil {
			t.lane.halt() // it finishes what it holds; collectLanes drops it
			if !d.started {
				t.lane.releaseOnce() // never started
			}
		} else {
			release = t.spec.Release
		}
		t.onLane = t.lane != nil // what is left comes from the lane
		return nil
	})
	if release != nil { // set only once the removal was applied
		// The dispatcher called the classifier last before it applied the
		// removal (the command's channel orders the two): closing it here
		// keeps a host's close off the dispatcher goroutine.
		release()
	}
	return err
}

// live returns the index of the live tenant called name, or -1.
func (mt *tenantRouter) live(name string) int {
	for k, t := range mt.tenants {
		if t.spec.Name == name && !t.removed {
			return k
		}
	}
	return -1
}

// growTypes extends the per-type tables to the policy's type space after
// a tenant was added, and names the types anew.
func (d *Dispatcher) growTypes() {
	n := d.mt.policy.NumTypes()
	if n <= d.numTypes {
		// The tenant took a retired tenant's ids: their names change.
		d.policy.Snapshot(&d.snapshotBuffer)
		d.names = typeNames(d.spec.TypeNames, d.snapshotBuffer, d.numTypes)
		return
	}
	counters := make([]typeCounters, n)
	copy(counters, d.counters)
	d.counters = counters
	var snap darc.Snapshot
	d.policy.Snapshot(&snap)
	d.names = typeNames(d.spec.TypeNames, snap, n)
	d.numTypes = n
	d.stageTypes.Store(int64(n))
	d.shedRing = make([]uint64, shedSlots*(n+1))
	d.shedCount, d.shedNext = 0, 0
	d.snapshotBuffer = snap
}

// keepRemoved is how many removed tenants keep their counters in Stats.
// Older ones are retired once nothing of theirs is queued, running or on
// their lane: their slot, type ids, counters and stage histograms go to
// tenants added later, so that tenants can come and go without end.
const keepRemoved = 8

// retirer is a TenantPolicy that can forget removed tenants (darc.Tenants).
type retirer interface {
	Retire(base darc.Type) error
}

// retireRemoved retires the removed tenants beyond the keepRemoved last
// ones that hold nothing any more (publish and AddTenant, on the
// dispatcher goroutine).
func (d *Dispatcher) retireRemoved() {
	mt := d.mt
	r, ok := mt.policy.(retirer)
	if !ok {
		return
	}
	n := 0
	for _, t := range mt.tenants {
		if t.removed && !t.retired {
			n++
		}
	}
	if n <= keepRemoved {
		return // the common case: nothing to sort, nothing allocated
	}
	removed := make([]*routedTenant, 0, n)
	for _, t := range mt.tenants {
		if t.removed && !t.retired {
			removed = append(removed, t)
		}
	}
	slices.SortFunc(removed, func(a, b *routedTenant) int { return cmp.Compare(a.removal, b.removal) })
	for _, t := range removed[:len(removed)-keepRemoved] {
		if l := t.lane; l != nil {
			if l.inflight > 0 {
				continue
			}
			if d.started {
				select {
				case <-l.done:
				default:
					continue // still in its last call
				}
			}
		}
		if r.Retire(t.base) != nil {
			continue // still holds requests
		}
		lo, hi := int(t.base), int(t.base)+t.numTypes
		clear(d.counters[lo:min(hi, len(d.counters))])
		for _, w := range d.workers {
			w.stages.reset(lo, hi)
		}
		d.inPlaceStages.reset(lo, hi)
		// The per-type shed totals went back to zero: start the window
		// again.
		d.shedCount, d.shedNext = 0, 0
		*t = routedTenant{base: t.base, numTypes: t.numTypes, removed: true, retired: true}
	}
}
