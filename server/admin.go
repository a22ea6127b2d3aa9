package server

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	json "github.com/goccy/go-json"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/persephone-go/psp/wasmclass"
)

// maxClassifierUpload bounds a PUT body: the largest module the classifier
// host accepts (the server leaves wasmclass.Options.MaxModuleSize at its
// default), so a larger upload is refused before it is buffered.
const maxClassifierUpload = wasmclass.DefaultMaxModuleSize

// Admin HTTP server timeouts. A request (headers and body) must arrive
// within adminReadTimeout, its answer (including a hot swap's compilation,
// bounded by swapTimeout) within adminWriteTimeout; idle keep-alive
// connections are closed after adminIdleTimeout.
const (
	adminReadHeaderTimeout = 5 * time.Second
	adminReadTimeout       = time.Minute
	swapTimeout            = 30 * time.Second
	adminWriteTimeout      = adminReadTimeout + swapTimeout
	adminIdleTimeout       = 2 * time.Minute
)

// Handler returns the admin HTTP handler:
//
//	GET /status                      the Status as JSON
//	GET /metrics                     Prometheus metrics
//	PUT /tenants/{name}/classifier   hot swap (body: the .wasm; needs the bearer token)
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /status", s.handleStatus)
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.registry, promhttp.HandlerOpts{Registry: s.registry}))
	mux.HandleFunc("PUT /tenants/{name}/classifier", s.handleSwap)
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "psp admin: GET /status, GET /metrics, PUT /tenants/{name}/classifier")
	})
	return mux
}

func (s *Server) handleStatus(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.Status())
}

// SwapResult is the JSON answer to a successful hot swap.
type SwapResult struct {
	Tenant  string `json:"tenant"`
	Version int    `json:"version"`
}

// apiError is the JSON answer to a failed request.
type apiError struct {
	Error string `json:"error"`
}

func (s *Server) handleSwap(w http.ResponseWriter, r *http.Request) {
	if len(s.token) == 0 {
		writeJSON(w, http.StatusForbidden, apiError{"hot swap disabled: the server has no admin token file (start it with --token-file)"})
		return
	}
	auth := r.Header.Get("Authorization")
	// The auth scheme is case-insensitive (RFC 9110, section 11.1).
	scheme, tok, ok := strings.Cut(auth, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || subtle.ConstantTimeCompare([]byte(strings.TrimSpace(tok)), s.token) != 1 {
		w.Header().Set("WWW-Authenticate", `Bearer realm="psp"`)
		writeJSON(w, http.StatusUnauthorized, apiError{"missing or wrong bearer token"})
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxClassifierUpload))
	if err != nil {
		if tooLarge := (*http.MaxBytesError)(nil); errors.As(err, &tooLarge) {
			writeJSON(w, http.StatusRequestEntityTooLarge, apiError{fmt.Sprintf("classifier larger than the %d-byte limit", maxClassifierUpload)})
			return
		}
		writeJSON(w, http.StatusBadRequest, apiError{fmt.Sprintf("read body: %v", err)})
		return
	}
	name := r.PathValue("name")
	ctx, cancel := context.WithTimeout(r.Context(), swapTimeout)
	defer cancel()
	version, err := s.Swap(ctx, name, body)
	switch {
	case err == nil:
		writeJSON(w, http.StatusOK, SwapResult{Tenant: name, Version: version})
	case errors.Is(err, ErrUnknownTenant):
		writeJSON(w, http.StatusNotFound, apiError{err.Error()})
	case errors.Is(err, ErrNoWasm):
		writeJSON(w, http.StatusConflict, apiError{err.Error()})
	default:
		writeJSON(w, http.StatusBadRequest, apiError{err.Error()})
	}
}

// Swap hot-swaps tenant's classifier. On error the running one stays.
func (s *Server) Swap(ctx context.Context, tenant string, wasm []byte) (int, error) {
	t := s.tenantsOrNil()
	if t == nil {
		return 0, errors.New("server: closed")
	}
	return t.swap(ctx, tenant, wasm)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}
