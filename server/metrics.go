package server

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/persephone-go/psp/dispatcher"
)

// collector exports the dispatcher's latest Stats snapshot at scrape time:
// scrapes never touch the policy or the hot path.
type collector struct {
	s *Server

	received, answered, dropped, inFlight, queued, busy     *prometheus.Desc
	idle, waste, reservations, typeCount, typeQueue, typeMS *prometheus.Desc
	typeProfileMean, groupReserved, tenantVersion, faults   *prometheus.Desc

	overloadReplies, overloaded, shedRate, pool               *prometheus.Desc
	typeDropped, typeBudget, typeHeld, typeDeadline, typeWait *prometheus.Desc
	netRx, netRxDropped, netRxNoBuffer, netRxTruncated        *prometheus.Desc
	netTx, netTxErrors                                        *prometheus.Desc
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

		overloadReplies: d("overload_replies_total", "Shed requests answered with an \"overloaded\" reply (counted as dropped too)."),
		overloaded:      d("overloaded", "1 while the server sheds requests (queue full, budget, expired, overload in the last second), else 0."),
		shedRate:        d("shed_requests_per_second", "Requests shed per second over the last second."),
		pool:            d("pool_requests", "Requests the types' budgets share: the buffers the dataplane lends to requests (0: unbounded)."),
		typeDropped:     d("type_requests_dropped_total", "Requests dropped per type and reason.", "type", "reason"),
		typeBudget:      d("type_budget_requests", "Most requests of the type held at once, queued or running (0: unbounded).", "type"),
		typeHeld:        d("type_held_requests", "Requests of the type held now, queued or running.", "type"),
		typeDeadline:    d("type_deadline_seconds", "Longest a request of the type may wait in its queue (0: none).", "type"),
		typeWait:        d("type_queue_wait_max_seconds", "Longest queue wait of the type's requests dispatched during the last stats interval.", "type"),
		netRx:           d("dataplane_rx_packets_total", "Packets the dataplane handed to the dispatcher."),
		netRxDropped:    d("dataplane_rx_dropped_total", "Packets dropped before the dispatcher saw them (kernel socket buffer full, device drops, non-requests)."),
		netRxNoBuffer:   d("dataplane_rx_no_buffer_total", "Times the dataplane found its buffer pool empty when receiving."),
		netRxTruncated:  d("dataplane_rx_truncated_total", "Datagrams longer than a buffer (also counted as dropped, reason truncated)."),
		netTx:           d("dataplane_tx_packets_total", "Packets transmitted."),
		netTxErrors:     d("dataplane_tx_errors_total", "Packets the dataplane failed to transmit."),
	}
}

// Describe implements prometheus.Collector.
func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.received, c.answered, c.dropped, c.inFlight, c.queued, c.busy,
		c.idle, c.waste, c.reservations, c.typeCount, c.typeQueue, c.typeMS,
		c.typeProfileMean, c.groupReserved, c.tenantVersion, c.faults,
		c.overloadReplies, c.overloaded, c.shedRate, c.pool, c.typeDropped, c.typeBudget, c.typeHeld,
		c.typeDeadline, c.typeWait, c.netRx, c.netRxDropped, c.netRxNoBuffer, c.netRxTruncated, c.netTx, c.netTxErrors} {
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
	for _, r := range dispatcher.Reasons() {
		counter(c.dropped, float64(st.Drops.Count(r)), r.String())
	}
	counter(c.overloadReplies, float64(st.OverloadReplies))
	over := 0.0
	if st.Overloaded {
		over = 1
	}
	gauge(c.overloaded, over)
	gauge(c.shedRate, st.ShedRate)
	gauge(c.pool, float64(st.Pool))
	counter(c.netRx, float64(st.Net.RxPackets))
	counter(c.netRxDropped, float64(st.Net.RxDropped))
	counter(c.netRxNoBuffer, float64(st.Net.RxNoBuffer))
	counter(c.netRxTruncated, float64(st.Net.RxTruncated))
	counter(c.netTx, float64(st.Net.TxPackets))
	counter(c.netTxErrors, float64(st.Net.TxErrors))
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
		for _, r := range dispatcher.Reasons() {
			if r == dispatcher.ReasonRunt || r == dispatcher.ReasonTruncated {
				continue // not classified: no type
			}
			counter(c.typeDropped, float64(t.Drops.Count(r)), name, r.String())
		}
		gauge(c.typeBudget, float64(t.Budget), name)
		gauge(c.typeHeld, float64(t.Held), name)
		gauge(c.typeDeadline, float64(t.DeadlineNs)/1e9, name)
		gauge(c.typeWait, float64(t.MaxWaitNs)/1e9, name)
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
