package tests

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/persephone-go/psp/wire"
)

// The hardening checks against a real psp serve: a 4-worker multi-tenant darc server
// with an operator token, a read-only token and an audit log.

// hardServer is a running psp serve of the hardening tests.
type hardServer struct {
	*server
	dir, audit   string
	operator     string
	reader       string
	portA, portB int
	client       *http.Client
	scheme       string
}

// startHardServer starts psp serve with extra YAML lines appended to the
// admin section (e.g. TLS) and waits for it to answer.
func startHardServer(t *testing.T, adminExtra string) *hardServer {
	t.Helper()
	dir := t.TempDir()
	hs := &hardServer{server: &server{t: t, log: &bytes.Buffer{}, done: make(chan struct{})}, dir: dir,
		audit: filepath.Join(dir, "audit.log"), operator: "operator-hardening-secret", reader: "scraper-hardening-secret",
		portA: freePort(t, "udp"), portB: freePort(t, "udp"), client: &http.Client{Timeout: 30 * time.Second}, scheme: "http"}
	hs.token = hs.operator
	write := func(name, tok string) string {
		f := filepath.Join(dir, name)
		if err := os.WriteFile(f, []byte(tok+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return f
	}
	hs.listen = fmt.Sprintf("127.0.0.1:%d", freePort(t, "udp"))
	hs.admin = fmt.Sprintf("127.0.0.1:%d", freePort(t, "tcp"))
	cfg := fmt.Sprintf(`listen: %s
workers: 4
policy: darc
min_samples: 50
app: {name: emulate, dilation: 1}
admin:
  addr: %s
  token_file: %s
  read_token_file: %s
  audit_log: %s
%s
multi_tenant: true
tenants:
  - {name: a, ports: [%d]}
`, hs.listen, hs.admin, write("operator.token", hs.operator), write("read.token", hs.reader), hs.audit, adminExtra, hs.portA)
	cfgFile := filepath.Join(dir, "psp.yaml")
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(adminExtra, "tls_cert") {
		hs.scheme = "https"
	}
	hs.cmd = newServeCmd(cfgFile, hs.log)
	if err := hs.cmd.Start(); err != nil {
		t.Fatalf("start psp serve: %v", err)
	}
	go func() { _ = hs.cmd.Wait(); close(hs.done) }()
	t.Cleanup(hs.stop)
	return hs
}

// waitReady waits for GET /status to answer 200 with the operator's token.
func (hs *hardServer) waitReady(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		if code, _ := hs.call("GET", "/status", hs.operator, nil); code == 200 {
			return
		}
		if !hs.alive() {
			t.Fatalf("psp serve exited:\n%s", hs.log)
		}
		if time.Now().After(deadline) {
			t.Fatalf("psp serve did not answer within 15s:\n%s", hs.log)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// call makes one admin request and returns its status (0: no answer) and
// body.
func (hs *hardServer) call(method, path, token string, body []byte) (int, string) {
	req, err := http.NewRequest(method, hs.scheme+"://"+hs.admin+path, bytes.NewReader(body))
	if err != nil {
		return 0, err.Error()
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := hs.client.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// rssKiB is the server process's resident set, KiB.
func (hs *hardServer) rssKiB(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", hs.cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			return n
		}
	}
	t.Fatal("no VmRSS")
	return 0
}

// exchangeUDP sends n psp-header SHORT requests to port and waits for the
// replies.
func exchangeUDP(t *testing.T, port, n int) {
	t.Helper()
	c, err := net.DialUDP("udp", nil, &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: port})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	b := make([]byte, wire.HeaderLen)
	for i := range n {
		wire.Header{ID: uint32(i), Type: wire.TypeShort, ServiceNs: 1000}.Encode(b)
		if _, err := c.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 2048)
	for i := range n {
		if _, err := c.Read(buf); err != nil {
			t.Fatalf("port %d: %d replies of %d: %v", port, i, n, err)
		}
	}
}

// TestHardeningHugeShares (item 1): the crash on a 4-worker darc
// server (a's weight patched to 1e308, b added with 1e308: index -1 in
// darc's partition on the dispatcher goroutine, exit 2), and other large
// numbers in every share field: refused (400), the server keeps serving.
func TestHardeningHugeShares(t *testing.T) {
	hs := startHardServer(t, "")
	hs.waitReady(t)
	patch, _ := hs.call("PATCH", "/tenants/a", hs.operator, []byte(`{"weight":1e308,"buffers":1000}`))
	add, _ := hs.call("POST", "/tenants", hs.operator, []byte(fmt.Sprintf(`{"name":"b","ports":[%d],"weight":1e308,"buffers":1000}`, hs.portB)))
	time.Sleep(200 * time.Millisecond)
	if !hs.alive() {
		t.Fatalf("psp serve died after PATCH (%d) and POST (%d) with weights 1e308:\n%s", patch, add, hs.log)
	}
	if patch != 400 || add != 400 {
		t.Errorf("PATCH weight 1e308: %d, POST weight 1e308: %d, want 400 and 400", patch, add)
	}
	for _, v := range []string{"1e308", "1.7976931348623157e308", "1e300", "-1", "9223372036854775807", "4294967297", "1e7", "16777217", "1025"} {
		for _, f := range []string{"weight", "workers", "max_workers", "buffers", "max_buffers", "max_types"} {
			code, body := hs.call("PATCH", "/tenants/a", hs.operator, []byte(fmt.Sprintf(`{%q:%s}`, f, v)))
			if code != 400 && code != 200 {
				t.Errorf("PATCH %s=%s: %d %s", f, v, code, body)
			}
			code, body = hs.call("POST", "/tenants", hs.operator, []byte(fmt.Sprintf(`{"name":"b","ports":[%d],%q:%s}`, hs.portB, f, v)))
			if code == 201 {
				hs.call("DELETE", "/tenants/b", hs.operator, nil)
			} else if code != 400 {
				t.Errorf("POST %s=%s: %d %s", f, v, code, body)
			}
		}
	}
	if !hs.alive() {
		t.Fatalf("psp serve died:\n%s", hs.log)
	}
	exchangeUDP(t, hs.portA, 20)
}

// TestHardeningUnauthenticatedBodies (item 2): three unauthenticated POST
// /tenants with a 10 MB name cost neither memory nor audit log.
func TestHardeningUnauthenticatedBodies(t *testing.T) {
	hs := startHardServer(t, "")
	hs.waitReady(t)
	before := hs.rssKiB(t)
	body := []byte(`{"name":"` + strings.Repeat("n", 10<<20) + `","ports":[7]}`)
	for range 3 {
		code, _ := hs.call("POST", "/tenants", "", body)
		if code != 401 && code != 0 { // 0: the server closed the connection without reading the body
			t.Errorf("unauthenticated POST: %d", code)
		}
	}
	time.Sleep(200 * time.Millisecond)
	after := hs.rssKiB(t)
	fi, err := os.Stat(hs.audit)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("RSS %d -> %d KiB, audit log %d bytes after 3 unauthenticated 10 MB requests", before, after, fi.Size())
	if fi.Size() > 8<<10 {
		t.Errorf("audit log of %d bytes after 3 refused requests", fi.Size())
	}
	if after-before > 16<<10 {
		t.Errorf("RSS grew by %d KiB", after-before)
	}
}

// TestHardeningMetricsReAdd (item 3): a tenant removed and added again
// under its name, with traffic each time: /metrics answers 200.
func TestHardeningMetricsReAdd(t *testing.T) {
	hs := startHardServer(t, "")
	hs.waitReady(t)
	add := []byte(fmt.Sprintf(`{"name":"b","ports":[%d]}`, hs.portB))
	for i := range 3 {
		if code, body := hs.call("POST", "/tenants", hs.operator, add); code != 201 {
			t.Fatalf("add b (%d): %d %s", i, code, body)
		}
		exchangeUDP(t, hs.portB, 5)
		time.Sleep(250 * time.Millisecond)
		if code, body := hs.call("GET", "/metrics", hs.reader, nil); code != 200 {
			t.Fatalf("/metrics with b added %d times: %d %.400s", i+1, code, body)
		}
		if code, _ := hs.call("DELETE", "/tenants/b", hs.operator, nil); code != 204 {
			t.Fatalf("remove b: %d", code)
		}
	}
}

// TestHardeningReadsAndTLS (item 4): reads need a token; a tenant's token
// sees its own tenant; the admin endpoint serves HTTPS from tls_cert and
// tls_key, and nothing over plain HTTP.
func TestHardeningReadsAndTLS(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile, pool := selfSigned(t, dir)
	hs := startHardServer(t, fmt.Sprintf("  tls_cert: %s\n  tls_key: %s", certFile, keyFile))
	hs.client.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}
	hs.waitReady(t)
	for _, p := range []string{"/status", "/tenants", "/metrics"} {
		if code, body := hs.call("GET", p, "", nil); code != 401 || strings.Contains(body, strconv.Itoa(hs.portA)) {
			t.Errorf("GET %s without a token: %d", p, code)
		}
		if code, _ := hs.call("GET", p, hs.reader, nil); code != 200 {
			t.Errorf("GET %s with the read-only token: %d", p, code)
		}
	}
	if code, _ := hs.call("DELETE", "/tenants/a", hs.reader, nil); code != 403 {
		t.Errorf("DELETE with the read-only token: %d, want 403", code)
	}
	// Plain HTTP gets no answer.
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + hs.admin + "/status")
	if err == nil {
		resp.Body.Close()
		if resp.StatusCode == 200 {
			t.Errorf("plain HTTP answered 200")
		}
	}
	// psp status over HTTPS with a token file (CA from the system: not
	// ours, so it must refuse the certificate rather than send the token).
	out, err := exec.Command(pspBinary, "status", "--admin", "https://"+hs.admin, "--token-file", filepath.Join(hs.dir, "read.token")).CombinedOutput()
	if err == nil {
		t.Errorf("psp status trusted a self-signed certificate: %s", out)
	}
}

// selfSigned writes a self-signed certificate for 127.0.0.1 and its key.
func selfSigned(t *testing.T, dir string) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "psp-test"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600)
	cert, _ := x509.ParseCertificate(der)
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}

// TestHardeningDurations (item 5): psp serve refuses a deadline of
// 2562047h (config) and a drain timeout of 2562047h (flag) at startup.
func TestHardeningDurations(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "psp.yaml")
	os.WriteFile(cfg, []byte("listen: 127.0.0.1:0\nadmin: {addr: off}\ntypes: {SHORT: {deadline: 2562047h}}\n"), 0o600)
	for _, args := range [][]string{
		{"serve", "--config", cfg},
		{"serve", "--listen", "127.0.0.1:0", "--admin", "off", "--drain-timeout", "2562047h"},
		{"serve", "--listen", "127.0.0.1:0", "--admin", "off", "--deadline-floor", "2562047h"},
	} {
		cmd := exec.Command(pspBinary, args...)
		done := make(chan struct{})
		var out []byte
		var err error
		go func() { out, err = cmd.CombinedOutput(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
			t.Errorf("psp %s started (killed after 10s)", strings.Join(args, " "))
			continue
		}
		if err == nil || !strings.Contains(string(out), "24h0m0s") {
			t.Errorf("psp %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}
