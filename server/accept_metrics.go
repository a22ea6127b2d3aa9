package server

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/persephone-go/psp/internal/accept"
)

// acceptCollector exports the server's accept loops: errors retried (by
// class), connections refused at a listener's cap, connections open.
type acceptCollector struct {
	s                     *Server
	errors, refused, open *prometheus.Desc
}

func newAcceptCollector(s *Server) *acceptCollector {
	return &acceptCollector{
		s:       s,
		errors:  prometheus.NewDesc("psp_accept_errors_total", "Accept errors a listener retried: aborted (a connection failed before it was accepted; retried at once) or exhausted (descriptors, buffers or memory ran out; retried after a growing pause).", []string{"listener", "class"}, nil),
		refused: prometheus.NewDesc("psp_accept_refused_total", "Connections accepted and closed at once because the listener held its most connections (its share of RLIMIT_NOFILE).", []string{"listener"}, nil),
		open:    prometheus.NewDesc("psp_accept_connections", "Connections a listener holds open.", []string{"listener"}, nil),
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
func (c *acceptCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.errors
	ch <- c.refused
	ch <- c.open
}

// Collect implements prometheus.Collector.
func (c *acceptCollector) Collect(ch chan<- prometheus.Metric) {
	for name, l := range c.s.listeners() {
		n := l.Loop().Counts()
		ch <- prometheus.MustNewConstMetric(c.errors, prometheus.CounterValue, float64(n.Aborted), name, accept.Aborted.String())
		ch <- prometheus.MustNewConstMetric(c.errors, prometheus.CounterValue, float64(n.Exhausted), name, accept.Exhausted.String())
		ch <- prometheus.MustNewConstMetric(c.refused, prometheus.CounterValue, float64(n.Refused), name)
		ch <- prometheus.MustNewConstMetric(c.open, prometheus.GaugeValue, float64(l.Open()), name)
	}
}
