package server

import (
	"bufio"
	"bytes"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	json "github.com/goccy/go-json"

	"github.com/persephone-go/psp/internal/testenv"
)

// fileLines decodes the JSON lines of path and its rotated path.1.
func fileLines(t *testing.T, path string) (lines []map[string]any, bytes int64) {
	t.Helper()
	for _, p := range []string{path + ".1", path} {
		b, err := os.ReadFile(p)
		if os.IsNotExist(err) {
			continue
		} else if err != nil {
			t.Fatal(err)
		}
		bytes += int64(len(b))
		sc := bufio.NewScanner(strings.NewReader(string(b)))
		for sc.Scan() {
			var m map[string]any
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				t.Fatalf("%s: line %q: %v", p, sc.Text(), err)
			}
			lines = append(lines, m)
		}
	}
	return lines, bytes
}

// TestAuditKeepsChanges: a flood of refused credentials (before the split,
// 10,500 wrong-token reads a second left no change in a log of two
// files) from more sources than are told apart, of every kind (wrong and
// missing tokens, reads and changes, tenant tokens on other tenants),
// with refused swaps of a tenant's own beside it, pushes no change out of
// the audit log: changes have a file of their own, and the refused
// credentials are counted per source and interval, every one of them
// accounted for in a line or a count.
func TestAuditKeepsChanges(t *testing.T) {
	dir := t.TempDir()
	cfg := tenantConfig(t)
	cfg.Admin.AuditLog = filepath.Join(dir, "audit.log")
	cfg.Admin.AuditLogMaxBytes = 64 << 10
	r, _ := startLogged(t, cfg)
	h := r.srv.Handler()
	wasm, _ := os.ReadFile(exampleWasm(t, "pspheader.wasm"))
	req := func(method, path, token, remote string, body []byte) int {
		q := httptest.NewRequest(method, path, bytes.NewReader(body))
		q.RemoteAddr = remote
		if token != "" {
			q.Header.Set("Authorization", "Bearer "+token)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, q)
		return rec.Code
	}
	changes := []struct {
		method, path, token string
		body                []byte
		code                int
	}{
		{"PUT", "/tenants/b/classifier", "b-secret", wasm, 200},
		{"POST", "/tenants/b/rollback", "operator-secret", nil, 200},
		{"POST", "/tenants", "operator-secret", []byte(`{"name":"c","ports":[7003]}`), 201},
		{"PATCH", "/tenants/c", "operator-secret", []byte(`{"ports":[7004]}`), 200},
		{"DELETE", "/tenants/c", "operator-secret", nil, 204},
	}
	for _, c := range changes {
		if got := req(c.method, c.path, c.token, "198.51.100.1:1", c.body); got != c.code {
			t.Fatalf("%s %s: %d, want %d", c.method, c.path, got, c.code)
		}
	}

	// The flood: 40,000 refused credentials from 1,500 IPv4 hosts and
	// 300 IPv6 ones (two addresses in each /64), and 500 refused swaps of
	// a tenant's own (a module that does not compile).
	floods := []struct{ method, path, token string }{
		{"GET", "/status", "wrong"}, {"GET", "/metrics", ""}, {"PUT", "/tenants/b/classifier", "nope"},
		{"DELETE", "/tenants/a", "a-secret"}, {"PUT", "/tenants/a/classifier", "b-secret"},
	}
	const refusals = 40000
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := w; i < refusals; i += 4 {
				f := floods[i%len(floods)]
				remote := fmt.Sprintf("203.0.%d.%d:%d", i%1500/250, i%1500%250, 40000+i%7)
				if i%1800 >= 1500 {
					remote = fmt.Sprintf("[2001:db8:%x::%d]:443", i%300, 1+i%2)
				}
				if code := req(f.method, f.path, f.token, remote, nil); code != 401 && code != 403 {
					t.Errorf("%s %s: %d", f.method, f.path, code)
					return
				}
			}
		})
	}
	for range 500 {
		if code := req("PUT", "/tenants/b/classifier", "b-secret", "198.51.100.2:1", []byte("\x00asm not a module")); code != 400 {
			t.Fatalf("a module that does not compile: %d", code)
		}
	}
	wg.Wait()
	_, metrics := scrape(t, h, "operator-secret")
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}

	kept, changeBytes := fileLines(t, cfg.Admin.AuditLog)
	if len(kept) != len(changes) {
		t.Fatalf("%d lines in the changes' log, want the %d changes", len(kept), len(changes))
	}
	for i, c := range []string{"swap", "rollback", "tenant_add", "tenant_update", "tenant_remove"} {
		if kept[i]["event"] != c || kept[i]["outcome"] != "ok" {
			t.Errorf("change %d: %v, want %s ok", i, kept[i], c)
		}
	}
	refused, refusedBytes := fileLines(t, cfg.Admin.AuditLog+refusalsSuffix)
	t.Logf("changes: %d lines, %d bytes; refusals: %d lines kept (%d bytes, bound 2 x %d)", len(kept), changeBytes, len(refused), refusedBytes, cfg.Admin.AuditLogMaxBytes)
	if refusedBytes > 2*cfg.Admin.AuditLogMaxBytes {
		t.Errorf("the refusals' log holds %d bytes, past its bound", refusedBytes)
	}
	if got := sumMetric(metrics, "psp_admin_credentials_refused_total"); got != refusals {
		t.Errorf("psp_admin_credentials_refused_total %g, want %d", got, refusals)
	}
	// Told apart: 1,500 hosts, 300 /64s, each of the 5 kinds per source
	// over the interval: at most 1,024 keys a line of their own, the
	// rest one line for "more than 1,024 sources" per kind.
	folded := sumMetric(metrics, "psp_audit_refusals_folded_total")
	if written := refusals - folded; written > maxRefusalSources+float64(len(floods)) {
		t.Errorf("%g refused credentials written one line each, want at most %d", written, maxRefusalSources+len(floods))
	}
}

// TestAuditRefusalIntervals: refused credentials from one source make a
// line when the first comes and one per interval with the count of the
// others; every refusal is accounted for; IPv6 addresses count by /64.
func TestAuditRefusalIntervals(t *testing.T) {
	var buf testenv.SyncBuffer
	a := newAudit(&buf, &buf, 20*time.Millisecond)
	sent := 0
	for end := time.Now().Add(300 * time.Millisecond); time.Now().Before(end); sent++ {
		a.record(auditEvent{Event: "read", Outcome: "unauthorized", Principal: "anonymous", Remote: fmt.Sprintf("[2001:db8::%x]:1", sent%100)})
		time.Sleep(100 * time.Microsecond)
	}
	a.record(auditEvent{Event: "swap", Outcome: "ok", Tenant: "a", Remote: "[2001:db8::1]:1"})
	a.close()
	firsts, counted, other := 0, 0.0, 0
	for _, l := range auditLines(t, buf.String()) {
		switch {
		case l["msg"] == "admin refusals repeated":
			if l["source"] != "2001:db8::/64" {
				t.Errorf("counted by %v, want the /64", l["source"])
			}
			counted += l["count"].(float64)
		case l["outcome"] == "unauthorized":
			firsts++
		default:
			other++
		}
	}
	t.Logf("%d refusals in 300 ms: %d lines in full, %g counted", sent, firsts, counted)
	if firsts+int(counted) != sent || other != 1 {
		t.Errorf("%d written + %g counted of %d refusals; %d other lines, want 1", firsts, counted, sent, other)
	}
	if firsts < 2 || firsts > 16 {
		t.Errorf("%d lines in full over about 15 intervals of 20 ms, want one per interval (fewer when the timer is late)", firsts)
	}
}
