package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/persephone-go/psp/wasmclass"
)

// Provisional swaps (commit-confirmed, as a router's "commit confirmed"):
// a swap made with ?provisional=DURATION is reverted by the server itself
// (a rollback, only over the module it swapped in) unless POST
// /tenants/{name}/confirm confirms it within DURATION. A rollout that dies
// mid-way thus leaves no server on a module nobody confirmed. A confirm
// with ?provisional=DURATION extends the deadline instead (a rollout
// keeps its swaps provisional until every wave passed).

// Bounds of a provisional swap's deadline.
const (
	MinProvisional = time.Second
	MaxProvisional = 24 * time.Hour
)

// ErrNotProvisional: a confirm found no provisional swap of the module it
// names (reverted already, or another module runs).
var ErrNotProvisional = errors.New("server: no provisional swap of that module")

// provisionalSwap is a tenant's unconfirmed swap.
type provisionalSwap struct {
	sha      string // the module swapped in (hex)
	deadline time.Time
	timer    *time.Timer
	gen      uint64
}

// provisionals are the server's unconfirmed swaps, by tenant. Safe for
// concurrent use.
type provisionals struct {
	mu  sync.Mutex
	m   map[string]*provisionalSwap
	gen uint64
}

// ProvisionalInfo is a tenant's unconfirmed swap, in its status.
type ProvisionalInfo struct {
	// SHA256 is the module swapped in; Until the deadline (RFC 3339) past
	// which the server rolls it back unless confirmed.
	SHA256 string `json:"sha256"`
	Until  string `json:"until"`
}

// info returns tenant's unconfirmed swap, nil when none.
func (p *provisionals) info(tenant string) *ProvisionalInfo {
	p.mu.Lock()
	defer p.mu.Unlock()
	ps := p.m[tenant]
	if ps == nil {
		return nil
	}
	return &ProvisionalInfo{SHA256: ps.sha, Until: ps.deadline.UTC().Format(time.RFC3339Nano)}
}

// set makes tenant's swap to sha provisional for d: revert runs at the
// deadline unless confirmed or replaced first.
func (p *provisionals) set(tenant, sha string, d time.Duration, revert func(sha string, gen uint64)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.clearLocked(tenant)
	if p.m == nil {
		p.m = map[string]*provisionalSwap{}
	}
	p.gen++
	ps := &provisionalSwap{sha: sha, deadline: time.Now().Add(d), gen: p.gen}
	gen := ps.gen
	ps.timer = time.AfterFunc(d, func() { revert(sha, gen) })
	p.m[tenant] = ps
}

// confirm confirms tenant's provisional swap to sha: for good (d 0) or
// for d more.
func (p *provisionals) confirm(tenant, sha string, d time.Duration, revert func(sha string, gen uint64)) error {
	p.mu.Lock()
	ps := p.m[tenant]
	if ps == nil || ps.sha != sha {
		p.mu.Unlock()
		return ErrNotProvisional
	}
	p.mu.Unlock()
	if d > 0 {
		p.set(tenant, sha, d, revert)
		return nil
	}
	p.clear(tenant)
	return nil
}

// clear forgets tenant's provisional swap (confirmed, replaced, rolled
// back or removed).
func (p *provisionals) clear(tenant string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.clearLocked(tenant)
}

func (p *provisionals) clearLocked(tenant string) {
	if ps := p.m[tenant]; ps != nil {
		ps.timer.Stop()
		delete(p.m, tenant)
	}
}

// due reports whether gen is still tenant's provisional swap (its timer
// fired, not a stale one), and forgets it.
func (p *provisionals) due(tenant string, gen uint64) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	ps := p.m[tenant]
	if ps == nil || ps.gen != gen {
		return false
	}
	delete(p.m, tenant)
	return true
}

// stopAll stops every timer (the server closes).
func (p *provisionals) stopAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, ps := range p.m {
		ps.timer.Stop()
	}
}

// provisionalParam reads ?provisional=DURATION (0 when absent).
func provisionalParam(q url.Values) (time.Duration, error) {
	v := q.Get("provisional")
	if v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < MinProvisional || d > MaxProvisional {
		return 0, fmt.Errorf("provisional %q: want a duration from %v to %v", v, MinProvisional, MaxProvisional)
	}
	return d, nil
}

// provisionalSwapParams are swapParams and ?provisional=DURATION.
func provisionalSwapParams(q url.Values) (wasmclass.Expect, string, time.Duration, error) {
	exp, ref, err := swapParams(q)
	if err != nil {
		return exp, ref, 0, err
	}
	d, err := provisionalParam(q)
	return exp, ref, d, err
}

// revertFunc returns what reverts tenant's provisional swap at its
// deadline.
func (s *Server) revertFunc(tenant string) func(sha string, gen uint64) {
	return func(sha string, gen uint64) {
		if !s.provisional.due(tenant, gen) {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), swapTimeout)
		defer cancel()
		start := time.Now()
		v, err := s.RollbackIf(ctx, tenant, wasmclass.Expect{SHA256: sha})
		e := auditEvent{Event: "revert", Tenant: tenant, Principal: "server", Version: v, Outcome: "ok", Duration: time.Since(start),
			Expected: wasmclass.Expect{SHA256: sha}}
		if err != nil {
			e.Outcome, e.Error = refusal(err), err.Error()
			fmt.Fprintf(s.log, "psp: tenant %s: provisional module %.12s not confirmed in time; revert refused: %v\n", tenant, sha, err)
		} else {
			s.noteRollback(tenant)
			ti := s.tenantInfo(tenant)
			e.SHA256, e.Size = ti.SHA256, ti.Size
			fmt.Fprintf(s.log, "psp: tenant %s: provisional module %.12s not confirmed in time: reverted to %.12s (version %d)\n", tenant, sha, ti.SHA256, v)
		}
		s.audit.record(e)
		s.saveState()
	}
}

// handleConfirm answers POST /tenants/{name}/confirm?expect_sha256=HEX
// [&provisional=DURATION]: it confirms the tenant's provisional swap to
// that module, for good or for DURATION more; 409 when there is none
// (reverted already, or another module runs), 200 when the module runs
// confirmed already.
func (s *Server) handleConfirm(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	p, ok := s.authorize(w, r, "confirm", name, false)
	if !ok {
		return
	}
	exp, _, d, err := provisionalSwapParams(r.URL.Query())
	if err == nil && exp.SHA256 == "" {
		err = errors.New("expect_sha256 is required: the module to confirm")
	}
	e := auditEvent{Event: "confirm", Tenant: name, Principal: p.String(), Remote: r.RemoteAddr, Outcome: "ok", Expected: exp, SHA256: exp.SHA256}
	if err != nil {
		s.refused(w, e, http.StatusBadRequest, err.Error())
		return
	}
	if _, err := s.tenants.get(name); err != nil {
		s.refused(w, e, http.StatusNotFound, err.Error())
		return
	}
	ti := s.tenantInfo(name)
	err = s.provisional.confirm(name, exp.SHA256, d, s.revertFunc(name))
	switch {
	case err == nil:
	case ti.SHA256 == exp.SHA256 && d == 0:
		// Confirmed already: confirming it again changes nothing.
	default:
		e.Outcome, e.Error = "conflict", fmt.Sprintf("%v: tenant %s runs %.12s", err, name, ti.SHA256)
		s.audit.record(e)
		writeJSON(w, http.StatusConflict, apiError{e.Error})
		return
	}
	s.audit.record(e)
	if d == 0 {
		s.settle(name, "a swap over the admin API confirmed")
		s.saveState()
	}
	writeJSON(w, http.StatusOK, SwapResult{Tenant: name, Version: ti.Version, SHA256: ti.SHA256, Size: ti.Size, Provisional: s.provisional.info(name)})
}
