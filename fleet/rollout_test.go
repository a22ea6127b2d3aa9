package fleet

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/persephone-go/psp/admin"
	"github.com/persephone-go/psp/nic/memnic"
	"github.com/persephone-go/psp/server"
	"github.com/persephone-go/psp/wasmclass"
	"github.com/persephone-go/psp/wire"
)

func module(t *testing.T, rel string) Module {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "examples", "classifiers", rel))
	if err != nil {
		t.Fatal(err)
	}
	s := sha256.Sum256(b)
	return Module{Wasm: b, SHA256: hex.EncodeToString(s[:]), Reference: rel}
}

// startServer runs an in-memory server with the C psp-header classifier
// and an admin endpoint on loopback.
func startServer(t *testing.T, token string) string {
	addr, _ := startServerDP(t, token)
	return addr
}

// startServerDP is startServer, with the server's in-memory dataplane.
func startServerDP(t *testing.T, token string) (string, *memnic.Dataplane) {
	return startServerTenants(t, token, nil)
}

// startServerTenants is startServerDP with tenants (none: one tenant, the
// default, classified by the C psp-header module).
func startServerTenants(t *testing.T, token string, tenants []server.Tenant) (string, *memnic.Dataplane) {
	t.Helper()
	tf := filepath.Join(t.TempDir(), "token")
	os.WriteFile(tf, []byte(token+"\n"), 0o600)
	cfg := server.Config{Dataplane: server.DataplaneMemory, Workers: 2, Policy: "darc",
		App:     server.App{Name: server.AppEmulate, Dilation: 1},
		Admin:   server.Admin{Addr: "127.0.0.1:0", TokenFile: tf},
		Tenants: tenants}
	if len(tenants) == 0 {
		cfg.Classifier = filepath.Join("..", "examples", "classifiers", "c", "pspheader.wasm")
	}
	srv, err := server.New(context.Background(), cfg, server.Options{Log: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	// Replies are read by nobody: drop them as they come.
	dp := srv.Dataplane().(*memnic.Dataplane)
	go func() {
		for {
			select {
			case <-dp.Replies():
			case <-ctx.Done():
				return
			}
		}
	}()
	return srv.AdminAddr(), dp
}

// busyServers starts n servers (token "tok") with traffic, and returns
// their admin addresses.
func busyServers(t *testing.T, n int) []string {
	var servers []string
	for range n {
		addr, dp := startServerDP(t, "tok")
		traffic(t, dp)
		servers = append(servers, addr)
	}
	return servers
}

// traffic sends SHORT and LONG requests, alternately, about 2000 a second,
// until the test ends.
func traffic(t *testing.T, dp *memnic.Dataplane) { trafficTo(t, dp, 0) }

// trafficTo is traffic to port (0: the dataplane's own).
func trafficTo(t *testing.T, dp *memnic.Dataplane, port uint16) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		peer := netip.MustParseAddrPort("192.0.2.1:1")
		b := make([]byte, wire.HeaderLen)
		for id := uint32(0); ctx.Err() == nil; id++ {
			wire.Header{ID: id, Type: 1 + id%2, ServiceNs: 1000}.Encode(b)
			if port == 0 {
				dp.Inject(b, peer)
			} else {
				dp.InjectPort(b, peer, port)
			}
			if id%20 == 0 {
				time.Sleep(10 * time.Millisecond)
			}
		}
	}()
}

// TestRolloutOneWave: a plan of one wave observes the server on its
// module first, then judges the new one against that window: a good
// module stays, one that traps on LONG is rolled back.
func TestRolloutOneWave(t *testing.T) {
	addr, dp := startServerDP(t, "tok")
	traffic(t, dp)
	p := Plan{Servers: []string{addr}, Tenant: server.DefaultTenant, Canary: 1, Bake: time.Second, Token: "tok"}
	var log strings.Builder
	progress := func(format string, args ...any) { fmt.Fprintf(&log, format, args...) }
	good := module(t, "wat/pspheader.wasm")
	rep, err := Run(context.Background(), p, good, progress)
	if err != nil || !rep.Completed || !strings.Contains(log.String(), "observing 1 server(s)") {
		var out strings.Builder
		rep.Write(&out)
		t.Fatalf("good module: %v\n%s\n%s", err, log.String(), out.String())
	}
	if j := rep.Waves[0].Judgements[0]; !j.Pass || j.Requests < 100 || !j.BaselineOwnWindow {
		t.Fatalf("judgement: %+v", j)
	}
	bad := module(t, "wat/pspheader_faultlong.wasm")
	rep, err = Run(context.Background(), p, bad, nil)
	if !errors.Is(err, ErrRolledBack) {
		t.Fatalf("bad module: %v, want ErrRolledBack", err)
	}
	if j := rep.Waves[0].Judgements[0]; j.Pass || j.FaultRate < 0.1 || j.BaseFaultRate != 0 {
		t.Fatalf("judgement of the bad module: %+v", j)
	}
	after, _ := Inspect(context.Background(), p)
	if after[0].SHA256 != good.SHA256 {
		t.Fatalf("after the rollback: %s, want %s", after[0].SHA256, good.SHA256)
	}
}

// TestRolloutMeetsAnotherChange: someone swaps the canary during the bake.
// The rollout stops, and its rollback, a compare-and-swap on the module it
// rolled out, is refused: the other change stays, and the report says so.
// The second server is never touched.
func TestRolloutMeetsAnotherChange(t *testing.T) {
	a, b := startServer(t, "tok"), startServer(t, "tok")
	mod := module(t, "wat/pspheader.wasm")
	other := module(t, "rust/pspheader.wasm")
	p := Plan{Servers: []string{a, b}, Tenant: server.DefaultTenant, Canary: 1, Bake: 1500 * time.Millisecond, Token: "tok"}
	before, err := Inspect(context.Background(), p)
	if err != nil || before[0].Err != nil || before[0].Version != 1 {
		t.Fatalf("inspect: %v %+v", err, before)
	}
	admin, _ := admin.NewClient(a, 0)
	admin.SetToken("tok")
	progress := func(format string, args ...any) {
		if strings.Contains(format, "swapped") {
			// The canary was just swapped: a person swaps it again.
			if _, err := admin.PushClassifier(context.Background(), server.DefaultTenant, other.Wasm, "tok"); err != nil {
				t.Errorf("the other swap: %v", err)
			}
		}
	}
	rep, err := Run(context.Background(), p, mod, progress)
	if !errors.Is(err, ErrRollbackIncomplete) {
		t.Fatalf("run: %v, want ErrRollbackIncomplete", err)
	}
	if len(rep.Waves) != 1 || rep.Waves[0].Err == nil || !strings.Contains(rep.Waves[0].Err.Error(), "changed by someone else") {
		t.Fatalf("waves: %+v", rep.Waves)
	}
	if len(rep.Rollbacks) != 1 || !errors.Is(rep.Rollbacks[0].Err, wasmclass.ErrConflict) {
		t.Fatalf("rollbacks: %+v", rep.Rollbacks)
	}
	st, err := admin.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if ti, _ := findTenant(st, server.DefaultTenant); ti.SHA256 != other.SHA256 || ti.Version != 3 {
		t.Fatalf("canary runs %s version %d, want the other change %s, version 3", ti.SHA256, ti.Version, other.SHA256)
	}
	after, _ := Inspect(context.Background(), p)
	if after[1].Version != 1 || after[1].SHA256 != before[1].SHA256 {
		t.Fatalf("the second server was touched: %+v", after[1])
	}
	var out strings.Builder
	rep.Write(&out)
	// The summary counts what the table shows: one swapped, its rollback
	// refused, one untouched.
	if !strings.Contains(out.String(), "FAILED") || !strings.Contains(out.String(), "conflict") ||
		!strings.Contains(out.String(), "stopped: 1 server(s) swapped: 0 rolled back, 1 rollback(s) FAILED (see above); 1 untouched") {
		t.Errorf("report:\n%s", out.String())
	}
}

// TestRolloutNeedsTraffic: a canary that saw no requests during its bake
// fails (nothing to judge it by) and is rolled back; the second server is
// never touched.
func TestRolloutNeedsTraffic(t *testing.T) {
	a, b := startServer(t, "tok"), startServer(t, "tok")
	mod := module(t, "wat/pspheader.wasm")
	p := Plan{Servers: []string{a, b}, Tenant: server.DefaultTenant, Canary: 1, Bake: 500 * time.Millisecond, Token: "tok"}
	rep, err := Run(context.Background(), p, mod, nil)
	if !errors.Is(err, ErrRolledBack) {
		t.Fatalf("run without traffic: %v, want ErrRolledBack", err)
	}
	if j := rep.Waves[0].Judgements; len(j) != 1 || j[0].Pass || !strings.Contains(strings.Join(j[0].Reasons, ";"), "fewer than the 100") {
		t.Fatalf("judgements: %+v", j)
	}
	after, _ := Inspect(context.Background(), p)
	if after[0].Version != 3 || after[0].SHA256 == mod.SHA256 || after[1].Version != 1 {
		t.Fatalf("after: %+v", after)
	}
}

// TestRolloutStopsMisclassifiers: modules that type every request LONG, or
// every request SHORT, never fault and classify nothing UNKNOWN; the
// canary's type mix gives them away against the servers still on the old
// module, and they are rolled back. A module that traps on LONG is stopped
// before half its bake. The servers end on the module they started with,
// confirmed.
func TestRolloutStopsMisclassifiers(t *testing.T) {
	servers := busyServers(t, 3)
	p := Plan{Servers: servers, Tenant: server.DefaultTenant, Bake: 2 * time.Second, Token: "tok"}
	before, _ := Inspect(context.Background(), p)
	for _, tc := range []struct {
		module, why string
	}{
		{"wat/pspheader_alllong.wasm", "type mix"},
		{"wat/pspheader_allshort.wasm", "type mix"},
		{"wat/pspheader_faultlong.wasm", "classifier faults"},
	} {
		rep, err := Run(context.Background(), p, module(t, tc.module), nil)
		var out strings.Builder
		if rep != nil {
			rep.Write(&out)
		}
		if !errors.Is(err, ErrRolledBack) || len(rep.Waves) != 1 || !strings.Contains(out.String(), tc.why) ||
			!strings.Contains(out.String(), "stopped: 1 server(s) swapped and rolled back, 2 untouched") {
			t.Fatalf("%s: %v\n%s", tc.module, err, out.String())
		}
		if tc.why == "classifier faults" && (rep.Waves[0].Aborted == "" || rep.Waves[0].Bake >= p.Bake/2) {
			t.Errorf("%s: baked %v of %v (aborted %q): want it stopped before half", tc.module, rep.Waves[0].Bake, p.Bake, rep.Waves[0].Aborted)
		}
		t.Logf("%s:\n%s", tc.module, out.String())
	}
	after, _ := Inspect(context.Background(), p)
	for i := range after {
		if after[i].SHA256 != before[i].SHA256 || !after[i].Provisional.IsZero() {
			t.Errorf("%s ends on %.12s (provisional %v), started on %.12s", after[i].Server, after[i].SHA256, after[i].Provisional, before[i].SHA256)
		}
	}
	// A good module reaches every server, the control group last, and is
	// confirmed.
	good := module(t, "wat/pspheader.wasm")
	rep, err := Run(context.Background(), p, good, nil)
	var out strings.Builder
	rep.Write(&out)
	if err != nil || !rep.Completed || len(rep.Waves) != 3 || rep.Waves[2].Kind != "control" || !strings.Contains(rep.Waves[1].Baseline, "1 server(s) on the old module") {
		t.Fatalf("good module: %v\n%s", err, out.String())
	}
	after, _ = Inspect(context.Background(), p)
	for _, s := range after {
		if s.SHA256 != good.SHA256 || !s.Provisional.IsZero() {
			t.Errorf("%s after the rollout: %.12s, provisional %v", s.Server, s.SHA256, s.Provisional)
		}
	}
}

// TestRolloutResumesInterrupted: a rollout interrupted after swapping
// two of three servers (their swaps still provisional) is run again
// before their deadline: it adopts those swaps (renews them, judges them
// with their waves, confirms them at the end) instead of taking them for
// done, so no server reverts afterwards and the report agrees with the
// servers.
func TestRolloutResumesInterrupted(t *testing.T) {
	servers := busyServers(t, 3)
	mod := module(t, "wat/pspheader.wasm")
	p := Plan{Servers: servers, Tenant: server.DefaultTenant, Canary: 1, Bake: time.Second, Token: "tok", ConfirmDeadline: 5 * time.Second}
	// The interrupted rollout's swaps: the canary and the second wave.
	for _, addr := range servers[:2] {
		c, _ := admin.NewClient(addr, 5*time.Second)
		if _, err := c.PushClassifierIf(context.Background(), server.DefaultTenant, mod.Wasm, "tok", admin.SwapOptions{Provisional: 2 * time.Second}); err != nil {
			t.Fatal(err)
		}
	}
	var log strings.Builder
	progress := func(format string, args ...any) { fmt.Fprintf(&log, format, args...) }
	rep, err := Run(context.Background(), p, mod, progress)
	var out strings.Builder
	if rep != nil {
		rep.Write(&out)
	}
	if err != nil || !rep.Completed || strings.Count(log.String(), "provisionally (an interrupted rollout's swap): adopted") != 2 {
		t.Fatalf("resumed rollout: %v\n%s\n%s", err, log.String(), out.String())
	}
	t.Logf("progress:\n%s\nreport:\n%s", log.String(), out.String())
	if !strings.Contains(out.String(), "2 server(s) ran the module provisionally when the rollout started") {
		t.Errorf("the report does not say it adopted 2 servers:\n%s", out.String())
	}
	// Past the interrupted swaps' deadline (three 1 s bakes outlast it),
	// every server still runs the module, confirmed.
	after, _ := Inspect(context.Background(), p)
	for _, st := range after {
		if st.SHA256 != mod.SHA256 || !st.Provisional.IsZero() {
			t.Errorf("%s runs %.12s (provisional until %v), want %.12s confirmed\n%s\n%s", st.Server, st.SHA256, st.Provisional, mod.SHA256, log.String(), out.String())
		}
	}

	// An interrupted rollout of a trapping module, resumed: the adopted
	// canary fails and is rolled back to the module it ran before.
	bad := module(t, "wat/pspheader_faultlong.wasm")
	c, _ := admin.NewClient(servers[0], 5*time.Second)
	if _, err := c.PushClassifierIf(context.Background(), server.DefaultTenant, bad.Wasm, "tok", admin.SwapOptions{Provisional: 30 * time.Second}); err != nil {
		t.Fatal(err)
	}
	rep, err = Run(context.Background(), p, bad, nil)
	out.Reset()
	if rep != nil {
		rep.Write(&out)
	}
	if !errors.Is(err, ErrRolledBack) || !strings.Contains(out.String(), "stopped: 1 server(s) swapped and rolled back, 2 untouched") {
		t.Fatalf("resumed rollout of a trapping module: %v\n%s", err, out.String())
	}
	if st, _ := Inspect(context.Background(), p); st[0].SHA256 != mod.SHA256 || !st[0].Provisional.IsZero() {
		t.Errorf("the adopted canary after the rollback: %.12s (provisional until %v), want %.12s confirmed", st[0].SHA256, st[0].Provisional, mod.SHA256)
	}
}

// TestRolloutNamedTenant: a rollout to one tenant of servers with two,
// each with its own classifier and traffic, judges that tenant's types
// only: a module typing every request LONG is stopped on its type mix,
// a good one rolls out, and the other tenant never changes.
func TestRolloutNamedTenant(t *testing.T) {
	header := filepath.Join("..", "examples", "classifiers", "c", "pspheader.wasm")
	var servers []string
	for range 2 {
		addr, dp := startServerTenants(t, "tok", []server.Tenant{
			{Name: "a", Ports: []uint16{7001}, Classifier: header, Workers: 1},
			{Name: "kv", Ports: []uint16{7002}, Classifier: header, Workers: 1},
		})
		trafficTo(t, dp, 7001)
		trafficTo(t, dp, 7002)
		servers = append(servers, addr)
	}
	p := Plan{Servers: servers, Tenant: "kv", Canary: 1, Bake: time.Second, Token: "tok"}
	other := p
	other.Tenant = "a"
	before, _ := Inspect(context.Background(), other)
	rep, err := Run(context.Background(), p, module(t, "wat/pspheader_alllong.wasm"), nil)
	var out strings.Builder
	if rep != nil {
		rep.Write(&out)
	}
	if !errors.Is(err, ErrRolledBack) || !strings.Contains(out.String(), "type mix") || !strings.Contains(out.String(), "kv/LONG 100.00% of requests") {
		t.Fatalf("all-LONG module to tenant kv: %v\n%s", err, out.String())
	}
	good := module(t, "wat/pspheader.wasm")
	if rep, err := Run(context.Background(), p, good, nil); err != nil || !rep.Completed {
		out.Reset()
		rep.Write(&out)
		t.Fatalf("good module to tenant kv: %v\n%s", err, out.String())
	}
	kv, _ := Inspect(context.Background(), p)
	after, _ := Inspect(context.Background(), other)
	for i := range servers {
		if kv[i].SHA256 != good.SHA256 || after[i] != before[i] {
			t.Errorf("%s: tenant kv runs %.12s (want %.12s), tenant a %+v (was %+v)", servers[i], kv[i].SHA256, good.SHA256, after[i], before[i])
		}
	}
}
