package server

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	json "github.com/goccy/go-json"

	"github.com/persephone-go/psp/internal/testenv"
	"github.com/persephone-go/psp/nic/memnic"
	"github.com/persephone-go/psp/wire"
)

// auditLines returns the audit log's lines, decoded.
func auditLines(t *testing.T, log string) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(log))
	for sc.Scan() {
		line := sc.Text()
		if !strings.Contains(line, `"psp-audit"`) {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("audit line %q: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

func writeToken(t *testing.T, tok string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(f, []byte(tok+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

const (
	portA = 7001
	portB = 7002
)

// tenantConfig is an in-memory multi-tenant server: a (native classifier,
// port 7001, 2 workers) and b (the C psp-header Wasm classifier, port 7002,
// the other 2), with an operator token and one token each.
func tenantConfig(t *testing.T) Config {
	cfg := memConfig()
	cfg.Admin.TokenFile = writeToken(t, "operator-secret")
	cfg.Tenants = []Tenant{
		{Name: "a", Ports: []uint16{portA}, Workers: 2, TokenFile: writeToken(t, "a-secret")},
		{Name: "b", Ports: []uint16{portB}, Classifier: exampleWasm(t, "pspheader.wasm"), TokenSHA256: TokenDigest("b-secret")},
	}
	return cfg
}

func startLogged(t *testing.T, cfg Config) (running, *testenv.SyncBuffer) {
	t.Helper()
	log := &testenv.SyncBuffer{}
	r := startWith(t, cfg, Options{Log: log})
	t.Cleanup(func() { r.stop() })
	return r, log
}

// exchange sends n requests to port and waits for their n replies.
func exchange(t *testing.T, dp *memnic.Dataplane, port uint16, n int, typ uint32) {
	t.Helper()
	peer := netip.MustParseAddrPort("10.0.0.9:1")
	for i := range n {
		for !dp.InjectPort(header(uint32(i), typ, 100), peer, port) {
			time.Sleep(50 * time.Microsecond)
		}
	}
	for i := range n {
		select {
		case <-dp.Replies():
		case <-time.After(10 * time.Second):
			t.Fatalf("port %d: %d replies of %d", port, i, n)
		}
	}
}

func tenantOf(t *testing.T, st Status, name string) TenantInfo {
	t.Helper()
	for _, ti := range st.Tenants {
		if ti.Name == name && !ti.Removed {
			return ti
		}
	}
	t.Fatalf("no tenant %q in %+v", name, st.Tenants)
	return TenantInfo{}
}

func do(t *testing.T, h http.Handler, method, path, token string, body []byte) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(method, path, bytes.NewReader(body))
	req.RemoteAddr = "192.0.2.7:4242"
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// TestMultiTenantServer: two tenants on their own ports, each with its
// share, types, counters, module identity and metrics.
func TestMultiTenantServer(t *testing.T) {
	r, _ := startLogged(t, tenantConfig(t))
	dp := r.srv.Dataplane().(*memnic.Dataplane)
	exchange(t, dp, portA, 30, wire.TypeShort)
	exchange(t, dp, portB, 20, wire.TypeLong)
	exchange(t, dp, 6789, 0, 0)
	peer := netip.MustParseAddrPort("10.0.0.9:1")
	dp.InjectPort(header(1, wire.TypeShort, 100), peer, 6789) // no default tenant: dropped
	time.Sleep(250 * time.Millisecond)
	st := getStatus(t, r.srv.Handler())
	a, b := tenantOf(t, st, "a"), tenantOf(t, st, "b")
	if !st.MultiTenant || !a.Native || a.Received != 30 || a.Answered != 30 || b.Received != 20 || b.Answered != 20 || st.Drops.NoTenant != 1 {
		t.Fatalf("status: multi %v, a %+v, b %+v, no tenant %d", st.MultiTenant, a, b, st.Drops.NoTenant)
	}
	if a.Share == nil || len(a.Share.HomeWorkers) != 2 || len(b.Share.HomeWorkers) != 2 || b.Share.Guarantee == 0 {
		t.Fatalf("shares: a %+v, b %+v", a.Share, b.Share)
	}
	wasm, _ := os.ReadFile(exampleWasm(t, "pspheader.wasm"))
	sum := sha256.Sum256(wasm)
	if b.SHA256 != hex.EncodeToString(sum[:]) || b.Size != len(wasm) || b.LoadedAt == "" || b.Version != 1 {
		t.Fatalf("b's module: %+v", b)
	}
	byName := map[string]TypeStatus{}
	for _, ts := range st.Types {
		byName[ts.Name] = ts
	}
	if byName["a/SHORT"].Answered != 30 || byName["b/LONG"].Answered != 20 {
		t.Fatalf("types %+v", st.Types)
	}
	if st.Received != st.Answered+st.Dropped+st.InFlight {
		t.Fatalf("received %d != answered %d + dropped %d + in flight %d", st.Received, st.Answered, st.Dropped, st.InFlight)
	}
	rec := do(t, r.srv.Handler(), "GET", "/metrics", "operator-secret", nil)
	body := rec.Body.String()
	for _, want := range []string{`psp_tenant_requests_answered_total{tenant="a"} 30`, `psp_tenant_requests_received_total{tenant="b"} 20`,
		`psp_tenant_home_workers{tenant="a"} 2`, `psp_classifier_module_info{sha256="` + b.SHA256 + `",tenant="b"} 1`,
		`psp_requests_dropped_total{reason="no_tenant"} 1`, `psp_tenant_requests_dropped_total{reason="classifier_busy",tenant="b"} 0`} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	lintMetrics(t, body)
	if got := sumMetric(body, "psp_tenant_requests_answered_total"); got != float64(st.Answered) {
		t.Errorf("tenants answered %v, server %d", got, st.Answered)
	}
}

// TestCredentials: a tenant's token changes that tenant only, the
// operator's every one; every attempt is one audit line, and so is the
// first refused credential of each source, event, outcome and principal
// in an interval (the others are counted in one line when it ends).
func TestCredentials(t *testing.T) {
	r, log := startLogged(t, tenantConfig(t))
	h := r.srv.Handler()
	random, _ := os.ReadFile(exampleWasm(t, "random.wasm"))
	for _, c := range []struct {
		token, tenant string
		code          int
		outcome       string
	}{
		{"", "b", 401, "unauthorized"},
		{"wrong", "b", 401, "unauthorized"},
		{"a-secret", "b", 403, "forbidden"},
		{"b-secret", "b", 200, "ok"},
		{"operator-secret", "b", 200, "ok"},
		{"b-secret", "a", 403, "forbidden"},
		{"a-secret", "a", 409, "refused"}, // a runs the native classifier
		{"b-secret", "nobody", 403, "forbidden"},
		{"operator-secret", "nobody", 404, "refused"},
	} {
		rec := do(t, h, "PUT", "/tenants/"+c.tenant+"/classifier", c.token, random)
		if rec.Code != c.code {
			t.Errorf("token %q on %s: %d %s, want %d", c.token, c.tenant, rec.Code, rec.Body, c.code)
		}
	}
	// Lifecycle changes need the operator.
	if rec := do(t, h, "DELETE", "/tenants/b", "b-secret", nil); rec.Code != 403 {
		t.Errorf("b removing itself: %d", rec.Code)
	}
	if rec := do(t, h, "POST", "/tenants/b/rollback", "b-secret", nil); rec.Code != 200 {
		t.Errorf("b's rollback: %d %s", rec.Code, rec.Body)
	}
	lines := auditLines(t, log.String())
	if len(lines) != 9 {
		t.Fatalf("%d audit lines, want 9:\n%s", len(lines), log)
	}
	sum := sha256.Sum256(random)
	want := []struct{ event, tenant, principal, outcome string }{
		{"swap", "b", "", "unauthorized"}, {"swap", "b", "tenant:a", "forbidden"},
		{"swap", "b", "tenant:b", "ok"}, {"swap", "b", "operator", "ok"}, {"swap", "a", "tenant:b", "forbidden"},
		{"swap", "a", "tenant:a", "refused"}, {"swap", "nobody", "operator", "refused"},
		{"tenant_remove", "b", "tenant:b", "forbidden"}, {"rollback", "b", "tenant:b", "ok"},
	}
	for i, w := range want {
		l := lines[i]
		if l["event"] != w.event || l["tenant"] != w.tenant || l["outcome"] != w.outcome || l["remote"] != "192.0.2.7:4242" ||
			(w.principal != "" && l["principal"] != w.principal) {
			t.Errorf("audit line %d: %v, want %+v", i, l, w)
		}
	}
	if l := lines[2]; l["sha256"] != hex.EncodeToString(sum[:]) || l["size"] != float64(len(random)) || l["version"] != float64(2) {
		t.Errorf("audit line of the accepted swap: %v", l)
	}

	st := getStatus(t, h)
	if b := tenantOf(t, st, "b"); b.Version != 4 || b.SHA256 != hex.EncodeToString(sum[:]) {
		t.Errorf("b after two swaps and a rollback: version %d sha %s", b.Version, b.SHA256)
	}
	// Stopping ends the interval: the refusals told in no line of their
	// own are counted.
	r.stop()
	repeated := map[string]float64{}
	for _, l := range auditLines(t, log.String()) {
		if l["msg"] == "admin refusals repeated" {
			repeated[fmt.Sprint(l["event"], "/", l["outcome"], "/", l["principal"], "/", l["source"])] = l["count"].(float64)
		}
	}
	if want := map[string]float64{"swap/unauthorized/anonymous/192.0.2.7": 1, "swap/forbidden/tenant:b/192.0.2.7": 1}; !maps.Equal(repeated, want) {
		t.Errorf("repeated refusals %v, want %v", repeated, want)
	}
}

func TestTokenFilesChecked(t *testing.T) {
	cfg := tenantConfig(t)
	if err := os.Chmod(cfg.Tenants[0].TokenFile, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := New(context.Background(), cfg, Options{}); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Errorf("a token file others may read: %v", err)
	}
	cfg = tenantConfig(t)
	cfg.Admin.TokenFile, cfg.Admin.TokenSHA256 = "", "not hex"
	if _, err := New(context.Background(), cfg, Options{}); !errors.Is(err, ErrConfig) {
		t.Errorf("a bad operator digest: %v", err)
	}
}

// TestTenantLifecycleHTTP adds, updates and removes a tenant through the
// admin API while requests flow; every packet stays accounted for.
// TestDotNamesRefused: a tenant named "." or ".." (a path segment, which
// the admin API's mux cleans away) is refused where it enters, so none
// exists that could not be updated or removed; dots beside other
// characters stay allowed.
func TestDotNamesRefused(t *testing.T) {
	r, _ := startLogged(t, tenantConfig(t))
	h := r.srv.Handler()
	wasm, _ := os.ReadFile(exampleWasm(t, "pspheader.wasm"))
	for i, name := range []string{".", "..", "...", "a.b"} {
		add, _ := json.Marshal(Tenant{Name: name, Ports: []uint16{uint16(7100 + i)}, Wasm: wasm, Workers: 1})
		rec := do(t, h, "POST", "/tenants", "operator-secret", add)
		if ok := strings.Trim(name, ".") != ""; ok != (rec.Code == 201) {
			t.Errorf("add %q: %d %s", name, rec.Code, rec.Body)
		}
	}
	if err := validTenantName(".."); err == nil || !strings.Contains(err.Error(), "other than '.'") {
		t.Errorf("validTenantName(\"..\") = %v", err)
	}
	if err := validTenantName(".c."); err != nil {
		t.Errorf("validTenantName(\".c.\") = %v", err)
	}
}

func TestTenantLifecycleHTTP(t *testing.T) {
	r, log := startLogged(t, tenantConfig(t))
	h := r.srv.Handler()
	dp := r.srv.Dataplane().(*memnic.Dataplane)
	wasm, _ := os.ReadFile(exampleWasm(t, "pspheader.wasm"))
	add, _ := json.Marshal(Tenant{Name: "c", Ports: []uint16{7003}, Wasm: wasm, Workers: 1, TokenSHA256: TokenDigest("c-secret")})
	if rec := do(t, h, "POST", "/tenants", "a-secret", add); rec.Code != 403 {
		t.Fatalf("a adding a tenant: %d", rec.Code)
	}
	rec := do(t, h, "POST", "/tenants", "operator-secret", add)
	if rec.Code != 201 {
		t.Fatalf("add c: %d %s", rec.Code, rec.Body)
	}
	var c TenantInfo
	json.Unmarshal(rec.Body.Bytes(), &c)
	if c.Name != "c" || c.Version != 1 || c.SHA256 == "" {
		t.Fatalf("added: %+v", c)
	}
	if rec := do(t, h, "POST", "/tenants", "operator-secret", add); rec.Code != 409 {
		t.Fatalf("adding c twice: %d", rec.Code)
	}
	exchange(t, dp, 7003, 25, wire.TypeShort)
	if rec := do(t, h, "PUT", "/tenants/c/classifier", "c-secret", wasm); rec.Code != 200 {
		t.Fatalf("c's own swap: %d %s", rec.Code, rec.Body)
	}
	upd := []byte(`{"ports": [7004], "max_workers": 2}`)
	if rec := do(t, h, "PATCH", "/tenants/c", "operator-secret", upd); rec.Code != 200 {
		t.Fatalf("update c: %d %s", rec.Code, rec.Body)
	}
	exchange(t, dp, 7004, 10, wire.TypeLong)
	if rec := do(t, h, "PATCH", "/tenants/c", "operator-secret", []byte(`{"ports": [7001]}`)); rec.Code != 400 {
		t.Fatalf("c taking a's port: %d %s", rec.Code, rec.Body)
	}
	if rec := do(t, h, "DELETE", "/tenants/c", "operator-secret", nil); rec.Code != 204 {
		t.Fatalf("remove c: %d %s", rec.Code, rec.Body)
	}
	if rec := do(t, h, "PUT", "/tenants/c/classifier", "c-secret", wasm); rec.Code != 401 {
		t.Fatalf("removed c's token: %d", rec.Code)
	}
	peer := netip.MustParseAddrPort("10.0.0.9:1")
	for range 5 {
		dp.InjectPort(header(1, wire.TypeShort, 100), peer, 7004)
	}
	time.Sleep(250 * time.Millisecond)
	st := getStatus(t, h)
	var removed TenantInfo
	for _, ti := range st.Tenants {
		if ti.Name == "c" {
			removed = ti
		}
	}
	if !removed.Removed || removed.Answered != 35 || st.Drops.NoTenant != 5 {
		t.Fatalf("removed c: %+v; no tenant %d", removed, st.Drops.NoTenant)
	}
	if st.Received != st.Answered+st.Dropped+st.InFlight {
		t.Fatalf("received %d != answered %d + dropped %d + in flight %d", st.Received, st.Answered, st.Dropped, st.InFlight)
	}
	events := map[string]int{}
	for _, l := range auditLines(t, log.String()) {
		events[l["event"].(string)+"/"+l["outcome"].(string)]++
	}
	if events["tenant_add/ok"] != 1 || events["tenant_add/forbidden"] != 1 || events["tenant_add/refused"] != 1 ||
		events["tenant_update/ok"] != 1 || events["tenant_update/refused"] != 1 || events["tenant_remove/ok"] != 1 || events["swap/unauthorized"] != 1 {
		t.Fatalf("audit events %v", events)
	}
	// A server of one classifier takes a tenant like any other (its
	// default tenant keeps every other port); under a policy without
	// tenant shares the tenants are fixed: 409, saying why.
	single := memConfig()
	single.Admin.TokenFile = writeToken(t, "operator-secret")
	r2, _ := startLogged(t, single)
	if rec := do(t, r2.srv.Handler(), "POST", "/tenants", "operator-secret", add); rec.Code != 201 {
		t.Fatalf("adding a tenant to a server of one classifier: %d %s", rec.Code, rec.Body)
	}
	fixed := memConfig()
	fixed.Policy = "cfcfs"
	fixed.Admin.TokenFile = writeToken(t, "operator-secret")
	r3, _ := startLogged(t, fixed)
	if rec := do(t, r3.srv.Handler(), "POST", "/tenants", "operator-secret", add); rec.Code != 409 || !strings.Contains(rec.Body.String(), "darc") {
		t.Fatalf("adding a tenant under cfcfs: %d %s, want 409 naming the policies that take tenants", rec.Code, rec.Body)
	}
	_ = io.Discard
}

// TestTenantChurnHTTP: adding and removing a
// 1,024-type Wasm tenant 100 times through the admin API succeeds every
// time (type ids are reused) and keeps the status, the metrics and the
// heap flat.
func TestTenantChurnHTTP(t *testing.T) {
	if testing.Short() {
		t.Skip("100 tenant cycles")
	}
	cfg := memConfig()
	cfg.Buffers, cfg.BufSize = 1<<16, 128 // a pool that can guarantee 1,024 types a part each
	cfg.Admin.TokenFile = writeToken(t, "operator-secret")
	r, _ := startLogged(t, cfg)
	h := r.srv.Handler()
	dp := r.srv.Dataplane().(*memnic.Dataplane)
	wasm, _ := os.ReadFile(exampleWasm(t, "pspheader.wasm"))
	peer := netip.MustParseAddrPort("10.0.0.7:5000")
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	var heapAt30 uint64
	var typesAt30, metricsAt30 int
	cycles := 100
	if raceDetector {
		cycles = 40 // still past 30 and keepRemoved several times over
	}
	for i := range cycles {
		name := fmt.Sprintf("big%d", i)
		add, _ := json.Marshal(Tenant{Name: name, Ports: []uint16{7003}, Wasm: wasm, MaxTypes: 1024, Weight: 1})
		if rec := do(t, h, "POST", "/tenants", "operator-secret", add); rec.Code != 201 {
			t.Fatalf("cycle %d: add: %d %s", i, rec.Code, rec.Body)
		}
		for j := range 2 {
			for !dp.InjectPort(header(uint32(i*2+j), wire.TypeShort, 10), peer, 7003) {
				time.Sleep(50 * time.Microsecond)
			}
			select {
			case <-dp.Replies():
			case <-time.After(10 * time.Second):
				t.Fatalf("cycle %d: no reply", i)
			}
		}
		if rec := do(t, h, "DELETE", "/tenants/"+name, "operator-secret", nil); rec.Code != 204 {
			t.Fatalf("cycle %d: remove: %d %s", i, rec.Code, rec.Body)
		}
		if i == 30 {
			time.Sleep(20 * time.Millisecond) // a stats pass retires what it can
			heapAt30, typesAt30 = heap(), len(r.srv.Dispatcher().Stats().Types)
			metricsAt30 = len(do(t, h, "GET", "/metrics", "operator-secret", nil).Body.String())
		}
	}
	time.Sleep(20 * time.Millisecond)
	st := getStatus(t, h)
	// At most the default tenant's, and the ranges of the removed tenants
	// whose counters stay (8) and of one or two not retired yet.
	if n := len(r.srv.Dispatcher().Stats().Types); n > typesAt30+1024 || n > len(headerTypes())+11*1024 {
		t.Errorf("type space %d after %d cycles, %d after 30", n, cycles, typesAt30)
	}
	if n := len(st.Tenants); n > 1+10 {
		t.Errorf("%d tenants in the status after %d cycles", n, cycles)
	}
	if m := len(do(t, h, "GET", "/metrics", "operator-secret", nil).Body.String()); m > metricsAt30+metricsAt30/4 {
		t.Errorf("/metrics %d bytes after %d cycles, %d after 30", m, cycles, metricsAt30)
	}
	if hp := heap(); hp > heapAt30+heapAt30/4 {
		t.Errorf("heap %d MiB after %d cycles, %d MiB after 30", hp>>20, cycles, heapAt30>>20)
	}
}

// TestDefaultTenantOwnViews: the default tenant of a server of one
// classifier, given a token of its own, sees its own types in /status and
// /metrics (their names carry no "default/" prefix), and each type says
// whose it is.
func TestDefaultTenantOwnViews(t *testing.T) {
	cfg := memConfig()
	cfg.Admin.TokenFile = writeToken(t, "operator-secret")
	r := start(t, cfg)
	h := r.srv.Handler()
	patch, _ := json.Marshal(TenantUpdate{TokenSHA256: ptr(TokenDigest("default-secret"))})
	if rec := do(t, h, "PATCH", "/tenants/default", "operator-secret", patch); rec.Code != 200 {
		t.Fatalf("give default a token: %d %s", rec.Code, rec.Body)
	}
	dp := r.srv.Dataplane().(*memnic.Dataplane)
	for i := range 5 {
		for !dp.Inject(header(uint32(i), wire.TypeShort, 10), netip.MustParseAddrPort("10.0.0.8:1")) {
			time.Sleep(50 * time.Microsecond)
		}
		<-dp.Replies()
	}
	time.Sleep(250 * time.Millisecond)
	st := getStatus(t, h)
	for _, ts := range st.Types {
		if ts.Tenant != DefaultTenant {
			t.Errorf("type %q belongs to %q, want %q", ts.Name, ts.Tenant, DefaultTenant)
		}
		if ts.Name == "SHORT" && ts.Local != ts.ID {
			t.Errorf("SHORT: local %d, id %d", ts.Local, ts.ID)
		}
	}
	body := do(t, h, "GET", "/metrics", "default-secret", nil).Body.String()
	for _, want := range []string{`psp_type_requests_answered_total{type="SHORT"} 5`, `psp_tenant_requests_answered_total{tenant="default"} 5`} {
		if !strings.Contains(body, want) {
			t.Errorf("the default tenant's /metrics lacks %s", want)
		}
	}
}

func ptr[T any](v T) *T { return &v }
