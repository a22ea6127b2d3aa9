package server

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/persephone-go/psp/internal/registrytest"
	"github.com/persephone-go/psp/internal/testenv"
	"github.com/persephone-go/psp/nic/memnic"
	"github.com/persephone-go/psp/oci"
	"github.com/persephone-go/psp/wire"
)

func fileSHA(t *testing.T, path string) ([]byte, string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := sha256.Sum256(b)
	return b, hex.EncodeToString(s[:])
}

// twoModules starts a server with the operator token "operator-secret",
// running the C header classifier (sha256 sum1), and returns its handler,
// its log, and a second module (the WAT one) to swap in.
func twoModules(t *testing.T) (h http.Handler, log *testenv.SyncBuffer, sum1 string, v2 []byte, sum2 string) {
	t.Helper()
	cfg := memConfig()
	cfg.Admin.TokenFile = writeToken(t, "operator-secret")
	cfg.Classifier = exampleWasm(t, "pspheader.wasm")
	r, log := startLogged(t, cfg)
	_, sum1 = fileSHA(t, cfg.Classifier)
	v2, sum2 = fileSHA(t, filepath.Join("..", "examples", "classifiers", "wat", "pspheader.wasm"))
	if sum1 == sum2 {
		t.Fatal("the two modules are the same")
	}
	return r.srv.Handler(), log, sum1, v2, sum2
}

// TestCompareAndSwapHTTP: a swap or rollback naming another module than
// the running one is refused with 409 and audited as a conflict; naming
// the running one, it lands, and the reference it gives shows in the
// status.
func TestCompareAndSwapHTTP(t *testing.T) {
	h, log, sum1, v2, sum2 := twoModules(t)
	ref := "oci://127.0.0.1:5000/psp/header:v2@sha256:" + strings.Repeat("ab", 32)

	if rec := do(t, h, "PUT", "/tenants/default/classifier?expect_sha256="+sum2, "operator-secret", v2); rec.Code != http.StatusConflict {
		t.Fatalf("swap expecting the wrong module: %d %s, want 409", rec.Code, rec.Body)
	}
	if rec := do(t, h, "PUT", "/tenants/default/classifier?expect_version=2", "operator-secret", v2); rec.Code != http.StatusConflict {
		t.Fatalf("swap expecting version 2: %d %s, want 409", rec.Code, rec.Body)
	}
	if rec := do(t, h, "PUT", "/tenants/default/classifier?expect_sha256=xyz", "operator-secret", v2); rec.Code != http.StatusBadRequest {
		t.Fatalf("swap with a malformed expectation: %d, want 400", rec.Code)
	}
	if rec := do(t, h, "PUT", "/tenants/default/classifier?reference=oci://x/y:latest", "operator-secret", v2); rec.Code != http.StatusBadRequest {
		t.Fatalf("swap with an unpinned reference: %d, want 400", rec.Code)
	}
	if ti := tenantOf(t, getStatus(t, h), "default"); ti.Version != 1 || ti.SHA256 != sum1 {
		t.Fatalf("after refused swaps: version %d %s", ti.Version, ti.SHA256)
	}
	if rec := do(t, h, "PUT", "/tenants/default/classifier?expect_sha256="+strings.ToUpper(sum1)+"&expect_version=1&reference="+ref, "operator-secret", v2); rec.Code != http.StatusOK {
		t.Fatalf("swap expecting the running module: %d %s", rec.Code, rec.Body)
	}
	ti := tenantOf(t, getStatus(t, h), "default")
	if ti.SHA256 != sum2 || ti.Reference != ref || ti.Fail != "open" {
		t.Fatalf("after the swap: %s, reference %q, fail %q", ti.SHA256, ti.Reference, ti.Fail)
	}
	if rec := do(t, h, "POST", "/tenants/default/rollback?expect_sha256="+sum1, "operator-secret", nil); rec.Code != http.StatusConflict {
		t.Fatalf("rollback expecting the old module: %d, want 409", rec.Code)
	}
	if rec := do(t, h, "POST", "/tenants/default/rollback?expect_sha256="+sum2, "operator-secret", nil); rec.Code != http.StatusOK {
		t.Fatalf("rollback expecting the new module: %d %s", rec.Code, rec.Body)
	}
	if ti := tenantOf(t, getStatus(t, h), "default"); ti.SHA256 != sum1 || ti.Reference != "" {
		t.Fatalf("after the rollback: %s, reference %q", ti.SHA256, ti.Reference)
	}
	conflicts := 0
	for _, l := range auditLines(t, log.String()) {
		if l["outcome"] == "conflict" {
			conflicts++
			if l["expected_sha256"] == nil && l["expected_version"] == nil {
				t.Errorf("conflict audited without the expectation: %v", l)
			}
		}
	}
	if conflicts != 3 {
		t.Errorf("%d conflicts audited, want 3:\n%s", conflicts, log)
	}
}

// TestFailPolicy: a tenant whose classifier traps fails open (its requests
// served as UNKNOWN) or closed (dropped as classifier_fault).
func TestFailPolicy(t *testing.T) {
	trap := filepath.Join("..", "examples", "classifiers", "hostile", "trap.wasm")
	for _, fail := range []string{"open", "closed", "reload"} {
		t.Run(fail, func(t *testing.T) {
			cfg := memConfig()
			cfg.Tenants = []Tenant{
				{Name: "a", Ports: []uint16{portA}, Workers: 2},
				{Name: "b", Ports: []uint16{portB}, Classifier: trap, Fail: fail},
			}
			r, _ := startLogged(t, cfg)
			dp := r.srv.Dataplane().(*memnic.Dataplane)
			peer := netip.MustParseAddrPort("10.0.0.9:1")
			const n = 40
			for i := range n {
				for !dp.InjectPort(header(uint32(i), wire.TypeShort, 100), peer, portB) {
					time.Sleep(50 * time.Microsecond)
				}
			}
			var ti TenantInfo
			deadline := time.Now().Add(10 * time.Second)
			for {
				ti = tenantOf(t, getStatus(t, r.srv.Handler()), "b")
				if ti.Answered+ti.Dropped == n {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("tenant b: answered %d dropped %d of %d", ti.Answered, ti.Dropped, n)
				}
				time.Sleep(10 * time.Millisecond)
			}
			if ti.Fail != fail {
				t.Errorf("status fail %q, want %q", ti.Fail, fail)
			}
			switch fail {
			case "open":
				if ti.Answered != n || ti.Drops.ClassifierFault != 0 {
					t.Errorf("fail open: answered %d, classifier_fault %d", ti.Answered, ti.Drops.ClassifierFault)
				}
			case "closed", "reload":
				if ti.Dropped != n || ti.Drops.ClassifierFault != n {
					t.Errorf("fail %s: dropped %d, classifier_fault %d, want %d", fail, ti.Dropped, ti.Drops.ClassifierFault, n)
				}
			}
		})
	}
	bad := memConfig()
	bad.Tenants = []Tenant{{Name: "b", Classifier: trap, Fail: "sometimes"}}
	if _, err := New(context.Background(), bad, Options{}); err == nil || !strings.Contains(err.Error(), "fail") {
		t.Errorf("fail: sometimes accepted: %v", err)
	}
}

// TestServeFromRegistry: a server started with a tag pulls it, shows the
// pinned reference, and starts again from its cache with the registry
// down; a digest that is not the module's is refused.
func TestServeFromRegistry(t *testing.T) {
	reg := registrytest.Start(t)
	wasm, sum := fileSHA(t, exampleWasm(t, "pspheader.wasm"))
	tag, _ := oci.ParseRef("oci://" + reg.Addr + "/psp/header:v1")
	pinned, err := (&oci.Client{}).Publish(context.Background(), wasm, tag)
	if err != nil {
		t.Fatal(err)
	}
	cfg := memConfig()
	cfg.Classifier = tag.String()
	cfg.OCI.CacheDir = t.TempDir()
	check := func(what string) {
		t.Helper()
		r, log := startLogged(t, cfg)
		ti := tenantOf(t, getStatus(t, r.srv.Handler()), "default")
		if ti.SHA256 != sum || ti.Reference != pinned.String() {
			t.Fatalf("%s: sha256 %s reference %q, want %s and %s\n%s", what, ti.SHA256, ti.Reference, sum, pinned, log)
		}
		r.stop()
	}
	check("registry up")
	// A tenant's classifier: in the config, by tag.
	mcfg := memConfig()
	mcfg.OCI.CacheDir = "off"
	mcfg.Tenants = []Tenant{{Name: "t", Ports: []uint16{portA}, Classifier: tag.String(), Fail: "closed"}}
	mr, _ := startLogged(t, mcfg)
	if ti := tenantOf(t, getStatus(t, mr.srv.Handler()), "t"); ti.SHA256 != sum || ti.Reference != pinned.String() || ti.Fail != "closed" {
		t.Fatalf("tenant from the registry: sha256 %s reference %q fail %q", ti.SHA256, ti.Reference, ti.Fail)
	}
	mr.stop()
	reg.Stop()
	check("registry down, from the cache")
	// Registry down and no cache, or a digest that is not the
	// manifest's: the tenant starts pending (see TestPendingUntilFetched)
	// and says why.
	cfg.OCI.CacheDir = "off"
	pending := func(what, want string) {
		t.Helper()
		r, _ := startLogged(t, cfg)
		ti := tenantOf(t, getStatus(t, r.srv.Handler()), "default")
		if !strings.Contains(ti.Pending, want) || ti.SHA256 == sum {
			t.Fatalf("%s: pending %q (want it to say %q), sha256 %s", what, ti.Pending, want, ti.SHA256)
		}
		r.stop()
	}
	pending("registry down, no cache", "connection refused")
	reg.Restart(t)
	wrong := pinned.Pinned()
	wrong.Digest = "sha256:" + sum // the module's digest, not the manifest's
	cfg.Classifier = wrong.String()
	pending("a digest that is not the manifest's", "not fetched")
}

// TestServeShapesMadeWithoutPSP: a server started from each shape of Wasm
// image Istio's and Envoy Gateway's fetchers accept, made without psp
// (registrytest.PushShapes), runs the module, pinned by the manifest's
// digest, and classifies its requests with it.
func TestServeShapesMadeWithoutPSP(t *testing.T) {
	reg := registrytest.Start(t)
	wasm, sum := fileSHA(t, exampleWasm(t, "pspheader.wasm"))
	for _, sh := range registrytest.PushShapes(t, reg, wasm) {
		t.Run(sh.Name, func(t *testing.T) {
			cfg := memConfig()
			cfg.Classifier = sh.Ref
			cfg.Fail = "closed"
			cfg.OCI.CacheDir = "off"
			r, log := startLogged(t, cfg)
			defer r.stop()
			h := r.srv.Handler()
			if ti := tenantOf(t, getStatus(t, h), "default"); ti.SHA256 != sum || ti.Reference != sh.Ref+"@"+sh.Digest() || ti.Pending != "" {
				t.Fatalf("sha256 %s reference %q pending %q, want %s from %s@%s\n%s", ti.SHA256, ti.Reference, ti.Pending, sum, sh.Ref, sh.Digest(), log)
			}
			if rec := do(t, h, "GET", "/readyz", "", nil); rec.Code != http.StatusOK {
				t.Fatalf("readyz: %d %s", rec.Code, rec.Body)
			}
			if want := fmt.Sprintf("(%d bytes, sha256 %s, %s variant) from the registry", len(wasm), sum, sh.Variant); !strings.Contains(log.String(), want) {
				t.Errorf("the log does not say %q:\n%s", want, log)
			}
			dp := r.srv.Dataplane().(*memnic.Dataplane)
			peer := netip.MustParseAddrPort("10.0.0.9:1")
			const n = 10
			for i := range n {
				inject(dp, header(uint32(2*i), wire.TypeShort, 100), peer)
				inject(dp, header(uint32(2*i+1), wire.TypeLong, 100), peer)
			}
			ti := waitTenant(t, h, "default", func(ti TenantInfo) bool { return ti.Answered+ti.Dropped >= 2*n })
			st := getStatus(t, h)
			if ti.Answered != 2*n || typeReceived(st, "default/SHORT") != n || typeReceived(st, "default/LONG") != n {
				t.Errorf("answered %d of %d; SHORT %d, LONG %d, want %d each", ti.Answered, 2*n,
					typeReceived(st, "default/SHORT"), typeReceived(st, "default/LONG"), n)
			}
		})
	}
}

// TestPendingUntilFetched: a server whose classifier's registry is down at
// start (and no cache) starts anyway, per its failure policy: /readyz
// answers 503, and its requests are dropped (closed, reload) or served
// UNKNOWN (open) by the placeholder; once the module is published the background
// pull swaps it in, /readyz answers 200 and the requests are classified.
func TestPendingUntilFetched(t *testing.T) {
	reg := registrytest.Start(t)
	wasm, sum := fileSHA(t, exampleWasm(t, "pspheader.wasm"))
	for _, fail := range []string{"closed", "open", "reload"} {
		t.Run(fail, func(t *testing.T) {
			tag, _ := oci.ParseRef("oci://" + reg.Addr + "/psp/later-" + fail + ":v1")
			cfg := memConfig()
			cfg.Classifier = tag.String()
			cfg.Fail = fail
			cfg.OCI.CacheDir = "off"
			r, log := startLogged(t, cfg)
			h := r.srv.Handler()
			if rec := do(t, h, "GET", "/readyz", "", nil); rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), "1 tenant(s) waiting") {
				t.Fatalf("readyz while pending: %d %s", rec.Code, rec.Body)
			}
			if rec := do(t, h, "GET", "/healthz", "", nil); rec.Code != http.StatusOK {
				t.Fatalf("healthz: %d", rec.Code)
			}
			dp := r.srv.Dataplane().(*memnic.Dataplane)
			peer := netip.MustParseAddrPort("10.0.0.9:1")
			const n = 20
			for i := range n {
				inject(dp, header(uint32(i), wire.TypeShort, 100), peer)
			}
			ti := waitTenant(t, h, "default", func(ti TenantInfo) bool { return ti.Answered+ti.Dropped >= n })
			switch fail {
			case "closed", "reload":
				if ti.Drops.ClassifierFault != n {
					t.Errorf("pending, fail %s: %d of %d dropped as classifier_fault", fail, ti.Drops.ClassifierFault, n)
				}
			case "open":
				st := getStatus(t, h)
				if ti.Answered != n || typeReceived(st, "UNKNOWN") != n {
					t.Errorf("pending, fail open: answered %d, UNKNOWN %d, want %d", ti.Answered, typeReceived(st, "UNKNOWN"), n)
				}
			}
			if !strings.Contains(ti.Pending, "not fetched") {
				t.Errorf("status pending %q", ti.Pending)
			}
			// Every status shows the module swapped in with its reference
			// and its tenant no longer pending: polled while the swap lands.
			torn := make(chan string, 1)
			go func() {
				defer close(torn)
				deadline := time.Now().Add(10 * time.Second)
				for time.Now().Before(deadline) {
					for _, ti := range r.srv.Status().Tenants {
						if ti.Name != "default" || ti.SHA256 != sum {
							continue
						}
						if ti.Pending != "" || ti.Reference == "" {
							torn <- fmt.Sprintf("pending %q, reference %q", ti.Pending, ti.Reference)
						}
						return
					}
				}
			}()
			pinned, err := (&oci.Client{}).Publish(context.Background(), wasm, tag)
			if err != nil {
				t.Fatal(err)
			}
			ti = waitTenant(t, h, "default", func(ti TenantInfo) bool { return ti.SHA256 == sum })
			if s, ok := <-torn; ok {
				t.Errorf("a status while the module was swapped in: %s", s)
			}
			if ti.Pending != "" || ti.Reference != pinned.String() {
				t.Errorf("after the pull: pending %q, reference %q (want %s)", ti.Pending, ti.Reference, pinned)
			}
			if rec := do(t, h, "GET", "/readyz", "", nil); rec.Code != http.StatusOK {
				t.Fatalf("readyz after the pull: %d %s\n%s", rec.Code, rec.Body, log)
			}
			// The types keep the names the tenant started with (type1 is
			// SHORT) until a restart starts it from the module.
			before := typeReceived(getStatus(t, h), "default/type1")
			for i := range n {
				inject(dp, header(uint32(i), wire.TypeShort, 100), peer)
			}
			waitTenant(t, h, "default", func(TenantInfo) bool { return typeReceived(getStatus(t, h), "default/type1") >= before+n })
			if !strings.Contains(log.String(), "starting pending") || !strings.Contains(log.String(), "running it (version 2)") {
				t.Errorf("log:\n%s", log)
			}
		})
	}
}

// TestPendingRolledBack: a tenant that started pending and got its module
// is pending again when a rollback puts its placeholder back (/readyz 503:
// its requests are all dropped), and its module is not pulled again
// behind the operator's back; a rollback that puts the module back, or a
// swap, ends the wait.
func TestPendingRolledBack(t *testing.T) {
	reg := registrytest.Start(t)
	wasm, sum := fileSHA(t, exampleWasm(t, "pspheader.wasm"))
	tag, _ := oci.ParseRef("oci://" + reg.Addr + "/psp/rolled-back:v1")
	cfg := memConfig()
	cfg.Classifier = tag.String()
	cfg.OCI.CacheDir = "off"
	cfg.Admin.TokenFile = writeToken(t, "operator-secret")
	r, log := startLogged(t, cfg)
	h := r.srv.Handler()
	placeholder := tenantOf(t, getStatus(t, h), "default").SHA256
	if _, err := (&oci.Client{}).Publish(context.Background(), wasm, tag); err != nil {
		t.Fatal(err)
	}
	waitTenant(t, h, "default", func(ti TenantInfo) bool { return ti.SHA256 == sum && ti.Pending == "" })
	if rec := do(t, h, "GET", "/readyz", "", nil); rec.Code != http.StatusOK {
		t.Fatalf("readyz with the module in: %d %s", rec.Code, rec.Body)
	}
	if rec := do(t, h, "POST", "/tenants/default/rollback", "operator-secret", nil); rec.Code != http.StatusOK {
		t.Fatalf("rollback: %d %s", rec.Code, rec.Body)
	}
	ti := tenantOf(t, getStatus(t, h), "default")
	if ti.SHA256 != placeholder || !strings.Contains(ti.Pending, "rolled back") {
		t.Fatalf("after the rollback: running %s (placeholder %s), pending %q", ti.SHA256, placeholder, ti.Pending)
	}
	if rec := do(t, h, "GET", "/readyz", "", nil); rec.Code != http.StatusServiceUnavailable {
		t.Fatalf("readyz on the placeholder again: %d %s", rec.Code, rec.Body)
	}
	time.Sleep(pendingRetryMin + 500*time.Millisecond) // a retry would have pulled it by now
	if ti := tenantOf(t, getStatus(t, h), "default"); ti.SHA256 != placeholder {
		t.Fatalf("the module rolled back from came back: %s\n%s", ti.SHA256, log)
	}
	// A rollback away from the placeholder ends the wait as a swap does;
	// one back to it makes the tenant pending again.
	for i, want := range []string{sum, placeholder} {
		if rec := do(t, h, "POST", "/tenants/default/rollback", "operator-secret", nil); rec.Code != http.StatusOK {
			t.Fatalf("rollback %d: %d %s", i+2, rec.Code, rec.Body)
		}
		ti := tenantOf(t, getStatus(t, h), "default")
		ready := do(t, h, "GET", "/readyz", "", nil).Code
		if pending := ti.Pending != ""; ti.SHA256 != want || pending != (want == placeholder) || (ready == http.StatusOK) == pending {
			t.Fatalf("after rollback %d: running %s (want %s), pending %q, /readyz %d\n%s", i+2, ti.SHA256, want, ti.Pending, ready, log)
		}
	}
	if rec := do(t, h, "PUT", "/tenants/default/classifier", "operator-secret", wasm); rec.Code != http.StatusOK {
		t.Fatalf("swap: %d %s", rec.Code, rec.Body)
	}
	if ti := tenantOf(t, getStatus(t, h), "default"); ti.SHA256 != sum || ti.Pending != "" {
		t.Fatalf("after the swap: running %s, pending %q", ti.SHA256, ti.Pending)
	}
	if rec := do(t, h, "GET", "/readyz", "", nil); rec.Code != http.StatusOK {
		t.Fatalf("readyz after the swap: %d %s", rec.Code, rec.Body)
	}
}

// waitTenant polls tenant name's status until ok, for at most 10 s.
func waitTenant(t *testing.T, h http.Handler, name string, ok func(TenantInfo) bool) TenantInfo {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ti := tenantOf(t, getStatus(t, h), name)
		if ok(ti) {
			return ti
		}
		if time.Now().After(deadline) {
			t.Fatalf("tenant %s: condition not met in 10s: %+v", name, ti)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// typeReceived is the requests received of the type called name.
func typeReceived(st Status, name string) uint64 {
	for _, ts := range st.Types {
		if ts.Name == name {
			return ts.Received
		}
	}
	return 0
}

// TestReferenceIsPerTenant: the registry reference a client gives with a
// swap labels the module of the tenant it swapped, not every tenant
// running the same bytes; a rollback to a module brings its reference
// back, and removing the tenant forgets them.
func TestReferenceIsPerTenant(t *testing.T) {
	cfg := tenantConfig(t)
	wat := filepath.Join("..", "examples", "classifiers", "wat", "pspheader.wasm")
	cfg.Tenants[0].Classifier = wat
	r, _ := startLogged(t, cfg)
	h := r.srv.Handler()
	same, sum := fileSHA(t, exampleWasm(t, "pspheader.wasm")) // what b runs
	other, _ := fileSHA(t, wat)
	ref1 := "oci://127.0.0.1:5000/a/claimed:v1@sha256:" + strings.Repeat("ab", 32)
	ref2 := "oci://127.0.0.1:5000/a/claimed:v2@sha256:" + strings.Repeat("cd", 32)
	if rec := do(t, h, "PUT", "/tenants/a/classifier?reference="+ref1, "a-secret", same); rec.Code != http.StatusOK {
		t.Fatalf("a's swap: %d %s", rec.Code, rec.Body)
	}
	st := getStatus(t, h)
	if a, b := tenantOf(t, st, "a"), tenantOf(t, st, "b"); a.SHA256 != sum || b.SHA256 != sum || a.Reference != ref1 || b.Reference != "" {
		t.Fatalf("a %s from %q, b %s from %q: want the same module, a's reference on a only", a.SHA256, a.Reference, b.SHA256, b.Reference)
	}
	if rec := do(t, h, "PUT", "/tenants/a/classifier?reference="+ref2, "a-secret", other); rec.Code != http.StatusOK {
		t.Fatalf("a's second swap: %d %s", rec.Code, rec.Body)
	}
	if a := tenantOf(t, getStatus(t, h), "a"); a.Reference != ref2 {
		t.Fatalf("after the second swap: a from %q, want %q", a.Reference, ref2)
	}
	if rec := do(t, h, "POST", "/tenants/a/rollback", "a-secret", nil); rec.Code != http.StatusOK {
		t.Fatalf("a's rollback: %d %s", rec.Code, rec.Body)
	}
	if a := tenantOf(t, getStatus(t, h), "a"); a.SHA256 != sum || a.Reference != ref1 {
		t.Fatalf("after the rollback: a %s from %q, want %s from %q", a.SHA256, a.Reference, sum, ref1)
	}
	if rec := do(t, h, "DELETE", "/tenants/a", "operator-secret", nil); rec.Code != http.StatusNoContent {
		t.Fatalf("remove a: %d %s", rec.Code, rec.Body)
	}
	if got := r.srv.refs.get("a", sum); got != "" {
		t.Errorf("removed tenant's reference kept: %q", got)
	}
}

// TestCountersAge: the status says how old its dispatcher counters are,
// in seconds: never negative, below the stats interval give or take the
// scheduler, and not always 0 (the counters are published every 100 ms,
// the status read whenever asked).
func TestCountersAge(t *testing.T) {
	r, _ := startLogged(t, memConfig())
	nonzero := false
	for range 20 {
		st := getStatus(t, r.srv.Handler())
		if st.CountersAgeSeconds < 0 || st.CountersAgeSeconds > 10 {
			t.Fatalf("counters age %v s", st.CountersAgeSeconds)
		}
		nonzero = nonzero || st.CountersAgeSeconds > 0
		time.Sleep(7 * time.Millisecond)
	}
	if !nonzero {
		t.Error("the counters' age was 0 in every status")
	}
}

// TestPendingEndsBySwapOrRemoval: a tenant pending on a tag its registry
// lacks stops being waited for once the operator swaps a module in over
// the admin API or removes the tenant: /readyz answers 200 when neither
// pending tenant is left, though the tag never appears.
func TestPendingEndsBySwapOrRemoval(t *testing.T) {
	reg := registrytest.Start(t)
	wasm, sum := fileSHA(t, exampleWasm(t, "pspheader.wasm"))
	cfg := memConfig()
	cfg.Admin.TokenFile = writeToken(t, "operator-secret")
	cfg.OCI.CacheDir = "off"
	cfg.Tenants = []Tenant{
		{Name: "a", Ports: []uint16{portA}, Classifier: "oci://" + reg.Addr + "/psp/never:v1", Fail: "closed", MaxTypes: 16},
		{Name: "b", Ports: []uint16{portB}, Classifier: "oci://" + reg.Addr + "/psp/never:v2", Fail: "reload", MaxTypes: 16},
	}
	r, log := startLogged(t, cfg)
	h := r.srv.Handler()
	ready := func(code int, body string) {
		t.Helper()
		if rec := do(t, h, "GET", "/readyz", "", nil); rec.Code != code || !strings.Contains(rec.Body.String(), body) {
			t.Fatalf("readyz: %d %q, want %d %q\n%s", rec.Code, rec.Body, code, body, log)
		}
	}
	ready(http.StatusServiceUnavailable, "2 tenant(s) waiting")
	// A provisional swap leaves it pending: unconfirmed, it reverts to
	// the placeholder.
	placeholder := tenantOf(t, getStatus(t, h), "a").SHA256
	if rec := do(t, h, "PUT", "/tenants/a/classifier?provisional="+MinProvisional.String(), "operator-secret", wasm); rec.Code != http.StatusOK {
		t.Fatalf("provisional swap: %d %s", rec.Code, rec.Body)
	}
	ready(http.StatusServiceUnavailable, "2 tenant(s) waiting")
	waitTenant(t, h, "a", func(ti TenantInfo) bool { return ti.SHA256 == placeholder && ti.Provisional == nil })
	ready(http.StatusServiceUnavailable, "2 tenant(s) waiting")
	if rec := do(t, h, "PUT", "/tenants/a/classifier", "operator-secret", wasm); rec.Code != http.StatusOK {
		t.Fatalf("swap: %d %s", rec.Code, rec.Body)
	}
	if ti := tenantOf(t, getStatus(t, h), "a"); ti.SHA256 != sum || ti.Pending != "" {
		t.Fatalf("tenant a after the swap: sha256 %.12s, pending %q", ti.SHA256, ti.Pending)
	}
	ready(http.StatusServiceUnavailable, "1 tenant(s) waiting")
	if rec := do(t, h, "DELETE", "/tenants/b", "operator-secret", nil); rec.Code != http.StatusNoContent {
		t.Fatalf("remove: %d %s", rec.Code, rec.Body)
	}
	ready(http.StatusOK, "ready")
	for _, want := range []string{`tenant "a": swapped over the admin API: no longer waiting for`, `tenant "b": removed: no longer waiting for`} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("the log does not say %q:\n%s", want, log)
		}
	}
}

// TestStartPullsShareTheirBound: tenants on a registry that accepts
// connections and never answers do not add up their waits: the server
// starts within oci.start_timeout, every one of them pending.
func TestStartPullsShareTheirBound(t *testing.T) {
	hang := make(chan struct{})
	reg := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-hang:
		case <-r.Context().Done():
		}
	}))
	defer reg.Close()
	defer close(hang)
	host := strings.TrimPrefix(reg.URL, "http://")
	cfg := memConfig()
	cfg.OCI.CacheDir = "off"
	cfg.OCI.StartTimeout = 2 * time.Second
	for i, name := range []string{"a", "b", "c"} {
		cfg.Tenants = append(cfg.Tenants, Tenant{Name: name, Ports: []uint16{uint16(7001 + i)}, Classifier: "oci://" + host + "/psp/" + name + ":v1", MaxTypes: 8})
	}
	start := time.Now()
	r, log := startLogged(t, cfg)
	took := time.Since(start)
	st := getStatus(t, r.srv.Handler())
	for _, name := range []string{"a", "b", "c"} {
		if ti := tenantOf(t, st, name); !strings.Contains(ti.Pending, "not fetched") {
			t.Errorf("tenant %s: pending %q", name, ti.Pending)
		}
	}
	// Each pull waiting its own 2 s would take 6 s.
	if took > 5*time.Second {
		t.Errorf("the server started after %v: the three pulls did not share their 2 s\n%s", took, log)
	}
	if c, err := ParseConfig([]byte("oci:\n  start_timeout: 3s\n")); err != nil || c.OCI.StartTimeout != 3*time.Second {
		t.Errorf("oci.start_timeout 3s: %v, %v", err, c.OCI.StartTimeout)
	}
	bad := memConfig()
	bad.OCI.StartTimeout = -time.Second
	if _, err := New(context.Background(), bad, Options{}); err == nil || !strings.Contains(err.Error(), "start_timeout") {
		t.Errorf("a negative start_timeout: %v", err)
	}
}

// TestServeWithUnwritableCache: a cache directory that cannot be created
// (its parent is a file) costs the cache and the state file, not the
// start: the module is pulled and served, /readyz answers 200 (503 once
// the server stops), and the log says what was not kept.
func TestServeWithUnwritableCache(t *testing.T) {
	reg := registrytest.Start(t)
	wasm, sum := fileSHA(t, exampleWasm(t, "pspheader.wasm"))
	tag, _ := oci.ParseRef("oci://" + reg.Addr + "/psp/header:v1")
	if _, err := (&oci.Client{}).Publish(context.Background(), wasm, tag); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "a-file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := memConfig()
	cfg.Admin.TokenFile = writeToken(t, "operator-secret")
	cfg.Classifier = tag.String()
	cfg.OCI.CacheDir = filepath.Join(file, "cache")
	cfg.StateFile = filepath.Join(file, "state.json")
	r, log := startLogged(t, cfg)
	h := r.srv.Handler()
	if ti := tenantOf(t, getStatus(t, h), "default"); ti.SHA256 != sum || ti.Pending != "" {
		t.Fatalf("sha256 %.12s, pending %q\n%s", ti.SHA256, ti.Pending, log)
	}
	if rec := do(t, h, "GET", "/readyz", "", nil); rec.Code != http.StatusOK {
		t.Fatalf("readyz: %d %s", rec.Code, rec.Body)
	}
	if rec := do(t, h, "PUT", "/tenants/default/classifier", "operator-secret", wasm); rec.Code != http.StatusOK {
		t.Fatalf("a swap with no state file to write: %d %s", rec.Code, rec.Body)
	}
	for _, want := range []string{"not cached", "not a directory (a restart starts from the config)"} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("the log does not say %q:\n%s", want, log)
		}
	}
	// Stopping, the server is no longer ready (still alive).
	r.stop()
	if rec := do(t, h, "GET", "/readyz", "", nil); rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), "stopping") {
		t.Errorf("readyz once stopped: %d %s", rec.Code, rec.Body)
	}
	if rec := do(t, h, "GET", "/healthz", "", nil); rec.Code != http.StatusOK {
		t.Errorf("healthz once stopped: %d", rec.Code)
	}
}
