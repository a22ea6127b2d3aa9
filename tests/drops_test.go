package tests

import (
	"io"
	"net"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/persephone-go/psp/wire"
)

// TestLostRequestsFound: a server that stops reading (SIGSTOP: a stall,
// as a long pause of its net worker would be) while 20,000 requests arrive
// lets the kernel drop what its socket cannot hold. Every request sent is
// then found: read by psp, dropped at its socket (psp status and /metrics
// say how many, per port), or dropped in the kernel's input backlog
// before any socket.
func TestLostRequestsFound(t *testing.T) {
	s := startServer(t, serverOptions{policy: "cfcfs", dilation: 1})
	before, backlog0 := s.status(), backlogDrops()
	conn, err := net.Dial("udp", s.listen)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	const sent = 20000
	if err := s.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, wire.HeaderLen)
	for i := range sent {
		wire.Header{ID: uint32(i), Type: wire.TypeShort, ServiceNs: 1}.Encode(b)
		if _, err := conn.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	var read, drops, backlog uint64
	var after *status
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		after = s.status()
		read = after.Net.RxPackets - before.Net.RxPackets
		drops = after.socketDrops() - before.socketDrops()
		backlog = backlogDrops() - backlog0
		if read+drops+backlog >= sent || time.Now().After(deadline) {
			break
		}
	}
	t.Logf("%d requests sent while the server was stopped: %d read by psp, %d dropped at its socket, %d in the kernel's backlog", sent, read, drops, backlog)
	if drops == 0 {
		t.Fatalf("no drop at the server's socket: the test proves nothing (a socket buffer holding %d requests?)", sent)
	}
	if read+drops+backlog != sent {
		t.Errorf("%d requests not found anywhere", int64(sent)-int64(read+drops+backlog))
	}
	port := s.listen[strings.LastIndexByte(s.listen, ':')+1:]
	if len(after.KernelDrops) != 1 || strconv.Itoa(int(after.KernelDrops[0].Port)) != port {
		t.Errorf("kernel drops %+v, want the listen port's", after.KernelDrops)
	}
	out, err := exec.Command(pspBinary, "status", "--admin", s.admin).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "kernel drops at the receive sockets") || !strings.Contains(string(out), "port "+port+": ") {
		t.Errorf("psp status does not say the kernel's drops: %v\n%s", err, out)
	}
	resp, err := http.Get("http://" + s.admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	want := `psp_dataplane_socket_drops_total{port="` + port + `"} ` + strconv.FormatUint(after.socketDrops(), 10)
	if !strings.Contains(string(body), want) {
		t.Errorf("/metrics has no %s", want)
	}
}
