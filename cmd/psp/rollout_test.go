package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	json "github.com/goccy/go-json"

	"github.com/persephone-go/psp/admin"
	"github.com/persephone-go/psp/internal/registrytest"
	"github.com/persephone-go/psp/internal/testenv"
	"github.com/persephone-go/psp/server"
	"github.com/persephone-go/psp/wire"
)

// fleetServer is a psp serve process of the rollout test.
type fleetServer struct {
	admin, listen string
	args          []string
	cmd           *exec.Cmd
	log           testenv.SyncBuffer
}

// buildPSP builds the psp binary once for the test.
func buildPSP(t *testing.T) string {
	t.Helper()
	goTool := testenv.RequireTool(t, "go")
	bin := filepath.Join(t.TempDir(), "psp")
	cmd := exec.Command(goTool, "build", "-o", bin, ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// startFleet starts n psp serve processes with classifier ref.
func startFleet(t *testing.T, bin string, n int, ref, token, cache string) []*fleetServer {
	t.Helper()
	var fs []*fleetServer
	for i := range n {
		s := &fleetServer{admin: freeAddr(t, "tcp"), listen: freeAddr(t, "udp")}
		s.args = []string{"serve", "--listen", s.listen, "--admin", s.admin, "--token-file", token,
			"--classifier", ref, "--oci-cache", filepath.Join(cache, fmt.Sprint(i)), "--workers", "2", "--dilation", "1",
			"--spin", "0", "--deadline-factor", "0"}
		s.start(t, bin)
		t.Cleanup(func() { s.stop(t) })
		fs = append(fs, s)
	}
	for _, s := range fs {
		s.waitUp(t, token)
	}
	return fs
}

func (s *fleetServer) start(t *testing.T, bin string) {
	t.Helper()
	s.cmd = exec.Command(bin, s.args...)
	s.cmd.Stdout, s.cmd.Stderr = &s.log, &s.log
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
}

// stop stops the server (SIGINT, then SIGKILL after 10 s).
func (s *fleetServer) stop(t *testing.T) {
	if s.cmd == nil {
		return
	}
	s.cmd.Process.Signal(os.Interrupt)
	done := make(chan struct{})
	go func() { s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		s.cmd.Process.Kill()
		<-done
	}
	s.cmd = nil
	if t.Failed() {
		t.Logf("server %s:\n%s", s.admin, s.log.String())
	}
}

// waitUp waits until the server answers GET /status.
func (s *fleetServer) waitUp(t *testing.T, token string) {
	t.Helper()
	tok, err := os.ReadFile(token)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := admin.NewClient(s.admin, time.Second)
	c.SetToken(string(tok)) // reads need a token on a server with tokens
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := c.Status(context.Background()); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("psp serve on %s did not come up:\n%s", s.admin, s.log.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// load sends SHORT and LONG requests, alternately, to every server at
// rate per second each, until stop is called.
func load(t *testing.T, fs []*fleetServer, rate int) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, s := range fs {
		conn, err := net.Dial("udp", s.listen)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(2)
		go func() { // drain the replies
			defer wg.Done()
			buf := make([]byte, 2048)
			for ctx.Err() == nil {
				conn.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
				conn.Read(buf)
			}
		}()
		go func() {
			defer wg.Done()
			defer conn.Close()
			b := make([]byte, wire.HeaderLen)
			tick := time.NewTicker(time.Second / time.Duration(rate/10))
			defer tick.Stop()
			id := uint32(0)
			for {
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
				for range 10 {
					id++
					wire.Header{ID: id, Type: 1 + id%2, ServiceNs: 2000}.Encode(b)
					conn.Write(b)
				}
			}
		}()
	}
	return func() { cancel(); wg.Wait() }
}

// fleetToken is the operator's token of TestRolloutFleet's servers.
const fleetToken = "fleet-secret"

func tenantState(t *testing.T, addr string) server.TenantInfo {
	t.Helper()
	c, _ := admin.NewClient(addr, 5*time.Second)
	c.SetToken(fleetToken) // the servers' operator token: reads need one
	st, err := c.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, ti := range st.Tenants {
		if ti.Name == server.DefaultTenant {
			return ti
		}
	}
	t.Fatalf("%s: no default tenant", addr)
	return server.TenantInfo{}
}

func runBin(bin string, args ...string) (stdout, stderr string, err error) {
	var o, e bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	return o.String(), e.String(), err
}

// startPrometheus runs Debian's prometheus scraping the servers' admin
// endpoints (with the token) every second, and returns its URL once it
// has scraped each of them.
func startPrometheus(t *testing.T, fs []*fleetServer, token string) string {
	t.Helper()
	bin := testenv.RequireTool(t, "prometheus")
	dir := t.TempDir()
	var targets []string
	for _, s := range fs {
		targets = append(targets, `"`+s.admin+`"`)
	}
	cfg := fmt.Sprintf("global: {scrape_interval: 1s, scrape_timeout: 1s}\nscrape_configs:\n"+
		"  - job_name: psp\n    authorization: {type: Bearer, credentials_file: %s}\n    static_configs: [{targets: [%s]}]\n",
		token, strings.Join(targets, ", "))
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t, "tcp")
	var log testenv.SyncBuffer
	cmd := exec.Command(bin, "--config.file="+filepath.Join(dir, "prometheus.yml"), "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--log.level=warn")
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		cmd.Wait()
		if t.Failed() {
			t.Logf("prometheus:\n%s", log.String())
		}
	})
	base := "http://" + addr
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(base + "/api/v1/query?query=" + url.QueryEscape(`sum(up{job="psp"})`))
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if strings.Contains(string(body), fmt.Sprintf(`"%d"]`, len(fs))) {
				return base
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("prometheus did not scrape the %d servers within 30 s:\n%s", len(fs), log.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestRolloutFleet: three psp serve processes started from a registry
// tag run the same module. A good module rolls out to all three, the
// control group last, confirmed. Modules that type every request LONG or
// every request SHORT, and one that traps on LONG, are stopped at the
// canary and rolled back (the trapping one before half its bake), the
// other two servers untouched. Debian's prometheus scraping the servers
// gives a rollout the same verdicts. A rollout killed during its second
// wave's bake leaves the canary and that wave on the new module only
// until the confirm deadline.
// A server restarted after a rollout runs the rolled-out module, and psp
// status says its config names another.
func TestRolloutFleet(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a registry, prometheus and three servers")
	}
	start := time.Now()
	reg := registrytest.Start(t)
	bin := buildPSP(t)
	dir := t.TempDir()
	token := filepath.Join(dir, "token")
	os.WriteFile(token, []byte(fleetToken+"\n"), 0o600)
	ex := filepath.Join("..", "..", "examples", "classifiers")
	file := func(rel string) string { return filepath.Join(ex, rel) }

	publish := func(rel, tag string) string {
		t.Helper()
		out, _, err := runBin(bin, "classifier", "publish", file(rel), "oci://"+reg.Addr+"/psp/header:"+tag)
		if err != nil {
			t.Fatalf("publish %s: %v", rel, err)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		ref := lines[len(lines)-1]
		if !strings.HasPrefix(ref, "oci://"+reg.Addr+"/psp/header@sha256:") || !strings.Contains(out, "tag: oci://"+reg.Addr+"/psp/header:"+tag+"@sha256:") {
			t.Fatalf("publish printed %q", out)
		}
		return ref
	}
	v1, v2, v3 := publish("c/pspheader.wasm", "v1"), publish("wat/pspheader.wasm", "v2"), publish("rust/pspheader.wasm", "v3")
	faultLong, allLong, allShort := publish("wat/pspheader_faultlong.wasm", "bad-trap"), publish("wat/pspheader_alllong.wasm", "bad-long"), publish("wat/pspheader_allshort.wasm", "bad-short")
	sha := func(rel string) string {
		b, _ := os.ReadFile(file(rel))
		return sha256Hex(b)
	}
	t.Logf("build and publish: %v", time.Since(start).Round(time.Millisecond))

	// Started by tag: each resolves it to the same digest and runs the
	// same module.
	tag := "oci://" + reg.Addr + "/psp/header:v1"
	fs := startFleet(t, bin, 3, tag, token, filepath.Join(dir, "cache"))
	for _, s := range fs {
		out, _, err := runBin(bin, "status", "--admin", s.admin, "--token-file", token)
		if err != nil {
			t.Fatal(err)
		}
		// The tag the servers started from, pinned by the digest publish printed.
		want := tag + "@" + strings.TrimPrefix(v1, "oci://"+reg.Addr+"/psp/header@")
		if !strings.Contains(out, sha("c/pspheader.wasm")) || !strings.Contains(out, "from "+want) {
			t.Fatalf("%s: psp status does not show sha256 %s from %s:\n%s", s.admin, sha("c/pspheader.wasm"), want, out)
		}
	}
	prom := startPrometheus(t, fs, token)
	stop := load(t, fs, 400)
	defer stop()
	servers := fs[0].admin + "," + fs[1].admin + "," + fs[2].admin
	rollout := func(ref string, extra ...string) (string, string, error) {
		args := append([]string{"rollout", ref, "--servers", servers, "--canary", "1", "--bake", "2s", "--token-file", token, "--oci-cache", "off"}, extra...)
		return runBin(bin, args...)
	}
	runs := func(rel string) {
		t.Helper()
		for _, s := range fs {
			if ti := tenantState(t, s.admin); ti.SHA256 != sha(rel) || ti.Provisional != nil {
				t.Fatalf("%s runs %.12s (provisional %+v), want %s's %.12s", s.admin, ti.SHA256, ti.Provisional, rel, sha(rel))
			}
		}
	}

	// (a) A good module reaches all three: canary, wave, control group.
	good := func(ref, rel string, extra ...string) string {
		t.Helper()
		out, errOut, err := rollout(ref, extra...)
		if err != nil {
			t.Fatalf("rollout of a good module %v: %v\n%s\n%s", extra, err, out, errOut)
		}
		t.Logf("psp rollout %s %v:\n%s", ref, extra, out)
		if !strings.Contains(out, "rolled out: 3 server(s)") || strings.Count(out, "verdict: pass") != 3 || !strings.Contains(out, "wave 3 (control)") {
			t.Fatalf("rollout output:\n%s", out)
		}
		runs(rel)
		return out
	}
	good(v2, "wat/pspheader.wasm")
	for _, s := range fs {
		if ti := tenantState(t, s.admin); ti.Reference != v2 {
			t.Fatalf("%s after the rollout: reference %q, want %s", s.admin, ti.Reference, v2)
		}
	}

	// (b) Bad modules: stopped at the canary, rolled back, the other two
	// never touched; each verdict with Prometheus as the source too.
	bad := func(ref, why string, extra ...string) string {
		t.Helper()
		out, errOut, err := rollout(ref, extra...)
		var exit *exec.ExitError
		if !errors.As(err, &exit) {
			t.Fatalf("rollout of %s %v: %v, want a failure exit\n%s\n%s", ref, extra, err, out, errOut)
		}
		t.Logf("psp rollout %s %v:\n%s", ref, extra, out)
		if !strings.Contains(out, why) || !strings.Contains(out, "verdict: FAIL") ||
			!strings.Contains(out, "stopped: 1 server(s) swapped and rolled back, 2 untouched") || strings.Count(out, "; baked ") != 1 {
			t.Fatalf("rollout output:\n%s", out)
		}
		runs("wat/pspheader.wasm")
		return out
	}
	bad(allLong, "type mix")
	bad(allShort, "type mix")
	out := bad(faultLong, "classifier faults")
	if !strings.Contains(out, "stopped before the end of the bake") {
		t.Errorf("the trapping module baked to the end:\n%s", out)
	}
	if m := regexp.MustCompile(`baked ([0-9.]+m?s);`).FindStringSubmatch(out); m == nil {
		t.Errorf("no bake time in:\n%s", out)
	} else if d, _ := time.ParseDuration(m[1]); d >= time.Second {
		t.Errorf("the trapping module baked %v of 2s: want less than half", d)
	}
	// The same verdicts with Prometheus as the source (its scrapes, a
	// second apart, show the trapping module's faults only at the first
	// one after the swap: stopped later than from the servers, but
	// stopped).
	bad(allLong, "type mix", "--prometheus", prom)
	bad(allShort, "type mix", "--prometheus", prom)
	bad(faultLong, "classifier faults", "--prometheus", prom)
	good(v3, "rust/pspheader.wasm", "--prometheus", prom)

	// (c) psp rollout killed (SIGKILL) during the second wave's bake,
	// the canary passed: both swapped servers are provisional, and back
	// on the old module within the confirm deadline.
	cmd := exec.Command(bin, "rollout", v2, "--servers", servers, "--canary", "1", "--bake", "3s", "--confirm-deadline", "3s",
		"--token-file", token, "--oci-cache", "off")
	var progress testenv.SyncBuffer
	cmd.Stdout, cmd.Stderr = &progress, &progress
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(progress.String(), "wave 2: baking") {
		if time.Now().After(deadline) || strings.Contains(progress.String(), "verdict: FAIL") {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("the rollout did not start baking its second wave:\n%s", progress.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	cmd.Process.Kill()
	cmd.Wait()
	killed := time.Now()
	out, _, err := runBin(bin, "rollout", "status", v2, "--servers", servers, "--token-file", token, "--oci-cache", "off")
	if err == nil || !strings.Contains(out, "PROVISIONAL") || !strings.Contains(out, "in progress, or interrupted: 0 of 3 server(s) run it confirmed, 2 provisionally") {
		t.Fatalf("rollout status after the kill: %v\n%s\nthe rollout said:\n%s", err, out, progress.String())
	}
	t.Logf("psp rollout status, just after the kill:\n%s", out)
	for _, s := range fs[:2] {
		for tenantState(t, s.admin).SHA256 != sha("rust/pspheader.wasm") {
			if time.Since(killed) > 3*time.Second+time.Second {
				t.Fatalf("%s is still on the new module %v after the kill (deadline 3s)", s.admin, time.Since(killed))
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	t.Logf("canary and second wave back on the old module %v after the kill", time.Since(killed).Round(10*time.Millisecond))
	runs("rust/pspheader.wasm")

	// (d) A server restarted after the rollout runs the rolled-out module,
	// not its config's tag, and says so.
	fs[1].stop(t)
	fs[1].start(t, bin)
	fs[1].waitUp(t, token)
	out, _, err = runBin(bin, "status", "--admin", fs[1].admin, "--token-file", token)
	if err != nil || !strings.Contains(out, sha("rust/pspheader.wasm")) || !strings.Contains(out, "differs from its config, which names "+tag) {
		t.Fatalf("psp status after a restart: %v\n%s\n%s", err, out, fs[1].log.String())
	}
	if ti := tenantState(t, fs[1].admin); ti.Reference != v3 {
		t.Fatalf("after a restart: reference %q, want %s", ti.Reference, v3)
	}
	if canary := tenantState(t, fs[0].admin); canary.Faults["trap"] == 0 {
		t.Errorf("the canary counted no traps: %v", canary.Faults)
	}

	// The PromQL of docs/metrics.md answers against the same Prometheus.
	checkDocPromQL(t, prom, fs[0].admin, []string{fs[1].admin, fs[2].admin})

	// A dry run changes nothing.
	v := tenantState(t, fs[0].admin).Version
	out, _, err = runBin(bin, "rollout", faultLong, "--servers", servers, "--dry-run", "--oci-cache", "off", "--token-file", token)
	if err != nil || !strings.Contains(out, "dry run: nothing changed") || !strings.Contains(out, "wave 1 (canary): "+fs[0].admin) {
		t.Fatalf("dry run: %v\n%s", err, out)
	}
	if ti := tenantState(t, fs[0].admin); ti.Version != v {
		t.Fatalf("the dry run changed the canary: version %d", ti.Version)
	}
	// Without the token the servers refuse the reads: the dry run says so
	// and fails (it exited 0 with every server unreadable).
	out, stderr, err := runBin(bin, "rollout", faultLong, "--servers", servers, "--dry-run", "--oci-cache", "off")
	if err == nil || !strings.Contains(stderr, "none of the 3 servers could be read") || !strings.Contains(out, "401 Unauthorized") {
		t.Fatalf("dry run without a token: %v\n%s%s", err, out, stderr)
	}
	t.Logf("the whole test: %v", time.Since(start).Round(time.Millisecond))
}

// TestRolloutBoundsAndDryRun: bounds that would turn a gate off (NaN, Inf)
// or fail every canary (a negative ratio) are refused, and a dry run that
// could read no server fails.
func TestRolloutBoundsAndDryRun(t *testing.T) {
	wasm := filepath.Join(t.TempDir(), "X.wasm")
	if err := os.WriteFile(wasm, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	servers := freeAddr(t, "tcp") // nothing listens
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--max-fault-rate", "NaN"}, "--max-fault-rate NaN: want a fraction in [0, 1]"},
		{[]string{"--max-error-rate", "Inf"}, "--max-error-rate +Inf: want a fraction in [0, 1]"},
		{[]string{"--max-unknown-increase", "-0.5"}, "--max-unknown-increase -0.5: want a fraction in [0, 1]"},
		{[]string{"--max-latency-ratio", "-1"}, "--max-latency-ratio -1: want a factor in [1, 1000]"},
		{[]string{"--max-latency-ratio", "Inf"}, "--max-latency-ratio +Inf: want a factor"},
		{[]string{"--max-latency-ratio", "NaN"}, "--max-latency-ratio NaN: want a factor"},
		{[]string{"--latency-slack", "-1s"}, "--latency-slack -1s: want 0 to 1h0m0s"},
		{[]string{"--latency-slack", "2562047h"}, "want 0 to 1h0m0s"},
		{nil, "dry run: none of the 1 servers could be read"},
	} {
		args := append([]string{"rollout", "--dry-run", "--oci-cache", "off", "--timeout", "2s", "--servers", servers}, tc.args...)
		out, err := runApp(t, append(args, wasm)...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want an error with %q\n%s", tc.args, err, tc.want, out)
		}
	}
}

// checkDocPromQL evaluates each PromQL query of docs/metrics.md's
// rollout questions, and the Argo Rollouts template's, against the
// Prometheus at prom, canary standing for the doc's canary and stable for
// its baseline servers: each must parse, answer, and give ratios (or
// seconds) in [0, 1], NaN only for a p99.9 of types without answers.
func checkDocPromQL(t *testing.T, prom, canary string, stable []string) {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "metrics.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(doc)
	start, end := strings.Index(text, "## The rollout's questions in PromQL"), strings.Index(text, "A Flagger `MetricTemplate`")
	if start < 0 || end < start {
		t.Fatal("docs/metrics.md: no PromQL section")
	}
	var queries []string
	for _, block := range regexp.MustCompile("(?s)```(yaml)?\n(.*?)```").FindAllStringSubmatch(text[start:end], -1) {
		if block[1] == "" {
			queries = append(queries, block[2])
			continue
		}
		for _, q := range regexp.MustCompile(`(?s)query: \|\n(.*?)(\n    - |$)`).FindAllStringSubmatch(block[2], -1) {
			queries = append(queries, q[1])
		}
	}
	if len(queries) < 7 {
		t.Fatalf("docs/metrics.md: %d queries found, want the 5 questions (6 queries) and the template's 2", len(queries))
	}
	var quoted []string
	for _, s := range stable {
		quoted = append(quoted, strings.ReplaceAll(regexp.QuoteMeta(s), `\`, `\\`)) // a PromQL string escapes its backslashes
	}
	subst := strings.NewReplacer(`instance="canary:9090"`, `instance="`+canary+`"`,
		`instance=~"stable-.*"`, `instance=~"`+strings.Join(quoted, "|")+`"`, "{{args.canary}}", canary)
	for _, q := range queries {
		q = subst.Replace(q)
		resp, err := http.Get(prom + "/api/v1/query?query=" + url.QueryEscape(q))
		if err != nil {
			t.Fatal(err)
		}
		var ans struct {
			Status string
			Error  string
			Data   struct {
				Result []struct{ Value [2]any }
			}
		}
		err = json.NewDecoder(resp.Body).Decode(&ans)
		resp.Body.Close()
		if err != nil || ans.Status != "success" || len(ans.Data.Result) == 0 {
			t.Errorf("docs/metrics.md's query answers %s %q with %d series (%v):\n%s", ans.Status, ans.Error, len(ans.Data.Result), err, q)
			continue
		}
		finite := 0
		for _, r := range ans.Data.Result {
			s, _ := r.Value[1].(string)
			v, err := strconv.ParseFloat(s, 64)
			switch {
			case err == nil && v >= 0 && v <= 1:
				finite++
			case s == "NaN" && strings.HasPrefix(q, "histogram_quantile"):
			default:
				t.Errorf("docs/metrics.md's query gives %q:\n%s", s, q)
			}
		}
		if finite == 0 {
			t.Errorf("docs/metrics.md's query gives no number:\n%s", q)
		}
	}
	t.Logf("docs/metrics.md: %d PromQL queries answered", len(queries))
}
