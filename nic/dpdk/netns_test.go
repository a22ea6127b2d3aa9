//go:build linux && cgo && dpdk

package dpdk

import (
	"bytes"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/persephone-go/psp/internal/testenv"
	"github.com/persephone-go/psp/nic/nictest"
	"github.com/persephone-go/psp/wire"
)

// inNetnsEnv is set in the environment of a test binary re-executed inside
// a private network namespace.
const inNetnsEnv = "PSP_DPDK_IN_NETNS"

// inPrivateNetns re-executes the running test binary, restricted to the
// calling test, under `unshare --net` and reports whether the caller is
// that child (and must run the test body). In the parent it checks that the
// child ran and passed the test. The test binary is already built, so the
// namespace needs no network access.
func inPrivateNetns(t *testing.T) bool {
	t.Helper()
	if os.Getenv(inNetnsEnv) == "1" {
		return true
	}
	testenv.RequireRoot(t)
	unshare := testenv.RequireTool(t, "unshare")
	testenv.RequireTool(t, "ip")
	if _, err := os.Stat("/dev/net/tun"); err != nil {
		testenv.Skip(t, "net_tap needs /dev/net/tun: %v", err)
	}
	cmd := exec.Command(unshare, "--net", os.Args[0], "-test.run=^"+t.Name()+"$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), inNetnsEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s in a private network namespace: %v\n%s", t.Name(), err, out)
	}
	if !bytes.Contains(out, []byte("--- PASS: "+t.Name())) {
		t.Fatalf("%s did not pass in the namespace:\n%s", t.Name(), out)
	}
	t.Logf("in a private network namespace:\n%s", out)
	return false
}

func run(t *testing.T, name string, args ...string) {
	t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}

// echoLoop receives requests and echoes them from the workers' TX queues
// until stop is closed, idling with Recv's back-off.
func echoLoop(d *Dataplane, workers int, stop <-chan struct{}) {
	queues := make([]int, workers)
	for w := range queues {
		queues[w] = w
	}
	nictest.Echo(d, stop, 5*time.Millisecond, queues...)
}

// TestKernelUDPClientOverTap talks to the dataplane with the kernel's own
// UDP stack through a net_tap device: the kernel resolves the dataplane's
// address with ARP, sends datagrams, and accepts the replies only if their
// checksums are right.
func TestKernelUDPClientOverTap(t *testing.T) {
	if !inPrivateNetns(t) {
		return
	}
	const (
		iface   = "psptap0"
		workers = 5 // more than net_tap's 3 worker queues: workers share them
		n       = 200
	)
	server := netip.MustParseAddr("10.77.0.2")
	d := openTestDevice(t, Config{Device: "net_tap0,iface=" + iface, IP: server, Workers: workers})
	if q := d.DeviceTxQueues(); q != 3 {
		t.Fatalf("net_tap worker queues %d, want 3", q)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); echoLoop(d, workers, stop) }()
	t.Cleanup(func() { close(stop); wg.Wait() })

	run(t, "ip", "link", "set", "lo", "up")
	run(t, "ip", "addr", "add", "10.77.0.1/24", "dev", iface)
	run(t, "ip", "link", "set", iface, "up")

	conn, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(10, 77, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	dst := &net.UDPAddr{IP: server.AsSlice(), Port: wire.DefaultPort}
	req := make([]byte, wire.HeaderLen)
	want := map[uint32]bool{}
	for i := range uint32(n) {
		wire.Header{ID: i, Type: wire.TypeShort, ServiceNs: 1000}.Encode(req)
		if _, err := conn.WriteTo(req, dst); err != nil {
			t.Fatal(err)
		}
		want[i] = true
		if i%20 == 19 {
			time.Sleep(time.Millisecond) // stay under the ARP queue while resolving
		}
	}
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	reply := make([]byte, 2048)
	for len(want) > 0 {
		k, from, err := conn.ReadFromUDPAddrPort(reply)
		if err != nil {
			t.Fatalf("%d of %d replies missing: %v (stats %+v, port %+v)", len(want), n, err, d.Stats(), d.PortStats())
		}
		if from != netip.AddrPortFrom(server, wire.DefaultPort) {
			t.Fatalf("reply from %v", from)
		}
		h, err := wire.Decode(reply[:k])
		if err != nil || k != wire.HeaderLen || !want[h.ID] {
			t.Fatalf("unexpected reply % x", reply[:k])
		}
		delete(want, h.ID)
	}
	if ps := d.PortStats(); ps.ARPReplies == 0 {
		t.Fatalf("the kernel reached the dataplane without ARP? %+v", ps)
	}
	t.Logf("stats %+v\nport %+v", d.Stats(), d.PortStats())
}
