package server

import (
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"

	"github.com/persephone-go/psp/nic/memnic"
	"github.com/persephone-go/psp/wire"
)

// lintMetrics checks an exposition with the Prometheus client library's
// linter (the rules promtool check metrics applies).
func lintMetrics(t *testing.T, body string) {
	t.Helper()
	problems, err := promlint.New(strings.NewReader(body)).Lint()
	if err != nil {
		t.Fatalf("promlint: %v", err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
}

// sumMetric adds the values of every series of metric name in an exposition.
func sumMetric(body, name string) float64 {
	sum := 0.0
	for _, line := range strings.Split(body, "\n") {
		series, value, ok := strings.Cut(line, " ")
		if !ok || (series != name && !strings.HasPrefix(series, name+"{")) {
			continue
		}
		if v, err := strconv.ParseFloat(value, 64); err == nil {
			sum += v
		}
	}
	return sum
}

// TestStageHistogramsFromFirstRequest: a type the classifier declares has
// its counters and gauges at once, and its stage histograms from its first
// request (a classifier declaring 65,535 types made every scrape 982 MB of
// empty histograms).
func TestStageHistogramsFromFirstRequest(t *testing.T) {
	cfg := memConfig()
	cfg.Classifier = exampleWasm(t, "pspheader.wasm")
	r := start(t, cfg)
	defer r.stop()
	h := r.srv.Handler()
	scrape := func() string {
		time.Sleep(250 * time.Millisecond) // a stats interval
		body := do(t, h, "GET", "/metrics", "", nil).Body.String()
		lintMetrics(t, body)
		return body
	}
	histogram := func(body, typ string) bool {
		return strings.Contains(body, `psp_request_latency_seconds_count{type="`+typ+`"}`) ||
			strings.Contains(body, `psp_request_service_seconds_bucket{type="`+typ+`"`)
	}
	body := scrape()
	for _, typ := range []string{"default/SHORT", "default/GET"} {
		if !strings.Contains(body, `psp_type_requests_received_total{type="`+typ+`"} 0`) {
			t.Errorf("declared type %s: no received counter before any request", typ)
		}
		if histogram(body, typ) {
			t.Errorf("declared type %s: stage histograms before any request", typ)
		}
	}
	dp := r.srv.Dataplane().(*memnic.Dataplane)
	if !dp.Inject(header(1, wire.TypeShort, 10), netip.MustParseAddrPort("10.0.0.7:5000")) {
		t.Fatal("inject refused")
	}
	select {
	case <-dp.Replies():
	case <-time.After(10 * time.Second):
		t.Fatal("no reply")
	}
	body = scrape()
	if !strings.Contains(body, `psp_request_latency_seconds_count{type="default/SHORT"} 1`) {
		t.Errorf("SHORT answered once: no latency histogram")
	}
	if histogram(body, "default/GET") || !strings.Contains(body, `psp_type_requests_received_total{type="default/GET"} 0`) {
		t.Errorf("GET, still idle: histograms, or no counter")
	}
}
