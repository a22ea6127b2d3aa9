package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	json "github.com/goccy/go-json"

	"github.com/persephone-go/psp/server"
)

// TestTenantCommands runs a multi-tenant server in process and drives its
// tenants with psp tenant, psp classifier push and psp status.
func TestTenantCommands(t *testing.T) {
	dir := t.TempDir()
	write := func(name, tok string) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(tok+"\n"), 0o600)
		return p
	}
	operator, aTok, cTok := write("operator", "op-token"), write("a", "a-token"), write("c", "c-token")
	pspheader := filepath.Join("..", "..", "examples", "classifiers", "c", "pspheader.wasm")
	random := filepath.Join("..", "..", "examples", "classifiers", "c", "random.wasm")
	admin := freeAddr(t, "tcp")
	serveInProcess(t, server.Config{Dataplane: server.DataplaneMemory, Workers: 4, Policy: "darc",
		App: server.App{Name: server.AppEmulate, Dilation: 1}, Admin: server.Admin{Addr: admin, TokenFile: operator},
		Tenants: []server.Tenant{{Name: "a", Ports: []uint16{7001}, Classifier: pspheader, TokenFile: aTok, Workers: 2}}})
	run := func(args ...string) string { t.Helper(); return mustPSP(t, args...) }
	digest := run("tenant", "token", "--file", cTok)
	if strings.TrimSpace(digest) != server.TokenDigest("c-token") {
		t.Fatalf("token digest %q", digest)
	}
	out := run("tenant", "add", "c", "--admin", admin, "--token-file", operator, "--ports", "7003,7004",
		"--classifier", pspheader, "--workers", "1", "--max-workers", "2", "--tenant-token-sha256", strings.TrimSpace(digest))
	if !strings.Contains(out, "tenant c added") || !strings.Contains(out, "ports 7003,7004") {
		t.Fatalf("add: %s", out)
	}
	if out, err := runPSP(context.Background(), "tenant", "add", "d", "--admin", admin, "--token-file", aTok); err == nil {
		t.Fatalf("a tenant's token added a tenant: %s", out)
	}
	out = run("classifier", "push", random, "--tenant", "c", "--admin", admin, "--token-file", cTok)
	if !strings.Contains(out, "version 2") {
		t.Fatalf("push: %s", out)
	}
	out = run("tenant", "rollback", "c", "--admin", admin, "--token-file", cTok, "--json")
	var res server.SwapResult
	if err := json.Unmarshal([]byte(out), &res); err != nil || res.Version != 3 {
		t.Fatalf("rollback: %v %s", err, out)
	}
	run("tenant", "update", "c", "--admin", admin, "--token-file", operator, "--weight", "2")
	time.Sleep(250 * time.Millisecond)
	out = run("status", "--admin", admin, "--token-file", operator)
	for _, want := range []string{"tenants (multi-tenant", "TENANT", res.SHA256[:12], "home workers [2]"} {
		if !strings.Contains(out, want) {
			t.Errorf("psp status lacks %q:\n%s", want, out)
		}
	}
	out = run("tenant", "list", "--admin", admin, "--json", "--token-file", operator)
	var ts []server.TenantInfo
	if err := json.Unmarshal([]byte(out), &ts); err != nil || len(ts) != 2 || ts[1].Name != "c" || ts[1].SHA256 != res.SHA256 || ts[1].Version != 3 {
		t.Fatalf("list: %v %s", err, out)
	}
	run("tenant", "remove", "c", "--admin", admin, "--token-file", operator)
	if out, err := runPSP(context.Background(), "tenant", "remove", "c", "--admin", admin, "--token-file", operator); err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("removing c twice: %v %s", err, out)
	}
	out = run("tenant", "list", "--admin", admin, "--token-file", operator)
	if !strings.Contains(out, "removed") {
		t.Errorf("list after remove:\n%s", out)
	}
}
