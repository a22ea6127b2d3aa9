package server

import (
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/persephone-go/psp/darc"
	"github.com/persephone-go/psp/oci"
	"github.com/persephone-go/psp/wasmclass"
)

// A tenant whose classifier is a registry reference that neither the
// registry nor the cache could give at start is pending: it runs a
// placeholder module chosen by its failure policy (open: every request
// UNKNOWN; closed and reload: every request dropped as a classifier
// fault), with room for PendingMaxTypes types unless it sets max_types,
// while the pull is retried in the background with a backoff (the first
// retry after pendingRetryMin, doubling up to pendingRetryMax). When it
// succeeds the module is swapped in over the placeholder; /readyz answers
// 503 until no tenant is pending.

// Placeholder modules (see placeholder/*.wat).
var (
	//go:embed placeholder/open.wasm
	placeholderOpen []byte
	//go:embed placeholder/closed.wasm
	placeholderClosed []byte
)

// PendingMaxTypes is the type range of a pending tenant without max_types:
// the module it waits for may declare up to this many types.
const PendingMaxTypes = 64

// Bounds of the pulls of pending tenants.
const (
	// startPullTimeout bounds the pulls at start (OCI.StartTimeout's
	// default), before the tenants still waiting start pending.
	startPullTimeout = 10 * time.Second
	pendingRetryMin  = time.Second
	pendingRetryMax  = 30 * time.Second
)

// placeholder is the module a pending tenant with failure policy fail
// runs.
func placeholder(fail string) []byte {
	if p, _ := failPolicy(fail); p == wasmclass.FailOpen {
		return placeholderOpen
	}
	return placeholderClosed
}

// pendingPull is a pending tenant's pull.
type pendingPull struct {
	tenant string
	what   string // "classifier" or `tenant "name"`, for the log
	ref    oci.Ref
	client *oci.Client
	// sha is the placeholder's SHA-256 (hex): the swap that ends the wait
	// replaces only it.
	sha      string
	since    time.Time
	attempts int
	err      error
	next     time.Time
	// swapIn is the SHA-256 (hex) of the module being swapped in over the
	// placeholder, "" when none is: from the moment the tenant runs it,
	// the tenant no longer counts as pending, though the wait ends (the
	// pull is removed) only after the swap returns.
	swapIn string
	// rolledBack: the wait had ended, and a rollback put the placeholder
	// back: pending again, but not pulled again (that would only bring
	// back the module rolled back from); a swap, a rollback that puts a
	// module back or a restart ends the wait.
	rolledBack bool
}

// pendingPulls are the server's pending tenants. Safe for concurrent use.
type pendingPulls struct {
	mu sync.Mutex
	m  map[string]*pendingPull // by tenant
	// ended are the pulls whose wait ended (the module arrived, the
	// operator swapped one in, or a rollback put one back over the
	// placeholder), by tenant: kept so that a rollback to the placeholder
	// makes the tenant pending again.
	ended map[string]*pendingPull
}

func (p *pendingPulls) add(pp *pendingPull) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m == nil {
		p.m = map[string]*pendingPull{}
	}
	p.m[pp.tenant] = pp
}

// end stops waiting for tenant's module, a module having been swapped in
// over the placeholder; it returns the pull it waited for (nil when it
// was not pending).
func (p *pendingPulls) end(tenant string) *pendingPull {
	p.mu.Lock()
	defer p.mu.Unlock()
	pp := p.m[tenant]
	if pp != nil {
		delete(p.m, tenant)
		if p.ended == nil {
			p.ended = map[string]*pendingPull{}
		}
		p.ended[tenant] = pp
	}
	return pp
}

// forget forgets a removed tenant's pull, waiting or ended; it returns
// the one it waited for (nil when it was not pending).
func (p *pendingPulls) forget(tenant string) *pendingPull {
	p.mu.Lock()
	defer p.mu.Unlock()
	pp := p.m[tenant]
	delete(p.m, tenant)
	delete(p.ended, tenant)
	return pp
}

// rolledBack follows a rollback of tenant, running being the module it
// runs after it: a tenant whose wait had ended is pending again when that
// is its placeholder, and one pending since such a rollback stops waiting
// when it is not (rolled back to a module, as a swap would have put it).
// It returns the pull whose wait began or ended, nil when none did, and
// whether the tenant is pending now.
func (p *pendingPulls) rolledBack(tenant, running string) (pp *pendingPull, pending bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if pp = p.m[tenant]; pp != nil {
		if !pp.rolledBack || pp.sha == running {
			return nil, true
		}
		delete(p.m, tenant)
		pp.rolledBack = false
		p.ended[tenant] = pp
		return pp, false
	}
	pp = p.ended[tenant]
	if pp == nil || pp.sha != running {
		return nil, false
	}
	delete(p.ended, tenant)
	pp.rolledBack, pp.swapIn = true, ""
	p.m[tenant] = pp
	return pp, true
}

// settle ends tenant's wait because the operator swapped another module
// in (why): that choice stands over the pull's.
func (s *Server) settle(tenant, why string) {
	if pp := s.pending.end(tenant); pp != nil {
		fmt.Fprintf(s.log, "psp: %s: %s: no longer waiting for %s\n", pp.what, why, pp.ref)
	}
}

// removed forgets a removed tenant's wait.
func (s *Server) removed(tenant string) {
	if pp := s.pending.forget(tenant); pp != nil {
		fmt.Fprintf(s.log, "psp: %s: removed: no longer waiting for %s\n", pp.what, pp.ref)
	}
}

// noteRollback makes tenant pending again when a rollback put its
// placeholder back, and ends that wait when a later one put a module back
// (see pendingPull.rolledBack).
func (s *Server) noteRollback(tenant string) {
	pp, pending := s.pending.rolledBack(tenant, s.tenants.runningSHA(tenant))
	switch {
	case pp == nil:
	case pending:
		fmt.Fprintf(s.log, "psp: %s: rolled back to its placeholder: pending again (/readyz 503) until a module is swapped or rolled back in, or a restart fetches %s\n", pp.what, pp.ref)
	default:
		fmt.Fprintf(s.log, "psp: %s: rolled back from its placeholder: no longer waiting for %s\n", pp.what, pp.ref)
	}
}

// retried returns the number of pulls retried in the background (those
// not rolled back to).
func (p *pendingPulls) retried() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, pp := range p.m {
		if !pp.rolledBack {
			n++
		}
	}
	return n
}

// waiting returns the number of pending tenants, running(tenant) being the
// SHA-256 of the module a tenant runs (see pendingNow).
func (p *pendingPulls) waiting(running func(tenant string) string) int {
	p.mu.Lock()
	views := make(map[string]pullView, len(p.m)+len(p.ended))
	for name, pp := range p.ended {
		views[name] = pp.view(false)
	}
	for name, pp := range p.m {
		views[name] = pp.view(true)
	}
	p.mu.Unlock()
	// running takes the tenants' lock: called without p.mu held, as the
	// tenants call describe with theirs.
	n := 0
	for name, v := range views {
		if v.pendingNow(running(name)) {
			n++
		}
	}
	return n
}

// pullView is what decides whether a pull's tenant is pending, given the
// module it runs.
type pullView struct {
	waiting    bool // in pendingPulls.m (not ended)
	rolledBack bool
	sha        string // the placeholder's
	swapIn     string
}

func (pp *pendingPull) view(waiting bool) pullView {
	return pullView{waiting: waiting, rolledBack: pp.rolledBack, sha: pp.sha, swapIn: pp.swapIn}
}

// pendingNow reports whether the tenant is pending while it runs the
// module running ("" when not known: the records alone decide). The
// records change after a swap or a rollback returns, the module at once:
// judged by the module, a tenant running the module swapped in over its
// placeholder is no longer pending, one a rollback put back on its
// placeholder is pending again, and one a rollback took off the
// placeholder is not, from the moment the dispatcher runs that module.
func (v pullView) pendingNow(running string) bool {
	switch {
	case running == "":
		return v.waiting
	case !v.waiting:
		return running == v.sha
	case v.swapIn != "" && running == v.swapIn:
		return false
	case v.rolledBack:
		return running == v.sha
	}
	return true
}

// swapping records that the module sha is being swapped in over tenant's
// placeholder, or ("" sha) that the swap failed.
func (p *pendingPulls) swapping(tenant, sha string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if pp := p.m[tenant]; pp != nil {
		pp.swapIn = sha
	}
}

// describe says why tenant is pending ("" when it is not), running being
// the SHA-256 of the module it runs ("" when not known).
func (p *pendingPulls) describe(tenant, running string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	pp, waiting := p.m[tenant], true
	if pp == nil {
		pp, waiting = p.ended[tenant], false
	}
	if pp == nil || !pp.view(waiting).pendingNow(running) {
		return ""
	}
	if pp.rolledBack || !waiting {
		return fmt.Sprintf("%s: rolled back to the placeholder over the admin API; not fetched again until a restart (a swap, or a rollback to a module, ends the wait)", pp.ref)
	}
	return fmt.Sprintf("%s not fetched (%d attempts since %s, next in %v): %v",
		pp.ref, pp.attempts, pp.since.Format(time.RFC3339), max(0, time.Until(pp.next)).Round(time.Second), pp.err)
}

// due returns the pending pulls to try now, and how long until the next
// one is due (pendingRetryMax when none is pending).
func (p *pendingPulls) due(now time.Time) ([]*pendingPull, time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []*pendingPull
	wait := pendingRetryMax
	for _, name := range slices.Sorted(maps.Keys(p.m)) {
		pp := p.m[name]
		if pp.rolledBack {
			continue
		}
		if d := pp.next.Sub(now); d > 0 {
			wait = min(wait, d)
			continue
		}
		out = append(out, pp)
	}
	return out, wait
}

// failed records a failed attempt and schedules the next.
func (p *pendingPulls) failed(pp *pendingPull, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	pp.attempts++
	pp.err = err
	pp.swapIn = ""
	pp.next = time.Now().Add(retryAfter(pp.attempts))
}

// retryAfter is the wait after attempts failed pulls: pendingRetryMin,
// doubling up to pendingRetryMax.
func retryAfter(attempts int) time.Duration {
	d := pendingRetryMin
	for range min(attempts-1, 16) {
		d = min(2*d, pendingRetryMax)
	}
	return d
}

// startPending makes tenant pending on ref after the pull err at start:
// it returns the placeholder to start the tenant with.
func (s *Server) startPending(tenant, what, fail string, ref oci.Ref, client *oci.Client, err error) []byte {
	wasm := placeholder(fail)
	sum := sha256.Sum256(wasm)
	pp := &pendingPull{tenant: tenant, what: what, ref: ref, client: client, sha: hex.EncodeToString(sum[:]), since: time.Now()}
	s.pending.add(pp)
	s.pending.failed(pp, err)
	fmt.Fprintf(s.log, "psp: %s: cannot fetch %s: %v\n", what, ref, err)
	fmt.Fprintf(s.log, "psp: %s: starting pending (fail %s: %s until it is fetched; retrying in the background, /readyz 503 meanwhile)\n",
		what, failName(fail), pendingEffect(fail))
	return wasm
}

// pendingEffect says what a pending tenant's requests get.
func pendingEffect(fail string) string {
	if p, _ := failPolicy(fail); p == wasmclass.FailOpen {
		return "its requests are classified UNKNOWN"
	}
	return "its requests are dropped (classifier_fault)"
}

// retryPending pulls the pending tenants' modules until none is pending
// or ctx ends, swapping each in when it arrives.
func (s *Server) retryPending(ctx context.Context) {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		due, _ := s.pending.due(time.Now())
		for _, pp := range due {
			s.tryPending(ctx, pp)
		}
		if s.pending.retried() == 0 {
			return
		}
		_, wait := s.pending.due(time.Now())
		t.Reset(wait)
	}
}

// tryPending pulls a pending tenant's module once and swaps it in over
// the placeholder.
func (s *Server) tryPending(ctx context.Context, pp *pendingPull) {
	pctx, cancel := context.WithTimeout(ctx, startPullTimeout+oci.DefaultTimeout)
	defer cancel()
	m, err := pp.client.Pull(pctx, pp.ref)
	if err != nil {
		s.pending.failed(pp, err)
		fmt.Fprintf(s.log, "psp: %s: still cannot fetch %s (attempt %d): %v\n", pp.what, pp.ref, pp.attempts, err)
		return
	}
	// The reference is recorded and the swap marked before it lands, so
	// that no status shows the module running without its reference or
	// with its tenant still pending.
	s.refs.set(pp.tenant, m.SHA256, m.Ref.String())
	s.pending.swapping(pp.tenant, m.SHA256)
	v, err := s.SwapIf(pctx, pp.tenant, m.Wasm, wasmclass.Expect{SHA256: pp.sha})
	switch {
	case errors.Is(err, wasmclass.ErrConflict) && s.provisional.info(pp.tenant) != nil:
		// A provisional swap runs: it reverts to the placeholder unless
		// confirmed, so the wait goes on.
		s.pending.failed(pp, err)
		fmt.Fprintf(s.log, "psp: %s: fetched %s, but a provisional swap runs (attempt %d): trying again later\n", pp.what, m.Ref, pp.attempts)
	case errors.Is(err, wasmclass.ErrConflict) || errors.Is(err, darc.ErrUnknownTenant):
		// Swapped or removed over the admin API meanwhile: that module
		// is the operator's choice, not this wait's to replace.
		if errors.Is(err, darc.ErrUnknownTenant) {
			s.pending.forget(pp.tenant)
		} else {
			s.pending.end(pp.tenant)
		}
		fmt.Fprintf(s.log, "psp: %s: fetched %s, but the tenant changed meanwhile (%v): not swapped in\n", pp.what, m.Ref, err)
	case err != nil:
		s.pending.failed(pp, err)
		fmt.Fprintf(s.log, "psp: %s: fetched %s, but it does not load (attempt %d): %v\n", pp.what, m.Ref, pp.attempts, err)
	default:
		s.pending.end(pp.tenant)
		s.keepModule(pp.tenant, m.Wasm)
		s.setStartSHA(pp.tenant, m.SHA256)
		s.saveState()
		fmt.Fprintf(s.log, "psp: %s: pulled %s (%d bytes, sha256 %s) after %v: running it (version %d)\n",
			pp.what, m.Ref, len(m.Wasm), m.SHA256, time.Since(pp.since).Round(time.Millisecond), v)
	}
}
