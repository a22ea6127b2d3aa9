package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/persephone-go/psp/internal/registrytest"
	"github.com/persephone-go/psp/server"
)

// TestRegistryCommands: psp classifier publish, then psp tenant add and
// psp classifier push from the registry, conditional pushes, and the
// reference in psp tenant list.
func TestRegistryCommands(t *testing.T) {
	reg := registrytest.Start(t)
	dir := t.TempDir()
	operator := filepath.Join(dir, "operator")
	os.WriteFile(operator, []byte("op-token\n"), 0o600)
	ex := filepath.Join("..", "..", "examples", "classifiers")
	pspheader, wat := filepath.Join(ex, "c", "pspheader.wasm"), filepath.Join(ex, "wat", "pspheader.wasm")
	admin := freeAddr(t, "tcp")
	serveInProcess(t, server.Config{Dataplane: server.DataplaneMemory, Workers: 4, Policy: "darc",
		App: server.App{Name: server.AppEmulate, Dilation: 1}, Admin: server.Admin{Addr: admin, TokenFile: operator}, MultiTenant: true})
	run := func(args ...string) string { t.Helper(); return mustPSP(t, args...) }
	cache := []string{"--oci-cache", filepath.Join(dir, "cache")}
	lines := strings.Split(strings.TrimSpace(run("classifier", "publish", pspheader, "oci://"+reg.Addr+"/psp/h:v1")), "\n")
	v1 := lines[len(lines)-1]
	lines = strings.Split(strings.TrimSpace(run("classifier", "publish", wat, "oci://"+reg.Addr+"/psp/h:v2")), "\n")
	v2 := lines[len(lines)-1]
	// A file psp serve would refuse is not published.
	junk := filepath.Join(dir, "notes.wasm")
	if err := os.WriteFile(junk, []byte("not a module"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := runPSP(context.Background(), "classifier", "publish", junk, "oci://"+reg.Addr+"/psp/h:junk"); err == nil || !strings.Contains(out+err.Error(), "not a classifier") {
		t.Fatalf("publishing junk: %v\n%s", err, out)
	}
	if !strings.HasPrefix(v1, "oci://"+reg.Addr+"/psp/h@sha256:") || v1 == v2 {
		t.Fatalf("publish printed %q and %q", v1, v2)
	}
	run(append([]string{"tenant", "add", "hdr", "--admin", admin, "--token-file", operator, "--ports", "7005", "--classifier", "oci://" + reg.Addr + "/psp/h:v1", "--fail", "closed"}, cache...)...)
	h1, _ := os.ReadFile(pspheader)
	h2, _ := os.ReadFile(wat)
	// A push expecting another module than the running one is refused.
	out, err := runPSP(context.Background(), append([]string{"classifier", "push", v2, "--tenant", "hdr", "--admin", admin, "--token-file", operator,
		"--expect-sha256", sha256Hex(h2)}, cache...)...)
	if err == nil || !strings.Contains(err.Error(), "409") {
		t.Fatalf("push expecting the wrong module: %v\n%s", err, out)
	}
	out = run(append([]string{"classifier", "push", v2, "--tenant", "hdr", "--admin", admin, "--token-file", operator,
		"--expect-sha256", sha256Hex(h1), "--expect-version", "1"}, cache...)...)
	if !strings.Contains(out, "version 2") || !strings.Contains(out, v2) {
		t.Fatalf("push: %s", out)
	}
	out = run("tenant", "list", "--admin", admin, "--token-file", operator)
	if !strings.Contains(out, "hdr: module from "+v2+" (fails closed)") || !strings.Contains(out, sha256Hex(h2)[:12]) {
		t.Fatalf("tenant list:\n%s", out)
	}
}

// TestRolloutHelpExplainsAnalysis: psp rollout --help says what is
// measured and how it is judged.
func TestRolloutHelpExplainsAnalysis(t *testing.T) {
	out, err := runApp(t, "rollout", "--help")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"faults", "UNKNOWN", "p99.9", "baseline", "psp_request_latency_seconds", "--min-requests", "compare-and-swap", "rolls back"} {
		if !strings.Contains(out, want) {
			t.Errorf("psp rollout --help lacks %q", want)
		}
	}
	if _, err := runApp(t, "rollout", "x.wasm"); err == nil || !strings.Contains(err.Error(), "--servers") {
		t.Errorf("rollout without --servers: %v", err)
	}
}
