// Package registrytest starts Debian's docker-registry (Docker's
// distribution) on loopback for tests: unprivileged, storing in a test's
// temporary directory, stopped when the test ends.
package registrytest

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/persephone-go/psp/internal/testenv"
)

// Registry is a running registry.
type Registry struct {
	// Addr is its host:port on 127.0.0.1.
	Addr     string
	cmd      *exec.Cmd
	dir      string
	password bool
}

// The account of a registry started by StartWithPassword.
const (
	User     = "psp-publisher"
	Password = "psp-registry-secret"
	// passwordHash is Password's bcrypt hash (cost 4: the registry checks
	// it on every request), as htpasswd -B would write it.
	passwordHash = "$2b$04$uWTZFjMofiJ/t8a2FXPs8.Uu2l.PoktvhTWmkUyEFlioLyuFgeOj6"
)

// Start starts a registry for tb; it skips tb (fails it under CI=true)
// when docker-registry is not installed.
func Start(tb testing.TB) *Registry {
	tb.Helper()
	bin := testenv.RequireTool(tb, "docker-registry")
	dir := tb.TempDir()
	r := &Registry{dir: dir}
	r.Addr = freeAddr(tb)
	r.start(tb, bin)
	return r
}

// StartWithPassword starts a registry that answers only requests
// authenticated as User with Password (HTTP basic authentication, from an
// htpasswd file).
func StartWithPassword(tb testing.TB) *Registry {
	tb.Helper()
	bin := testenv.RequireTool(tb, "docker-registry")
	r := &Registry{dir: tb.TempDir(), password: true}
	r.Addr = freeAddr(tb)
	r.start(tb, bin)
	return r
}

func (r *Registry) start(tb testing.TB, bin string) {
	tb.Helper()
	cfg := filepath.Join(r.dir, "config.yml")
	conf := fmt.Sprintf("version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: %s\n  delete:\n    enabled: true\nhttp:\n  addr: %s\n",
		filepath.Join(r.dir, "data"), r.Addr)
	up := http.StatusOK
	if r.password {
		htpasswd := filepath.Join(r.dir, "htpasswd")
		if err := os.WriteFile(htpasswd, []byte(User+":"+passwordHash+"\n"), 0o600); err != nil {
			tb.Fatal(err)
		}
		conf += fmt.Sprintf("auth:\n  htpasswd:\n    realm: psp-test\n    path: %s\n", htpasswd)
		up = http.StatusUnauthorized
	}
	if err := os.WriteFile(cfg, []byte(conf), 0o600); err != nil {
		tb.Fatal(err)
	}
	log, err := os.Create(filepath.Join(r.dir, "registry.log"))
	if err != nil {
		tb.Fatal(err)
	}
	cmd := exec.Command(bin, "serve", cfg)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		tb.Fatalf("docker-registry: %v", err)
	}
	r.cmd = cmd
	tb.Cleanup(func() { r.Stop(); log.Close() })
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get("http://" + r.Addr + "/v2/")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == up {
				return
			}
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(filepath.Join(r.dir, "registry.log"))
			tb.Fatalf("docker-registry on %s did not answer GET /v2/ with %d within 10s: %v\n%s", r.Addr, up, err, b)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Stop stops the registry (its storage stays for Restart).
func (r *Registry) Stop() {
	if r.cmd != nil && r.cmd.Process != nil {
		r.cmd.Process.Kill()
		r.cmd.Wait()
		r.cmd = nil
	}
}

// Restart starts a stopped registry again on the same address and storage.
func (r *Registry) Restart(tb testing.TB) {
	tb.Helper()
	r.Stop()
	r.start(tb, testenv.RequireTool(tb, "docker-registry"))
}

// freeAddr returns a loopback address nothing listens on now.
func freeAddr(tb testing.TB) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// Dir is the registry's directory: its storage is under Dir()/data.
func (r *Registry) Dir() string { return r.dir }
