//go:build linux

package udp_test

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/persephone-go/psp/internal/testenv"
	"github.com/persephone-go/psp/nic"
	"github.com/persephone-go/psp/nic/udp"
)

// freeUDPPort returns a port free on 127.0.0.1 (at the time of the call).
func freeUDPPort(t testing.TB) uint16 {
	t.Helper()
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return uint16(c.LocalAddr().(*net.UDPAddr).Port)
}

// echoOnce receives what has arrived (waiting up to wait) and sends it
// back on queue 0, returning the ports the packets arrived on.
func echoOnce(t testing.TB, dp *udp.Dataplane, wait time.Duration) []uint16 {
	t.Helper()
	bufs := make([]*nic.Buffer, 32)
	n, err := dp.Recv(bufs, wait)
	if err != nil {
		t.Fatal(err)
	}
	var ports []uint16
	for _, b := range bufs[:n] {
		ports = append(ports, b.DstPort)
	}
	if n > 0 {
		if sent, err := dp.TxQueue(0).Send(bufs[:n]); sent != n || err != nil {
			t.Fatalf("sent %d of %d: %v", sent, n, err)
		}
	}
	return ports
}

// TestPorts: a dataplane with several ports receives on each, tells them
// apart (DstPort) and replies from the port each request came to (a
// connected client only accepts those); ports come and go while it runs.
func TestPorts(t *testing.T) {
	extra := freeUDPPort(t)
	dp := open(t, udp.Config{Ports: []uint16{extra}, Workers: 1, Buffers: 64, BufSize: 512})
	main := dp.Addr()
	if ports := dp.Ports(); len(ports) != 2 || ports[0] != main.Port() || ports[1] != extra {
		t.Fatalf("ports %v", ports)
	}
	dial := func(port uint16) *net.UDPConn {
		c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(main.Addr(), port)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	roundTrip := func(c *net.UDPConn, msg string) error {
		if _, err := c.Write([]byte(msg)); err != nil {
			return err
		}
		deadline := time.Now().Add(2 * time.Second)
		var got []uint16
		for len(got) == 0 && time.Now().Before(deadline) {
			got = echoOnce(t, dp, 100*time.Millisecond)
		}
		if len(got) != 1 || got[0] != uint16(c.RemoteAddr().(*net.UDPAddr).Port) {
			return fmt.Errorf("received on ports %v, sent to %v", got, c.RemoteAddr())
		}
		buf := make([]byte, 64)
		c.SetReadDeadline(time.Now().Add(2 * time.Second))
		n, err := c.Read(buf)
		if err != nil || string(buf[:n]) != msg {
			return fmt.Errorf("reply %q, %v", buf[:n], err)
		}
		return nil
	}
	a, b := dial(main.Port()), dial(extra)
	for i := range 3 {
		if err := roundTrip(a, fmt.Sprint("a", i)); err != nil {
			t.Fatalf("main port: %v", err)
		}
		if err := roundTrip(b, fmt.Sprint("b", i)); err != nil {
			t.Fatalf("extra port: %v", err)
		}
	}
	// A third port while a Recv waits.
	third := freeUDPPort(t)
	done := make(chan []uint16)
	go func() { done <- echoOnce(t, dp, time.Second) }()
	time.Sleep(20 * time.Millisecond)
	if err := dp.AddPort(third); err != nil {
		t.Fatal(err)
	}
	<-done
	if err := roundTrip(dial(third), "c"); err != nil {
		t.Fatalf("added port: %v", err)
	}
	if err := dp.RemovePort(extra); err != nil {
		t.Fatal(err)
	}
	if err := dp.RemovePort(main.Port()); err == nil {
		t.Fatal("removed the listen address's port")
	}
	// The removed port is free again.
	c, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(main.Addr(), extra)))
	if err != nil {
		t.Fatalf("removed port still bound: %v", err)
	}
	c.Close()
	if err := roundTrip(a, "a again"); err != nil {
		t.Fatal(err)
	}
	// Close ends a waiting Recv.
	errc := make(chan error, 1)
	go func() {
		_, err := dp.Recv(make([]*nic.Buffer, 8), 10*time.Second)
		errc <- err
	}()
	time.Sleep(20 * time.Millisecond)
	dp.Close()
	if err := testenv.Await(t, errc, 3*time.Second, "Close to end a waiting Recv"); !errors.Is(err, nic.ErrClosed) {
		t.Fatalf("Recv after Close: %v", err)
	}
	if err := dp.AddPort(extra); !errors.Is(err, nic.ErrClosed) {
		t.Fatalf("AddPort after Close: %v", err)
	}
}

func TestPortsAllocateNothing(t *testing.T) {
	dp := open(t, udp.Config{Ports: []uint16{freeUDPPort(t)}, Workers: 1, Buffers: 64, BufSize: 512})
	c := dialClient(t, dp)
	bufs := make([]*nic.Buffer, 8)
	msg := []byte("x")
	step := func() {
		c.Write(msg)
		for {
			n, _ := dp.Recv(bufs, 0)
			if n > 0 {
				dp.TxQueue(0).Send(bufs[:n])
				return
			}
		}
	}
	for range 50 {
		step()
	}
	if n := testing.AllocsPerRun(200, step); n != 0 {
		t.Fatalf("%v allocations per round trip", n)
	}
}

// TestPortsWakeAndStamp: with several ports and KernelWait, WakeRecv ends a
// waiting Recv (and one called before the wait makes it return at once),
// and packets on an added port carry the kernel's receive stamp.
func TestPortsWakeAndStamp(t *testing.T) {
	extra := freeUDPPort(t)
	dp := open(t, udp.Config{Ports: []uint16{extra}, Workers: 1, Buffers: 64, BufSize: 512, KernelWait: true})
	if !dp.RecvWakeable() {
		t.Fatal("not wakeable with KernelWait")
	}
	bufs := make([]*nic.Buffer, 32)
	dp.WakeRecv() // before the wait
	start := time.Now()
	if n, err := dp.Recv(bufs, 2*time.Second); n != 0 || err != nil {
		t.Fatalf("recv: %d, %v", n, err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("a wake-up before the wait was lost: waited %v", d)
	}
	go func() {
		time.Sleep(20 * time.Millisecond)
		dp.WakeRecv()
	}()
	start = time.Now()
	if n, err := dp.Recv(bufs, 5*time.Second); n != 0 || err != nil {
		t.Fatalf("recv: %d, %v", n, err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("WakeRecv did not end the wait: waited %v", d)
	}
	c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(dp.Addr().Addr(), extra)))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(30 * time.Millisecond) // let it wait in the socket
	n, err := dp.Recv(bufs, time.Second)
	if n != 1 || err != nil {
		t.Fatalf("recv: %d, %v", n, err)
	}
	b := bufs[0]
	defer dp.Release(b)
	if b.DstPort != extra {
		t.Fatalf("port %d, want %d", b.DstPort, extra)
	}
	if waited := dp.Now() - b.RxTime; waited < int64(10*time.Millisecond) {
		t.Fatalf("RxTime %d is %v before now: not the kernel's stamp", b.RxTime, time.Duration(waited))
	}
}
