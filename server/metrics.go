package server

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/persephone-go/psp/darc"
	"github.com/persephone-go/psp/dispatcher"
)

// collector exports the dispatcher's latest Stats snapshot at scrape time:
// scrapes never touch the policy or the hot path.
//
// Conventions: one name per quantity, base units in names (seconds,
// packets), counters end in _total and partition what they count (a label
// never mixes "received" with "answered": summing a counter over its labels
// is meaningful), and per-stage request times are histograms named by
// stage (psp_request_<stage>_seconds, see dispatcher.Stage) whose buckets,
// _sum and _count rate() can aggregate across types and servers. Per-type
// series exist for the types the classifiers declare and for those that
// have seen requests; a type's stage histogram from its first request in
// that stage (most of a type's series are histogram series, and a
// classifier may declare 65,535 types that never see a request).
type collector struct {
	s *Server

	received, droppedByReason                                *prometheus.Desc
	receivedByType, answeredByType, droppedByType            *prometheus.Desc
	queue, busy, idleSeconds, wasteSeconds                   *prometheus.Desc
	stages                                                   [dispatcher.NumStages]*prometheus.Desc
	bounds                                                   []int64 // bucket bounds exported, ns
	reservations, groupReserved, profiledMean, profiledShare *prometheus.Desc
	classifierVersion, classifierFaults, classifierRestarts  *prometheus.Desc
	rxPackets, rxDropped, rxTruncated, txPackets, txErrors   *prometheus.Desc

	rxNoBuffer, overloadReplies, overloaded, pool *prometheus.Desc
	socketDrops                                   *prometheus.Desc
	budget, held, deadline, queueingMax           *prometheus.Desc
	typeShare                                     *prometheus.Desc
	parked                                        *prometheus.Desc
}

func newCollector(s *Server) *collector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("psp_"+name, help, labels, nil)
	}
	return &collector{
		s: s,

		received:        d("requests_received_total", "Requests received from the dataplane, before classification."),
		droppedByReason: d("requests_dropped_total", "Requests dropped, by reason (each drop counted once).", "reason"),
		receivedByType:  d("type_requests_received_total", "Requests classified as each type.", "type"),
		answeredByType:  d("type_requests_answered_total", "Requests answered, per type.", "type"),
		droppedByType:   d("type_requests_dropped_total", "Classified requests dropped, per type and reason (each drop counted once).", "type", "reason"),

		queue:        d("queue_requests", "Requests waiting in each type's queue.", "type"),
		parked:       d("parked_requests", "Requests parked by the application until it lets them run again (a Redis BLPOP on an empty list), per type.", "type"),
		busy:         d("workers_busy", "Workers running a request."),
		idleSeconds:  d("worker_idle_seconds_total", "Idle time summed over workers (its rate is the mean number of idle workers)."),
		wasteSeconds: d("worker_waste_seconds_total", "Idle time summed over workers while requests waited in a queue (its rate is the CPU waste, in workers)."),

		stages: [dispatcher.NumStages]*prometheus.Desc{
			dispatcher.StageReceive:  d("request_receive_seconds", "Time from a request's arrival (the kernel's or NIC's receive) until the dispatcher read it, per request type.", "type"),
			dispatcher.StageQueueing: d("request_queueing_seconds", "Time from classification and enqueue until dispatch to a worker, per request type.", "type"),
			dispatcher.StageHandoff:  d("request_handoff_seconds", "Time from dispatch until the worker started the request (including waking a parked worker), per request type.", "type"),
			dispatcher.StageService:  d("request_service_seconds", "Service time measured by the worker, per request type (every request a worker ran).", "type"),
			dispatcher.StageTransmit: d("request_transmit_seconds", "Time from the end of service until the dataplane took the reply, per request type.", "type"),
			dispatcher.StageLatency:  d("request_latency_seconds", "Time in the server from arrival to reply (the sum of the other stages), per request type (answered requests).", "type"),
		},
		bounds: dispatcher.PromBounds(),

		reservations:  d("reservations_total", "Reservation (re)computations by the policy."),
		groupReserved: d("group_reserved_workers", "Workers reserved per group of the current reservation.", "group", "types"),
		profiledMean:  d("profiled_mean_service_seconds", "Mean service time per type in the policy's current profiling window (what it reserves by).", "type"),
		profiledShare: d("profiled_share_ratio", "Share of each type among the completions of the policy's current profiling window.", "type"),

		classifierVersion:  d("classifier_version", "Classifier version per tenant (1 at start, +1 per hot swap).", "tenant"),
		classifierFaults:   d("classifier_faults_total", "Packets a classifier faulted on (sent to UNKNOWN), per tenant and kind.", "tenant", "kind"),
		classifierRestarts: d("classifier_restarts_total", "Classifier instances restarted after a fault, per tenant.", "tenant"),

		rxPackets:   d("dataplane_receive_packets_total", "Packets the dataplane handed to the dispatcher."),
		rxDropped:   d("dataplane_receive_drops_total", "Packets the dataplane dropped on receive (no buffer, not for us, malformed)."),
		rxTruncated: d("dataplane_receive_truncated_total", "Packets received truncated to the buffer size (also in dataplane_receive_packets_total)."),
		txPackets:   d("dataplane_transmit_packets_total", "Packets the dataplane transmitted."),
		txErrors:    d("dataplane_transmit_errors_total", "Packets the dataplane failed to transmit."),
		socketDrops: d("dataplane_socket_drops_total", "Datagrams the kernel dropped at a port's receive socket before the server read them (its buffer was full), per port (UDP dataplane; dataplane_receive_drops_total includes them).", "port"),
		rxNoBuffer:  d("dataplane_receive_no_buffer_total", "Times the dataplane found its buffer pool empty on receive (packets then wait in, or are dropped by, the kernel or the device)."),

		overloadReplies: d("overload_replies_total", "Shed requests answered \"overloaded\" (they are counted as dropped too)."),
		overloaded:      d("overloaded", "1 while the server sheds requests (queue full, budget, expired or overload drops in the last second), else 0."),
		pool:            d("pool_requests", "Requests the policy may hold at once, queued or running: the buffers the dataplane lends to requests (0: unbounded)."),
		budget:          d("type_budget_requests", "Most requests of the type held at once, queued or running (0: unbounded).", "type"),
		held:            d("type_held_requests", "Requests of the type held now, queued or running.", "type"),
		deadline:        d("type_deadline_seconds", "Longest a request of the type may wait in its queue before it is dropped as expired (0: none).", "type"),
		queueingMax:     d("request_queueing_max_seconds", "Longest time from enqueue to dispatch of a request dispatched during the last stats interval, per type.", "type"),
		typeShare:       d("type_share_ratio", "Share of each type among the requests its tenant's classifier typed over the last 10 s (UNKNOWN included; 0 when the tenant typed none).", "type"),
	}
}

// Describe implements prometheus.Collector.
func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{
		c.received, c.droppedByReason, c.receivedByType, c.answeredByType, c.droppedByType,
		c.queue, c.busy, c.idleSeconds, c.wasteSeconds,
		c.reservations, c.groupReserved, c.profiledMean, c.profiledShare,
		c.classifierVersion, c.classifierFaults, c.classifierRestarts,
		c.rxPackets, c.rxDropped, c.rxTruncated, c.txPackets, c.txErrors,
		c.rxNoBuffer, c.socketDrops, c.overloadReplies, c.overloaded, c.pool, c.budget, c.held, c.deadline, c.queueingMax, c.typeShare,
		c.parked,
	} {
		ch <- d
	}
	for _, d := range c.stages {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *collector) Collect(ch chan<- prometheus.Metric) {
	st := c.s.disp.Stats()
	stages := c.s.disp.Stages()
	declared, tenants := c.s.tenants.declared(st), c.s.tenants.status(st)
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}

	counter(c.received, float64(st.Received))
	for _, r := range dispatcher.Reasons() {
		counter(c.droppedByReason, float64(st.Drops.Count(r)), r.String())
	}
	counter(c.overloadReplies, float64(st.OverloadReplies))
	over := 0.0
	if st.Overloaded {
		over = 1
	}
	gauge(c.overloaded, over)
	gauge(c.pool, float64(st.Pool))
	gauge(c.busy, float64(st.Busy))
	counter(c.idleSeconds, st.IdleWorkerSeconds)
	counter(c.wasteSeconds, st.WasteWorkerSeconds)
	counter(c.reservations, float64(st.Policy.Reservations))

	hidden := shadowedTypes(st)
	shares := c.s.mix.shares(st)
	seen := make(map[string]bool, len(st.Types))
	for i := range st.Types {
		t := &st.Types[i]
		var p darc.TypeState
		if int(t.Type) < len(st.Policy.Types) {
			p = st.Policy.Types[t.Type]
		}
		if !typeExists(t, declared) && p.Count == 0 || hidden[t.Type] {
			continue
		}
		name := uniqueName(seen, t.Name, t.Type)
		if name == "" {
			continue
		}
		counter(c.receivedByType, float64(t.Received), name)
		counter(c.answeredByType, float64(t.Answered), name)
		for _, r := range dispatcher.Reasons() {
			if r == dispatcher.ReasonRunt || r == dispatcher.ReasonTruncated {
				continue // dropped before classification: no type
			}
			counter(c.droppedByType, float64(t.Drops.Count(r)), name, r.String())
		}
		gauge(c.queue, float64(t.Queued), name)
		gauge(c.parked, float64(t.Parked), name)
		gauge(c.budget, float64(p.Budget), name)
		gauge(c.held, float64(p.Held), name)
		gauge(c.deadline, float64(p.DeadlineNs)/1e9, name)
		gauge(c.queueingMax, float64(t.MaxWaitNs)/1e9, name)
		if int(t.Type) < len(shares) {
			gauge(c.typeShare, shares[t.Type], name)
		}
		var h *dispatcher.TypeStages
		if int(t.Type) < len(stages) {
			h = stages[t.Type]
		}
		if h != nil {
			for s, d := range c.stages {
				if h[s].Count > 0 {
					ch <- c.histogram(d, &h[s], name)
				}
			}
		}
		gauge(c.profiledMean, p.MeanService/1e9, name)
		gauge(c.profiledShare, p.Ratio, name)
	}
	for i, g := range st.Policy.Groups {
		names := make([]string, len(g.Types))
		for k, t := range g.Types {
			if int(t) < len(st.Types) {
				names[k] = st.Types[t].Name
			}
		}
		gauge(c.groupReserved, float64(len(g.Reserved)), strconv.Itoa(i), strings.Join(names, ","))
	}
	seenTenant := map[string]bool{}
	for _, t := range tenants {
		if seenTenant[t.Name] {
			continue
		}
		seenTenant[t.Name] = true
		gauge(c.classifierVersion, float64(t.Version), t.Name)
		for kind, v := range t.Faults {
			counter(c.classifierFaults, float64(v), t.Name, kind)
		}
		if !t.Native {
			counter(c.classifierRestarts, float64(t.Restarts), t.Name)
		}
	}
	n := st.Dataplane
	counter(c.rxPackets, float64(n.RxPackets))
	counter(c.rxDropped, float64(n.RxDropped))
	counter(c.rxTruncated, float64(n.RxTruncated))
	counter(c.txPackets, float64(n.TxPackets))
	counter(c.txErrors, float64(n.TxErrors))
	counter(c.rxNoBuffer, float64(n.RxNoBuffer))
	if pd, ok := member[portDropper](c.s.dp); ok {
		for _, p := range pd.PortDrops() {
			counter(c.socketDrops, float64(p.Drops), strconv.Itoa(int(p.Port)))
		}
	}
}

// shadowedTypes marks the type ids of removed tenants whose name a live
// tenant has again: the live tenant's types have the same names ("a/SHORT"),
// and a label set must never be exported twice (one repeat fails the whole
// scrape). The removed tenant's counters stay in /status.
func shadowedTypes(st *dispatcher.Stats) map[darc.Type]bool {
	var hidden map[darc.Type]bool
	for _, r := range st.Tenants {
		if !r.Removed {
			continue
		}
		for _, l := range st.Tenants {
			if l.Name != r.Name || l.Removed {
				continue
			}
			if hidden == nil {
				hidden = map[darc.Type]bool{}
			}
			for id := r.Base; id < r.Base+darc.Type(r.NumTypes); id++ {
				hidden[id] = true
			}
		}
	}
	return hidden
}

// uniqueName returns name as a type label if no type exported before has
// it, else name#id (a module may declare one name twice), else "" (give
// up on this type: never export a label set twice). It marks the label
// taken.
func uniqueName(seen map[string]bool, name string, id darc.Type) string {
	for _, n := range []string{name, fmt.Sprintf("%s#%d", name, id)} {
		if !seen[n] {
			seen[n] = true
			return n
		}
	}
	return ""
}

// histogram exports one stage histogram with the 1-2-5 bucket bounds.
func (c *collector) histogram(d *prometheus.Desc, h *dispatcher.Histogram, labels ...string) prometheus.Metric {
	buckets := make(map[float64]uint64, len(c.bounds))
	for _, b := range c.bounds {
		n, _ := h.Cumulative(b)
		buckets[float64(b)/1e9] = n
	}
	return prometheus.MustNewConstHistogram(d, h.Count, float64(h.SumNs)/1e9, buckets, labels...)
}

// registerMetrics fills the server's own registry (never the global one).
func (s *Server) registerMetrics() error {
	for _, col := range []prometheus.Collector{
		newCollector(s),
		newTenantCollector(s),
		newAppCollector(s.app),
		newAdminCollector(s),
		collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics(collectors.MetricsScheduler)),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	} {
		if err := s.registry.Register(col); err != nil {
			return fmt.Errorf("server: metrics: %w", err)
		}
	}
	if t, ok := tcpDataplane(s.dp); ok {
		if err := s.registry.Register(newTCPCollector(t)); err != nil {
			return fmt.Errorf("server: metrics: %w", err)
		}
	}
	return nil
}
