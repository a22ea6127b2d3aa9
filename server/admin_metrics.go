package server

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/persephone-go/psp/internal/accept"
)

// adminCollector exports the bounds of the admin endpoint and of the
// server's listeners: accept errors retried (by class), connections
// refused at a listener's cap, connections open, admin bodies refused (by
// reason), the bytes bodies hold, refused credentials and how many of them
// the audit log folded into counts.
type adminCollector struct {
	s                     *Server
	errors, refused, open *prometheus.Desc
	bodiesRefused, bodies *prometheus.Desc
	credRefused, folded   *prometheus.Desc
}

func newAdminCollector(s *Server) *adminCollector {
	return &adminCollector{
		s:       s,
		errors:  prometheus.NewDesc("psp_accept_errors_total", "Accept errors a listener retried: aborted (a connection failed before it was accepted; retried at once) or exhausted (descriptors, buffers or memory ran out; retried after a growing pause).", []string{"listener", "class"}, nil),
		refused: prometheus.NewDesc("psp_accept_refused_total", "Connections accepted and closed at once because the listener held its most connections (its share of RLIMIT_NOFILE).", []string{"listener"}, nil),
		open:    prometheus.NewDesc("psp_accept_connections", "Connections a listener holds open.", []string{"listener"}, nil),

		bodiesRefused: prometheus.NewDesc("psp_admin_bodies_refused_total", "Admin request bodies refused: too_large (past the endpoint's limit), budget (past the bytes of all bodies at once), in_flight (past a token's uploads in progress), stalled (stopped arriving).", []string{"reason"}, nil),
		bodies:        prometheus.NewDesc("psp_admin_body_bytes", "Bytes reserved by the admin request bodies being read or held.", nil, nil),
		credRefused:   prometheus.NewDesc("psp_admin_credentials_refused_total", "Admin requests refused for their credential (a missing or wrong token, or one that may not).", nil, nil),
		folded:        prometheus.NewDesc("psp_audit_refusals_folded_total", "Refused credentials the audit log counts in a line per source and interval rather than writing one line each.", nil, nil),
	}
}

// listeners returns the server's capped listeners by name.
func (s *Server) listeners() map[string]*accept.Listener {
	m := map[string]*accept.Listener{}
	if s.adminAccept != nil {
		m["admin"] = s.adminAccept
	}
	return m
}

// Describe implements prometheus.Collector.
func (c *adminCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.errors, c.refused, c.open, c.bodiesRefused, c.bodies, c.credRefused, c.folded} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *adminCollector) Collect(ch chan<- prometheus.Metric) {
	for name, l := range c.s.listeners() {
		n := l.Loop().Counts()
		ch <- prometheus.MustNewConstMetric(c.errors, prometheus.CounterValue, float64(n.Aborted), name, accept.Aborted.String())
		ch <- prometheus.MustNewConstMetric(c.errors, prometheus.CounterValue, float64(n.Exhausted), name, accept.Exhausted.String())
		ch <- prometheus.MustNewConstMetric(c.refused, prometheus.CounterValue, float64(n.Refused), name)
		ch <- prometheus.MustNewConstMetric(c.open, prometheus.GaugeValue, float64(l.Open()), name)
	}
	if b := c.s.bodies; b != nil {
		for i, reason := range bodyReasons {
			ch <- prometheus.MustNewConstMetric(c.bodiesRefused, prometheus.CounterValue, float64(b.refusedCount(i)), reason)
		}
		ch <- prometheus.MustNewConstMetric(c.bodies, prometheus.GaugeValue, float64(b.reserved()))
	}
	if a := c.s.audit; a != nil {
		ch <- prometheus.MustNewConstMetric(c.credRefused, prometheus.CounterValue, float64(a.refused.Load()))
		ch <- prometheus.MustNewConstMetric(c.folded, prometheus.CounterValue, float64(a.folded.Load()))
	}
}
