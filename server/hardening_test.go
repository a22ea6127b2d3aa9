package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	json "github.com/goccy/go-json"

	"github.com/persephone-go/psp/darc"
	"github.com/persephone-go/psp/internal/testenv"
	"github.com/persephone-go/psp/nic/memnic"
	"github.com/persephone-go/psp/wire"
)

// TestHugeSharesRefused: the crash's two requests and
// the rest of the class (every numeric field of POST and PATCH at the
// ends of its range) are answered 400 or applied; the server never
// panics, keeps serving, and its shares stay sane.
func TestHugeSharesRefused(t *testing.T) {
	r, _ := startLogged(t, tenantConfig(t))
	h := r.srv.Handler()
	code := func(method, path, body string) int {
		return do(t, h, method, path, "operator-secret", []byte(body)).Code
	}
	// The reproduction.
	if c := code("PATCH", "/tenants/a", `{"weight":1e308,"buffers":1000}`); c != 400 {
		t.Errorf("PATCH weight 1e308: %d, want 400", c)
	}
	if c := code("POST", "/tenants", `{"name":"c","ports":[7003],"weight":1e308,"buffers":1000}`); c != 400 {
		t.Errorf("POST weight 1e308: %d, want 400", c)
	}
	bigs := []string{"1e308", "-1e308", "1.7976931348623157e308", "1e19", "9223372036854775807", "-9223372036854775808",
		"4294967296", "1e6", "1000001", "-1", "0.000001", "5e-324", "16777217", "65536", "1025"}
	for _, field := range []string{"weight", "workers", "max_workers", "buffers", "max_buffers"} {
		for _, v := range bigs {
			c := code("PATCH", "/tenants/a", fmt.Sprintf(`{%q:%s}`, field, v))
			if c != 200 && c != 400 {
				t.Errorf("PATCH %s=%s: %d", field, v, c)
			}
			c = code("POST", "/tenants", fmt.Sprintf(`{"name":"c","ports":[7003],%q:%s}`, field, v))
			switch c {
			case 201:
				if code("DELETE", "/tenants/c", "") != 204 {
					t.Fatalf("remove c after %s=%s", field, v)
				}
			case 400:
			default:
				t.Errorf("POST %s=%s: %d", field, v, c)
			}
		}
	}
	// A port list of every port, duplicates, port 0.
	var all []string
	for p := 1; p < 1<<16; p++ {
		all = append(all, fmt.Sprint(p))
	}
	for _, ports := range []string{strings.Join(all, ","), "7003,7003", "0", "7003," + strings.Repeat("7004,", 2000) + "7005"} {
		if c := code("POST", "/tenants", `{"name":"c","ports":[`+ports+`]}`); c != 400 {
			t.Errorf("POST ports [%.40s...]: %d, want 400", ports, c)
		}
	}
	// Durations past the cap (item 5): refused where they are parsed.
	for _, d := range []string{"2562047h", "9223372036854775807", "25h"} {
		dur, _ := time.ParseDuration(d)
		if d == "9223372036854775807" {
			dur = math.MaxInt64
		}
		body, _ := json.Marshal(Tenant{Name: "c", Ports: []uint16{7003}, ClassifierOptions: ClassifierOptions{TimeLimit: dur}})
		if c := code("POST", "/tenants", string(body)); c != 400 {
			t.Errorf("POST time_limit %s: %d, want 400", d, c)
		}
	}
	// Status is a snapshot published every stats interval (the first one
	// before Run): wait for one taken while running.
	st := getStatus(t, h)
	for deadline := time.Now().Add(5 * time.Second); !st.Running && time.Now().Before(deadline); st = getStatus(t, h) {
		time.Sleep(10 * time.Millisecond)
	}
	if !st.Running {
		t.Fatal("the server stopped")
	}
	home := 0
	for _, ti := range st.Tenants {
		if !ti.Removed && ti.Share != nil {
			home += len(ti.Share.HomeWorkers)
			if len(ti.Share.HomeWorkers) < 1 || math.IsNaN(ti.Share.Weight) || ti.Share.Weight > darc.MaxWeight {
				t.Errorf("tenant %s share %+v", ti.Name, ti.Share)
			}
		}
	}
	if home > st.Workers {
		t.Errorf("homes add up to %d of %d workers", home, st.Workers)
	}
}

// TestDurationsCapped (item 5): a deadline of 2562047h, and any other
// duration past MaxDuration, is refused by the config's validation (which
// psp serve's flags go through too).
func TestDurationsCapped(t *testing.T) {
	for name, set := range map[string]func(c *Config){
		"types deadline":  func(c *Config) { c.Types = map[string]TypeLimits{"SHORT": {Deadline: "2562047h"}} },
		"deadline_floor":  func(c *Config) { c.DeadlineFloor = 2562047 * time.Hour },
		"drain_timeout":   func(c *Config) { c.DrainTimeout = math.MaxInt64 },
		"negative drain":  func(c *Config) { c.DrainTimeout = math.MinInt64 },
		"spin":            func(c *Config) { c.Spin = 25 * time.Hour },
		"dispatcher_spin": func(c *Config) { c.DispatcherSpin = 25 * time.Hour },
		"in_place":        func(c *Config) { c.InPlace = math.MaxInt64 },
		"spin_tail":       func(c *Config) { c.App.SpinTail = 25 * time.Hour },
		"time_limit":      func(c *Config) { c.ClassifierOptions.TimeLimit = 25 * time.Hour },
		"breaker_backoff": func(c *Config) { c.ClassifierOptions.BreakerBackoff = math.MaxInt64 },
		"compile_timeout": func(c *Config) { c.ClassifierOptions.CompileTimeout = math.MaxInt64 },
		"deadline_factor": func(c *Config) { c.DeadlineFactor = 1e300 },
		"dilation NaN":    func(c *Config) { c.App.Dilation = math.NaN() },
		"dilation huge":   func(c *Config) { c.App.Dilation = 1e300 },
		"buffers":         func(c *Config) { c.Buffers = math.MaxInt },
	} {
		cfg := memConfig()
		set(&cfg)
		if err := cfg.Validate(); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: %v, want ErrConfig", name, err)
		}
	}
	cfg := memConfig()
	cfg.Types = map[string]TypeLimits{"SHORT": {Deadline: "24h"}}
	if err := cfg.Validate(); err != nil {
		t.Errorf("a deadline of 24h: %v", err)
	}
}

// countingReader counts the bytes read from it.
type countingReader struct {
	r io.Reader
	n atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// TestUnauthenticatedCostsNothing (item 2): a POST /tenants without a
// valid token has its body left unread, and its audit line is short
// whatever the request's path or body hold.
func TestUnauthenticatedCostsNothing(t *testing.T) {
	r, log := startLogged(t, tenantConfig(t))
	h := r.srv.Handler()
	name := strings.Repeat("n", 10<<20)
	body := &countingReader{r: strings.NewReader(`{"name":"` + name + `"}`)}
	for _, tok := range []string{"", "wrong", "a-secret"} {
		req := httptest.NewRequest("POST", "/tenants", body)
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != 401 && rec.Code != 403 {
			t.Errorf("token %q: %d", tok, rec.Code)
		}
	}
	if n := body.n.Load(); n != 0 {
		t.Errorf("%d bytes of an unauthenticated body read, want 0", n)
	}
	// A long path: bounded in the audit line.
	long := strings.Repeat("x", 1<<20)
	do(t, h, "DELETE", "/tenants/"+long, "", nil)
	do(t, h, "PUT", "/tenants/"+long+"/classifier", "wrong", nil)
	do(t, h, "GET", "/status", "", nil)
	lines := auditLines(t, log.String())
	if len(lines) != 5 { // the second anonymous POST is counted, not written
		t.Fatalf("%d audit lines, want 5", len(lines))
	}
	for _, l := range strings.Split(strings.TrimSpace(log.String()), "\n") {
		if strings.Contains(l, "psp-audit") && len(l) > 2048 {
			t.Errorf("an audit line of %d bytes: %.200s...", len(l), l)
		}
	}
}

// TestAuditLogRotates (item 2): the audit file never grows past its bound;
// one older file is kept.
func TestAuditLogRotates(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	f, err := openRotatingFile(path, 4096)
	if err != nil {
		t.Fatal(err)
	}
	a := newAudit(f, f, time.Hour)
	for i := range 1000 {
		a.record(auditEvent{Event: "swap", Tenant: strings.Repeat("t", 300), Outcome: "unauthorized", Remote: fmt.Sprint(i)})
	}
	f.Close()
	var total int64
	for _, p := range []string{path, path + ".1"} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Size() > 4096 {
			t.Errorf("%s: %d bytes, bound 4096", p, fi.Size())
		}
		total += fi.Size()
	}
	b, _ := os.ReadFile(path)
	if !strings.Contains(string(b), `"remote":"999"`) {
		t.Errorf("the last line is not in the current file")
	}
	t.Logf("1000 audit lines: %d bytes on disk in 2 files", total)
}

// scrape returns GET /metrics with token, checking it parses and no label
// set repeats.
func scrape(t *testing.T, h http.Handler, token string) (int, string) {
	t.Helper()
	rec := do(t, h, "GET", "/metrics", token, nil)
	if rec.Code != 200 {
		return rec.Code, rec.Body.String()
	}
	lintMetrics(t, rec.Body.String())
	seen := map[string]bool{}
	for _, l := range strings.Split(rec.Body.String(), "\n") {
		if l == "" || l[0] == '#' {
			continue
		}
		series := l[:strings.LastIndexByte(l, ' ')]
		if seen[series] {
			t.Errorf("series %s exported twice", series)
		}
		seen[series] = true
	}
	return rec.Code, rec.Body.String()
}

// TestMetricsAfterReAdd (item 3): a tenant removed and added again under
// its name leaves /metrics answering 200 with every series once.
func TestMetricsAfterReAdd(t *testing.T) {
	r, _ := startLogged(t, tenantConfig(t))
	h := r.srv.Handler()
	wasm, _ := os.ReadFile(exampleWasm(t, "pspheader.wasm"))
	add, _ := json.Marshal(Tenant{Name: "c", Ports: []uint16{7003}, Wasm: wasm, Workers: 1})
	for i := range 3 {
		if rec := do(t, h, "POST", "/tenants", "operator-secret", add); rec.Code != 201 {
			t.Fatalf("add c (%d): %d %s", i, rec.Code, rec.Body)
		}
		exchange(t, r.srv.Dataplane().(*memnic.Dataplane), 7003, 5, wire.TypeShort)
		time.Sleep(150 * time.Millisecond) // a stats interval: the status has c
		if c, body := scrape(t, h, "operator-secret"); c != 200 {
			t.Fatalf("/metrics after adding c %d times: %d %.300s", i+1, c, body)
		}
		if rec := do(t, h, "DELETE", "/tenants/c", "operator-secret", nil); rec.Code != 204 {
			t.Fatalf("remove c: %d", rec.Code)
		}
	}
	if c, body := scrape(t, h, "operator-secret"); c != 200 || !strings.Contains(body, `type="c/SHORT"`) {
		t.Fatalf("/metrics after removing c: %d, c/SHORT there: %v", c, strings.Contains(body, `type="c/SHORT"`))
	}
	if rec := do(t, h, "POST", "/tenants", "operator-secret", add); rec.Code != 201 {
		t.Fatalf("add c again: %d %s", rec.Code, rec.Body)
	}
	exchange(t, r.srv.Dataplane().(*memnic.Dataplane), 7003, 7, wire.TypeShort)
	time.Sleep(150 * time.Millisecond)
	if c, body := scrape(t, h, "operator-secret"); c != 200 || !strings.Contains(body, `psp_type_requests_answered_total{type="c/SHORT"} 7`) {
		t.Fatalf("/metrics with c live again: %d, c/SHORT answered %d times", c, strings.Count(body, `psp_type_requests_answered_total{type="c/SHORT"}`))
	}
	// Two types of one name get distinct labels.
	seen := map[string]bool{}
	if a, b := uniqueName(seen, "x/SHORT", 3), uniqueName(seen, "x/SHORT", 4); a != "x/SHORT" || b != "x/SHORT#4" {
		t.Errorf("unique names %q %q", a, b)
	}
}

// TestReadsNeedAToken (item 4): with tokens configured, /status, /tenants
// and /metrics answer 401 without one; the operator and the read-only
// token see every tenant, a tenant's token its own only; the read-only
// token changes nothing.
func TestReadsNeedAToken(t *testing.T) {
	cfg := tenantConfig(t)
	cfg.Admin.ReadTokenFile = writeToken(t, "scraper-secret")
	r, _ := startLogged(t, cfg)
	h := r.srv.Handler()
	time.Sleep(150 * time.Millisecond)
	for _, path := range []string{"/status", "/tenants", "/metrics"} {
		for _, tok := range []string{"", "wrong"} {
			if rec := do(t, h, "GET", path, tok, nil); rec.Code != 401 || strings.Contains(rec.Body.String(), "7002") {
				t.Errorf("GET %s with token %q: %d", path, tok, rec.Code)
			}
		}
		for _, tok := range []string{"operator-secret", "scraper-secret"} {
			rec := do(t, h, "GET", path, tok, nil)
			if rec.Code != 200 || !strings.Contains(rec.Body.String(), `"b"`) && path != "/metrics" || path == "/metrics" && !strings.Contains(rec.Body.String(), `tenant="b"`) {
				t.Errorf("GET %s with %s: %d", path, tok, rec.Code)
			}
		}
		rec := do(t, h, "GET", path, "a-secret", nil)
		if rec.Code != 200 {
			t.Errorf("GET %s with a's token: %d", path, rec.Code)
		}
		body := rec.Body.String()
		if strings.Contains(body, `"b"`) || strings.Contains(body, `tenant="b"`) || strings.Contains(body, "b/") || strings.Contains(body, "7002") {
			t.Errorf("GET %s with a's token shows b:\n%.2000s", path, body)
		}
		if !strings.Contains(body, `"a"`) && !strings.Contains(body, `tenant="a"`) {
			t.Errorf("GET %s with a's token does not show a:\n%.2000s", path, body)
		}
	}
	var st Status
	json.Unmarshal(do(t, h, "GET", "/status", "a-secret", nil).Body.Bytes(), &st)
	if len(st.Tenants) != 1 || st.Tenants[0].Name != "a" || len(st.Types) == 0 || st.Net.RxPackets != 0 {
		t.Errorf("a's status: tenants %+v, %d types", st.Tenants, len(st.Types))
	}
	for _, tc := range []struct{ method, path string }{{"PUT", "/tenants/a/classifier"}, {"DELETE", "/tenants/b"}, {"POST", "/tenants"}, {"PATCH", "/tenants/a"}} {
		if rec := do(t, h, tc.method, tc.path, "scraper-secret", []byte(`{}`)); rec.Code != 403 {
			t.Errorf("%s %s with the read-only token: %d, want 403", tc.method, tc.path, rec.Code)
		}
	}
	// Without any token, reads stay open (changes are refused anyway).
	r2, _ := startLogged(t, memConfig())
	if rec := do(t, r2.srv.Handler(), "GET", "/status", "", nil); rec.Code != 200 {
		t.Errorf("a server without tokens: GET /status %d", rec.Code)
	}
}

// TestTokenFileChecks (item 11): a token file is opened once and checked
// as opened: a symbolic link, a FIFO, a file of another user, a huge file
// are refused.
func TestTokenFileChecks(t *testing.T) {
	dir := t.TempDir()
	good := writeToken(t, "tok")
	link := filepath.Join(dir, "link")
	if err := os.Symlink(good, link); err != nil {
		t.Fatal(err)
	}
	if _, err := readTokenFile(link); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("a symlink: %v", err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := readTokenFile(fifo); done <- err }()
	if err := testenv.Await(t, done, 5*time.Second, "reading a FIFO token file"); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("a FIFO: %v", err)
	}
	big := filepath.Join(dir, "big")
	os.WriteFile(big, bytes.Repeat([]byte("x"), 1<<20), 0o600)
	if _, err := readTokenFile(big); err == nil {
		t.Errorf("a 1 MiB token file accepted")
	}
	other := writeToken(t, "tok")
	if err := os.Chown(other, 12345, 12345); err == nil {
		if _, err := readTokenFile(other); err == nil || !strings.Contains(err.Error(), "uid 12345") {
			t.Errorf("another user's file: %v", err)
		}
	} else if os.Geteuid() == 0 {
		t.Fatal(err)
	}
	if tok, err := readTokenFile(good); err != nil || tok != "tok" {
		t.Errorf("a good token file: %q %v", tok, err)
	}
}

// TestAddCompilesOutsideTheLock (item 9): while an added tenant's module
// compiles, status, metrics and the other tenants' changes and swaps do
// not wait for it.
func TestAddCompilesOutsideTheLock(t *testing.T) {
	r, _ := startLogged(t, tenantConfig(t))
	h := r.srv.Handler()
	compiling, release := make(chan struct{}), make(chan struct{})
	load := r.srv.tenants.compile
	r.srv.tenants.compile = func(ctx context.Context, tn Tenant) (*loadedTenant, error) {
		close(compiling)
		<-release
		return load(ctx, tn)
	}
	wasm, _ := os.ReadFile(exampleWasm(t, "pspheader.wasm"))
	add, _ := json.Marshal(Tenant{Name: "c", Ports: []uint16{7003}, Wasm: wasm})
	added := make(chan int, 1)
	go func() { added <- do(t, h, "POST", "/tenants", "operator-secret", add).Code }()
	<-compiling
	for _, c := range []struct {
		method, path string
		body         []byte
		want         int
	}{
		{"GET", "/status", nil, 200},
		{"GET", "/tenants", nil, 200},
		{"GET", "/metrics", nil, 200},
		{"PATCH", "/tenants/a", []byte(`{"max_workers":3}`), 200},
		{"PUT", "/tenants/b/classifier", wasm, 200},
		{"POST", "/tenants/b/rollback", nil, 200},
	} {
		done := make(chan int, 1)
		start := time.Now()
		go func() { done <- do(t, h, c.method, c.path, "operator-secret", c.body).Code }()
		select {
		case code := <-done:
			if code != c.want {
				t.Errorf("%s %s during a compile: %d, want %d", c.method, c.path, code, c.want)
			}
			t.Logf("%s %s during a compile: %v", c.method, c.path, time.Since(start).Round(time.Microsecond))
		case <-time.After(5 * time.Second):
			t.Errorf("%s %s waited 5s for another tenant's compile", c.method, c.path)
		}
	}
	close(release)
	if code := <-added; code != 201 {
		t.Errorf("add c: %d", code)
	}
}
