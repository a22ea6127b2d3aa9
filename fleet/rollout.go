package fleet

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/persephone-go/psp/admin"
)

// Errors returned by Run.
var (
	// ErrRolledBack: a wave failed its analysis (or a server could not be
	// swapped or read) and every server swapped was rolled back.
	ErrRolledBack = errors.New("fleet: rollout stopped and rolled back")
	// ErrRollbackIncomplete: a rollback could not restore every server;
	// the report says which.
	ErrRollbackIncomplete = errors.New("fleet: rollout stopped, rollback incomplete")
)

// Module is what a rollout installs.
type Module struct {
	Wasm []byte
	// SHA256 is the module's SHA-256 in hex.
	SHA256 string
	// Reference is where it came from (oci://HOST/REPO@sha256:..., or a
	// file name), sent to the servers when it is a registry reference.
	Reference string
}

// ServerState is a server's tenant before the rollout.
type ServerState struct {
	Server  string
	SHA256  string
	Version int
	// Provisional is set while the tenant's last swap awaits its
	// confirmation: the deadline; Previous is then the module (SHA-256)
	// it reverts to.
	Provisional time.Time
	Previous    string
	Err         error // unreachable, no such tenant...
}

// Wave is one wave's outcome.
type Wave struct {
	Number  int
	Kind    string // canary, wave or control
	Servers []string
	// Swapped: servers this wave swapped (a server already running the
	// module is not swapped, nor rolled back), and those it adopted.
	Swapped []string
	// Adopted: servers that ran the module provisionally when the
	// rollout started (an interrupted rollout's swaps): renewed, judged
	// and confirmed or rolled back as if this rollout had swapped them.
	Adopted []string
	// Baseline names where the comparison came from.
	Baseline   string
	Judgements []Judgement
	Pass       bool
	// Err is why the wave could not be judged (a swap refused, a server
	// unreachable), if so.
	Err error
	// Bake is how long the wave ran before it was judged; Aborted says
	// that its faults or UNKNOWN share crossed a bound before the bake's
	// end, whatever the rest of it would have brought.
	Bake    time.Duration
	Aborted string
}

// RollbackResult is one server's rollback.
type RollbackResult struct {
	Server  string
	Version int
	SHA256  string
	Err     error
}

// Report is a rollout's outcome.
type Report struct {
	Module    Module
	Tenant    string
	Before    []ServerState
	Waves     []Wave
	Rollbacks []RollbackResult
	// Unconfirmed are the servers whose final confirmation failed (they
	// revert to their old module at the deadline).
	Unconfirmed []RollbackResult
	// Completed: every server runs the module, confirmed.
	Completed bool
}

// Progress is told what happens while a rollout runs (nil: nothing).
type Progress func(format string, args ...any)

// member is one server of the rollout.
type member struct {
	addr  string
	admin *admin.Client
	orig  ServerState
	// on: runs the new module (swapped by this rollout, or already).
	on bool
	// swapped: this rollout swapped it, or adopted an interrupted
	// rollout's provisional swap of it; old is then the module a
	// rollback returns it to.
	swapped bool
	old     string
	// until is the deadline of its provisional swap, renewed while the
	// rollout runs.
	until time.Time
	// lastOld is the server's last window on the old module.
	lastOld *window
	// swappedAt is when its swap returned.
	swappedAt time.Time
}

// Inspect reads every server's tenant: the plan's starting point.
func Inspect(ctx context.Context, p Plan) ([]ServerState, error) {
	ms, err := members(p)
	if err != nil {
		return nil, err
	}
	out := make([]ServerState, len(ms))
	for i, m := range ms {
		out[i] = m.inspect(ctx, p.Tenant)
	}
	return out, nil
}

func members(p Plan) ([]*member, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	var ms []*member
	for _, s := range p.Servers {
		c, err := admin.NewClient(s, p.Timeout)
		if err != nil {
			return nil, fmt.Errorf("fleet: %w", err)
		}
		c.SetToken(p.Token) // reads need a token on a server that has tokens
		ms = append(ms, &member{addr: s, admin: c})
	}
	return ms, nil
}

func (m *member) inspect(ctx context.Context, tenant string) ServerState {
	st := ServerState{Server: m.addr}
	s, err := m.admin.Status(ctx)
	if err != nil {
		st.Err = err
		return st
	}
	ti, ok := findTenant(s, tenant)
	switch {
	case !ok:
		st.Err = fmt.Errorf("no tenant %q (tenants: %s)", tenant, tenantNames(s))
	case ti.Native:
		st.Err = fmt.Errorf("tenant %q runs a native classifier", tenant)
	default:
		st.SHA256, st.Version = ti.SHA256, ti.Version
		if ti.Provisional != nil {
			st.Provisional, _ = time.Parse(time.RFC3339Nano, ti.Provisional.Until)
			st.Previous = ti.PreviousSHA256
		}
	}
	return st
}

// rollout is one Run.
type rollout struct {
	p        Plan
	mod      Module
	ms       []*member
	prom     *promSource
	progress Progress
}

// Run rolls mod out by plan: the canaries are swapped (compare-and-swap
// on the module each ran, provisionally: a server rolls back by itself
// unless the rollout confirms in time), baked and judged against the
// servers still on the old module; if they pass, the next wave, and so on
// to the control group. The first wave that fails, or a swap refused,
// stops the rollout and rolls every server it swapped back, each only if
// it still runs mod. Every swap is confirmed once every wave passed. The
// report says what happened; the error is nil only when every server runs
// mod.
func Run(ctx context.Context, p Plan, mod Module, progress Progress) (*Report, error) {
	if progress == nil {
		progress = func(string, ...any) {}
	}
	p.Bounds = p.Bounds.WithDefaults()
	ms, err := members(p)
	if err != nil {
		return nil, err
	}
	r := &rollout{p: p, mod: mod, ms: ms, progress: progress}
	if p.Prometheus != "" {
		if r.prom, err = newPromSource(p.Prometheus, p.Timeout); err != nil {
			return nil, err
		}
		if err := r.prom.targets(ctx, p.Servers); err != nil {
			return nil, fmt.Errorf("fleet: %w (nothing was changed)", err)
		}
	}
	rep := &Report{Module: mod, Tenant: p.Tenant}
	for _, m := range ms {
		m.orig = m.inspect(ctx, p.Tenant)
		rep.Before = append(rep.Before, m.orig)
		if m.orig.Err != nil {
			return rep, fmt.Errorf("fleet: %s: %w (nothing was changed)", m.addr, m.orig.Err)
		}
		m.on = m.orig.SHA256 == mod.SHA256
		if m.on && !m.orig.Provisional.IsZero() {
			if err := r.adopt(ctx, m); err != nil {
				return rep, fmt.Errorf("fleet: %w (nothing was changed: run again once it reverted)", err)
			}
		}
	}
	all := true
	for _, m := range ms {
		all = all && m.on && !m.swapped
	}
	if all {
		progress("every server already runs %.12s: nothing to do\n", mod.SHA256)
		rep.Completed = true
		return rep, nil
	}
	byAddr := map[string]*member{}
	for _, m := range ms {
		byAddr[m.addr] = m
	}
	waves := p.Waves()
	if len(waves) == 1 {
		// Nobody stays on the old module to compare with: observe the
		// servers on it first.
		progress("observing %d server(s) on the running module for %v (the baseline)\n", len(ms), p.Bake)
		if err := r.observeOld(ctx); err != nil {
			return rep, fmt.Errorf("fleet: baseline: %w (nothing was changed)", err)
		}
	}
	for i, addrs := range waves {
		w := Wave{Number: i + 1, Kind: p.kind(i, waves), Servers: addrs, Bake: p.Bake}
		var wave []*member
		for _, a := range addrs {
			wave = append(wave, byAddr[a])
		}
		w.Err = r.swapWave(ctx, wave, &w)
		switch {
		case w.Err != nil:
		case len(w.Swapped) == 0:
			w.Pass, w.Baseline = true, "none: every server of the wave already ran the module"
		default:
			w.Err = r.bake(ctx, wave, &w)
		}
		rep.Waves = append(rep.Waves, w)
		if w.Err != nil || !w.Pass {
			return rep, r.rollback(ctx, rep)
		}
	}
	r.confirmAll(ctx, rep)
	if len(rep.Unconfirmed) > 0 {
		return rep, fmt.Errorf("fleet: rollout passed, but %d server(s) could not be confirmed: they revert to their old module at the deadline", len(rep.Unconfirmed))
	}
	rep.Completed = true
	return rep, nil
}

// swapWave swaps the wave's servers still on their original module,
// provisionally.
func (r *rollout) swapWave(ctx context.Context, wave []*member, w *Wave) error {
	opts := admin.SwapOptions{Provisional: r.p.confirmDeadline()}
	if isRef(r.mod.Reference) {
		opts.Reference = r.mod.Reference
	}
	for _, m := range wave {
		if m.on && m.swapped {
			w.Swapped, w.Adopted = append(w.Swapped, m.addr), append(w.Adopted, m.addr)
			r.progress("wave %d: %s runs %.12s provisionally (an interrupted rollout's swap): adopted, judged with this wave\n", w.Number, m.addr, r.mod.SHA256)
			continue
		}
		if m.on {
			r.progress("wave %d: %s already runs %.12s: not swapped\n", w.Number, m.addr, r.mod.SHA256)
			continue
		}
		o := opts
		o.ExpectSHA256, o.ExpectVersion = m.orig.SHA256, m.orig.Version
		res, err := m.admin.PushClassifierIf(ctx, r.p.Tenant, r.mod.Wasm, r.p.Token, o)
		if err != nil {
			return fmt.Errorf("swap %s: %w", m.addr, err)
		}
		m.on, m.swapped, m.old, m.swappedAt, m.until = true, true, m.orig.SHA256, time.Now(), time.Now().Add(opts.Provisional)
		w.Swapped = append(w.Swapped, m.addr)
		r.progress("wave %d: %s swapped: version %d -> %d (sha256 %.12s -> %.12s), provisional for %v\n",
			w.Number, m.addr, m.orig.Version, res.Version, m.orig.SHA256, res.SHA256, opts.Provisional)
	}
	return nil
}

func isRef(s string) bool { return len(s) > 6 && s[:6] == "oci://" }

// adopt takes over the provisional swap m runs (an interrupted
// rollout's, of the module rolled out): renewed now, it is judged with
// its wave and confirmed or rolled back as the rollout's own swaps are.
func (r *rollout) adopt(ctx context.Context, m *member) error {
	if m.orig.Previous == "" {
		return fmt.Errorf("%s runs the module provisionally, but does not say what it reverts to", m.addr)
	}
	d := r.p.confirmDeadline()
	if _, err := m.admin.Confirm(ctx, r.p.Tenant, r.p.Token, r.mod.SHA256, d); err != nil {
		return fmt.Errorf("%s: renew the provisional swap it runs: %w", m.addr, err)
	}
	m.swapped, m.old, m.swappedAt, m.until = true, m.orig.Previous, time.Now(), time.Now().Add(d)
	r.progress("%s runs %.12s provisionally, reverting to %.12s: adopted (renewed for %v)\n", m.addr, r.mod.SHA256, m.old, d)
	return nil
}

// renew extends the provisional swaps past half their deadline.
func (r *rollout) renew(ctx context.Context) error {
	d := r.p.confirmDeadline()
	for _, m := range r.ms {
		if !m.swapped || time.Until(m.until) > d/2 {
			continue
		}
		if _, err := m.admin.Confirm(ctx, r.p.Tenant, r.p.Token, r.mod.SHA256, d); err != nil {
			return fmt.Errorf("%s: renew the provisional swap: %w", m.addr, err)
		}
		m.until = time.Now().Add(d)
	}
	return nil
}

// confirmAll confirms every swap for good.
func (r *rollout) confirmAll(ctx context.Context, rep *Report) {
	for _, m := range r.ms {
		if !m.swapped {
			continue
		}
		res, err := m.admin.Confirm(ctx, r.p.Tenant, r.p.Token, r.mod.SHA256, 0)
		if err != nil {
			rep.Unconfirmed = append(rep.Unconfirmed, RollbackResult{Server: m.addr, Version: res.Version, SHA256: res.SHA256, Err: err})
			r.progress("confirm %s: %v\n", m.addr, err)
			continue
		}
		r.progress("confirmed %s: version %d, sha256 %.12s\n", m.addr, res.Version, res.SHA256)
	}
}

// snapAll snapshots the servers (full: see take), at one moment.
func (r *rollout) snapAll(ctx context.Context, full bool) (map[*member]snapshot, error) {
	out := map[*member]snapshot{}
	at := time.Now()
	for _, m := range r.ms {
		s, err := take(ctx, m, r.p.Tenant, full, r.prom, at)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", m.addr, err)
		}
		out[m] = s
	}
	return out, nil
}

// wait waits d unless ctx ends, calling tick every r.p.tick() with the
// time elapsed; a tick that returns true ends the wait early.
func (r *rollout) wait(ctx context.Context, d time.Duration, tick func(elapsed time.Duration) (bool, error)) error {
	start := time.Now()
	t := time.NewTicker(r.p.tick())
	defer t.Stop()
	end := time.NewTimer(d)
	defer end.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-end.C:
			return nil
		case <-t.C:
			if err := r.renew(ctx); err != nil {
				return err
			}
			if stop, err := tick(time.Since(start)); err != nil || stop {
				return err
			}
		}
	}
}

// observeOld records a window of every server on the old module.
func (r *rollout) observeOld(ctx context.Context) error {
	a, err := r.snapAll(ctx, true)
	if err != nil {
		return err
	}
	if err := r.wait(ctx, r.p.Bake, func(time.Duration) (bool, error) { return false, nil }); err != nil {
		return err
	}
	b, err := r.snapAll(ctx, true)
	if err != nil {
		return err
	}
	for _, m := range r.ms {
		w := between(a[m], b[m])
		m.lastOld = &w
	}
	return nil
}

// oldWindows returns the pooled window of the servers still on the old
// module between a and b (recording each one's as its last), and how many
// there are.
func (r *rollout) oldWindows(a, b map[*member]snapshot) (window, int) {
	var base window
	n := 0
	for _, m := range r.ms {
		if b[m].sha != r.mod.SHA256 && !m.on {
			wn := between(a[m], b[m])
			m.lastOld = &wn
			base = base.plus(wn)
			n++
		}
	}
	return base, n
}

// bake runs the wave for the plan's bake, or until its faults or UNKNOWN
// share cross their bound whatever the rest of the bake brings, and
// judges its servers.
func (r *rollout) bake(ctx context.Context, wave []*member, w *Wave) error {
	if err := r.settle(ctx, wave); err != nil {
		return err
	}
	a, err := r.snapAll(ctx, true)
	if err != nil {
		return err
	}
	inWave := map[*member]bool{}
	for _, m := range wave {
		inWave[m] = true
	}
	start := time.Now()
	err = r.wait(ctx, r.p.Bake, func(el time.Duration) (bool, error) {
		// Every server is read, not only the wave's: reading a server
		// costs it a little, and the comparison must not charge one side.
		now, err := r.snapAll(ctx, false)
		if err != nil {
			return false, err
		}
		base, _ := r.oldWindows(a, now)
		var got, faults uint64
		for _, m := range wave {
			if !m.swapped {
				continue
			}
			cur := between(a[m], now[m])
			got += cur.received
			faults += cur.faults
			if why := r.doomed(cur, base, el); why != "" {
				w.Aborted = fmt.Sprintf("%s after %v of %v: %s", m.addr, el.Round(10*time.Millisecond), r.p.Bake, why)
				r.progress("wave %d: stopped early: %s\n", w.Number, w.Aborted)
				return true, nil
			}
		}
		r.progress("wave %d: baking %v/%v: %d requests on the new module so far, %d classifier faults\n",
			w.Number, el.Round(100*time.Millisecond), r.p.Bake, got, faults)
		return false, nil
	})
	if err != nil {
		return err
	}
	w.Bake = time.Since(start).Round(10 * time.Millisecond)
	b, err := r.snapAll(ctx, true)
	if err != nil {
		return err
	}
	base, old := r.oldWindows(a, b)
	own := old == 0
	if own {
		w.Baseline = "each server's own last window on the old module"
	} else {
		w.Baseline = fmt.Sprintf("%d server(s) on the old module, same window", old)
	}
	w.Pass = true
	for _, m := range wave {
		if b[m].sha != r.mod.SHA256 {
			return fmt.Errorf("%s: tenant %s runs %.12s now, not the module rolled out: changed by someone else during the bake", m.addr, r.p.Tenant, b[m].sha)
		}
		if !m.swapped {
			continue // already ran the module: not this rollout's to judge
		}
		bw := base
		if own {
			if m.lastOld == nil {
				return fmt.Errorf("%s: no window on the old module to compare with", m.addr)
			}
			bw = *m.lastOld
		}
		j := judge(m.addr, between(a[m], b[m]), bw, r.p.Bounds)
		j.BaselineServers, j.BaselineOwnWindow = old, own
		w.Judgements = append(w.Judgements, j)
		w.Pass = w.Pass && j.Pass
	}
	return nil
}

// maxSettle bounds how long settle waits for a server's counters.
const maxSettle = 5 * time.Second

// settle waits until each server the wave swapped shows counters its
// dispatcher published after the swap: a server publishes its types'
// counts every stats interval but counts classifier faults as they come,
// so a window started sooner would count requests the old module faulted
// on as UNKNOWN of the new one, without their faults. A status asked for
// at q with counters age old were published no earlier than q - age, on
// this host's clock, whatever the server's.
func (r *rollout) settle(ctx context.Context, wave []*member) error {
	deadline := time.Now().Add(maxSettle)
	for _, m := range wave {
		if !m.swapped {
			continue
		}
		for {
			q := time.Now()
			st, err := m.admin.Status(ctx)
			if err != nil {
				return fmt.Errorf("%s: %w", m.addr, err)
			}
			published := q.Add(-time.Duration(st.CountersAgeSeconds * float64(time.Second)))
			if published.After(m.swappedAt) || q.After(deadline) {
				break
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(min(m.swappedAt.Sub(published)+5*time.Millisecond, 100*time.Millisecond)):
			}
		}
	}
	return nil
}

// doomed says why a server's window so far, el into the bake, already
// fails: its faults or UNKNOWN requests, which can only grow, exceed the
// baseline's rate plus the bound even over all the requests the whole
// bake would bring at the rate seen so far ("" when not, or when it saw
// fewer requests than the bounds need to judge).
func (r *rollout) doomed(cur, base window, el time.Duration) string {
	b := r.p.Bounds
	if cur.received < b.MinRequests || el <= 0 {
		return ""
	}
	expect := float64(cur.received) * max(1, float64(r.p.Bake)/float64(el))
	for _, c := range []struct {
		what  string
		n     uint64
		base  float64
		bound float64
	}{
		{"classifier faults", cur.faults, ratio(base.faults, base.received), b.FaultRate},
		{"UNKNOWN", cur.unknown, ratio(base.unknown, base.received), b.UnknownShare},
	} {
		n := min(c.n, cur.received) // counters read apart may disagree by a little
		if least := float64(n) / expect; least > c.base+c.bound {
			return fmt.Sprintf("%s on %d of %d requests so far: at least %s of the whole bake's, baseline %s (+%s > %s)",
				c.what, n, cur.received, pct(least), pct(c.base), pct(least-c.base), pct(c.bound))
		}
	}
	return ""
}

// rollback rolls every swapped server back, each only if it still runs
// mod (compare-and-swap), and checks it runs its original module again.
func (r *rollout) rollback(ctx context.Context, rep *Report) error {
	ctx = context.WithoutCancel(ctx) // an interrupted rollout still rolls back
	incomplete := false
	for _, m := range r.ms {
		if !m.swapped {
			continue
		}
		rb := RollbackResult{Server: m.addr}
		res, err := m.admin.RollbackIf(ctx, r.p.Tenant, r.p.Token, admin.SwapOptions{ExpectSHA256: r.mod.SHA256})
		switch {
		case err != nil:
			rb.Err = err
		case res.SHA256 != m.old:
			rb.Err = fmt.Errorf("rolled back to %.12s, not the %.12s it ran before", res.SHA256, m.old)
		}
		rb.Version, rb.SHA256 = res.Version, res.SHA256
		if rb.Err != nil {
			incomplete = true
			r.progress("rollback %s: %v (unconfirmed, it reverts by itself by %s if it still runs the module)\n", m.addr, rb.Err, m.until.Format("15:04:05"))
		} else {
			r.progress("rollback %s: version %d, sha256 %.12s again\n", m.addr, rb.Version, rb.SHA256)
		}
		rep.Rollbacks = append(rep.Rollbacks, rb)
	}
	if incomplete {
		return ErrRollbackIncomplete
	}
	return ErrRolledBack
}
