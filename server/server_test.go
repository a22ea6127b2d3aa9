package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	json "github.com/goccy/go-json"

	"github.com/persephone-go/psp/app/kv"
	"github.com/persephone-go/psp/internal/testenv"
	"github.com/persephone-go/psp/nic/memnic"
	"github.com/persephone-go/psp/wire"
)

func header(id, typ, serviceNs uint32) []byte {
	b := make([]byte, wire.HeaderLen)
	wire.Header{ID: id, Type: typ, ServiceNs: serviceNs}.Encode(b)
	return b
}

// memConfig is a small in-memory server: emulate with a tiny dilation. The
// tests inject bursts far above its capacity and check every answer, not
// the shedding: no automatic deadlines, and a pool that holds the bursts.
func memConfig() Config {
	return Config{
		Dataplane:      DataplaneMemory,
		Workers:        4,
		Buffers:        2048,
		Policy:         "darc",
		MinSamples:     100,
		DeadlineFactor: -1,
		App:            App{Name: AppEmulate, Dilation: 1, SpinTail: -1},
		Admin:          Admin{Addr: "127.0.0.1:0"},
	}
}

type running struct {
	srv  *Server
	stop func() error
}

func start(t *testing.T, cfg Config) running {
	t.Helper()
	return startWith(t, cfg, Options{})
}

// startWith runs a server of cfg and opts; stop, which may be called
// again, cancels it and returns what Run returned.
func startWith(t testing.TB, cfg Config, opts Options) running {
	t.Helper()
	srv, err := New(context.Background(), cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- srv.Run(ctx) }()
	var once sync.Once
	var runErr error
	return running{srv: srv, stop: func() error {
		once.Do(func() {
			cancel()
			runErr = testenv.Await(t, errc, 20*time.Second, "Run to return")
		})
		return runErr
	}}
}

// inject retries until the pool has a free buffer.
func inject(dp *memnic.Dataplane, payload []byte, peer netip.AddrPort) {
	for !dp.Inject(payload, peer) {
		time.Sleep(50 * time.Microsecond)
	}
}

func getStatus(t *testing.T, h http.Handler) Status {
	t.Helper()
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("GET", "/status", nil)
	req.Header.Set("Authorization", "Bearer operator-secret") // the tests' operator token, for servers with tokens
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /status: %d %s", rec.Code, rec.Body)
	}
	var st Status
	if err := json.Unmarshal(rec.Body.Bytes(), &st); err != nil {
		t.Fatalf("decode /status: %v", err)
	}
	return st
}

func TestMemServerAnswersAndReports(t *testing.T) {
	cfg := memConfig()
	// SHORT 100 µs and LONG 2 ms: far enough apart that timer jitter on a
	// loaded machine cannot make DARC group them together.
	cfg.App.Dilation = 100
	procs := runtime.GOMAXPROCS(0)
	r := start(t, cfg)
	dp := r.srv.Dataplane().(*memnic.Dataplane)
	peer := netip.MustParseAddrPort("10.0.0.1:5000")
	const n = 400
	for i := 0; i < n; i++ {
		typ := uint32(wire.TypeShort)
		svc := uint32(1000)
		if i%2 == 1 {
			typ, svc = wire.TypeLong, 20000
		}
		inject(dp, header(uint32(i), typ, svc), peer)
	}
	inject(dp, []byte("garbage"), peer) // runt
	inject(dp, header(n, 77, 0), peer)  // unknown type: spillway
	seen := map[uint32]bool{}
	deadline := time.After(10 * time.Second)
	for len(seen) < n+1 {
		select {
		case rep := <-dp.Replies():
			h, err := wire.Decode(rep.Payload)
			if err != nil {
				t.Fatalf("bad reply %x", rep.Payload)
			}
			if seen[h.ID] {
				t.Fatalf("duplicate reply %d", h.ID)
			}
			seen[h.ID] = true
			if rep.Peer != peer {
				t.Errorf("reply to %v, want %v", rep.Peer, peer)
			}
		case <-deadline:
			st := getStatus(t, r.srv.Handler())
			j, _ := json.MarshalIndent(st, "", " ")
			t.Fatalf("got %d replies of %d; status %s", len(seen), n+1, j)
		}
	}
	time.Sleep(250 * time.Millisecond) // one stats interval
	st := getStatus(t, r.srv.Handler())
	if st.Received != n+2 || st.Answered != n+1 || st.Drops.Runt != 1 {
		t.Errorf("status received %d answered %d runts %d, want %d %d 1", st.Received, st.Answered, st.Drops.Runt, n+2, n+1)
	}
	if st.Policy != "darc" || st.Phase != "darc" {
		t.Errorf("policy %q phase %q, want darc after %d samples", st.Policy, st.Phase, n)
	}
	if len(st.Groups) == 0 || st.Groups[0].Types[0] != "SHORT" || len(st.Groups[0].Reserved) != 1 {
		t.Errorf("groups %+v, want SHORT first with one reserved worker", st.Groups)
	}
	if st.Reservations == 0 {
		t.Errorf("no reservation computed")
	}
	if st.Types[1].Answered != n/2 || st.Types[0].Answered != 1 {
		t.Errorf("SHORT answered %d UNKNOWN answered %d, want %d and 1", st.Types[1].Answered, st.Types[0].Answered, n/2)
	}
	if len(st.Tenants) != 1 || !st.Tenants[0].Native {
		t.Errorf("tenants %+v, want the native classifier", st.Tenants)
	}

	rec := httptest.NewRecorder()
	r.srv.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body := rec.Body.String()
	for _, want := range []string{"psp_requests_received_total 402", `psp_requests_dropped_total{reason="runt"} 1`,
		`psp_type_requests_answered_total{type="SHORT"} 200`, `psp_type_requests_answered_total{type="UNKNOWN"} 1`,
		`psp_request_service_seconds_count{type="SHORT"} 200`, `psp_request_queueing_seconds_count{type="LONG"} 200`,
		"psp_dataplane_receive_packets_total 402", "go_goroutines",
		`psp_requests_dropped_total{reason="expired"} 0`, `psp_type_requests_dropped_total{reason="budget",type="LONG"} 0`, "psp_pool_requests 1536",
		`psp_type_budget_requests{type="SHORT"}`, "psp_overloaded 0", "psp_dataplane_receive_no_buffer_total 0"} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	// Only the types that exist: the native classifier's type space has 12
	// ids, this workload 2 (and UNKNOWN got one request).
	var names []string
	for _, ts := range st.Types {
		names = append(names, ts.Name)
	}
	if got := strings.Join(names, ","); got != "UNKNOWN,SHORT,LONG" {
		t.Errorf("status types %s, want UNKNOWN,SHORT,LONG", got)
	}
	if strings.Contains(body, `type="type3"`) || strings.Contains(body, `type="GET"`) {
		t.Errorf("/metrics shows types that saw no request:\n%s", body)
	}
	lintMetrics(t, body)
	// Counters partition what they count: summed over their label they give
	// the totals of the status.
	if got := sumMetric(body, "psp_type_requests_answered_total"); got != float64(st.Answered) {
		t.Errorf("sum of psp_type_requests_answered_total = %v, want %d", got, st.Answered)
	}
	if got := sumMetric(body, "psp_requests_dropped_total"); got != float64(st.Dropped) {
		t.Errorf("sum of psp_requests_dropped_total = %v, want %d", got, st.Dropped)
	}
	if got := sumMetric(body, "psp_request_service_seconds_count"); got != float64(st.Answered) {
		t.Errorf("sum of psp_request_service_seconds_count = %v, want %d", got, st.Answered)
	}
	checkStages(t, body, st, n/2)
	// Under spin-then-park each worker and the dispatcher keep their Go
	// processor while they sleep in the kernel: the server raises
	// GOMAXPROCS to one each plus a spare while it runs (the live tail's
	// fix; see RATIONALE.md), and puts it back when it stops.
	if os.Getenv("GOMAXPROCS") == "" && st.Runtime.GOMAXPROCS < cfg.Workers+2 {
		t.Errorf("GOMAXPROCS %d while serving with %d spin-then-park workers, want at least %d", st.Runtime.GOMAXPROCS, cfg.Workers, cfg.Workers+2)
	}
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	if after := runtime.GOMAXPROCS(0); after != procs {
		t.Errorf("GOMAXPROCS %d after the server stopped (%d while it ran), want %d as before it started", after, st.Runtime.GOMAXPROCS, procs)
	}
}

func TestSwapNeedsTokenAndWasm(t *testing.T) {
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	os.WriteFile(tokenFile, []byte("s3cret\n"), 0o600)
	cfg := memConfig()
	cfg.Admin.TokenFile = tokenFile
	srv, err := New(context.Background(), cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	put := func(auth string) int {
		req := httptest.NewRequest("PUT", "/tenants/default/classifier", bytes.NewReader([]byte("\x00asm")))
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		rec := httptest.NewRecorder()
		srv.Handler().ServeHTTP(rec, req)
		return rec.Code
	}
	if got := put(""); got != http.StatusUnauthorized {
		t.Errorf("no token: %d, want 401", got)
	}
	if got := put("Bearer wrong"); got != http.StatusUnauthorized {
		t.Errorf("wrong token: %d, want 401", got)
	}
	if got := put("Basic s3cret"); got != http.StatusUnauthorized {
		t.Errorf("other scheme: %d, want 401", got)
	}
	if got := put("Bearer s3cret"); got != http.StatusConflict {
		t.Errorf("native classifier: %d, want 409", got)
	}
	if got := put("bearer s3cret"); got != http.StatusConflict {
		t.Errorf("lower-case scheme: %d, want 409 (schemes are case-insensitive)", got)
	}
}

func TestConfigStrictAndValidated(t *testing.T) {
	if _, err := ParseConfig([]byte("listen: 127.0.0.1:1\nworkerz: 3\n")); !errors.Is(err, ErrConfig) {
		t.Errorf("unknown key: %v, want ErrConfig", err)
	}
	cfg, err := ParseConfig([]byte("workers: 3\npolicy: cfcfs\napp:\n  name: spin\nspin: 20us\n"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Workers != 3 || cfg.Policy != "cfcfs" || cfg.App.Name != "spin" || cfg.Spin != 20*time.Microsecond {
		t.Errorf("parsed %+v", cfg)
	}
	for _, bad := range []Config{
		{Policy: "lifo"},
		{Listen: "nowhere"},
		{Workers: -2},
		{App: App{Name: "nosuchapp"}},
		{CPUs: "0-100000"},
		{Classifier: "a.wasm", Tenants: []Tenant{{Name: "x", Classifier: "b.wasm"}}},
		{Tenants: []Tenant{{Name: "a", Classifier: "a.wasm"}, {Name: "b", Classifier: "b.wasm"}}},
		{Tenants: []Tenant{{Name: "a", Classifier: "a.wasm", Ports: []uint16{1}}, {Name: "b", Classifier: "b.wasm", Ports: []uint16{1}}}},
		{Idle: "nap"},
	} {
		if err := bad.Validate(); !errors.Is(err, ErrConfig) {
			t.Errorf("%+v: Validate = %v, want ErrConfig", bad, err)
		}
	}
	// The printed config parses back to itself.
	out, err := memConfig().YAML()
	if err != nil {
		t.Fatal(err)
	}
	back, err := ParseConfig(out)
	if err != nil {
		t.Fatalf("re-parse printed config: %v\n%s", err, out)
	}
	if b2, _ := back.YAML(); !bytes.Equal(b2, out) {
		t.Errorf("round trip differs:\n%s\n---\n%s", out, b2)
	}
}

func TestMemServerKVAndTPCC(t *testing.T) {
	for _, app := range []App{{Name: AppKV, KV: KV{Keys: 100}}, {Name: AppTPCC, Dilation: 2}, {Name: AppSpin}} {
		t.Run(app.Name, func(t *testing.T) {
			cfg := memConfig()
			cfg.App = app
			cfg.Policy = "cfcfs"
			r := start(t, cfg)
			dp := r.srv.Dataplane().(*memnic.Dataplane)
			peer := netip.MustParseAddrPort("10.0.0.2:6000")
			buf := make([]byte, 64)
			for i := 0; i < 20; i++ {
				var p []byte
				switch app.Name {
				case AppKV:
					op := uint32(wire.TypeGet)
					if i%4 == 0 {
						op = wire.TypeScan
					}
					p = buf[:kv.Encode(buf, kv.Request{ID: uint32(i), Op: op, Key: kv.Key(i)})]
				case AppTPCC:
					p = header(uint32(i), wire.TypePayment+uint32(i%5)-1, 0)
				default:
					p = header(uint32(i), wire.TypeShort, 500)
				}
				inject(dp, p, peer)
			}
			for i := 0; i < 20; i++ {
				select {
				case rep := <-dp.Replies():
					h, err := wire.Decode(rep.Payload)
					if err != nil {
						t.Fatalf("bad reply %x", rep.Payload)
					}
					if app.Name == AppKV && h.Reserved != kv.StatusOK {
						t.Errorf("kv reply %+v: status %d", h, h.Reserved)
					}
				case <-time.After(10 * time.Second):
					t.Fatalf("%d replies of 20", i)
				}
			}
			if err := r.stop(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestExampleConfigLoads(t *testing.T) {
	cfg, err := LoadConfig(filepath.Join("..", "examples", "serve.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if cfg.MinSamples != 500 || cfg.App.Name != AppEmulate || cfg.Workers != 14 {
		t.Errorf("examples/serve.yaml parsed as %+v", cfg)
	}
}

func TestAdminOffServes(t *testing.T) {
	cfg := memConfig()
	cfg.Admin.Addr = "off"
	r := start(t, cfg)
	if r.srv.AdminAddr() != "" {
		t.Errorf("admin address %q with the endpoint off", r.srv.AdminAddr())
	}
	dp := r.srv.Dataplane().(*memnic.Dataplane)
	inject(dp, header(1, wire.TypeShort, 10), netip.MustParseAddrPort("10.0.0.3:1"))
	select {
	case <-dp.Replies():
	case <-time.After(10 * time.Second):
		t.Fatal("no reply with the admin endpoint off")
	}
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
}

func TestMemServerTenantsByPort(t *testing.T) {
	cfg := memConfig()
	cfg.Policy = "cfcfs"
	cfg.Tenants = []Tenant{
		{Name: "psp", Classifier: exampleWasm(t, "pspheader.wasm")},
		{Name: "rnd", Ports: []uint16{7000}, Classifier: exampleWasm(t, "random.wasm")},
	}
	r := start(t, cfg)
	dp := r.srv.Dataplane().(*memnic.Dataplane)
	peer := netip.MustParseAddrPort("10.0.0.4:1")
	for i := 0; i < 40; i++ {
		port := uint16(6789)
		if i%2 == 1 {
			port = 7000
		}
		for !dp.InjectPort(header(uint32(i), wire.TypeStockLevel, 10), peer, port) {
			time.Sleep(50 * time.Microsecond)
		}
	}
	for i := 0; i < 40; i++ {
		select {
		case <-dp.Replies():
		case <-time.After(10 * time.Second):
			t.Fatalf("%d replies of 40", i)
		}
	}
	time.Sleep(250 * time.Millisecond)
	st := getStatus(t, r.srv.Handler())
	byName := map[string]TypeStatus{}
	for _, ts := range st.Types {
		byName[ts.Name] = ts
	}
	if got := byName["psp/StockLevel"].Received; got != 20 {
		t.Errorf("psp/StockLevel received %d, want the 20 requests on the default port", got)
	}
	rnd := byName["rnd/SHORT"].Received + byName["rnd/LONG"].Received
	if rnd != 20 {
		t.Errorf("random tenant classified %d requests as SHORT or LONG, want the 20 on port 7000 (types %+v)", rnd, st.Types)
	}
	if len(st.Tenants) != 2 || st.Tenants[1].Name != "rnd" || st.Tenants[1].Ports[0] != 7000 {
		t.Errorf("tenants %+v", st.Tenants)
	}
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
}

// checkStages checks the per-type stage breakdown in a server's /metrics
// and /status after short requests of type SHORT were answered.
func checkStages(t *testing.T, body string, st Status, short int) {
	t.Helper()
	for _, stage := range StageNames() {
		name := "psp_request_" + stage + "_seconds"
		for _, want := range []string{
			"# TYPE " + name + " histogram",
			fmt.Sprintf(`%s_count{type="SHORT"} %d`, name, short),
			fmt.Sprintf(`%s_bucket{type="SHORT",le="+Inf"} %d`, name, short),
			name + `_bucket{type="SHORT",le="0.001"} `,
		} {
			if !strings.Contains(body, want) {
				t.Errorf("/metrics lacks %q", want)
			}
		}
	}
	var ts *TypeStatus
	for i := range st.Types {
		if st.Types[i].Name == "SHORT" {
			ts = &st.Types[i]
		}
	}
	if ts == nil || ts.Stages == nil {
		t.Fatalf("status has no stage breakdown for SHORT: %+v", ts)
	}
	b := ts.Stages
	sum := 0.0
	for _, stage := range StageNames() {
		l := b.ByName(stage)
		if l.Count != uint64(short) {
			t.Errorf("status stage %s: count %d, want %d", stage, l.Count, short)
		}
		if stage != "latency" {
			sum += l.MeanNs
		}
		if l.P50Ns > l.P99Ns || l.P99Ns > l.P999Ns {
			t.Errorf("status stage %s: quantiles %d %d %d not in order", stage, l.P50Ns, l.P99Ns, l.P999Ns)
		}
	}
	// Every request went through every stage: the means add up.
	if d := sum - b.Latency.MeanNs; d > 1 || d < -1 {
		t.Errorf("stage means add up to %.0f ns, mean latency %.0f ns", sum, b.Latency.MeanNs)
	}
	// SHORT's service is 1µs x 100 = 100µs, emulated.
	if b.Service.MeanNs < 100e3 || b.Service.P50Ns < 100e3 {
		t.Errorf("SHORT service mean %.0f ns, p50 %d ns: want at least the emulated 100µs", b.Service.MeanNs, b.Service.P50Ns)
	}
	if st.Runtime.GOMAXPROCS < 1 || st.Runtime.SchedLatency.Count == 0 {
		t.Errorf("runtime status %+v, want GOMAXPROCS and scheduling latencies", st.Runtime)
	}
}
