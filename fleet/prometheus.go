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
	return &promSource{base: u.String(), http: &http.Client{Timeout: timeout}}, nil
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

// promSample is one series of an instant query's answer.
type promSample struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"`
}

// query runs an instant query at t.
func (p *promSource) query(ctx context.Context, q string, t time.Time) ([]promSample, error) {
	v := url.Values{"query": {q}, "time": {strconv.FormatFloat(float64(t.UnixNano())/1e9, 'f', 3, 64)}}
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
			Result     []promSample `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &ans); err != nil {
		return nil, fmt.Errorf("prometheus: %s: decode: %w", resp.Status, err)
	}
	if ans.Status != "success" {
		return nil, fmt.Errorf("prometheus: %s: %s", resp.Status, ans.Error)
	}
	if ans.Data.ResultType != "vector" {
		return nil, fmt.Errorf("prometheus: a %s, want a vector", ans.Data.ResultType)
	}
	return ans.Data.Result, nil
}

func (s promSample) value() float64 {
	str, _ := s.Value[1].(string)
	v, err := strconv.ParseFloat(str, 64)
	if err != nil {
		return math.NaN()
	}
	return v
}

// counters fills snap's counters for the tenant's types (types, the
// tenant's UNKNOWN named unknown) with the values Prometheus holds for
// the server at addr at snap.at, and its latency histograms when
// withLatency. A series Prometheus has not scraped yet counts zero.
func (p *promSource) counters(ctx context.Context, addr, tenant string, types map[string]bool, unknown string, withLatency bool, snap *snapshot) error {
	inst, err := instance(addr)
	if err != nil {
		return err
	}
	names := "psp_type_requests_received_total|psp_type_requests_dropped_total|psp_classifier_faults_total"
	if withLatency {
		names += "|" + latencyMetric + "_bucket|" + latencyMetric + "_count"
	}
	q := fmt.Sprintf(`{__name__=~"%s",instance="%s"}`, names, inst)
	res, err := p.query(ctx, q, snap.at)
	if err != nil {
		return fmt.Errorf("%s: %w", addr, err)
	}
	if len(res) == 0 {
		return fmt.Errorf("%s: prometheus has no psp series of instance %q at %s (does it scrape the server as that target?)", addr, inst, snap.at.Format(time.RFC3339))
	}
	isError := map[string]bool{}
	for _, r := range errorReasons {
		isError[r] = true
	}
	buckets := map[string]map[float64]uint64{}
	counts := map[string]uint64{}
	for _, s := range res {
		v := s.value()
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
			if types[typ] && isError[s.Metric["reason"]] {
				snap.errors += n
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
