//go:build linux

package udp

import (
	"net/netip"
	"testing"

	"golang.org/x/sys/unix"
)

func TestSockaddrRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		family int
		peer   string
		ok     bool
	}{
		{unix.AF_INET, "127.0.0.1:6789", true},
		{unix.AF_INET, "[::1]:1", false},
		{unix.AF_INET6, "[2001:db8::7]:65535", true},
		{unix.AF_INET6, "10.1.2.3:53", true}, // sent IPv4-mapped, parsed back as IPv4
		{unix.AF_INET, "[::ffff:10.1.2.3]:53", true},
	} {
		peer := netip.MustParseAddrPort(tc.peer)
		var b [sockaddrLen]byte
		n := encodeSockaddr(tc.family, peer, &b)
		if (n > 0) != tc.ok {
			t.Errorf("encode %v for family %d: length %d, want ok=%v", peer, tc.family, n, tc.ok)
			continue
		}
		if n == 0 {
			continue
		}
		want := netip.AddrPortFrom(peer.Addr().Unmap(), peer.Port())
		if got := parseSockaddr(b[:n]); got != want {
			t.Errorf("parse(encode(%v)) = %v, want %v", peer, got, want)
		}
	}
	if n := encodeSockaddr(unix.AF_INET6, netip.AddrPort{}, new([sockaddrLen]byte)); n != 0 {
		t.Errorf("encoded the zero AddrPort (length %d)", n)
	}
}

// FuzzParseSockaddr feeds arbitrary kernel address bytes to the receive
// path's parser: it must never panic, and what it accepts must encode back
// to an equivalent address.
func FuzzParseSockaddr(f *testing.F) {
	var b [sockaddrLen]byte
	f.Add(b[:encodeSockaddr(unix.AF_INET, netip.MustParseAddrPort("1.2.3.4:5"), &b)])
	f.Add(b[:encodeSockaddr(unix.AF_INET6, netip.MustParseAddrPort("[fe80::1]:5"), &b)])
	f.Add([]byte{})
	f.Add([]byte{2, 0, 1})
	f.Fuzz(func(t *testing.T, raw []byte) {
		p := parseSockaddr(raw)
		if !p.IsValid() {
			return
		}
		var out [sockaddrLen]byte
		n := encodeSockaddr(unix.AF_INET6, p, &out)
		if n == 0 || parseSockaddr(out[:n]) != p {
			t.Fatalf("parsed %v from %x does not round-trip", p, raw)
		}
	})
}
