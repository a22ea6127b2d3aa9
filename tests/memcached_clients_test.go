package tests

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/persephone-go/psp/app/memcached/memcachedtest"
	"github.com/persephone-go/psp/internal/testenv"
)

// startMemcachedServer starts psp serve --app memcached listening on UDP
// and on TCP (tcp:// in --listen: requests of both scheduled by DARC); the
// server's tcp field is the TCP address.
func startMemcachedServer(t *testing.T, extra ...string) (*server, string) {
	t.Helper()
	s := startServer(t, serverOptions{app: "memcached", policy: "darc", dilation: -1, tcp: true,
		extra: append([]string{"--workers", "4"}, extra...)})
	return s, s.tcp
}

// run runs a client tool and returns its output.
func runTool(t testing.TB, name string, args ...string) (string, error) {
	t.Helper()
	bin := testenv.RequireTool(t, name)
	cmd := exec.Command(bin, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return out.String(), err
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatalf("%s %v did not finish within 60s:\n%s", name, args, out.String())
		return "", nil
	}
}

// TestMemcachedWithLibmemcachedTools: clients nobody here wrote store,
// read and delete through psp: memccp over UDP and over TCP, memccat and
// memcrm over TCP (libmemcached reads only over TCP), on one store.
func TestMemcachedWithLibmemcachedTools(t *testing.T) {
	s, tcp := startMemcachedServer(t)
	dir := t.TempDir()
	small := filepath.Join(dir, "small.txt")
	os.WriteFile(small, []byte("hello from memccp over UDP\n"), 0o644)
	big := filepath.Join(dir, "big.bin")
	blob := make([]byte, 600<<10) // over UDP's reach: TCP only
	rand.Read(blob)
	os.WriteFile(big, blob, 0o644)

	if out, err := runTool(t, "memccp", "--servers="+s.listen, "--udp", small); err != nil {
		t.Fatalf("memccp --udp: %v\n%s", err, out)
	}
	if out, err := runTool(t, "memccp", "--servers="+tcp, "--flags=7", big); err != nil {
		t.Fatalf("memccp over TCP: %v\n%s", err, out)
	}
	// memccat prints the value and a line end.
	out, err := runTool(t, "memccat", "--servers="+tcp, "small.txt")
	if err != nil || out != "hello from memccp over UDP\n\n" {
		t.Fatalf("memccat small.txt: %v, %q", err, out)
	}
	bigOut := filepath.Join(dir, "big.out")
	if out, err := runTool(t, "memccat", "--servers="+tcp, "--file="+bigOut, "big.bin"); err != nil {
		t.Fatalf("memccat big.bin: %v\n%s", err, out)
	}
	if got, _ := os.ReadFile(bigOut); !bytes.Equal(got, blob) {
		t.Errorf("memccat big.bin: %d bytes back, differ from the %d stored", len(got), len(blob))
	}
	out, err = runTool(t, "memccat", "--servers="+tcp, "--flags", "big.bin")
	if err != nil || !strings.HasPrefix(out, "7\n") {
		t.Errorf("memccat --flags: %v, %.80q", err, out)
	}
	if out, err := runTool(t, "memcrm", "--servers="+tcp, "small.txt", "big.bin"); err != nil {
		t.Fatalf("memcrm: %v\n%s", err, out)
	}
	if out, err := runTool(t, "memccat", "--servers="+tcp, "small.txt"); err == nil {
		t.Errorf("memccat after memcrm found the key: %q", out)
	}
	// The UDP side sees the same store (a get of two missing keys: an
	// empty datagram, then END).
	conn, err := net.Dial("udp", s.listen)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.Write(memcachedtest.Request{Body: "get small.txt big.bin\r\n"}.Datagram(1))
	var body []byte
	buf := make([]byte, 2048)
	for !bytes.HasSuffix(body, []byte("END\r\n")) {
		conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		n, err := conn.Read(buf)
		if err != nil {
			t.Fatalf("get after memcrm over UDP: %v (so far %q)", err, body)
		}
		body = append(body, buf[8:n]...)
	}
	if string(body) != "END\r\n" {
		t.Errorf("get after memcrm over UDP: %q", body)
	}
}

// TestMemcachedWithPymemcache: pymemcache, the Python client most Python
// users have, runs its script (every command family, a 500 KB value, 200
// keys at once) against psp over TCP, and against memcached, so that the
// script's own checks are known to hold for memcached.
func TestMemcachedWithPymemcache(t *testing.T) {
	memcachedtest.RunPymemcache(t, memcachedtest.StartMemcached(t, false))
	s, tcp := startMemcachedServer(t)
	memcachedtest.RunPymemcache(t, tcp)
	if st := s.status(); st.Drops["app"] != 0 {
		t.Errorf("drops %v", st.Drops)
	}
}

// TestMemcachedUnderLoadTools: memcaslap (gets and sets, over UDP and
// over TCP) and memcslap (sets over UDP) run against psp without a lost,
// late or missing reply.
func TestMemcachedUnderLoadTools(t *testing.T) {
	s, tcp := startMemcachedServer(t)
	for _, run := range []struct {
		transport string
		args      []string
	}{
		{"udp", []string{"-s", s.listen, "-U"}},
		{"tcp", []string{"-s", tcp}},
	} {
		out, err := runTool(t, "memcaslap", append(run.args, "-t", "2s", "-T", "1", "-c", "8")...)
		if err != nil {
			t.Fatalf("memcaslap over %s: %v\n%s", run.transport, err, out)
		}
		counter := func(name string) int {
			m := regexp.MustCompile(name + `: (\d+)`).FindStringSubmatch(out)
			if m == nil {
				if run.transport == "tcp" && name != "cmd_get" && name != "cmd_set" && name != "get_misses" {
					return 0 // memcaslap counts datagrams over UDP only
				}
				t.Fatalf("memcaslap over %s: output without %s:\n%s", run.transport, name, out)
			}
			n, _ := strconv.Atoi(m[1])
			return n
		}
		t.Logf("memcaslap over %s against psp: %s", run.transport, regexp.MustCompile(`Run time.*`).FindString(out))
		if counter("cmd_get") == 0 || counter("cmd_set") == 0 || counter("udp_timeout") != 0 || counter("packet_drop") != 0 || counter("packet_disorder") != 0 || counter("get_misses") != 0 {
			t.Errorf("memcaslap over %s: gets %d, sets %d, udp timeouts %d, drops %d, disorder %d, misses %d", run.transport,
				counter("cmd_get"), counter("cmd_set"), counter("udp_timeout"), counter("packet_drop"), counter("packet_disorder"), counter("get_misses"))
		}
	}
	out, err := runTool(t, "memcslap", "--servers="+s.listen, "--udp", "--test=set", "--concurrency=2", "--execute-number=2000")
	if err != nil || !strings.Contains(out, "Time to set") {
		t.Fatalf("memcslap --udp: %v\n%s", err, out)
	}
	st := s.status()
	if st.Drops["app"] != 0 || st.Drops["truncated"] != 0 {
		t.Errorf("drops %v", st.Drops)
	}
}

// TestMemcachedConformanceThroughServe runs the conformance sequences
// against psp serve (the whole server: config, buffers, classifier) and
// Debian's memcached.
func TestMemcachedConformanceThroughServe(t *testing.T) {
	bin := testenv.RequireTool(t, "memcached")
	port := freePort(t, "udp")
	args := []string{"-U", strconv.Itoa(port), "-p", "0", "-l", "127.0.0.1", "-t", "1"}
	if os.Geteuid() == 0 {
		args = append(args, "-u", "nobody")
	}
	mcCmd := exec.Command(bin, args...)
	if err := mcCmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mcCmd.Process.Kill(); mcCmd.Wait() })
	// One worker, nothing served in place: replies in request order, for
	// the sentinel (a request served in place on the dispatcher can
	// overtake one handed to the worker).
	p := startServer(t, serverOptions{app: "memcached", policy: "cfcfs", dilation: -1, extra: []string{"--workers", "1", "--in-place", "0"}})
	mc, err := memcachedtest.Dial(fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		t.Fatal(err)
	}
	defer mc.Close()
	ps, err := memcachedtest.Dial(p.listen)
	if err != nil {
		t.Fatal(err)
	}
	defer ps.Close()
	for i := 0; ; i++ { // wait for memcached
		if _, err := mc.Exchange(memcachedtest.Request{Body: "version\r\n"}.Datagram(1)); err == nil {
			break
		}
		if i == 50 {
			t.Fatal("memcached does not answer")
		}
		time.Sleep(50 * time.Millisecond)
	}
	memcachedtest.CompareUDP(t, ps, mc)
}
