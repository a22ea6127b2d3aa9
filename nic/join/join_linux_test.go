//go:build linux

package join_test

import (
	"bufio"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/persephone-go/psp/nic"
	"github.com/persephone-go/psp/nic/join"
	"github.com/persephone-go/psp/nic/nictest"
	"github.com/persephone-go/psp/nic/tcp"
	"github.com/persephone-go/psp/nic/udp"
	"github.com/persephone-go/psp/wire"
)

// headers frames 16-byte psp headers.
type headers struct{}

func (headers) NewConn(uint64, netip.AddrPort) nic.Framer { return headers{} }
func (headers) TooManyConns() []byte                      { return nil }
func (headers) Frame(in []byte, _ int) nic.Frame {
	if len(in) < wire.HeaderLen {
		return nic.Frame{Kind: nic.FrameMore}
	}
	return nic.Frame{Kind: nic.FrameRequest, Len: wire.HeaderLen, ReadOnly: true}
}

// TestJoinedServesBoth: requests over UDP and over TCP come out of one
// Recv, each reply goes back the way its request came, every buffer to
// its own pool, and a wait ends on a datagram as on a connection.
func TestJoinedServesBoth(t *testing.T) {
	u, err := udp.Open(udp.Config{Addr: "127.0.0.1:0", Workers: 2, Buffers: 64, KernelWait: true})
	if err != nil {
		t.Fatal(err)
	}
	tc, err := tcp.Open(tcp.Config{Addr: "127.0.0.1:0", Workers: 2, Buffers: 64, Protocol: headers{}})
	if err != nil {
		t.Fatal(err)
	}
	dp, err := join.New(tc, u)
	if err != nil {
		t.Fatal(err)
	}
	defer dp.Close()
	done := make(chan struct{})
	defer close(done)
	go nictest.Echo(dp, done, 50*time.Millisecond, 1)
	req := make([]byte, wire.HeaderLen)
	for i := range 20 {
		wire.Header{ID: uint32(i), Type: 1}.Encode(req)
		uc, err := net.Dial("udp", u.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		uc.SetDeadline(time.Now().Add(2 * time.Second))
		uc.Write(req)
		got := make([]byte, 64)
		if n, err := uc.Read(got); err != nil || n != wire.HeaderLen || wire.TypeOf(got) != 1 {
			t.Fatalf("udp %d: %d bytes, %v", i, n, err)
		}
		uc.Close()
		cc, err := net.Dial("tcp", tc.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		cc.SetDeadline(time.Now().Add(2 * time.Second))
		cc.Write(req)
		if _, err := bufio.NewReader(cc).Peek(wire.HeaderLen); err != nil {
			t.Fatalf("tcp %d: %v", i, err)
		}
		cc.Close()
		time.Sleep(time.Duration(i) * time.Millisecond) // some requests find Recv waiting
	}
	deadline := time.Now().Add(2 * time.Second)
	for tc.FreeBuffers() != 64 || u.FreeBuffers() != 64+0 {
		if time.Now().After(deadline) {
			t.Fatalf("free buffers: tcp %d, udp %d", tc.FreeBuffers(), u.FreeBuffers())
		}
		time.Sleep(time.Millisecond)
	}

}
