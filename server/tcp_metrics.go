package server

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/persephone-go/psp/nic/tcp"
)

// tcpCollector exports the TCP dataplane's connection counters.
type tcpCollector struct {
	dp                                                *tcp.Dataplane
	conns, maxConns, accepted, rejected, acceptErrors *prometheus.Desc
	closed, pipelinePauses, memoryPauses, dropped     *prometheus.Desc
	bytesIn, bytesOut, memory, requestsDropped        *prometheus.Desc
	pushes, pushesRefused                             *prometheus.Desc
}

func newTCPCollector(dp *tcp.Dataplane) *tcpCollector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("psp_tcp_"+name, help, labels, nil)
	}
	return &tcpCollector{dp: dp,
		conns:           d("connections", "TCP connections open."),
		maxConns:        d("connections_max", "The most TCP connections served at once."),
		accepted:        d("connections_accepted_total", "TCP connections accepted and served."),
		rejected:        d("connections_rejected_total", "TCP connections closed at once: the connection limit was reached."),
		acceptErrors:    d("accept_errors_total", "Failed accepts retried after a pause (out of descriptors or kernel memory, aborted connections)."),
		closed:          d("connections_closed_total", "TCP connections closed, by reason.", "reason"),
		pipelinePauses:  d("pipeline_pauses_total", "Times a connection was not read: its unanswered requests reached the pipeline limit."),
		memoryPauses:    d("memory_pauses_total", "Times connections were not read: the TCP memory bound was reached."),
		dropped:         d("replies_dropped_total", "Replies not sent: their connection had closed."),
		requestsDropped: d("requests_dropped_total", "Requests of closed connections dropped before they ran (queued behind an earlier request of theirs)."),
		bytesIn:         d("received_bytes_total", "Bytes read from TCP connections."),
		bytesOut:        d("sent_bytes_total", "Bytes written to TCP connections."),
		memory:          d("memory_bytes", "Bytes held for TCP connections (input not yet framed, long requests, replies not yet taken)."),
		pushes:          d("pushes_total", "Pushes taken for sending: bytes sent to a connection that no request asked for (Redis pub/sub messages)."),
		pushesRefused:   d("pushes_refused_total", "Pushes refused: their connection was closed or closing, or the push reached its output bound and closed it."),
	}
}

// Describe implements prometheus.Collector.
func (c *tcpCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.conns, c.maxConns, c.accepted, c.rejected, c.acceptErrors, c.closed,
		c.pipelinePauses, c.memoryPauses, c.dropped, c.requestsDropped, c.bytesIn, c.bytesOut, c.memory,
		c.pushes, c.pushesRefused} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *tcpCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.dp.ConnStats()
	gauge := func(d *prometheus.Desc, v float64, l ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, l...)
	}
	counter := func(d *prometheus.Desc, v uint64, l ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), l...)
	}
	gauge(c.conns, float64(s.Current))
	gauge(c.maxConns, float64(s.Max))
	counter(c.accepted, s.Accepted)
	counter(c.rejected, s.Rejected)
	counter(c.acceptErrors, s.AcceptErrors)
	s.Closed.Each(func(reason string, n uint64) { counter(c.closed, n, reason) })
	counter(c.pipelinePauses, s.PipelinePauses)
	counter(c.memoryPauses, s.MemoryPauses)
	counter(c.dropped, s.RepliesDropped)
	counter(c.requestsDropped, s.RequestsDropped)
	counter(c.bytesIn, s.BytesIn)
	counter(c.bytesOut, s.BytesOut)
	gauge(c.memory, float64(s.MemoryUsed))
	counter(c.pushes, s.Pushes)
	counter(c.pushesRefused, s.PushesRefused)
}
