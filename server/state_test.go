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

// TestStateFileResumes: a server started from a tag and swapped to
// another module runs that module again after a restart (not the tag's),
// and says its config names something else; a swap still provisional
// when the server stopped is not resumed (the module it replaced is); a
// changed config wins over the state file.
func TestStateFileResumes(t *testing.T) {
	reg := registrytest.Start(t)
	ctx := context.Background()
	v1, sum1 := fileSHA(t, exampleWasm(t, "pspheader.wasm"))
	v2, sum2 := fileSHA(t, filepath.Join("..", "examples", "classifiers", "wat", "pspheader.wasm"))
	tag, _ := oci.ParseRef("oci://" + reg.Addr + "/psp/header:v1")
	if _, err := (&oci.Client{}).Publish(ctx, v1, tag); err != nil {
		t.Fatal(err)
	}
	ref2, err := (&oci.Client{}).Publish(ctx, v2, oci.Ref{Host: reg.Addr, Repo: "psp/header", Tag: "v2"})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cfg := memConfig()
	cfg.Admin.TokenFile = writeToken(t, "operator-secret")
	cfg.Classifier = tag.String()
	cfg.OCI.CacheDir = filepath.Join(dir, "cache")
	cfg.StateFile = filepath.Join(dir, "state.json")
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
