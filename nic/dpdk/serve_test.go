//go:build linux && cgo && dpdk

package dpdk

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	json "github.com/goccy/go-json"

	"github.com/persephone-go/psp/internal/testenv"
	"github.com/persephone-go/psp/wire"
)

// pspBinEnv names the psp binary (built with -tags dpdk) for the child
// test inside the namespace.
const pspBinEnv = "PSP_DPDK_TEST_PSP"

// TestServeOverTap runs `psp serve --dataplane dpdk` on a net_tap device in
// a private network namespace and has the kernel's UDP stack send it psp
// requests: the whole server (dispatcher, DARC, emulate app) answers them
// through the DPDK dataplane, and /status agrees.
func TestServeOverTap(t *testing.T) {
	if os.Getenv(inNetnsEnv) != "1" && os.Getenv(pspBinEnv) == "" {
		// Build psp before entering the namespace: the module proxy and
		// caches may be out of reach there. (Setting the variable to a
		// prebuilt binary skips the build.)
		goTool := testenv.RequireTool(t, "go")
		testenv.RequireRoot(t)
		bin := filepath.Join(t.TempDir(), "psp")
		build := exec.Command(goTool, "build", "-tags", "dpdk", "-o", bin, "github.com/persephone-go/psp/cmd/psp")
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("go build -tags dpdk ./cmd/psp: %v\n%s", err, out)
		}
		t.Setenv(pspBinEnv, bin)
	}
	if !inPrivateNetns(t) {
		return
	}
	const (
		iface   = "psptap1"
		workers = 6 // more than net_tap's 3 worker queues
		n       = 100
	)
	server := netip.MustParseAddrPort("10.77.1.2:6789")
	serve := exec.Command(os.Getenv(pspBinEnv), "serve",
		"--dataplane", "dpdk",
		"--listen", server.String(),
		"--workers", fmt.Sprint(workers),
		"--app", "emulate", "--dilation", "1",
		"--admin", "127.0.0.1:9090",
		"--eal", "-l 0-1 --no-huge -m 512 --no-pci --no-shconf --no-telemetry --vdev=net_tap0,iface="+iface,
	)
	var output testenv.SyncBuffer
	serve.Stdout, serve.Stderr = &output, &output
	run(t, "ip", "link", "set", "lo", "up")
	exited := testenv.Start(t, serve)

	// psp serve says when it serves; the tap interface exists by then.
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(output.String(), "dpdk dataplane on") {
		select {
		case err := <-exited:
			t.Fatalf("psp serve exited: %v\n%s", err, output.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("psp serve not ready after 20s:\n%s", output.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	run(t, "ip", "addr", "add", "10.77.1.1/24", "dev", iface)
	run(t, "ip", "link", "set", iface, "up")

	conn, err := net.DialUDP("udp4", nil, net.UDPAddrFromAddrPort(server))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	req, reply := make([]byte, wire.HeaderLen), make([]byte, 2048)
	// The server may still be starting its dispatcher: retry the first
	// request until it is answered.
	for {
		wire.Header{ID: 1 << 31, Type: wire.TypeShort, ServiceNs: 1000}.Encode(req)
		conn.Write(req)
		conn.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		if _, err := conn.Read(reply); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no reply to a first request:\n%s", output.String())
		}
	}
	want := map[uint32]bool{}
	for i := range uint32(n) {
		wire.Header{ID: i, Type: 1 + i%2, ServiceNs: 1000}.Encode(req)
		if _, err := conn.Write(req); err != nil {
			t.Fatal(err)
		}
		want[i] = true
	}
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	for len(want) > 0 {
		k, err := conn.Read(reply)
		if err != nil {
			t.Fatalf("%d of %d replies missing: %v\n%s", len(want), n, err, output.String())
		}
		h, err := wire.Decode(reply[:k])
		if err != nil {
			t.Fatalf("reply % x: %v", reply[:k], err)
		}
		delete(want, h.ID) // late replies to the retried first request are ignored
	}

	// /status is a snapshot refreshed periodically: poll it.
	var status struct {
		Dataplane string `json:"dataplane"`
		Answered  uint64 `json:"answered"`
	}
	for polls := 0; status.Dataplane != "dpdk" || status.Answered < n; polls++ {
		if polls == 50 {
			t.Fatalf("/status: dataplane %q answered %d, want dpdk and >= %d", status.Dataplane, status.Answered, n)
		}
		time.Sleep(100 * time.Millisecond)
		resp, err := http.Get("http://127.0.0.1:9090/status")
		if err != nil {
			t.Fatalf("GET /status: %v", err)
		}
		err = json.NewDecoder(resp.Body).Decode(&status)
		resp.Body.Close()
		if err != nil {
			t.Fatalf("decode /status: %v", err)
		}
	}

	serve.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("psp serve exited with %v after SIGTERM:\n%s", err, output.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatalf("psp serve still running 15s after SIGTERM:\n%s", output.String())
	}
	t.Logf("psp serve output:\n%s", output.String())
}
