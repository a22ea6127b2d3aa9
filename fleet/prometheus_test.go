package fleet

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestPrometheusTargets: before a rollout changes anything, Prometheus's
// targets say whether it scrapes each server and whether the last scrape
// failed (a scrape without the token is refused 401); a snapshot waits
// for a scrape two of the longest interval, plus 5 s.
func TestPrometheusTargets(t *testing.T) {
	target := func(instance, health, lastError, interval string) string {
		return fmt.Sprintf(`{"labels":{"instance":%q,"job":"psp"},"health":%q,"lastError":%q,"scrapeInterval":%q}`, instance, health, lastError, interval)
	}
	serve := func(targets ...string) string {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/api/v1/targets" {
				http.NotFound(w, r)
				return
			}
			fmt.Fprintf(w, `{"status":"success","data":{"activeTargets":[%s],"droppedTargets":[]}}`, strings.Join(targets, ","))
		}))
		t.Cleanup(srv.Close)
		return srv.URL
	}
	servers := []string{"127.0.0.1:9091", "127.0.0.1:9092"}
	for _, tc := range []struct {
		name    string
		targets []string
		err     string
		wait    time.Duration
	}{
		{"both up", []string{target("127.0.0.1:9091", "up", "", "15s"), target("127.0.0.1:9092", "unknown", "", "1m")}, "", 125 * time.Second},
		{"short intervals", []string{target("127.0.0.1:9091", "up", "", "1s"), target("127.0.0.1:9092", "up", "", "1s")}, "", promWait},
		{"one not scraped", []string{target("127.0.0.1:9091", "up", "", "15s"), target("10.0.0.7:9092", "up", "", "15s")},
			`scrapes no target with instance="127.0.0.1:9092" (it scrapes 127.0.0.1:9091, 10.0.0.7:9092)`, 0},
		{"scraped without the token", []string{target("127.0.0.1:9091", "up", "", "15s"), target("127.0.0.1:9092", "down", "server returned HTTP status 401 Unauthorized", "15s")},
			"its last scrape of 127.0.0.1:9092 failed: server returned HTTP status 401 Unauthorized (with tokens, a scrape needs one", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := newPromSource(serve(tc.targets...), time.Second)
			if err != nil {
				t.Fatal(err)
			}
			err = p.targets(context.Background(), servers)
			switch {
			case tc.err == "" && (err != nil || p.wait != tc.wait):
				t.Fatalf("targets: %v, wait %v (want %v)", err, p.wait, tc.wait)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Fatalf("targets: %v, want %q", err, tc.err)
			}
		})
	}
	// A rollout that Prometheus cannot serve changes nothing.
	addr := startServer(t, "tok")
	p := Plan{Servers: []string{addr}, Tenant: "default", Bake: time.Second, Token: "tok", Prometheus: serve()}
	before, _ := Inspect(context.Background(), p)
	if _, err := Run(context.Background(), p, module(t, "wat/pspheader.wasm"), nil); err == nil || !strings.Contains(err.Error(), "nothing was changed") {
		t.Fatalf("rollout with a Prometheus scraping nothing: %v", err)
	}
	if after, _ := Inspect(context.Background(), p); after[0] != before[0] {
		t.Fatalf("the server changed: %+v, was %+v", after[0], before[0])
	}
}
