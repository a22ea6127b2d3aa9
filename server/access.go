package server

import (
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"

	"github.com/persephone-go/psp/darc"
)

// Read access. Without any token configured the read endpoints (GET
// /status, /tenants, /metrics) answer anyone who reaches the admin port,
// as changes are then refused anyway. With a token configured (the
// operator's, the read-only one or a tenant's), a read needs one: the
// operator's and the read-only token (Admin.ReadTokenFile, for a scraper)
// see every tenant; a tenant's token sees its own tenant only: its entry
// in /tenants, its types, groups and counters in /status, its series in
// /metrics (those labelled with its name or its types).

// authorizeRead checks r's bearer token for a read and writes the refusal
// (401, audited) to w. It returns who the caller is and whether to go on.
func (s *Server) authorizeRead(w http.ResponseWriter, r *http.Request) (principal, bool) {
	if !s.creds.any() {
		return principal{reader: true}, true
	}
	if p, ok := s.creds.authenticate(bearer(r)); ok && bearer(r) != "" {
		return p, true
	}
	const msg = "reads need a token: the operator's, the read-only one (admin.read_token_file) or a tenant's"
	s.audit.record(auditEvent{Event: "read", Principal: "anonymous", Remote: r.RemoteAddr, Outcome: "unauthorized", Error: msg + ": GET " + r.URL.Path})
	w.Header().Set("WWW-Authenticate", `Bearer realm="psp"`)
	writeJSON(w, http.StatusUnauthorized, apiError{msg})
	return principal{}, false
}

func (s *Server) handleStatus(w http.ResponseWriter, r *http.Request) {
	p, ok := s.authorizeRead(w, r)
	if !ok {
		return
	}
	st := s.Status()
	if !p.readsAll() {
		base, n := s.tenantRange(p.tenant)
		st = st.forTenant(p.tenant, base, n)
	}
	writeJSON(w, http.StatusOK, st)
}

func (s *Server) handleTenants(w http.ResponseWriter, r *http.Request) {
	p, ok := s.authorizeRead(w, r)
	if !ok {
		return
	}
	ts := s.Status().Tenants
	if !p.readsAll() {
		ts = ownTenant(ts, p.tenant)
	}
	writeJSON(w, http.StatusOK, ts)
}

// metricsOpts: one failing collector costs its own series, not the scrape.
var metricsOpts = promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}

func (s *Server) handleMetrics(w http.ResponseWriter, r *http.Request) {
	p, ok := s.authorizeRead(w, r)
	if !ok {
		return
	}
	if p.readsAll() {
		promhttp.HandlerFor(s.oneGather(r, s.registry), metricsOpts).ServeHTTP(w, r)
		return
	}
	g := prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
		mfs, err := s.registry.Gather()
		return tenantSeries(mfs, p.tenant, s.typeNamesOf(p.tenant)), err
	})
	promhttp.HandlerFor(s.oneGather(r, g), metricsOpts).ServeHTTP(w, r)
}

// oneGather makes g gather while no other scrape does; the others wait
// (or give up when their request ends). A gather holds every series of
// every tenant in memory (about 550 bytes a series, some 200 series a
// type), a tenant's own scrape included (its series are cut from a full
// gather), and concurrent scrapes multiplied that. Only the gather holds
// the turn, not the writing of its answer: a client reading slowly does
// not hold up the other scrapes.
func (s *Server) oneGather(r *http.Request, g prometheus.Gatherer) prometheus.Gatherer {
	return prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
		select {
		case s.scrape <- struct{}{}:
			defer func() { <-s.scrape }()
		case <-r.Context().Done():
			return nil, r.Context().Err()
		}
		return g.Gather()
	})
}

// tenantRange returns the global type ids of the live tenant called name:
// [base, base+n).
func (s *Server) tenantRange(name string) (darc.Type, int) {
	if s.disp == nil {
		return 0, 0
	}
	for _, t := range s.disp.Stats().Tenants {
		if t.Name == name && !t.Removed {
			return t.Base, t.NumTypes
		}
	}
	return 0, 0
}

// ownTenant returns the live tenant called name of ts (none: empty).
func ownTenant(ts []TenantInfo, name string) []TenantInfo {
	out := []TenantInfo{}
	for _, t := range ts {
		if t.Name == name && !t.Removed {
			out = append(out, t)
		}
	}
	return out
}

// forTenant is st as tenant name may see it: the server's settings, its
// own tenant entry, types (ids base..base+n-1) and groups, and its own
// counters in place of the server's.
func (st Status) forTenant(name string, base darc.Type, n int) Status {
	out := Status{Policy: st.Policy, Phase: st.Phase, App: st.App, Dilation: st.Dilation, Workers: st.Workers,
		Listen: st.Listen, Dataplane: st.Dataplane, UptimeSeconds: st.UptimeSeconds, Running: st.Running,
		Draining: st.Draining, MultiTenant: st.MultiTenant, Groups: []GroupStatus{}, Types: []TypeStatus{},
		Tenants: ownTenant(st.Tenants, name)}
	for _, t := range out.Tenants {
		out.Received, out.Answered, out.Dropped = t.Received, t.Answered, t.Dropped
		out.Queued, out.Classifying = uint64(t.Queued), uint64(t.Classifying)
		out.Parked = t.Parked
		out.InFlight = uint64(t.Queued + t.Running + t.Parked + t.Classifying)
		if t.Drops != nil {
			out.Drops = *t.Drops
		}
		if t.Share != nil {
			out.Busy = t.Share.Busy
		}
	}
	for _, t := range st.Types {
		if n > 0 && t.ID >= base && t.ID < base+darc.Type(n) {
			out.Types = append(out.Types, t)
		}
	}
	for _, g := range st.Groups {
		if g.Tenant == name && len(out.Tenants) > 0 {
			out.Groups = append(out.Groups, g)
		}
	}
	return out
}

// typeNamesOf returns the names of the live tenant's types, as the
// metrics label them (the default tenant's are not prefixed with its name).
func (s *Server) typeNamesOf(tenant string) map[string]bool {
	names := map[string]bool{}
	ds := s.disp.Stats()
	base, n := s.tenantRange(tenant)
	for id := int(base); id < int(base)+n && id < len(ds.Types); id++ {
		names[ds.Types[id].Name] = true
	}
	return names
}

// tenantSeries keeps the series of mfs labelled with tenant (label
// tenant) or one of its types (label type, or types: all of them, names);
// it drops the server's own and other tenants'.
func tenantSeries(mfs []*dto.MetricFamily, tenant string, types map[string]bool) []*dto.MetricFamily {
	mine := func(m *dto.Metric) bool {
		for _, l := range m.GetLabel() {
			switch v := l.GetValue(); l.GetName() {
			case "tenant":
				return v == tenant
			case "type":
				return types[v]
			case "types":
				return allOf(v, types)
			}
		}
		return false
	}
	var out []*dto.MetricFamily
	for _, mf := range mfs {
		var keep []*dto.Metric
		for _, m := range mf.GetMetric() {
			if mine(m) {
				keep = append(keep, m)
			}
		}
		if len(keep) > 0 {
			mf.Metric = keep
			out = append(out, mf)
		}
	}
	return out
}

// allOf reports whether every name of a comma-separated list is in names.
func allOf(list string, names map[string]bool) bool {
	for _, n := range strings.Split(list, ",") {
		if !names[n] {
			return false
		}
	}
	return true
}
