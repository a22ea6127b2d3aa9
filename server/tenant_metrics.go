package server

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/persephone-go/psp/dispatcher"
)

// tenantCollector exports a server's per-tenant series, with a
// tenant label: its packets by outcome, its requests waiting, running and
// being classified, its workers (home, busy, borrowed, lent), its part of
// the buffer pool, its classifier's time and the module it runs. Removed
// tenants keep their counters (their gauges go to zero).
type tenantCollector struct {
	s *Server

	received, answered, dropped                *prometheus.Desc
	queued, running, classifying               *prometheus.Desc
	homeWorkers, busy, borrowed, lent          *prometheus.Desc
	guarantee, budget, held                    *prometheus.Desc
	classifierCalls, classifierSeconds, module *prometheus.Desc
	escalations, onLane                        *prometheus.Desc
}

func newTenantCollector(s *Server) *tenantCollector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("psp_tenant_"+name, help, append([]string{"tenant"}, labels...), nil)
	}
	return &tenantCollector{
		s:                 s,
		received:          d("requests_received_total", "Packets routed to the tenant (by UDP destination port)."),
		answered:          d("requests_answered_total", "The tenant's requests answered."),
		dropped:           d("requests_dropped_total", "The tenant's requests dropped, by reason (each drop counted once).", "reason"),
		queued:            d("queued_requests", "The tenant's requests waiting in its typed queues."),
		running:           d("running_requests", "The tenant's requests on workers."),
		classifying:       d("classifying_requests", "The tenant's packets on its classifier lane."),
		homeWorkers:       d("home_workers", "Workers guaranteed to the tenant (its home)."),
		busy:              d("busy_workers", "Workers running the tenant's requests, its own and borrowed."),
		borrowed:          d("borrowed_workers", "Workers of other tenants (or nobody's) running the tenant's requests."),
		lent:              d("lent_workers", "The tenant's home workers running other tenants' requests."),
		guarantee:         d("pool_guarantee_requests", "Requests the tenant can always hold, queued or running (0: no pool)."),
		budget:            d("pool_budget_requests", "Most requests the tenant holds at once (0: no pool)."),
		held:              d("held_requests", "Requests the tenant holds now, queued or running."),
		classifierCalls:   d("classifier_calls_total", "Calls of the tenant's classifier on its lane (each classifies a batch)."),
		classifierSeconds: d("classifier_seconds_total", "Time spent in the tenant's classifier on its lane."),
		escalations:       d("classifier_escalations_total", "Times a fault or a slow call moved the tenant's classifier to its own goroutine (isolation auto)."),
		onLane:            d("classifier_on_lane", "1 while the tenant's classifier runs on its own goroutine, else 0."),
		module:            prometheus.NewDesc("psp_classifier_module_info", "The module a tenant's Wasm classifier runs (value 1), by SHA-256 of the module as uploaded.", []string{"tenant", "sha256"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *tenantCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.received, c.answered, c.dropped, c.queued, c.running, c.classifying,
		c.homeWorkers, c.busy, c.borrowed, c.lent, c.guarantee, c.budget, c.held, c.classifierCalls, c.classifierSeconds, c.module,
		c.escalations, c.onLane} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *tenantCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.s.Status()
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	seen, module := map[string]bool{}, map[string]bool{}
	for _, t := range st.Tenants {
		if t.SHA256 != "" && !t.Removed && !module[t.Name] {
			module[t.Name] = true
			gauge(c.module, 1, t.Name, t.SHA256)
		}
		if seen[t.Name] {
			continue // a removed tenant's name re-added: the live one's series
		}
		if t.Removed && c.liveAgain(st.Tenants, t.Name) {
			continue
		}
		seen[t.Name] = true
		counter(c.received, float64(t.Received), t.Name)
		counter(c.answered, float64(t.Answered), t.Name)
		var drops dispatcher.Drops
		if t.Drops != nil {
			drops = *t.Drops
		}
		for _, r := range dispatcher.Reasons() {
			if r == dispatcher.ReasonRunt || r == dispatcher.ReasonTruncated || r == dispatcher.ReasonNoTenant {
				continue // before a tenant is known
			}
			counter(c.dropped, float64(drops.Count(r)), t.Name, r.String())
		}
		gauge(c.queued, float64(t.Queued), t.Name)
		gauge(c.running, float64(t.Running), t.Name)
		gauge(c.classifying, float64(t.Classifying), t.Name)
		counter(c.classifierCalls, float64(t.ClassifierCalls), t.Name)
		counter(c.classifierSeconds, t.ClassifierBusySeconds, t.Name)
		counter(c.escalations, float64(t.Escalations), t.Name)
		lane := 0.0
		if t.OnLane {
			lane = 1
		}
		gauge(c.onLane, lane, t.Name)
		if sh := t.Share; sh != nil {
			gauge(c.homeWorkers, float64(len(sh.HomeWorkers)), t.Name)
			gauge(c.busy, float64(sh.Busy), t.Name)
			gauge(c.borrowed, float64(sh.Borrowed), t.Name)
			gauge(c.lent, float64(sh.Lent), t.Name)
			gauge(c.guarantee, float64(sh.Guarantee), t.Name)
			gauge(c.budget, float64(sh.Budget), t.Name)
			gauge(c.held, float64(sh.Held), t.Name)
		}
	}
}

// liveAgain reports whether a live tenant has name (a removed tenant's
// name given to a new one).
func (c *tenantCollector) liveAgain(ts []TenantInfo, name string) bool {
	for _, t := range ts {
		if t.Name == name && !t.Removed {
			return true
		}
	}
	return false
}
