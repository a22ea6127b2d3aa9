//go:build linux

package sockstat

import (
	"net"
	"testing"
)

// TestDrops overflows a socket's receive buffer and reads its drops, then
// reads them again after it is closed.
func TestDrops(t *testing.T) {
	srv, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	srv.SetReadBuffer(1) // the kernel rounds up to its minimum
	raw, err := srv.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var d Drops
	if n, ok := d.Read(raw); !ok || n != 0 {
		t.Fatalf("a new socket: %d drops (ok %v)", n, ok)
	}
	c, err := net.DialUDP("udp", nil, srv.LocalAddr().(*net.UDPAddr))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for range 500 {
		c.Write(make([]byte, 1024))
	}
	n, ok := d.Read(raw)
	if !ok || n == 0 || n >= 500 {
		t.Fatalf("500 datagrams into a tiny buffer nobody reads: %d drops (ok %v)", n, ok)
	}
	if a := testing.AllocsPerRun(20, func() { d.Read(raw) }); a != 0 {
		t.Errorf("Read allocated %.1f times", a)
	}
	srv.Close()
	if after, ok := d.Read(raw); ok || after != n {
		t.Errorf("after Close: %d (ok %v), want the last count %d", after, ok, n)
	}
}

// TestBacklogDrops: the kernel's count of drops before any socket is read
// and never goes back.
func TestBacklogDrops(t *testing.T) {
	a, ok := BacklogDrops()
	if !ok {
		t.Fatal("/proc/net/softnet_stat unreadable")
	}
	if b, ok := BacklogDrops(); !ok || b < a {
		t.Errorf("backlog drops %d then %d (%v)", a, b, ok)
	}
}
