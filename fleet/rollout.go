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

// Plan is a rollout: which servers, in which waves, baked how long,
// judged by which bounds.
type Plan struct {
	// Servers are the admin addresses, in rollout order.
	Servers []string
	// Tenant is the tenant whose classifier is replaced.
	Tenant string
	// Canary is the number of servers in the first wave (default 1).
	Canary int
	// Wave is the number of servers in each later wave (0: all the rest
	// at once).
	Wave int
	// Bake is how long each wave runs the new module before it is judged.
	Bake time.Duration
	// Bounds judge each wave's servers against the baseline.
	Bounds Bounds
	// Token is the bearer token (the operator's or the tenant's).
	Token string
	// Timeout bounds each admin request (0: admin.DefaultTimeout).
	Timeout time.Duration
}

// Waves splits the servers: the canaries, then waves of Wave.
func (p Plan) Waves() [][]string {
	canary := max(p.Canary, 1)
	var out [][]string
	rest := p.Servers
	n := min(canary, len(rest))
	out = append(out, rest[:n])
	rest = rest[n:]
	for len(rest) > 0 {
		n := len(rest)
		if p.Wave > 0 {
			n = min(p.Wave, n)
		}
		out = append(out, rest[:n])
		rest = rest[n:]
	}
	return out
}

// Validate checks the plan.
func (p Plan) Validate() error {
	switch {
	case len(p.Servers) == 0:
		return errors.New("fleet: no servers")
	case p.Tenant == "":
		return errors.New("fleet: no tenant")
	case p.Canary < 0 || p.Wave < 0:
		return fmt.Errorf("fleet: canary %d, wave %d: want >= 0", p.Canary, p.Wave)
	case p.Bake <= 0:
		return fmt.Errorf("fleet: bake %v: want > 0", p.Bake)
	}
	if err := p.Bounds.Validate(); err != nil {
		return err
	}
	seen := map[string]bool{}
	for _, s := range p.Servers {
		if seen[s] {
			return fmt.Errorf("fleet: server %s listed twice", s)
		}
		seen[s] = true
	}
	return nil
}

// ServerState is a server's tenant before the rollout.
type ServerState struct {
	Server  string
	SHA256  string
	Version int
	Err     error // unreachable, no such tenant...
}

// Wave is one wave's outcome.
type Wave struct {
	Number  int
	Servers []string
	// Swapped: servers this wave swapped (a server already running the
	// module is not swapped, nor rolled back).
	Swapped []string
	// Baseline names where the comparison came from.
	Baseline   string
	Judgements []Judgement
	Pass       bool
	// Err is why the wave could not be judged (a swap refused, a server
	// unreachable), if so.
	Err  error
	Bake time.Duration
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
	// Completed: every server runs the module.
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
	on      bool
	swapped bool
	// promoted: swapped in a wave that passed.
	promoted bool
	// lastOld is the server's last window on the old module.
	lastOld *window
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
	}
	return st
}

// Run rolls mod out by plan: the canaries are swapped (compare-and-swap
// on the module each ran), baked and judged against the servers still on
// the old module; if they pass, the next wave, and so on. The first wave
// that fails, or a swap refused, stops the rollout and rolls every server
// it swapped back, each only if it still runs mod. The report says what
// happened; the error is nil only when every server runs mod.
func Run(ctx context.Context, p Plan, mod Module, progress Progress) (*Report, error) {
	if progress == nil {
		progress = func(string, ...any) {}
	}
	p.Bounds = p.Bounds.WithDefaults()
	ms, err := members(p)
	if err != nil {
		return nil, err
	}
	rep := &Report{Module: mod, Tenant: p.Tenant}
	for _, m := range ms {
		m.orig = m.inspect(ctx, p.Tenant)
		rep.Before = append(rep.Before, m.orig)
		if m.orig.Err != nil {
			return rep, fmt.Errorf("fleet: %s: %w (nothing was changed)", m.addr, m.orig.Err)
		}
		m.on = m.orig.SHA256 == mod.SHA256
	}
	all := true
	for _, m := range ms {
		all = all && m.on
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
		if err := observeOld(ctx, ms, p); err != nil {
			return rep, fmt.Errorf("fleet: baseline: %w (nothing was changed)", err)
		}
	}
	for i, addrs := range waves {
		w := Wave{Number: i + 1, Servers: addrs, Bake: p.Bake}
		var wave []*member
		for _, a := range addrs {
			wave = append(wave, byAddr[a])
		}
		w.Err = swapWave(ctx, wave, p, mod, &w, progress)
		switch {
		case w.Err != nil:
		case len(w.Swapped) == 0:
			w.Pass, w.Baseline = true, "none: every server of the wave already ran the module"
		default:
			w.Err = bake(ctx, ms, wave, p, mod, &w, progress)
		}
		rep.Waves = append(rep.Waves, w)
		if w.Err != nil || !w.Pass {
			return rep, rollback(ctx, ms, p, mod, rep, progress)
		}
		for _, m := range wave {
			m.promoted = m.swapped
		}
	}
	rep.Completed = true
	return rep, nil
}

// swapWave swaps the wave's servers still on their original module.
func swapWave(ctx context.Context, wave []*member, p Plan, mod Module, w *Wave, progress Progress) error {
	opts := admin.SwapOptions{}
	if isRef(mod.Reference) {
		opts.Reference = mod.Reference
	}
	for _, m := range wave {
		if m.on {
			progress("wave %d: %s already runs %.12s: not swapped\n", w.Number, m.addr, mod.SHA256)
			continue
		}
		o := opts
		o.ExpectSHA256, o.ExpectVersion = m.orig.SHA256, m.orig.Version
		res, err := m.admin.PushClassifierIf(ctx, p.Tenant, mod.Wasm, p.Token, o)
		if err != nil {
			return fmt.Errorf("swap %s: %w", m.addr, err)
		}
		m.on, m.swapped = true, true
		w.Swapped = append(w.Swapped, m.addr)
		progress("wave %d: %s swapped: version %d -> %d (sha256 %.12s -> %.12s)\n", w.Number, m.addr, m.orig.Version, res.Version, m.orig.SHA256, res.SHA256)
	}
	return nil
}

func isRef(s string) bool { return len(s) > 6 && s[:6] == "oci://" }

// snapAll snapshots the servers.
func snapAll(ctx context.Context, ms []*member, tenant string) (map[*member]snapshot, error) {
	out := map[*member]snapshot{}
	for _, m := range ms {
		s, err := take(ctx, m, tenant, true)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", m.addr, err)
		}
		out[m] = s
	}
	return out, nil
}

// sleep waits d, reporting progress every second, unless ctx ends.
func sleep(ctx context.Context, d time.Duration, tick func(elapsed time.Duration)) error {
	start := time.Now()
	t := time.NewTicker(time.Second)
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
			tick(time.Since(start))
		}
	}
}

// observeOld records a window of every server on the old module.
func observeOld(ctx context.Context, ms []*member, p Plan) error {
	a, err := snapAll(ctx, ms, p.Tenant)
	if err != nil {
		return err
	}
	if err := sleep(ctx, p.Bake, func(time.Duration) {}); err != nil {
		return err
	}
	b, err := snapAll(ctx, ms, p.Tenant)
	if err != nil {
		return err
	}
	for _, m := range ms {
		w := between(a[m], b[m])
		m.lastOld = &w
	}
	return nil
}

// bake runs the wave for p.Bake and judges its servers.
func bake(ctx context.Context, ms, wave []*member, p Plan, mod Module, w *Wave, progress Progress) error {
	a, err := snapAll(ctx, ms, p.Tenant)
	if err != nil {
		return err
	}
	inWave := map[*member]bool{}
	for _, m := range wave {
		inWave[m] = true
	}
	err = sleep(ctx, p.Bake, func(el time.Duration) {
		// Every server is asked, not only the wave's: reading a server
		// costs it a little, and the comparison must not charge one side.
		var got, faults uint64
		for _, m := range ms {
			s, err := take(ctx, m, p.Tenant, false)
			if err == nil && inWave[m] {
				got += s.received - min(s.received, a[m].received)
				faults += s.faults - min(s.faults, a[m].faults)
			}
		}
		progress("wave %d: baking %v/%v: %d requests on the new module so far, %d classifier faults\n", w.Number, el.Round(time.Second), p.Bake, got, faults)
	})
	if err != nil {
		return err
	}
	b, err := snapAll(ctx, ms, p.Tenant)
	if err != nil {
		return err
	}
	var base, promoted window
	old, prom := 0, 0
	for _, m := range ms {
		switch {
		case b[m].sha != mod.SHA256 && !m.on:
			wn := between(a[m], b[m])
			m.lastOld = &wn
			base = base.plus(wn)
			old++
		case m.promoted && b[m].sha == mod.SHA256:
			promoted = promoted.plus(between(a[m], b[m]))
			prom++
		}
	}
	own := false
	switch {
	case old > 0:
		w.Baseline = fmt.Sprintf("%d server(s) on the old module, same window", old)
	case prom > 0:
		// Nobody is left on the old module: the servers that already
		// passed on the new one, in the same window, so that the host's
		// noise over time is not blamed on this wave.
		base, old = promoted, prom
		w.Baseline = fmt.Sprintf("%d server(s) that passed on the new module in earlier waves, same window", prom)
	default:
		own = true
		w.Baseline = "each server's own last window on the old module"
	}
	w.Pass = true
	for _, m := range wave {
		if b[m].sha != mod.SHA256 {
			return fmt.Errorf("%s: tenant %s runs %.12s now, not the module rolled out: changed by someone else during the bake", m.addr, p.Tenant, b[m].sha)
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
		j := judge(m.addr, between(a[m], b[m]), bw, p.Bounds)
		j.BaselineServers, j.BaselineOwnWindow = old, own
		w.Judgements = append(w.Judgements, j)
		w.Pass = w.Pass && j.Pass
	}
	return nil
}

// rollback rolls every swapped server back, each only if it still runs
// mod (compare-and-swap), and checks it runs its original module again.
func rollback(ctx context.Context, ms []*member, p Plan, mod Module, rep *Report, progress Progress) error {
	ctx = context.WithoutCancel(ctx) // an interrupted rollout still rolls back
	incomplete := false
	for _, m := range ms {
		if !m.swapped {
			continue
		}
		r := RollbackResult{Server: m.addr}
		res, err := m.admin.RollbackIf(ctx, p.Tenant, p.Token, admin.SwapOptions{ExpectSHA256: mod.SHA256})
		switch {
		case err != nil:
			r.Err = err
		case res.SHA256 != m.orig.SHA256:
			r.Err = fmt.Errorf("rolled back to %.12s, not the %.12s it ran before", res.SHA256, m.orig.SHA256)
		}
		r.Version, r.SHA256 = res.Version, res.SHA256
		if r.Err != nil {
			incomplete = true
			progress("rollback %s: %v\n", m.addr, r.Err)
		} else {
			progress("rollback %s: version %d, sha256 %.12s again\n", m.addr, r.Version, r.SHA256)
		}
		rep.Rollbacks = append(rep.Rollbacks, r)
	}
	if incomplete {
		return ErrRollbackIncomplete
	}
	return ErrRolledBack
}
