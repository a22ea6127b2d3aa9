//go:build linux && cgo && dpdk

package dpdk

import (
	"bytes"
	"net/netip"
	"testing"

	"github.com/persephone-go/psp/nic"
	"github.com/persephone-go/psp/wire"
)

// FuzzReceive feeds arbitrary frames to the C receive path: nothing may
// crash, a delivered payload must be the frame's own bytes, and every frame
// is either delivered, answered (ARP) or dropped and counted.
func FuzzReceive(f *testing.F) {
	good := udpFrame{
		dstMAC: [6]byte{}, srcMAC: clientMAC,
		src:     netip.AddrPortFrom(clientIP, 1234),
		dst:     netip.AddrPortFrom(serverIP, wire.DefaultPort),
		payload: []byte("0123456789abcdef"),
	}
	f.Add(good.build())
	f.Add(good.build()[:40])
	f.Add(arpFrame(1, broadcast, clientMAC, clientIP, serverIP))
	f.Add([]byte{})
	f.Add(bytes.Repeat([]byte{0xff}, 60))
	r := openTestRingPair(f, Config{})
	bufs := make([]*nic.Buffer, 4)
	f.Fuzz(func(t *testing.T, frame []byte) {
		if len(frame) >= 6 && frame[0]&1 == 0 {
			mac := r.MAC()
			copy(frame, mac[:]) // reach past the MAC filter most of the time
		}
		if len(frame) == 0 || len(frame) > maxFrame {
			return
		}
		before := r.PortStats()
		if err := r.inject(frame); err != nil {
			t.Fatal(err)
		}
		n, err := r.Recv(bufs, 0)
		if err != nil || n > 1 {
			t.Fatalf("recv: %d, %v", n, err)
		}
		if n == 1 {
			b := bufs[0]
			if b.Len > len(b.Data) || !bytes.Contains(frame, b.Payload()) {
				t.Fatalf("delivered payload %x (room %d) is not part of the frame", b.Payload(), len(b.Data))
			}
			r.Release(b)
		}
		for f, _ := r.transmitted(); f != nil; f, _ = r.transmitted() {
		}
		after := r.PortStats()
		accounted := (after.Delivered - before.Delivered) + (after.ARPReplies - before.ARPReplies) + (after.Dropped() - before.Dropped())
		if after.Polled-before.Polled != 1 || accounted != 1 {
			t.Fatalf("frame not accounted for exactly once: before %+v after %+v", before, after)
		}
	})
}
