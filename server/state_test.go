package server

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/persephone-go/psp/internal/registrytest"
	"github.com/persephone-go/psp/internal/testenv"
	"github.com/persephone-go/psp/oci"
)

// stateFixture is a registry holding the C psp-header module as
// psp/header:v1 (tag), the WAT one beside it (v2), and a server config
// with an operator token, a cache and a state file.
type stateFixture struct {
	reg        *registrytest.Registry
	v1, v2     []byte
	sum1, sum2 string
	tag        oci.Ref
	cfg        Config
}

func newStateFixture(t *testing.T) stateFixture {
	t.Helper()
	f := stateFixture{reg: registrytest.Start(t)}
	f.v1, f.sum1 = fileSHA(t, exampleWasm(t, "pspheader.wasm"))
	f.v2, f.sum2 = fileSHA(t, filepath.Join("..", "examples", "classifiers", "wat", "pspheader.wasm"))
	f.tag, _ = oci.ParseRef("oci://" + f.reg.Addr + "/psp/header:v1")
	if _, err := (&oci.Client{}).Publish(context.Background(), f.v1, f.tag); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	f.cfg = memConfig()
	f.cfg.Admin.TokenFile = writeToken(t, "operator-secret")
	f.cfg.OCI.CacheDir = filepath.Join(dir, "cache")
	f.cfg.StateFile = filepath.Join(dir, "state.json")
	return f
}

// TestStateFileResumes: a server started from a tag and swapped to
// another module runs that module again after a restart (not the tag's),
// and says its config names something else; a swap still provisional
// when the server stopped is not resumed (the module it replaced is); a
// changed config wins over the state file.
func TestStateFileResumes(t *testing.T) {
	f := newStateFixture(t)
	reg, v1, sum1, v2, sum2, tag, cfg := f.reg, f.v1, f.sum1, f.v2, f.sum2, f.tag, f.cfg
	ref2, err := (&oci.Client{}).Publish(context.Background(), v2, oci.Ref{Host: reg.Addr, Repo: "psp/header", Tag: "v2"})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Classifier = tag.String()
	run := func() (running, *testenv.SyncBuffer, TenantInfo) {
		t.Helper()
		r, log := startLogged(t, cfg)
		return r, log, tenantOf(t, getStatus(t, r.srv.Handler()), "default")
	}

	r, _, ti := run()
	if ti.SHA256 != sum1 || ti.Configured != "" {
		t.Fatalf("first start: %s, configured %q", ti.SHA256, ti.Configured)
	}
	if rec := do(t, r.srv.Handler(), "PUT", "/tenants/default/classifier?reference="+ref2.Pinned().String(), "operator-secret", v2); rec.Code != http.StatusOK {
		t.Fatalf("swap: %d %s", rec.Code, rec.Body)
	}
	r.stop()
	if b, _ := os.ReadFile(cfg.StateFile); true {
		t.Logf("state:\n%s", b)
	}
	reg.Stop() // the restart needs neither the registry nor the tag

	r, log, ti := run()
	if ti.SHA256 != sum2 || ti.Reference != ref2.Pinned().String() || ti.Configured != tag.String() || !strings.Contains(log.String(), "from the state file") {
		t.Fatalf("after a restart: %s from %q, configured %q (want %s from %s, configured %s)\n%s", ti.SHA256, ti.Reference, ti.Configured, sum2, ref2.Pinned(), tag, log)
	}
	// A provisional swap back to v1, never confirmed before the stop.
	if rec := do(t, r.srv.Handler(), "PUT", "/tenants/default/classifier?provisional=1h", "operator-secret", v1); rec.Code != http.StatusOK {
		t.Fatalf("provisional swap: %d %s", rec.Code, rec.Body)
	}
	state, _ := os.ReadFile(cfg.StateFile)
	if !strings.Contains(string(state), `"provisional_until"`) {
		t.Fatalf("state file after a provisional swap:\n%s", state)
	}
	r.stop()
	r, log, ti = run()
	if ti.SHA256 != sum2 || !strings.Contains(log.String(), "left unconfirmed") {
		t.Fatalf("after a restart with a provisional swap: %s, want %s\n%s", ti.SHA256, sum2, log)
	}
	r.stop()

	// A changed config: the state file no longer applies.
	reg.Restart(t)
	cfg.Classifier = "oci://" + reg.Addr + "/psp/header:v2"
	_, _, ti = run()
	if ti.SHA256 != sum2 || ti.Configured != "" {
		t.Fatalf("changed config: %s, configured %q", ti.SHA256, ti.Configured)
	}
}

// TestStateFilePerTenant: the state file keeps each tenant's module apart:
// after a swap of one of two tenants started from the same tag and a
// restart, that one runs the swapped module and says its config names
// another, the other runs its config's.
func TestStateFilePerTenant(t *testing.T) {
	f := newStateFixture(t)
	sum1, v2, sum2, tag, cfg := f.sum1, f.v2, f.sum2, f.tag, f.cfg
	cfg.Tenants = []Tenant{
		{Name: "a", Ports: []uint16{portA}, Classifier: tag.String()},
		{Name: "b", Ports: []uint16{portB}, Classifier: tag.String()},
	}
	r, _ := startLogged(t, cfg)
	if rec := do(t, r.srv.Handler(), "PUT", "/tenants/b/classifier", "operator-secret", v2); rec.Code != http.StatusOK {
		t.Fatalf("swap: %d %s", rec.Code, rec.Body)
	}
	r.stop()
	r, log := startLogged(t, cfg)
	st := getStatus(t, r.srv.Handler())
	a, b := tenantOf(t, st, "a"), tenantOf(t, st, "b")
	if a.SHA256 != sum1 || a.Configured != "" || b.SHA256 != sum2 || b.Configured != tag.String() {
		t.Fatalf("after a restart: a runs %.12s (configured %q), b %.12s (configured %q); want a %.12s, b %.12s differing from %s\n%s",
			a.SHA256, a.Configured, b.SHA256, b.Configured, sum1, sum2, tag, log)
	}
}

// TestStateFileCorrupt: a state file that cannot be read (cut short by a
// full disk, say) is warned about and written anew: the swaps made after
// the start are recorded, and a restart resumes them.
func TestStateFileCorrupt(t *testing.T) {
	f := newStateFixture(t)
	f.cfg.Classifier = f.tag.String()
	if err := os.WriteFile(f.cfg.StateFile, []byte(`{"version":1,"tenants":{"default":{"con`), 0o600); err != nil {
		t.Fatal(err)
	}
	r, log := startLogged(t, f.cfg)
	if ti := tenantOf(t, getStatus(t, r.srv.Handler()), "default"); ti.SHA256 != f.sum1 || !strings.Contains(log.String(), "the state file is written anew") {
		t.Fatalf("start with a corrupt state file: %.12s\n%s", ti.SHA256, log)
	}
	if rec := do(t, r.srv.Handler(), "PUT", "/tenants/default/classifier", "operator-secret", f.v2); rec.Code != http.StatusOK {
		t.Fatalf("swap: %d %s", rec.Code, rec.Body)
	}
	r.stop()
	r, log = startLogged(t, f.cfg)
	if ti := tenantOf(t, getStatus(t, r.srv.Handler()), "default"); ti.SHA256 != f.sum2 || !strings.Contains(log.String(), "from the state file") {
		t.Fatalf("after a restart: %.12s, want the swapped %.12s\n%s", ti.SHA256, f.sum2, log)
	}
}
