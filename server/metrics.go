package server

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// collector exports the dispatcher's latest Stats snapshot at scrape time:
// scrapes never touch the policy or the hot path.
type collector struct {
	s *Server

	received, answered, dropped, inFlight, queued, busy     *prometheus.Desc
	idle, waste, reservations, typeCount, typeQueue, typeMS *prometheus.Desc
	typeProfileMean, groupReserved, tenantVersion, faults   *prometheus.Desc
}

func newCollector(s *Server) *collector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("psp_"+name, help, labels, nil)
	}
	return &collector{
		s:               s,
		received:        d("requests_received_total", "Requests received from the dataplane."),
		answered:        d("requests_answered_total", "Requests answered."),
		dropped:         d("requests_dropped_total", "Requests dropped, by reason.", "reason"),
		inFlight:        d("requests_in_flight", "Requests queued or running."),
		queued:          d("requests_queued", "Requests waiting in typed queues."),
		busy:            d("workers_busy", "Workers running a request."),
		idle:            d("workers_idle_mean", "Mean idle workers over the last stats interval."),
		waste:           d("cpu_waste_workers", "Mean idle workers while requests waited, over the last stats interval."),
		reservations:    d("reservations_total", "Reservation (re)computations."),
		typeCount:       d("type_requests_total", "Requests per type and outcome.", "type", "outcome"),
		typeQueue:       d("type_queue_length", "Requests waiting per type.", "type"),
		typeMS:          d("type_service_seconds_mean", "Mean measured service time per type since start.", "type"),
		typeProfileMean: d("type_profile_service_seconds", "Mean service time per type in the policy's current profile.", "type"),
		groupReserved:   d("group_reserved_workers", "Workers reserved per group of the current reservation.", "group", "types"),
		tenantVersion:   d("classifier_version", "Classifier version per tenant.", "tenant"),
		faults:          d("classifier_faults_total", "Classifier faults per tenant and kind.", "tenant", "kind"),
	}
}

// Describe implements prometheus.Collector.
func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.received, c.answered, c.dropped, c.inFlight, c.queued, c.busy,
		c.idle, c.waste, c.reservations, c.typeCount, c.typeQueue, c.typeMS,
		c.typeProfileMean, c.groupReserved, c.tenantVersion, c.faults} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *collector) Collect(ch chan<- prometheus.Metric) {
	st := c.s.Status()
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter(c.received, float64(st.Received))
	counter(c.answered, float64(st.Answered))
	for reason, v := range map[string]uint64{
		"runt": st.Drops.Runt, "truncated": st.Drops.Truncated, "queue_full": st.Drops.QueueFull,
		"overload": st.Drops.Overload, "app": st.Drops.App, "panic": st.Drops.Panic, "tx_error": st.Drops.TxError, "shutdown": st.Drops.Shutdown,
	} {
		counter(c.dropped, float64(v), reason)
	}
	gauge(c.inFlight, float64(st.InFlight))
	gauge(c.queued, float64(st.Queued))
	gauge(c.busy, float64(st.Busy))
	gauge(c.idle, st.IdleWorkers)
	gauge(c.waste, st.CPUWaste)
	counter(c.reservations, float64(st.Reservations))
	for _, t := range st.Types {
		name := t.Name
		counter(c.typeCount, float64(t.Received), name, "received")
		counter(c.typeCount, float64(t.Answered), name, "answered")
		counter(c.typeCount, float64(t.Dropped), name, "dropped")
		gauge(c.typeQueue, float64(t.Queued), name)
		gauge(c.typeMS, t.MeasuredMeanNs/1e9, name)
		gauge(c.typeProfileMean, t.MeanServiceNs/1e9, name)
	}
	for i, g := range st.Groups {
		gauge(c.groupReserved, float64(len(g.Reserved)), strconv.Itoa(i), strings.Join(g.Types, ","))
	}
	for _, t := range st.Tenants {
		gauge(c.tenantVersion, float64(t.Version), t.Name)
		for kind, v := range t.Faults {
			counter(c.faults, float64(v), t.Name, kind)
		}
	}
}

// registerMetrics fills the server's own registry (never the global one).
func (s *Server) registerMetrics() error {
	for _, col := range []prometheus.Collector{
		newCollector(s),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	} {
		if err := s.registry.Register(col); err != nil {
			return fmt.Errorf("server: metrics: %w", err)
		}
	}
	return nil
}
