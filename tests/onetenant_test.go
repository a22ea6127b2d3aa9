package tests

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestTenantAddToDefaultServer: psp serve with its defaults (one native
// classifier: the default tenant, owning every port) takes
// `psp tenant add extra --ports P --weight 1` with the operator's token,
// serves P at once, and /metrics, psp status and psp tenant list show
// both tenants with the same labels and columns.
func TestTenantAddToDefaultServer(t *testing.T) {
	dir := t.TempDir()
	token, secret := filepath.Join(dir, "operator.token"), fmt.Sprintf("op-%d-secret", time.Now().UnixNano())
	if err := os.WriteFile(token, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := &server{t: t, log: &bytes.Buffer{}, done: make(chan struct{}), token: secret,
		listen: fmt.Sprintf("127.0.0.1:%d", freePort(t, "udp")), admin: fmt.Sprintf("127.0.0.1:%d", freePort(t, "tcp"))}
	s.cmd = exec.Command(pspBinary, "serve", "--listen", s.listen, "--admin", s.admin, "--token-file", token)
	s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = s.cmd.Wait(); close(s.done) }()
	t.Cleanup(s.stop)
	for deadline := time.Now().Add(15 * time.Second); ; {
		if _, err := s.fetchStatus(); err == nil {
			break
		}
		if time.Now().After(deadline) || !s.alive() {
			t.Fatalf("psp serve did not answer /status:\n%s", s.log)
		}
		time.Sleep(50 * time.Millisecond)
	}
	psp := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(pspBinary, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("psp %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	extra := freePort(t, "udp")
	out := psp("tenant", "add", "extra", "--ports", fmt.Sprint(extra), "--weight", "1", "--admin", s.admin, "--token-file", token)
	if !strings.Contains(out, "tenant extra added") {
		t.Fatalf("psp tenant add: %s", out)
	}
	listen := 0
	fmt.Sscanf(s.listen[strings.LastIndexByte(s.listen, ':')+1:], "%d", &listen)
	exchangeUDP(t, extra, 30)  // served at once
	exchangeUDP(t, listen, 20) // the default tenant keeps the listen port
	var metrics string
	for deadline := time.Now().Add(5 * time.Second); ; {
		metrics = metricsText(t, s)
		if strings.Contains(metrics, `psp_tenant_requests_answered_total{tenant="extra"} 30`) &&
			strings.Contains(metrics, `psp_tenant_requests_answered_total{tenant="default"} 20`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/metrics does not count both tenants' requests:\n%s", grepLines(metrics, "psp_tenant_requests_"))
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, want := range []string{`psp_tenant_home_workers{tenant="default"}`, `psp_tenant_home_workers{tenant="extra"}`,
		`psp_type_requests_answered_total{type="SHORT"} 20`, `psp_type_requests_answered_total{type="extra/SHORT"} 30`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	status := psp("status", "--admin", s.admin, "--token-file", token)
	list := psp("tenant", "list", "--admin", s.admin, "--token-file", token)
	for _, out := range []string{status, list} {
		for _, want := range []string{"default", "extra", fmt.Sprint(extra)} {
			if !strings.Contains(out, want) {
				t.Errorf("output lacks %q:\n%s", want, out)
			}
		}
	}
}

// grepLines returns the lines of text that contain sub.
func grepLines(text, sub string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
