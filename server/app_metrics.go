package server

import "github.com/prometheus/client_golang/prometheus"

// appCollector exports the application's own figures (Application.Counters)
// as psp_<name>: the memcached application's bounds, for instance, count
// what they refused there.
type appCollector struct {
	counters func() []AppCounter
	descs    []*prometheus.Desc
}

func newAppCollector(app *Application) *appCollector {
	c := &appCollector{}
	if app == nil || app.Counters == nil {
		return c
	}
	c.counters = app.Counters
	for _, a := range app.Counters() {
		c.descs = append(c.descs, prometheus.NewDesc("psp_"+a.Name, a.Help, nil, nil))
	}
	return c
}

// Describe implements prometheus.Collector.
func (c *appCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *appCollector) Collect(ch chan<- prometheus.Metric) {
	if c.counters == nil {
		return
	}
	for i, a := range c.counters() {
		if i >= len(c.descs) {
			break
		}
		kind := prometheus.CounterValue
		if a.Gauge {
			kind = prometheus.GaugeValue
		}
		ch <- prometheus.MustNewConstMetric(c.descs[i], kind, a.Value)
	}
}
