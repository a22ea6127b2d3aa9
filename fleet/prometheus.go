package fleet

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	json "github.com/goccy/go-json"

	"github.com/persephone-go/psp/admin"
)

// promSource reads the servers' counters from a Prometheus server that
// scrapes them: the same series GET /metrics exports, at a moment, by
// instance (the admin address's host:port).
type promSource struct {
	base string
	http *http.Client
	// wait bounds how long a snapshot waits for a scrape at or after its
	// moment (see targets).
	wait time.Duration
}

// maxPromAnswer bounds a query's answer: one server's per-type series.
const maxPromAnswer = 64 << 20

// errorReasons are the drop reasons the analysis counts as errors.
var errorReasons = []string{"app", "panic", "tx_error", "classifier_fault"}

func newPromSource(base string, timeout time.Duration) (*promSource, error) {
	u, err := url.Parse(strings.TrimRight(strings.TrimSpace(base), "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("fleet: prometheus %q: want http://HOST:PORT", base)
	}
	if timeout <= 0 {
		timeout = admin.DefaultTimeout
	}
	return &promSource{base: u.String(), http: &http.Client{Timeout: timeout}, wait: promWait}, nil
}

// instance is the instance label Prometheus gives the server at admin
// address addr (the host:port it scrapes).
func instance(addr string) (string, error) {
	base, err := admin.ParseURL(addr)
	if err != nil {
		return "", err
	}
	u, err := url.Parse(base)
	if err != nil {
		return "", err
	}
	return u.Host, nil
}

// promSeries is one series of a range selector's answer: its raw
// samples, oldest first.
type promSeries struct {
	Metric map[string]string `json:"metric"`
	Values [][2]any          `json:"values"`
}

// promSample is a series' value, as counters reads it.
type promSample struct {
	Metric map[string]string
	Value  float64
}

// selectRange runs a range selector (NAME{...}[RANGE]) evaluated now: the
// raw samples scraped in that range, without staleness markers.
func (p *promSource) selectRange(ctx context.Context, q string) ([]promSeries, error) {
	v := url.Values{"query": {q}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.base+"/api/v1/query?"+v.Encode(), nil)
	if err != nil {
		return nil, fmt.Errorf("prometheus: %w", err)
	}
	resp, err := p.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("prometheus: %w (is it running at %s?)", err, p.base)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxPromAnswer+1))
	if err != nil {
		return nil, fmt.Errorf("prometheus: read: %w", err)
	}
	if len(body) > maxPromAnswer {
		return nil, fmt.Errorf("prometheus: answer larger than %d bytes", maxPromAnswer)
	}
	var ans struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			ResultType string       `json:"resultType"`
			Result     []promSeries `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &ans); err != nil {
		return nil, fmt.Errorf("prometheus: %s: decode: %w", resp.Status, err)
	}
	if ans.Status != "success" {
		return nil, fmt.Errorf("prometheus: %s: %s", resp.Status, ans.Error)
	}
	if ans.Data.ResultType != "matrix" {
		return nil, fmt.Errorf("prometheus: a %s, want a matrix", ans.Data.ResultType)
	}
	return ans.Data.Result, nil
}

// firstAtOrAfter returns the series' first sample scraped at or after t.
func (s promSeries) firstAtOrAfter(t time.Time) (float64, bool) {
	at := float64(t.UnixNano()) / 1e9
	for _, v := range s.Values {
		ts, _ := v[0].(float64)
		if ts < at {
			continue
		}
		str, _ := v[1].(string)
		f, err := strconv.ParseFloat(str, 64)
		return f, err == nil
	}
	return 0, false
}

// last returns the series' last sample.
func (s promSeries) last() (float64, bool) {
	if len(s.Values) == 0 {
		return 0, false
	}
	str, _ := s.Values[len(s.Values)-1][1].(string)
	f, err := strconv.ParseFloat(str, 64)
	return f, err == nil
}

// promWait is the least a snapshot waits for Prometheus to scrape the
// server after its moment; targets raises it to two of the longest scrape
// interval of the servers' targets, plus 5 s.
const promWait = 15 * time.Second

// maxTargetsAnswer bounds /api/v1/targets' answer.
const maxTargetsAnswer = 64 << 20

// targets checks, before anything changes, that Prometheus scrapes each
// server (a target whose instance label is its admin address) and that
// the last scrape of each did not fail, and sets how long a snapshot
// waits for a scrape from their intervals.
func (p *promSource) targets(ctx context.Context, addrs []string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.base+"/api/v1/targets?state=active", nil)
	if err != nil {
		return fmt.Errorf("prometheus: %w", err)
	}
	resp, err := p.http.Do(req)
	if err != nil {
		return fmt.Errorf("prometheus: %w (is it running at %s?)", err, p.base)
	}
	defer resp.Body.Close()
	var ans struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			ActiveTargets []struct {
				Labels         map[string]string `json:"labels"`
				Health         string            `json:"health"`
				LastError      string            `json:"lastError"`
				ScrapeInterval string            `json:"scrapeInterval"`
			} `json:"activeTargets"`
		} `json:"data"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxTargetsAnswer)).Decode(&ans); err != nil {
		return fmt.Errorf("prometheus: targets: %s: decode: %w", resp.Status, err)
	}
	if ans.Status != "success" {
		return fmt.Errorf("prometheus: targets: %s: %s", resp.Status, ans.Error)
	}
	var known []string
	for _, t := range ans.Data.ActiveTargets {
		known = append(known, t.Labels["instance"])
	}
	for _, addr := range addrs {
		inst, err := instance(addr)
		if err != nil {
			return err
		}
		found := false
		for _, t := range ans.Data.ActiveTargets {
			if t.Labels["instance"] != inst {
				continue
			}
			found = true
			if t.Health == "down" {
				return fmt.Errorf("prometheus at %s: its last scrape of %s failed: %s (with tokens, a scrape needs one that may read: authorization: {credentials_file: FILE})", p.base, inst, t.LastError)
			}
			if d, err := time.ParseDuration(t.ScrapeInterval); err == nil {
				p.wait = max(p.wait, 2*d+5*time.Second)
			}
		}
		if !found {
			if len(known) > 5 {
				known = append(known[:5], "...")
			}
			return fmt.Errorf("prometheus at %s scrapes no target with instance=%q (it scrapes %s): scrape each server's admin address", p.base, inst, strings.Join(known, ", "))
		}
	}
	return nil
}

// samples returns, for each series of the metrics names of the server at
// addr, its first value scraped at or after t, waiting (up to p.wait)
// for a scrape that late of every series found (a series still missing
// then would count zero, and a window from it all the server ever
// counted): a window between two such scrapes holds what
// the server counted between them, never a value older than the moment
// asked for (a failed scrape, or one in flight, would give one). Without
// wait it returns the last values scraped in the two seconds before t,
// or none (a bake's progress, read without holding it up).
func (p *promSource) samples(ctx context.Context, addr string, names []string, t time.Time, wait bool) ([]promSample, error) {
	inst, err := instance(addr)
	if err != nil {
		return nil, err
	}
	deadline := t.Add(p.wait)
	for {
		var out []promSample
		fresh, missing := false, false
		for _, name := range names {
			// The range reaches a little before t: a series whose first
			// sample after t is its first at all is still found.
			rng := time.Since(t) + 2*time.Second
			q := fmt.Sprintf(`%s{instance=%q}[%dms]`, name, inst, rng.Milliseconds())
			series, err := p.selectRange(ctx, q)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", addr, err)
			}
			for _, s := range series {
				v, ok := s.firstAtOrAfter(t)
				if !wait {
					v, ok = s.last()
				}
				if !ok {
					// Not scraped since t yet (the names are asked one
					// after another: a scrape may land between them).
					missing = true
					continue
				}
				fresh = true
				if s.Metric == nil {
					s.Metric = map[string]string{}
				}
				s.Metric["__name__"] = name
				out = append(out, promSample{Metric: s.Metric, Value: v})
			}
		}
		if (fresh && !missing) || !wait {
			return out, nil
		}
		if time.Now().After(deadline) {
			if fresh {
				return out, nil // a series no longer scraped counts zero
			}
			return nil, fmt.Errorf("%s: prometheus scraped no psp series of instance %q from %s to %s (does it scrape the server as that target?)",
				addr, inst, t.Format("15:04:05.000"), time.Now().Format("15:04:05.000"))
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// counters fills snap's counters for the tenant's types (types, the
// tenant's UNKNOWN named unknown) from Prometheus: for a full snapshot
// (one that bounds a window) the first values scraped of the server at
// addr at or after snap.at, with its latency histograms; else the last
// ones scraped (see samples). A series not found counts zero.
func (p *promSource) counters(ctx context.Context, addr, tenant string, types map[string]bool, unknown string, full bool, snap *snapshot) error {
	names := []string{"psp_type_requests_received_total", "psp_type_requests_dropped_total", "psp_classifier_faults_total"}
	if full {
		names = append(names, latencyMetric+"_bucket", latencyMetric+"_count")
	}
	res, err := p.samples(ctx, addr, names, snap.at, full)
	if err != nil {
		return err
	}
	withLatency := full
	isError := map[string]bool{}
	for _, r := range errorReasons {
		isError[r] = true
	}
	busy := map[string]uint64{} // per type: received, never typed (see take)
	buckets := map[string]map[float64]uint64{}
	counts := map[string]uint64{}
	for _, s := range res {
		v := s.Value
		if math.IsNaN(v) || v < 0 {
			continue
		}
		n := uint64(v)
		typ := s.Metric["type"]
		switch s.Metric["__name__"] {
		case "psp_type_requests_received_total":
			if types[typ] {
				snap.received += n
				snap.types[typ] += n
				if typ == unknown {
					snap.unknown += n
				}
			}
		case "psp_type_requests_dropped_total":
			switch {
			case !types[typ]:
			case isError[s.Metric["reason"]]:
				snap.errors += n
			case s.Metric["reason"] == "classifier_busy":
				busy[typ] += n
			}
		case "psp_classifier_faults_total":
			if s.Metric["tenant"] == tenant {
				snap.faults += n
			}
		case latencyMetric + "_bucket":
			if !types[typ] {
				continue
			}
			le, err := strconv.ParseFloat(s.Metric["le"], 64)
			if err != nil {
				continue
			}
			if buckets[typ] == nil {
				buckets[typ] = map[float64]uint64{}
			}
			buckets[typ][le] = n
		case latencyMetric + "_count":
			if types[typ] {
				counts[typ] = n
			}
		}
	}
	for typ, n := range busy {
		n = min(n, snap.types[typ])
		snap.types[typ] -= n
		snap.received -= n
		if typ == unknown {
			snap.unknown -= n
		}
	}
	if withLatency {
		snap.latency = map[string]histogram{}
		for typ, bs := range buckets {
			var h histogram
			les := make([]float64, 0, len(bs))
			for le := range bs {
				if !math.IsInf(le, 1) {
					les = append(les, le)
				}
			}
			sort.Float64s(les)
			for _, le := range les {
				h.bounds = append(h.bounds, le)
				h.counts = append(h.counts, bs[le])
			}
			h.bounds = append(h.bounds, math.Inf(1))
			h.counts = append(h.counts, counts[typ])
			snap.latency[typ] = h
		}
	}
	return nil
}
