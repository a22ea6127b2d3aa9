package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/persephone-go/psp/admin"
	"github.com/persephone-go/psp/internal/registrytest"
	"github.com/persephone-go/psp/internal/testenv"
	"github.com/persephone-go/psp/server"
	"github.com/persephone-go/psp/wire"
)

// fleetServer is a psp serve process of the rollout test.
type fleetServer struct {
	admin, listen string
	cmd           *exec.Cmd
	log           bytes.Buffer
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

func udpAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.LocalAddr().String()
}

// startFleet starts n psp serve processes with classifier ref.
func startFleet(t *testing.T, bin string, n int, ref, token, cache string) []*fleetServer {
	t.Helper()
	var fs []*fleetServer
	for i := range n {
		s := &fleetServer{admin: fmt.Sprintf("127.0.0.1:%d", freePort(t)), listen: udpAddr(t)}
		s.cmd = exec.Command(bin, "serve", "--listen", s.listen, "--admin", s.admin, "--token-file", token,
			"--classifier", ref, "--oci-cache", filepath.Join(cache, fmt.Sprint(i)), "--workers", "2", "--dilation", "1",
			"--spin", "0", "--deadline-factor", "0")
		s.cmd.Stdout, s.cmd.Stderr = &s.log, &s.log
		if err := s.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			s.cmd.Process.Signal(os.Interrupt)
			done := make(chan struct{})
			go func() { s.cmd.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				s.cmd.Process.Kill()
				<-done
			}
			if t.Failed() {
				t.Logf("server %s:\n%s", s.admin, s.log.String())
			}
		})
		fs = append(fs, s)
	}
	tok, err := os.ReadFile(token)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range fs {
		c, _ := admin.NewClient(s.admin, time.Second)
		c.SetToken(string(tok)) // reads need a token on a server with tokens
		deadline := time.Now().Add(30 * time.Second)
		for {
			if _, err := c.Status(context.Background()); err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("psp serve on %s did not come up:\n%s", s.admin, s.log.String())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return fs
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

// TestRolloutFleet: three psp serve processes started from a registry
// reference run the same module; a good module rolls out to all three; a
// module that traps on LONG requests is stopped at the canary and rolled
// back, the other two untouched.
func TestRolloutFleet(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a registry and three servers")
	}
	start := time.Now()
	reg := registrytest.Start(t)
	bin := buildPSP(t)
	dir := t.TempDir()
	token := filepath.Join(dir, "token")
	os.WriteFile(token, []byte(fleetToken+"\n"), 0o600)
	ex := filepath.Join("..", "..", "examples", "classifiers")
	v1File, v2File, badFile := filepath.Join(ex, "c", "pspheader.wasm"), filepath.Join(ex, "wat", "pspheader.wasm"), filepath.Join(ex, "wat", "pspheader_faultlong.wasm")

	publish := func(file, tag string) string {
		t.Helper()
		out, _, err := runBin(bin, "classifier", "publish", file, "oci://"+reg.Addr+"/psp/header:"+tag)
		if err != nil {
			t.Fatalf("publish %s: %v", file, err)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		ref := lines[len(lines)-1]
		if !strings.HasPrefix(ref, "oci://"+reg.Addr+"/psp/header@sha256:") || !strings.Contains(out, "tag: oci://"+reg.Addr+"/psp/header:"+tag+"@sha256:") {
			t.Fatalf("publish printed %q", out)
		}
		return ref
	}
	v1, v2, bad := publish(v1File, "v1"), publish(v2File, "v2"), publish(badFile, "v3-bad")
	t.Logf("build and publish: %v", time.Since(start).Round(time.Millisecond))
	v1Bytes, _ := os.ReadFile(v1File)
	v2Bytes, _ := os.ReadFile(v2File)

	// Started by tag: each resolves it to the same digest and runs the
	// same module.
	fs := startFleet(t, bin, 3, "oci://"+reg.Addr+"/psp/header:v1", token, filepath.Join(dir, "cache"))
	for _, s := range fs {
		out, _, err := runBin(bin, "status", "--admin", s.admin, "--token-file", token)
		if err != nil {
			t.Fatal(err)
		}
		// The tag the servers started from, pinned by the digest publish printed.
		want := "oci://" + reg.Addr + "/psp/header:v1@" + strings.TrimPrefix(v1, "oci://"+reg.Addr+"/psp/header@")
		if !strings.Contains(out, sha256Hex(v1Bytes)) || !strings.Contains(out, "from "+want) {
			t.Fatalf("%s: psp status does not show sha256 %s from %s:\n%s", s.admin, sha256Hex(v1Bytes), want, out)
		}
	}
	stop := load(t, fs, 400)
	defer stop()
	servers := fs[0].admin + "," + fs[1].admin + "," + fs[2].admin
	rollout := func(ref string) (string, string, error) {
		return runBin(bin, "rollout", ref, "--servers", servers, "--canary", "1", "--bake", "2s", "--token-file", token, "--oci-cache", "off")
	}

	// (a) A good module reaches all three, canary first.
	out, errOut, err := rollout(v2)
	if err != nil {
		t.Fatalf("rollout of a good module: %v\n%s\n%s", err, out, errOut)
	}
	t.Logf("psp rollout %s:\n%s", v2, out)
	if !strings.Contains(out, "rolled out: 3 server(s)") || strings.Count(out, "verdict: pass") != 2 {
		t.Fatalf("rollout output:\n%s", out)
	}
	versions := map[string]int{}
	for _, s := range fs {
		ti := tenantState(t, s.admin)
		if ti.SHA256 != sha256Hex(v2Bytes) || ti.Reference != v2 {
			t.Fatalf("%s after rollout: sha256 %s reference %q, want %s from %s", s.admin, ti.SHA256, ti.Reference, sha256Hex(v2Bytes), v2)
		}
		versions[s.admin] = ti.Version
	}

	// (b) A module that traps on LONG: the canary fails, is rolled back;
	// the other two never see it.
	out, errOut, err = rollout(bad)
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		t.Fatalf("rollout of a bad module: %v, want a failure exit\n%s\n%s", err, out, errOut)
	}
	t.Logf("psp rollout %s:\n%s\n%s", bad, out, errOut)
	if !strings.Contains(out, "classifier faults") || !strings.Contains(out, "verdict: FAIL") ||
		!strings.Contains(out, "stopped: 1 server(s) swapped and rolled back, 2 untouched") || strings.Count(out, "; baked 2s;") != 1 {
		t.Fatalf("rollout output:\n%s", out)
	}
	canary := tenantState(t, fs[0].admin)
	if canary.SHA256 != sha256Hex(v2Bytes) || canary.Version != versions[fs[0].admin]+2 || canary.Reference != v2 {
		t.Fatalf("canary after the rollback: version %d sha256 %s reference %q; want version %d, %s from %s",
			canary.Version, canary.SHA256, canary.Reference, versions[fs[0].admin]+2, sha256Hex(v2Bytes), v2)
	}
	for _, s := range fs[1:] {
		if ti := tenantState(t, s.admin); ti.Version != versions[s.admin] || ti.SHA256 != sha256Hex(v2Bytes) {
			t.Fatalf("%s was touched: version %d (was %d), sha256 %s", s.admin, ti.Version, versions[s.admin], ti.SHA256)
		}
	}
	if canary.Faults["trap"] == 0 {
		t.Errorf("the canary counted no traps: %v", canary.Faults)
	}

	// A dry run changes nothing.
	out, _, err = runBin(bin, "rollout", bad, "--servers", servers, "--dry-run", "--oci-cache", "off", "--token-file", token)
	if err != nil || !strings.Contains(out, "dry run: nothing changed") || !strings.Contains(out, "wave 1 (canary): "+fs[0].admin) {
		t.Fatalf("dry run: %v\n%s", err, out)
	}
	if ti := tenantState(t, fs[0].admin); ti.Version != canary.Version {
		t.Fatalf("the dry run changed the canary: version %d", ti.Version)
	}
	// Without the token the servers refuse the reads: the dry run says so
	// and fails (it exited 0 with every server unreadable).
	out, stderr, err := runBin(bin, "rollout", bad, "--servers", servers, "--dry-run", "--oci-cache", "off")
	if err == nil || !strings.Contains(stderr, "none of the 3 servers could be read") || !strings.Contains(out, "401 Unauthorized") {
		t.Fatalf("dry run without a token: %v\n%s%s", err, out, stderr)
	}
}

// TestRolloutBoundsAndDryRun: bounds that would turn a gate off (NaN, Inf)
// or fail every canary (a negative ratio) are refused, and a dry run that
// could read no server fails.
func TestRolloutBoundsAndDryRun(t *testing.T) {
	wasm := filepath.Join(t.TempDir(), "X.wasm")
	if err := os.WriteFile(wasm, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	servers := fmt.Sprintf("127.0.0.1:%d", freePort(t)) // nothing listens
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
