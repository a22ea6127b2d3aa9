package server

import (
	"fmt"
	"net/http"
)

// handleHealthz answers GET /healthz: 200 while the process serves its
// admin endpoint (a liveness probe). No token is needed.
func (s *Server) handleHealthz(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	fmt.Fprintln(w, "ok")
}

// handleReadyz answers GET /readyz: 200 when every tenant's classifier is
// loaded (from the registry, the cache or a file) and the server is not
// stopping, else 503 with the reason (a readiness probe). No token is
// needed, so the answer names no tenant: psp status says which is pending
// and why.
func (s *Server) handleReadyz(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	switch n := s.pending.waiting(s.tenants.runningSHA); {
	case s.stopping.Load():
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintln(w, "not ready: stopping")
	case n > 0:
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintf(w, "not ready: %d tenant(s) waiting for a classifier that could not be fetched (psp status says which)\n", n)
	default:
		fmt.Fprintln(w, "ready")
	}
}
