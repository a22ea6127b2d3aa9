package tests

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	json "github.com/goccy/go-json"

	"github.com/persephone-go/psp/admin"
	"github.com/persephone-go/psp/darc"
	"github.com/persephone-go/psp/loadgen"
	pspserver "github.com/persephone-go/psp/server"
	"github.com/persephone-go/psp/sim"
	"github.com/persephone-go/psp/workload"
)

// The tenant tests run multi-tenant psp serve processes (the emulate
// application, 14 workers, DARC with tenant shares): tenant a is
// guaranteed 10 workers, tenant b 4, each classified by the C psp-header
// Wasm classifier on its own UDP port, each with its own token.

const (
	tenantDilation = 5000 // SHORT 5 ms, LONG 500 ms
	aWorkers       = 10
	bWorkers       = 4
)

// tenantServer is a running multi-tenant psp serve.
type tenantServer struct {
	*server
	dilation     float64
	portA, portB int
	tokens       map[string]string // "operator", "a", "b" -> token
	tokenFiles   map[string]string
	audit        string // the audit log file
}

// startTenantServer starts a multi-tenant server with tenants a and b
// (dilation 0: tenantDilation); aMaxWorkers > 0 is a's ceiling
// (max_workers).
func startTenantServer(t testing.TB, dilation float64, aMaxWorkers int) *tenantServer {
	t.Helper()
	if dilation == 0 {
		dilation = tenantDilation
	}
	dir := t.TempDir()
	ts := &tenantServer{server: &server{t: t, log: &bytes.Buffer{}, done: make(chan struct{}), dilation: dilation}, dilation: dilation,
		portA: freePort(t, "udp"), portB: freePort(t, "udp"), tokens: map[string]string{}, tokenFiles: map[string]string{},
		audit: filepath.Join(dir, "audit.log")}
	for _, who := range []string{"operator", "a", "b"} {
		tok := fmt.Sprintf("%s-%d-secret-token", who, time.Now().UnixNano())
		f := filepath.Join(dir, who+".token")
		if err := os.WriteFile(f, []byte(tok+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		ts.tokens[who], ts.tokenFiles[who] = tok, f
	}
	ts.token = ts.tokens["operator"] // for reads
	ts.listen = fmt.Sprintf("127.0.0.1:%d", freePort(t, "udp"))
	ts.admin = fmt.Sprintf("127.0.0.1:%d", freePort(t, "tcp"))
	wasm := filepath.Join(repoRoot, "examples", "classifiers", "c", "pspheader.wasm")
	cfg := fmt.Sprintf(`listen: %s
workers: 14
policy: darc
min_samples: 50
app: {name: emulate, dilation: %g}
admin: {addr: %s, token_file: %s, audit_log: %s}
tenants:
  - {name: a, ports: [%d], classifier: %s, workers: %d, max_workers: %d, token_file: %s}
  - {name: b, ports: [%d], classifier: %s, workers: %d, token_file: %s}
`, ts.listen, dilation, ts.admin, ts.tokenFiles["operator"], ts.audit,
		ts.portA, wasm, aWorkers, aMaxWorkers, ts.tokenFiles["a"], ts.portB, wasm, bWorkers, ts.tokenFiles["b"])
	cfgFile := filepath.Join(dir, "psp.yaml")
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	ts.run(t, newServeCmd(cfgFile, ts.log), "serve")
	return ts
}

// tenantStatus returns the server's status as package server has it.
func (ts *tenantServer) tenantStatus(t testing.TB) *pspserver.Status {
	t.Helper()
	c, err := admin.NewClient(ts.admin, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c.SetToken(ts.tokens["operator"])
	st, err := c.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// pooledP999Slowdown is the p99.9 slowdown (nearest rank) of every
// measured request of the runs together.
func pooledP999Slowdown(runs []*loadgen.Result) float64 {
	var slow []float64
	for _, r := range runs {
		for _, q := range r.AppendSamples(nil, -1) {
			slow = append(slow, float64(q.LatencyNs)/float64(max(q.ServiceNs, 1)))
		}
	}
	if len(slow) == 0 {
		return math.NaN()
	}
	sort.Float64s(slow)
	k := int(math.Ceil(0.999*float64(len(slow)))) - 1
	return slow[min(max(k, 0), len(slow)-1)]
}

// tenantInfo returns the live tenant called name in st.
func tenantInfo(t testing.TB, st *pspserver.Status, name string) pspserver.TenantInfo {
	t.Helper()
	for _, ti := range st.Tenants {
		if ti.Name == name && !ti.Removed {
			return ti
		}
	}
	t.Fatalf("no tenant %s in %+v", name, st.Tenants)
	return pspserver.TenantInfo{}
}

// playPort runs w at rate r (requests/s) for d against a port of s's
// host; the returned function waits for the result.
func (s *tenantServer) playPort(t testing.TB, port int, w *workload.Workload, rate float64, d time.Duration, seed uint64) func() (*loadgen.Result, error) {
	t.Helper()
	sched, err := loadgen.NewSchedule(w, rate, d, seed)
	if err != nil {
		t.Fatal(err)
	}
	spec := loadgen.Spec{Server: fmt.Sprintf("127.0.0.1:%d", port), Dilation: s.dilation, FromActualSend: true, MaxLag: time.Second}
	done := make(chan struct{})
	var res *loadgen.Result
	go func() {
		defer close(done)
		res, err = loadgen.Run(context.Background(), spec, sched)
	}()
	return func() (*loadgen.Result, error) {
		<-done
		return res, err
	}
}

// cheap is High Bimodal's SHORT alone: b's cheap requests.
func cheap(t testing.TB) *workload.Workload {
	t.Helper()
	hb := builtin(t, "high-bimodal")
	w := &workload.Workload{Name: "cheap"}
	for _, ty := range hb.Types {
		if ty.Name == "SHORT" {
			ty.Share = 1
			w.Types = append(w.Types, ty)
		}
	}
	return w
}

// TestNoisyNeighbour: tenant b offers three times its share of cheap
// requests; tenant a, at load 0.5 of its share, keeps its p99.9 slowdown
// within its SLO (10) and within 20% of running alone on its share: its
// twin is the same server, measured at the same time (the same machine
// noise) with the same schedule, where b sends nothing and a's ceiling is
// its share (max_workers 10). Alone on the whole server a would also run
// on b's idle workers, which no share promises: psp sim puts a's p99.9
// slowdown at 1.0 there, 2.2 alone on its 10 workers and 2.5 beside b's
// flood (60 s runs), the difference being what the isolation bound allows,
// a's requests waiting at most one of b's service times for a lent worker
// to come back. Each run's a and twin run at the same time, so they share
// the machine's noise, except for a burst that stalls one server's
// threads more than the other's: with one run's p99.9 being its one or
// two slowest requests, such a burst doubles it. The bound is judged on
// the median of the three runs' ratios (a run whose pair the host split
// does not decide), or on five runs when both estimates of three are over
// it; the SLO on the runs' requests together. b gets more than its share:
// a's idle workers are lent. psp sim,
// driving the same policy code, predicts b's throughput beside a,
// calibrated by the live per-request cost of a run of b alone.
func TestNoisyNeighbour(t *testing.T) {
	// a: SHORT 5 ms (80%), LONG 150 ms: SHORT far above the machine's
	// scheduling noise, ~150 requests/s, and a's DARC reserves one worker
	// for SHORT, nine for LONG, whose idle ones it lends.
	const dilation = 5000
	noisy, twin := startTenantServer(t, dilation, 0), startTenantServer(t, dilation, aWorkers)
	hb := &workload.Workload{Name: "a-mix", Types: []workload.TypeSpec{
		{Name: "SHORT", ID: 1, Share: 0.8, Service: workload.Dist{Kind: workload.Fixed, Value: workload.Duration(time.Microsecond)}},
		{Name: "LONG", ID: 2, Share: 0.2, Service: workload.Dist{Kind: workload.Fixed, Value: workload.Duration(30 * time.Microsecond)}},
	}}
	if err := hb.Validate(); err != nil {
		t.Fatal(err)
	}
	aRate := loadgen.RateForLoad(hb, 0.5, aWorkers, dilation)
	bRate := loadgen.RateForLoad(cheap(t), 3, bWorkers, dilation)
	const runFor = 8 * time.Second
	var aNoisy, aTwin []*loadgen.Result
	var b *loadgen.Result
	runs := 3
	for run := 1; run <= runs; run++ {
		waitB := noisy.playPort(t, noisy.portB, cheap(t), bRate, runFor, uint64(100+run))
		waitA := noisy.playPort(t, noisy.portA, hb, aRate, runFor, uint64(run))
		waitTwin := twin.playPort(t, twin.portA, hb, aRate, runFor, uint64(run))
		r := awaitAll(t, waitA, waitTwin, waitB)
		a, at := r[0], r[1]
		b = r[2]
		aNoisy, aTwin = append(aNoisy, a), append(aTwin, at)
		t.Logf("run %d: a beside b: %s", run, summary(a))
		t.Logf("run %d: a alone on its share (twin): %s", run, summary(at))
		t.Logf("run %d: b: %.0f req/s offered, %.0f answered/s (%d of %d)", run, b.OfferedRate, b.AchievedRate, b.Answered, b.Sent)
		if a.Lost > 0 || a.Answered != a.Sent {
			t.Errorf("run %d: a lost %d of %d requests beside b", run, a.Sent-a.Answered, a.Sent)
		}
		if run == runs && runs == 3 {
			// Both estimates over the bound after three runs: two runs
			// more, and the bound is judged on five.
			if pooled, median := noisyRatios(aNoisy, aTwin); pooled > 1.2 && median > 1.2 {
				t.Logf("after 3 runs: pooled %.3g, median %.3g: two runs more", pooled, median)
				runs = 5
			}
		}
	}
	// a's SLO: p99.9 slowdown 10. When the machine's own noise already
	// breaks it on the twin, only the comparison with the twin says
	// anything about b.
	const slo = 10
	noisyS, twinS := pooledP999Slowdown(aNoisy), pooledP999Slowdown(aTwin)
	ratios := runRatios(aNoisy, aTwin)
	// The bound holds a's p99.9 over the three runs pooled, or the median
	// of the three runs' ratios: one run's p99.9 is its one or two
	// slowest of about 1,100 requests, which the host's scheduling alone
	// can move by more than 20% between two servers running side by
	// side; pooled, it is the 3rd or 4th slowest of about 3,300. Each
	// estimate alone has failed on a machine shared with other builds
	// while the other was well within the bound (pooled 1.16 with run
	// ratios 1.17, 1.2, 1.33; pooled 1.22 with run ratios 1.12, 1.1,
	// 1.09); a flood that does hurt a moves both.
	ratio, median := noisyRatios(aNoisy, aTwin)
	t.Logf("a's p99.9 slowdown over the %d runs: %.3g beside b's flood, %.3g alone on its share (%.3g); per run, beside / alone: %.3g",
		runs, noisyS, twinS, ratio, ratios)
	switch {
	case ratio > 1.2 && median > 1.2:
		t.Errorf("a's p99.9 slowdown over the %d runs: %.3g beside b's flood, %.3g alone on its share (%.3g; per run %.3g, median %.3g): want within 20%%", runs, noisyS, twinS, ratio, ratios, median)
	case twinS <= slo && noisyS > slo:
		t.Errorf("a's p99.9 slowdown %.3g beside b's flood: over its SLO of %d (alone: %.3g)", noisyS, slo, twinS)
	case twinS > slo:
		t.Logf("the machine's noise alone puts a's p99.9 slowdown at %.3g, over its SLO of %d: only the comparison with the twin holds", twinS, slo)
	}
	share := bWorkers * 1e9 / (float64(time.Microsecond) * dilation)
	if b.AchievedRate < 1.1*share {
		t.Errorf("b answered %.0f/s, its share serves %.0f/s: no idle worker was lent", b.AchievedRate, share)
	}
	st := noisy.tenantStatus(t)
	if st.Received != st.Answered+st.Dropped+st.InFlight {
		t.Errorf("received %d != answered %d + dropped %d + in flight %d", st.Received, st.Answered, st.Dropped, st.InFlight)
	}
	if bi := tenantInfo(t, st, "b"); bi.Drops == nil || bi.Drops.Shed() == 0 {
		t.Errorf("b's flood shed nothing: %+v", bi)
	}

	// psp sim on the same setup. The live server pays per request what
	// the simulator does not (waking workers, timer slack on a shared
	// machine): b alone, on the same server right after, measures it.
	waitAlone := noisy.playPort(t, noisy.portB, cheap(t), bRate, 4*time.Second, 200)
	bAlone, err := waitAlone()
	if err != nil {
		t.Fatal(err)
	}
	// a has profiled its types on the live server: it reserves by them
	// from the start in the simulation too.
	aProfile := []darc.TypeProfile{{Type: 1, MeanNs: float64(dilation * time.Microsecond), Ratio: 0.8},
		{Type: 2, MeanNs: float64(30 * dilation * time.Microsecond), Ratio: 0.2}}
	simB := func(aLoad float64) float64 {
		p, err := sim.Run(sim.Config{Workers: 14, Duration: 4 * time.Second, Seed: 1, Dilation: dilation,
			Darc: darc.Config{Pool: st.Pool, MinSamples: 50},
			Tenants: []sim.Tenant{
				{Name: "a", Workload: *hb, Load: aLoad, Share: darc.TenantConfig{Workers: aWorkers, Profile: aProfile}},
				{Name: "b", Workload: *cheap(t), Rate: bRate, Share: darc.TenantConfig{Workers: bWorkers}},
			}})
		if err != nil {
			t.Fatal(err)
		}
		return p.Tenants[1].AchievedRate
	}
	alone, beside := simB(1e-6), simB(0.5*aWorkers/14)
	calibration := bAlone.AchievedRate / alone
	predicted := beside * calibration
	t.Logf("psp sim: b answers %.0f/s alone, %.0f/s beside a; live b alone %.0f/s (x%.2f): predicted beside a %.0f/s, live %.0f/s",
		alone, beside, bAlone.AchievedRate, calibration, predicted, b.AchievedRate)
	if r := b.AchievedRate / predicted; r < 0.75 || r > 1.25 {
		t.Errorf("b answered %.0f/s beside a, psp sim predicts %.0f/s (ratio %.2f, want within 25%%)", b.AchievedRate, predicted, r)
	}
}

// TestHostileNeighbour: while a runs High Bimodal at load 0.5 of its
// share, b pushes each hostile example module in turn (each refused or
// faulting); a's p99.9 latency stays within 10% of its twin's at the same
// time, nothing of a's is lost, b's faults are b's alone.
func TestHostileNeighbour(t *testing.T) {
	s, twin := startTenantServer(t, 0, 0), startTenantServer(t, 0, 0)
	hb := builtin(t, "high-bimodal")
	rate := loadgen.RateForLoad(hb, 0.5, aWorkers, tenantDilation)
	hostile, err := filepath.Glob(filepath.Join(repoRoot, "examples", "classifiers", "hostile", "*.wasm"))
	if err != nil || len(hostile) < 8 {
		t.Fatalf("hostile examples: %v %v", hostile, err)
	}
	admin, err := admin.NewClient(s.admin, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	admin.SetToken(s.tokens["operator"])
	const runFor = 12 * time.Second
	var a, aTwin *loadgen.Result
	var pushes []string
	const attempts = 2
	for attempt := 1; attempt <= attempts; attempt++ {
		waitA := s.playPort(t, s.portA, hb, rate, runFor, uint64(attempt))
		waitTwin := twin.playPort(t, twin.portA, hb, rate, runFor, uint64(attempt))
		waitB := s.playPort(t, s.portB, cheap(t), 200, runFor, uint64(50+attempt)) // b's packets meet each module
		pushes = pushes[:0]
		time.Sleep(time.Second)
		for _, f := range hostile {
			wasm, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			name := strings.TrimSuffix(filepath.Base(f), ".wasm")
			_, err = admin.PushClassifier(context.Background(), "b", wasm, s.tokens["b"])
			pushes = append(pushes, fmt.Sprintf("%s: %v", name, err))
			time.Sleep(runFor / time.Duration(len(hostile)+2))
		}
		if a, err = waitA(); err != nil {
			t.Fatal(err)
		}
		if aTwin, err = waitTwin(); err != nil {
			t.Fatal(err)
		}
		if _, err := waitB(); err != nil {
			t.Fatal(err)
		}
		t.Logf("attempt %d: a beside hostile b: %s", attempt, summary(a))
		t.Logf("attempt %d: a's twin: %s", attempt, summary(aTwin))
		if a.Overall.P999Latency <= aTwin.Overall.P999Latency*11/10 || attempt == attempts {
			break
		}
	}
	t.Logf("b's pushes: %s", strings.Join(pushes, "; "))
	if a.Answered != a.Sent || a.Lost > 0 {
		t.Errorf("a lost %d of %d requests beside hostile b", a.Sent-a.Answered, a.Sent)
	}
	if a.Overall.P999Latency > aTwin.Overall.P999Latency*11/10 {
		t.Errorf("a's p99.9 latency %v beside hostile b, %v on its twin: want within 10%%",
			time.Duration(a.Overall.P999Latency), time.Duration(aTwin.Overall.P999Latency))
	}
	st := s.tenantStatus(t)
	ai, bi := tenantInfo(t, st, "a"), tenantInfo(t, st, "b")
	var aFaults, bFaults uint64
	for _, v := range ai.Faults {
		aFaults += v
	}
	for _, v := range bi.Faults {
		bFaults += v
	}
	if aFaults != 0 || bFaults == 0 || ai.Dropped != 0 || bi.Escalations == 0 {
		t.Errorf("faults: a %v (dropped %d), b %v (moved to its lane %d times)", ai.Faults, ai.Dropped, bi.Faults, bi.Escalations)
	}
	// Every push is in the audit log (the refused ones in its .refused
	// stream), with b's principal, the module's hash and its outcome.
	lines := append(auditLog(t, s.audit), auditLog(t, s.audit+".refused")...)
	swaps := 0
	for _, l := range lines {
		if l["event"] == "swap" && l["tenant"] == "b" && l["principal"] == "tenant:b" && l["sha256"] != "" {
			swaps++
		}
	}
	if swaps < len(hostile) {
		t.Errorf("%d swap lines in the audit log for %d pushes", swaps, len(hostile))
	}
}

// auditLog reads the audit log's JSON lines.
func auditLog(t testing.TB, path string) []map[string]any {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []map[string]any
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("audit line %q: %v", sc.Text(), err)
		}
		out = append(out, m)
	}
	return out
}

// TestTenantCredentials: a's token is refused on b (403), a wrong one
// everywhere (401); the operator's works on both; psp tenant rollback
// returns b to its previous module; every attempt is an audit line with
// the tenant, the module's hash and size, the version, the remote address
// and the outcome.
func TestTenantCredentials(t *testing.T) {
	s := startTenantServer(t, 0, 0)
	random, err := os.ReadFile(filepath.Join(repoRoot, "examples", "classifiers", "c", "random.wasm"))
	if err != nil {
		t.Fatal(err)
	}
	put := func(tenant, token string) int {
		req, _ := http.NewRequest(http.MethodPut, "http://"+s.admin+"/tenants/"+tenant+"/classifier", bytes.NewReader(random))
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, c := range []struct {
		tenant, who string
		want        int
	}{
		{"b", "a", 403}, {"a", "b", 403}, {"b", "", 401}, {"b", "nobody", 401},
		{"b", "b", 200}, {"a", "operator", 200}, {"a", "a", 200},
	} {
		tok := s.tokens[c.who]
		if c.who == "nobody" {
			tok = "not-a-token"
		}
		if got := put(c.tenant, tok); got != c.want {
			t.Errorf("%s's token on %s: %d, want %d", c.who, c.tenant, got, c.want)
		}
	}
	// Rollback with psp tenant rollback: b's token, back to its first module.
	out, err := runCLI(t, "tenant", "rollback", "b", "--admin", s.admin, "--token-file", s.tokenFiles["b"])
	if err != nil || !strings.Contains(out, "version 3") {
		t.Fatalf("psp tenant rollback: %v\n%s", err, out)
	}
	st := s.tenantStatus(t)
	b := tenantInfo(t, st, "b")
	pspheader, _ := os.ReadFile(filepath.Join(repoRoot, "examples", "classifiers", "c", "pspheader.wasm"))
	if b.Version != 3 || b.Size != len(pspheader) || b.SHA256 == "" || b.LoadedAt == "" {
		t.Errorf("b after the rollback: %+v", b)
	}
	out, err = runCLI(t, "status", "--admin", s.admin, "--token-file", s.tokenFiles["operator"])
	if err != nil || !strings.Contains(out, b.SHA256[:12]) {
		t.Errorf("psp status does not show b's module %s: %v\n%s", b.SHA256[:12], err, out)
	}
	// Changes made go to the audit log, refusals to its .refused stream:
	// each refused credential's first line in full (the repeat of the
	// anonymous one is counted, written when its interval ends).
	lines := auditLog(t, s.audit)
	if len(lines) != 4 {
		t.Fatalf("%d audit lines, want 4 (3 pushes, 1 rollback): %v", len(lines), lines)
	}
	refused := auditLog(t, s.audit+".refused")
	if len(refused) != 3 {
		t.Fatalf("%d lines of refusals, want 3 (two forbidden, one unauthorized; its repeat counted): %v", len(refused), refused)
	}
	for i, l := range append(lines[:3:3], refused...) {
		for _, k := range []string{"time", "event", "tenant", "remote", "outcome"} {
			if _, ok := l[k]; !ok {
				t.Errorf("audit line %d lacks %s: %v", i, k, l)
			}
		}
	}
	if l := lines[0]; l["outcome"] != "ok" || l["tenant"] != "b" || l["size"] != float64(len(random)) || l["version"] != float64(2) || l["sha256"] == nil {
		t.Errorf("audit line of b's swap: %v", l)
	}
	if l := refused[0]; l["outcome"] != "forbidden" || l["principal"] != "tenant:a" || l["tenant"] != "b" {
		t.Errorf("audit line of a's refused token: %v", l)
	}
	if l := refused[2]; l["outcome"] != "unauthorized" || l["tenant"] != "b" {
		t.Errorf("audit line of the missing token: %v", l)
	}
	if l := lines[3]; l["event"] != "rollback" || l["outcome"] != "ok" || l["version"] != float64(3) {
		t.Errorf("audit line of the rollback: %v", l)
	}
}

// exec runs the psp binary.
func runCLI(t testing.TB, args ...string) (string, error) {
	t.Helper()
	cmd := newPSPCmd(args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// TestTenantLifecycleUnderLoad shrinks a's share and adds a tenant with
// psp tenant add while a and b are loaded, serves it, updates it, removes b
// and then the new one,
// and checks that every request is accounted for, per tenant and in all:
// received = answered + dropped (by reason) + in flight.
func TestTenantLifecycleUnderLoad(t *testing.T) {
	s := startTenantServer(t, 0, 0)
	hb := builtin(t, "high-bimodal")
	rate := loadgen.RateForLoad(hb, 0.3, aWorkers, tenantDilation)
	const runFor = 8 * time.Second
	waitA := s.playPort(t, s.portA, hb, rate, runFor, 1)
	waitB := s.playPort(t, s.portB, cheap(t), 400, runFor, 2)
	op := s.tokenFiles["operator"]
	pc := freePort(t, "udp")
	time.Sleep(time.Second)
	// a and b hold every worker: a makes room for c.
	if out, err := runCLI(t, "tenant", "update", "a", "--admin", s.admin, "--token-file", op, "--workers", "8"); err != nil {
		t.Fatalf("psp tenant update a: %v\n%s", err, out)
	}
	out, err := runCLI(t, "tenant", "add", "c", "--admin", s.admin, "--token-file", op, "--ports", strconv.Itoa(pc),
		"--classifier", filepath.Join(repoRoot, "examples", "classifiers", "c", "pspheader.wasm"), "--workers", "2")
	if err != nil {
		t.Fatalf("psp tenant add: %v\n%s", err, out)
	}
	waitC := s.playPort(t, pc, cheap(t), 150, 3*time.Second, 3)
	time.Sleep(time.Second)
	if out, err := runCLI(t, "tenant", "update", "c", "--admin", s.admin, "--token-file", op, "--max-workers", "3"); err != nil {
		t.Fatalf("psp tenant update: %v\n%s", err, out)
	}
	time.Sleep(time.Second)
	if out, err := runCLI(t, "tenant", "remove", "b", "--admin", s.admin, "--token-file", op); err != nil {
		t.Fatalf("psp tenant remove b: %v\n%s", err, out)
	}
	c, err := waitC()
	if err != nil {
		t.Fatal(err)
	}
	if out, err := runCLI(t, "tenant", "remove", "c", "--admin", s.admin, "--token-file", op); err != nil {
		t.Fatalf("psp tenant remove c: %v\n%s", err, out)
	}
	r := awaitAll(t, waitA, waitB)
	a, b := r[0], r[1]
	t.Logf("a: %s", summary(a))
	t.Logf("b: %s", summary(b))
	t.Logf("c: %s", summary(c))
	if a.Answered != a.Sent {
		t.Errorf("a answered %d of %d while tenants came and went", a.Answered, a.Sent)
	}
	if c.Answered < c.Sent*99/100 {
		t.Errorf("c, added under load, answered %d of %d", c.Answered, c.Sent)
	}
	// Let the last requests finish, then check the accounting.
	deadline := time.Now().Add(10 * time.Second)
	var st *pspserver.Status
	for {
		st = s.tenantStatus(t)
		if st.InFlight == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if st.Received != st.Answered+st.Dropped+st.InFlight || st.InFlight != 0 {
		t.Errorf("received %d != answered %d + dropped %d + in flight %d", st.Received, st.Answered, st.Dropped, st.InFlight)
	}
	var removed int
	for _, ti := range st.Tenants {
		if got := ti.Answered + ti.Dropped + uint64(ti.Queued+ti.Running+ti.Classifying); ti.Received != got {
			t.Errorf("tenant %s: received %d != answered %d + dropped %d + queued/running/classifying", ti.Name, ti.Received, ti.Answered, ti.Dropped)
		}
		if ti.Removed {
			removed++
		}
	}
	// b's port closed with it: what b's client sent afterwards never
	// reached psp.
	if removed != 2 || b.Answered == b.Sent || b.Answered == 0 {
		t.Errorf("%d removed tenants in the status; b answered %d of %d", removed, b.Answered, b.Sent)
	}
}

func newServeCmd(cfgFile string, log io.Writer) *exec.Cmd {
	cmd := exec.Command(pspBinary, "serve", "--config", cfgFile)
	cmd.Stdout, cmd.Stderr = log, log
	return cmd
}

func newPSPCmd(args ...string) *exec.Cmd { return exec.Command(pspBinary, args...) }

// runRatios returns each run's p99.9 slowdown of a beside b over its
// twin's.
func runRatios(aNoisy, aTwin []*loadgen.Result) []float64 {
	var ratios []float64
	for i := range aNoisy {
		ratios = append(ratios, aNoisy[i].Overall.P999Slowdown/aTwin[i].Overall.P999Slowdown)
	}
	return ratios
}

// noisyRatios returns a's p99.9 slowdown beside b over its twin's, the
// runs pooled, and the median of the runs' ratios.
func noisyRatios(aNoisy, aTwin []*loadgen.Result) (pooled, median float64) {
	ratios := runRatios(aNoisy, aTwin)
	return pooledP999Slowdown(aNoisy) / pooledP999Slowdown(aTwin), slices.Sorted(slices.Values(ratios))[len(ratios)/2]
}
