package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	json "github.com/goccy/go-json"

	"github.com/persephone-go/psp/darc"
	"github.com/persephone-go/psp/wasmclass"
)

// maxClassifierUpload bounds a PUT body: the largest module the classifier
// host accepts (the server leaves wasmclass.Options.MaxModuleSize at its
// default), so a larger upload is refused before it is buffered.
const maxClassifierUpload = wasmclass.DefaultMaxModuleSize

// Admin HTTP server timeouts. A request (headers and body) must arrive
// within adminReadTimeout (a body must also keep arriving: see
// adminBodyStall), its answer (including a hot swap's compilation,
// bounded by swapTimeout) within adminWriteTimeout; idle keep-alive
// connections are closed after adminIdleTimeout.
const (
	// adminMaxHeaderBytes bounds a request's header block (the path
	// included): a token and a tenant name fit many times over.
	adminMaxHeaderBytes    = 64 << 10
	adminReadHeaderTimeout = 5 * time.Second
	adminReadTimeout       = 30 * time.Second
	swapTimeout            = 30 * time.Second
	adminWriteTimeout      = adminReadTimeout + swapTimeout
	adminIdleTimeout       = 2 * time.Minute
)

// Handler returns the admin HTTP handler:
//
//	GET    /healthz                      200 while the process is alive (no token)
//	GET    /readyz                       200 when every tenant's classifier is loaded, else 503 (no token)
//	GET    /status                       the Status as JSON
//	GET    /metrics                      Prometheus metrics
//	GET    /tenants                      the tenants (Status.Tenants)
//	PUT    /tenants/{name}/classifier    hot swap (body: the .wasm); the tenant's or the operator's token
//	POST   /tenants/{name}/rollback      back to the previous classifier; the tenant's or the operator's token
//	POST   /tenants/{name}/confirm       confirm a provisional swap (?expect_sha256=HEX, ?provisional=DURATION extends it)
//
// Both take ?expect_sha256=HEX and ?expect_version=N: the change is made
// only over that running module, else refused with 409 (compare-and-swap);
// a swap's ?reference=oci://HOST/REPO@sha256:HEX names the registry
// reference the module came from, shown in the status; its
// ?provisional=DURATION makes it provisional: rolled back by the server
// unless confirmed within DURATION (see provisional.go).
//
//	POST   /tenants                      add a tenant (body: a Tenant as JSON); the operator's token
//	PATCH  /tenants/{name}               change its ports, share or token (a TenantUpdate); the operator's token
//	DELETE /tenants/{name}               remove it; the operator's token
//
// Every change is written to the audit log, every refusal to its
// refusals' log (see Admin.AuditLog).
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", s.handleHealthz)
	mux.HandleFunc("GET /readyz", s.handleReadyz)
	mux.HandleFunc("GET /status", s.handleStatus)
	mux.HandleFunc("GET /metrics", s.handleMetrics)
	mux.HandleFunc("GET /tenants", s.handleTenants)
	mux.HandleFunc("PUT /tenants/{name}/classifier", s.handleSwap)
	mux.HandleFunc("POST /tenants/{name}/rollback", s.handleRollback)
	mux.HandleFunc("POST /tenants/{name}/confirm", s.handleConfirm)
	mux.HandleFunc("POST /tenants", s.handleAddTenant)
	mux.HandleFunc("PATCH /tenants/{name}", s.handleUpdateTenant)
	mux.HandleFunc("DELETE /tenants/{name}", s.handleRemoveTenant)
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "psp admin: GET /healthz, GET /readyz, GET /status, GET /metrics, GET /tenants, PUT /tenants/{name}/classifier, POST /tenants/{name}/rollback, POST /tenants/{name}/confirm, POST /tenants, PATCH /tenants/{name}, DELETE /tenants/{name}")
	})
	return mux
}

// SwapResult is the JSON answer to a successful hot swap or rollback.
type SwapResult struct {
	Tenant  string `json:"tenant"`
	Version int    `json:"version"`
	// SHA256 and Size identify the module now running.
	SHA256 string `json:"sha256,omitempty"`
	Size   int    `json:"size,omitempty"`
	// Provisional is set while the swap awaits its confirmation.
	Provisional *ProvisionalInfo `json:"provisional,omitempty"`
}

// apiError is the JSON answer to a failed request.
type apiError struct {
	Error string `json:"error"`
}

// authorize checks r's bearer token for event on tenant (operatorOnly:
// only the operator's token will do) and writes the refusal (401 without a
// known token, 403 with one that may not) to w and the audit log. It
// returns who the caller is and whether to go on.
func (s *Server) authorize(w http.ResponseWriter, r *http.Request, event, tenant string, operatorOnly bool) (principal, bool) {
	refuse := func(code int, outcome, msg string, p principal) (principal, bool) {
		s.audit.record(auditEvent{Event: event, Tenant: tenant, Principal: p.String(), Remote: r.RemoteAddr, Outcome: outcome, Error: msg})
		refuseBody(w, r)
		if code == http.StatusUnauthorized {
			w.Header().Set("WWW-Authenticate", `Bearer realm="psp"`)
		}
		writeJSON(w, code, apiError{msg})
		return p, false
	}
	if !s.creds.changers() {
		return refuse(http.StatusForbidden, "refused", "changes over HTTP are disabled: the server has no token that may change anything (start it with --token-file, or give tenants token_file or token_sha256)", principal{})
	}
	tok := bearer(r)
	if tok == "" {
		return refuse(http.StatusUnauthorized, "unauthorized", "missing or wrong bearer token", principal{})
	}
	p, ok := s.creds.authenticate(tok)
	switch {
	case !ok:
		return refuse(http.StatusUnauthorized, "unauthorized", "missing or wrong bearer token", principal{})
	case operatorOnly && !p.operator:
		return refuse(http.StatusForbidden, "forbidden", "this needs the operator's token", p)
	case !p.may(tenant):
		return refuse(http.StatusForbidden, "forbidden", fmt.Sprintf("this token may not change tenant %q", tenant), p)
	}
	return p, true
}

func (s *Server) handleSwap(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	p, ok := s.authorize(w, r, "swap", name, false)
	if !ok {
		return
	}
	attempt := auditEvent{Event: "swap", Tenant: name, Principal: p.String(), Remote: r.RemoteAddr}
	exp, ref, provisional, perr := provisionalSwapParams(r.URL.Query())
	if perr != nil {
		s.refused(w, attempt, http.StatusBadRequest, perr.Error())
		return
	}
	body, release, berr := s.readBody(w, r, p, maxClassifierUpload)
	defer release()
	if berr != nil {
		s.refused(w, attempt, berr.code, berr.msg)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), swapTimeout)
	defer cancel()
	start := time.Now()
	sum := sha256Hex(body)
	if provisional == 0 {
		// A pending tenant stops being pending when this module lands
		// (the wait itself is settled after the swap returns).
		s.pending.swapping(name, sum)
	}
	version, err := s.SwapIf(ctx, name, body, exp)
	if err != nil && provisional == 0 {
		s.pending.swapping(name, "")
	}
	e := auditEvent{Event: "swap", Tenant: name, Principal: p.String(), Remote: r.RemoteAddr,
		SHA256: sum, Size: len(body), Version: version, Outcome: "ok", Duration: time.Since(start),
		Expected: exp, Reference: ref}
	if err != nil {
		e.Outcome, e.Error = refusal(err), err.Error()
	} else {
		if ref != "" {
			s.refs.set(name, e.SHA256, ref)
		}
		s.keepModule(name, body)
		if provisional > 0 {
			// A pending tenant stays pending: the swap reverts to the
			// placeholder unless confirmed.
			s.provisional.set(name, e.SHA256, provisional, s.revertFunc(name))
		} else {
			s.provisional.clear(name)
			s.settle(name, "swapped over the admin API")
		}
	}
	s.audit.record(e)
	if err != nil {
		writeJSON(w, swapStatus(err), apiError{err.Error()})
		return
	}
	s.saveState()
	writeJSON(w, http.StatusOK, SwapResult{Tenant: name, Version: version, SHA256: e.SHA256, Size: len(body), Provisional: s.provisional.info(name)})
}

func (s *Server) handleRollback(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	p, ok := s.authorize(w, r, "rollback", name, false)
	if !ok {
		return
	}
	exp, _, perr := swapParams(r.URL.Query())
	if perr != nil {
		s.refused(w, auditEvent{Event: "rollback", Tenant: name, Principal: p.String(), Remote: r.RemoteAddr}, http.StatusBadRequest, perr.Error())
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), swapTimeout)
	defer cancel()
	start := time.Now()
	version, err := s.RollbackIf(ctx, name, exp)
	e := auditEvent{Event: "rollback", Tenant: name, Principal: p.String(), Remote: r.RemoteAddr, Version: version, Outcome: "ok", Duration: time.Since(start), Expected: exp}
	res := SwapResult{Tenant: name, Version: version}
	if err == nil {
		s.provisional.clear(name)
		s.noteRollback(name)
		for _, ti := range s.Status().Tenants {
			if ti.Name == name && !ti.Removed {
				res.SHA256, res.Size = ti.SHA256, ti.Size
			}
		}
		e.SHA256, e.Size = res.SHA256, res.Size
	} else {
		e.Outcome, e.Error = refusal(err), err.Error()
	}
	s.audit.record(e)
	if err != nil {
		writeJSON(w, swapStatus(err), apiError{err.Error()})
		return
	}
	s.saveState()
	writeJSON(w, http.StatusOK, res)
}

// refused records e, refused with msg, in the audit log and answers code
// with msg.
func (s *Server) refused(w http.ResponseWriter, e auditEvent, code int, msg string) {
	e.Outcome, e.Error = "refused", msg
	s.audit.record(e)
	writeJSON(w, code, apiError{msg})
}

// refusal is the audit outcome of a failed swap or rollback: "conflict"
// when a compare-and-swap found another module, else "refused".
func refusal(err error) string {
	if errors.Is(err, wasmclass.ErrConflict) {
		return "conflict"
	}
	return "refused"
}

// swapStatus is the HTTP status of a failed swap or rollback.
func swapStatus(err error) int {
	switch {
	case errors.Is(err, darc.ErrUnknownTenant):
		return http.StatusNotFound
	case errors.Is(err, ErrNoWasm), errors.Is(err, wasmclass.ErrNoPrevious), errors.Is(err, wasmclass.ErrConflict):
		return http.StatusConflict
	}
	return http.StatusBadRequest
}

// maxTenantRequest bounds a POST /tenants body: a module (base64) and its
// settings.
const maxTenantRequest = maxClassifierUpload*4/3 + 1<<20

// maxTenantUpdate bounds a PATCH /tenants/{name} body: ports, a share and
// a token digest.
const maxTenantUpdate = 1 << 20

// lifecycleStatus is the HTTP status of a failed tenant change.
func lifecycleStatus(err error) int {
	switch {
	case errors.Is(err, darc.ErrUnknownTenant):
		return http.StatusNotFound
	case errors.Is(err, ErrTenantExists), errors.Is(err, ErrFixedTenants):
		return http.StatusConflict
	}
	return http.StatusBadRequest
}

func (s *Server) handleAddTenant(w http.ResponseWriter, r *http.Request) {
	// The token first, from the headers: an unauthenticated request costs
	// no body read, no decoding, and its audit line no name of its choice.
	p, ok := s.authorize(w, r, "tenant_add", "", true)
	if !ok {
		return
	}
	var t Tenant
	body, release, berr := s.readBody(w, r, p, maxTenantRequest)
	defer release()
	if berr != nil {
		s.refused(w, auditEvent{Event: "tenant_add", Principal: p.String(), Remote: r.RemoteAddr}, berr.code, berr.msg)
		return
	}
	derr := json.Unmarshal(body, &t)
	e := auditEvent{Event: "tenant_add", Tenant: t.Name, Principal: p.String(), Remote: r.RemoteAddr, Outcome: "ok"}
	if derr != nil {
		s.refused(w, e, http.StatusBadRequest, fmt.Sprintf("request body: %v (want a tenant as JSON)", derr))
		return
	}
	if len(t.Wasm) > 0 {
		e.SHA256, e.Size = sha256Hex(t.Wasm), len(t.Wasm)
	}
	t.Classifier, t.TokenFile = "", "" // files are the server's business, not a client's
	ctx, cancel := context.WithTimeout(r.Context(), swapTimeout)
	defer cancel()
	start := time.Now()
	err := s.AddTenant(ctx, t)
	e.Duration = time.Since(start)
	if err != nil {
		s.refused(w, e, lifecycleStatus(err), err.Error())
		return
	}
	e.Version = 1
	s.audit.record(e)
	writeJSON(w, http.StatusCreated, s.tenantInfo(t.Name))
}

func (s *Server) handleUpdateTenant(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	p, ok := s.authorize(w, r, "tenant_update", name, true)
	if !ok {
		return
	}
	e := auditEvent{Event: "tenant_update", Tenant: name, Principal: p.String(), Remote: r.RemoteAddr, Outcome: "ok"}
	var u TenantUpdate
	body, release, berr := s.readBody(w, r, p, maxTenantUpdate)
	defer release()
	if berr != nil {
		s.refused(w, e, berr.code, berr.msg)
		return
	}
	if err := json.Unmarshal(body, &u); err != nil {
		s.refused(w, e, http.StatusBadRequest, fmt.Sprintf("request body: %v (want a tenant update as JSON)", err))
		return
	}
	if err := s.UpdateTenant(r.Context(), name, u); err != nil {
		s.refused(w, e, lifecycleStatus(err), err.Error())
		return
	}
	s.audit.record(e)
	writeJSON(w, http.StatusOK, s.tenantInfo(name))
}

func (s *Server) handleRemoveTenant(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	p, ok := s.authorize(w, r, "tenant_remove", name, true)
	if !ok {
		return
	}
	e := auditEvent{Event: "tenant_remove", Tenant: name, Principal: p.String(), Remote: r.RemoteAddr, Outcome: "ok"}
	for _, ti := range s.Status().Tenants {
		if ti.Name == name && !ti.Removed {
			e.SHA256, e.Size, e.Version = ti.SHA256, ti.Size, ti.Version
		}
	}
	if err := s.RemoveTenant(r.Context(), name); err != nil {
		s.refused(w, e, lifecycleStatus(err), err.Error())
		return
	}
	s.audit.record(e)
	w.WriteHeader(http.StatusNoContent)
}

// tenantInfo returns the live tenant called name's status.
func (s *Server) tenantInfo(name string) TenantInfo {
	for _, ti := range s.Status().Tenants {
		if ti.Name == name && !ti.Removed {
			return ti
		}
	}
	return TenantInfo{Name: name}
}

// Swap hot-swaps tenant's classifier. On error the running one stays.
func (s *Server) Swap(ctx context.Context, tenant string, wasm []byte) (int, error) {
	return s.SwapIf(ctx, tenant, wasm, wasmclass.Expect{})
}

// SwapIf is Swap, only over the running module exp names (its sha256 or
// version; zero fields are not checked): otherwise wasmclass.ErrConflict.
func (s *Server) SwapIf(ctx context.Context, tenant string, wasm []byte, exp wasmclass.Expect) (v int, err error) {
	err = s.withClassifier(s.tenants.pagesOf(tenant), func() error {
		v, err = s.tenants.swap(ctx, tenant, wasm, exp)
		return err
	})
	return v, err
}

// Rollback swaps tenant's previous classifier back in (the module it ran
// before its last swap or rollback) and returns the new version number.
func (s *Server) Rollback(ctx context.Context, tenant string) (int, error) {
	return s.RollbackIf(ctx, tenant, wasmclass.Expect{})
}

// RollbackIf is Rollback, only over the running module exp names.
func (s *Server) RollbackIf(ctx context.Context, tenant string, exp wasmclass.Expect) (v int, err error) {
	err = s.withClassifier(s.tenants.pagesOf(tenant), func() error {
		v, err = s.tenants.rollback(ctx, tenant, exp)
		return err
	})
	return v, err
}

// AddTenant adds a tenant to the server without a restart: its
// classifier (t.Wasm or t.Classifier; neither: the native classifier), its
// ports on the dataplane, its share of the workers and the pool, its token.
func (s *Server) AddTenant(ctx context.Context, t Tenant) error {
	return s.withClassifier(s.tenants.memoryPages(t), func() error {
		_, err := s.tenants.add(ctx, t)
		return err
	})
}

// UpdateTenant changes a live tenant's ports, share or token.
func (s *Server) UpdateTenant(ctx context.Context, name string, u TenantUpdate) error {
	_, err := s.tenants.update(ctx, name, u)
	return err
}

// RemoveTenant removes a tenant without a restart: its queued requests are
// dropped (removed), its running ones answered, its ports closed.
func (s *Server) RemoveTenant(ctx context.Context, name string) error {
	_, err := s.tenants.remove(ctx, name)
	if err == nil {
		s.refs.forget(name)
		s.provisional.clear(name)
		s.removed(name)
		s.fitMemory(0)
	}
	return err
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}
