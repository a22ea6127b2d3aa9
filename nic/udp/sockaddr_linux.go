//go:build linux

package udp

import (
	"encoding/binary"
	"net/netip"

	"golang.org/x/sys/unix"
)

// sockaddrLen is the room for one peer address (sockaddr_in6 covers both
// families).
const sockaddrLen = unix.SizeofSockaddrInet6

// parseSockaddr decodes a kernel sockaddr_in or sockaddr_in6; IPv4-mapped
// IPv6 addresses become IPv4.
func parseSockaddr(b []byte) netip.AddrPort {
	if len(b) < 4 {
		return netip.AddrPort{}
	}
	port := binary.BigEndian.Uint16(b[2:4])
	switch binary.NativeEndian.Uint16(b[0:2]) {
	case unix.AF_INET:
		if len(b) >= 8 {
			return netip.AddrPortFrom(netip.AddrFrom4([4]byte(b[4:8])), port)
		}
	case unix.AF_INET6:
		if len(b) >= 24 {
			return netip.AddrPortFrom(netip.AddrFrom16([16]byte(b[8:24])).Unmap(), port)
		}
	}
	return netip.AddrPort{}
}

// encodeSockaddr writes peer as a sockaddr of the socket's family and returns
// its length, or 0 when peer cannot be reached from such a socket.
func encodeSockaddr(family int, peer netip.AddrPort, b *[sockaddrLen]byte) int {
	ip := peer.Addr()
	switch {
	case !ip.IsValid():
		return 0
	case family == unix.AF_INET:
		if !ip.Is4() && !ip.Is4In6() {
			return 0
		}
		binary.NativeEndian.PutUint16(b[0:2], unix.AF_INET)
		binary.BigEndian.PutUint16(b[2:4], peer.Port())
		a := ip.Unmap().As4()
		copy(b[4:8], a[:])
		clear(b[8:16])
		return unix.SizeofSockaddrInet4
	default:
		binary.NativeEndian.PutUint16(b[0:2], unix.AF_INET6)
		binary.BigEndian.PutUint16(b[2:4], peer.Port())
		clear(b[4:8])  // flow info
		a := ip.As16() // IPv4 peers become IPv4-mapped
		copy(b[8:24], a[:])
		clear(b[24:28]) // scope id
		return unix.SizeofSockaddrInet6
	}
}
