package fleet

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/persephone-go/psp/server"
)

// latencyMetric is the per-type histogram the latency check reads.
const latencyMetric = "psp_request_latency_seconds"

// snapshot is what one server had counted for the tenant at one moment.
type snapshot struct {
	at       time.Time
	sha      string // the tenant's running module
	version  int
	received uint64            // requests classified into the tenant's types
	unknown  uint64            // of which UNKNOWN (the tenant's)
	faults   uint64            // packets the classifier faulted on (every kind)
	errors   uint64            // drops for app, panic, tx_error, classifier_fault
	types    map[string]uint64 // requests typed, per type (the mix)
	latency  map[string]histogram
}

// histogram is a cumulative histogram: counts[i] requests took at most
// bounds[i] seconds (the last bound +Inf).
type histogram struct {
	bounds []float64
	counts []uint64
}

// sub returns h - earlier, bucket by bucket (same bounds).
func (h histogram) sub(earlier histogram) histogram {
	out := histogram{bounds: h.bounds, counts: make([]uint64, len(h.counts))}
	for i, c := range h.counts {
		var e uint64
		if i < len(earlier.counts) {
			e = earlier.counts[i]
		}
		out.counts[i] = c - min(c, e)
	}
	return out
}

// add returns h + o (same bounds; o may be empty).
func (h histogram) add(o histogram) histogram {
	if len(h.counts) == 0 {
		return o
	}
	out := histogram{bounds: h.bounds, counts: make([]uint64, len(h.counts))}
	for i, c := range h.counts {
		out.counts[i] = c
		if i < len(o.counts) {
			out.counts[i] += o.counts[i]
		}
	}
	return out
}

func (h histogram) count() uint64 {
	if len(h.counts) == 0 {
		return 0
	}
	return h.counts[len(h.counts)-1]
}

// quantile estimates quantile q as Prometheus's histogram_quantile does:
// linearly within the bucket holding it (from 0 in the first bucket; the
// last finite bound past it), NaN when empty. The servers export 1-2-5
// buckets: the bucket's upper bound alone would be up to 2.5x off.
func (h histogram) quantile(q float64) float64 {
	n := h.count()
	if n == 0 {
		return math.NaN()
	}
	rank := q * float64(n)
	for i, c := range h.counts {
		if float64(c) < rank {
			continue
		}
		if math.IsInf(h.bounds[i], 1) {
			if i == 0 {
				return math.Inf(1)
			}
			return h.bounds[i-1]
		}
		lo, below := 0.0, uint64(0)
		if i > 0 {
			lo, below = h.bounds[i-1], h.counts[i-1]
		}
		in := c - below
		if in == 0 {
			return h.bounds[i]
		}
		return lo + (h.bounds[i]-lo)*(rank-float64(below))/float64(in)
	}
	return h.bounds[len(h.bounds)-1]
}

// take reads a server's tenant: its module from GET /status, and its
// counters from the status and GET /metrics, or from Prometheus when prom
// is set. A full snapshot bounds a window: it has the latency histograms
// and, from Prometheus, waits for a scrape at or after its moment; the
// others follow a bake's progress. at is the moment Prometheus's values
// are taken for (the status and metrics are read now).
func take(ctx context.Context, s *member, tenant string, full bool, prom *promSource, at time.Time) (snapshot, error) {
	st, err := s.admin.Status(ctx)
	if err != nil {
		return snapshot{}, err
	}
	snap := snapshot{at: time.Now(), types: map[string]uint64{}}
	if prom != nil {
		snap.at = at
	}
	ti, ok := findTenant(st, tenant)
	if !ok {
		return snapshot{}, fmt.Errorf("%s: no tenant %q (tenants: %s)", s.addr, tenant, tenantNames(st))
	}
	if ti.Native {
		return snapshot{}, fmt.Errorf("%s: tenant %q runs a native classifier: nothing to roll out to", s.addr, tenant)
	}
	snap.sha, snap.version = ti.SHA256, ti.Version
	types := tenantTypes(st, tenant)
	if prom != nil {
		unknown := ""
		for _, ts := range st.Types {
			if isUnknown(tenant, ts) {
				unknown = ts.Name
			}
		}
		if err := prom.counters(ctx, s.addr, tenant, types, unknown, full, &snap); err != nil {
			return snapshot{}, err
		}
		return snap, nil
	}
	for _, n := range ti.Faults {
		snap.faults += n
	}
	for _, ts := range st.Types {
		if !types[ts.Name] {
			continue
		}
		// A packet the tenant's classifier lane had no room for is
		// counted received on its UNKNOWN and dropped (classifier_busy):
		// overload, not a request the classifier typed.
		typed := ts.Received - min(ts.Received, ts.Drops.ClassifierBusy)
		snap.received += typed
		snap.types[ts.Name] += typed
		if isUnknown(tenant, ts) {
			snap.unknown += typed
		}
		d := ts.Drops
		snap.errors += d.App + d.Panic + d.TxError + d.ClassifierFault
	}
	if !full {
		return snap, nil
	}
	text, err := s.admin.Metrics(ctx)
	if err != nil {
		return snapshot{}, err
	}
	if snap.latency, err = latencies(text, types); err != nil {
		return snapshot{}, fmt.Errorf("%s: metrics: %w", s.addr, err)
	}
	return snap, nil
}

func findTenant(st *server.Status, name string) (server.TenantInfo, bool) {
	for _, ti := range st.Tenants {
		if ti.Name == name && !ti.Removed {
			return ti, true
		}
	}
	return server.TenantInfo{}, false
}

func tenantNames(st *server.Status) string {
	var names []string
	for _, ti := range st.Tenants {
		if !ti.Removed {
			names = append(names, ti.Name)
		}
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// tenantTypes names the tenant's types as the status and the metrics do:
// "tenant/TYPE", and on a server with one Wasm classifier also its
// UNKNOWN (type 0, shared by nobody else).
func tenantTypes(st *server.Status, tenant string) map[string]bool {
	m := map[string]bool{}
	for _, ts := range st.Types {
		if ts.Tenant == tenant {
			m[ts.Name] = true
		}
	}
	return m
}

// isUnknown reports whether ts is the tenant's UNKNOWN (its local type 0).
func isUnknown(tenant string, ts server.TypeStatus) bool {
	return ts.Tenant == tenant && ts.Local == 0
}

// latencies reads the per-type latency histograms of types from a
// Prometheus text exposition.
func latencies(text []byte, types map[string]bool) (map[string]histogram, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(text))
	if err != nil {
		return nil, err
	}
	out := map[string]histogram{}
	fam, ok := fams[latencyMetric]
	if !ok {
		return out, nil
	}
	for _, m := range fam.GetMetric() {
		var typ string
		for _, l := range m.GetLabel() {
			if l.GetName() == "type" {
				typ = l.GetValue()
			}
		}
		if !types[typ] || m.GetHistogram() == nil {
			continue
		}
		h := m.GetHistogram()
		var hist histogram
		for _, b := range h.GetBucket() {
			hist.bounds = append(hist.bounds, b.GetUpperBound())
			hist.counts = append(hist.counts, b.GetCumulativeCount())
		}
		hist.bounds = append(hist.bounds, math.Inf(1))
		hist.counts = append(hist.counts, h.GetSampleCount())
		out[typ] = hist
	}
	return out, nil
}

// window is what a server counted between two snapshots, or several
// servers (parts holds each one's).
type window struct {
	received, unknown, faults, errors uint64
	types                             map[string]uint64
	latency                           map[string]histogram
	dur                               time.Duration
	parts                             []window
}

// p999 is the baseline's p99.9 of typ: the highest of its servers' own
// (each with at least min answers), so that a server is judged against
// the spread the old module shows across the fleet in the same window;
// the pooled one when it is one server. ok is false without samples
// enough.
func (w window) p999(typ string, min uint64) (float64, bool) {
	if len(w.parts) == 0 {
		h := w.latency[typ]
		return h.quantile(0.999), h.count() >= min
	}
	best, ok := math.Inf(-1), false
	for _, p := range w.parts {
		if h := p.latency[typ]; h.count() >= min {
			best, ok = math.Max(best, h.quantile(0.999)), true
		}
	}
	return best, ok
}

func between(a, b snapshot) window {
	d := func(x, y uint64) uint64 { return y - min(x, y) }
	w := window{received: d(a.received, b.received), unknown: d(a.unknown, b.unknown), faults: d(a.faults, b.faults),
		errors: d(a.errors, b.errors), types: map[string]uint64{}, latency: map[string]histogram{}, dur: b.at.Sub(a.at)}
	for typ, n := range b.types {
		w.types[typ] = d(a.types[typ], n)
	}
	for typ, h := range b.latency {
		w.latency[typ] = h.sub(a.latency[typ])
	}
	return w
}

// plus adds windows (the baseline servers').
func (w window) plus(o window) window {
	out := window{received: w.received + o.received, unknown: w.unknown + o.unknown, faults: w.faults + o.faults,
		errors: w.errors + o.errors, types: map[string]uint64{}, latency: map[string]histogram{}, dur: max(w.dur, o.dur)}
	for _, src := range []map[string]uint64{w.types, o.types} {
		for typ, n := range src {
			out.types[typ] += n
		}
	}
	for typ, h := range w.latency {
		out.latency[typ] = h
	}
	for typ, h := range o.latency {
		out.latency[typ] = out.latency[typ].add(h)
	}
	out.parts = append(append(out.parts, w.partsOrSelf()...), o.partsOrSelf()...)
	return out
}

func (w window) partsOrSelf() []window {
	if len(w.parts) > 0 {
		return w.parts
	}
	if w.latency == nil {
		return nil // the empty window plus starts from
	}
	return []window{w}
}

// ratio is n/of, at most 1: the counters are read apart (a packet may be
// counted faulting before it is counted received), and a share of
// requests over 100% means nothing.
func ratio(n, of uint64) float64 {
	if of == 0 {
		return 0
	}
	return min(1, float64(n)/float64(of))
}
