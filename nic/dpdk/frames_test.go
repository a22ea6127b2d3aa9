//go:build linux && cgo && dpdk

package dpdk

import (
	"encoding/binary"
	"fmt"
	"net/netip"
)

// Frame building and parsing for tests, independent of the C code under
// test: checksums here are computed the textbook way (RFC 1071).

var (
	clientMAC = [6]byte{0x02, 0, 0, 0, 0, 0x01}
	clientIP  = netip.MustParseAddr("10.9.0.1")
	serverIP  = netip.MustParseAddr("10.9.0.2")
	broadcast = [6]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
)

func checksum(parts ...[]byte) uint16 {
	var sum uint32
	for _, b := range parts {
		for i := 0; i+1 < len(b); i += 2 {
			sum += uint32(b[i])<<8 | uint32(b[i+1])
		}
		if len(b)%2 == 1 {
			sum += uint32(b[len(b)-1]) << 8
		}
	}
	for sum>>16 != 0 {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}

// udpFrame describes an Ethernet/IPv4/UDP frame to build.
type udpFrame struct {
	dstMAC, srcMAC [6]byte
	src, dst       netip.AddrPort
	payload        []byte
	proto          byte   // default 17
	flagsFrag      uint16 // IPv4 flags and fragment offset
	noUDPChecksum  bool
}

func (f udpFrame) build() []byte {
	proto := f.proto
	if proto == 0 {
		proto = 17
	}
	udpLen := 8 + len(f.payload)
	b := make([]byte, 14+20+udpLen)
	copy(b[0:6], f.dstMAC[:])
	copy(b[6:12], f.srcMAC[:])
	binary.BigEndian.PutUint16(b[12:], 0x0800)
	ip := b[14:34]
	ip[0] = 0x45
	binary.BigEndian.PutUint16(ip[2:], uint16(20+udpLen))
	binary.BigEndian.PutUint16(ip[4:], 0x1234)
	binary.BigEndian.PutUint16(ip[6:], f.flagsFrag)
	ip[8] = 64
	ip[9] = proto
	s, d := f.src.Addr().As4(), f.dst.Addr().As4()
	copy(ip[12:16], s[:])
	copy(ip[16:20], d[:])
	binary.BigEndian.PutUint16(ip[10:], checksum(ip))
	udp := b[34:]
	binary.BigEndian.PutUint16(udp[0:], f.src.Port())
	binary.BigEndian.PutUint16(udp[2:], f.dst.Port())
	binary.BigEndian.PutUint16(udp[4:], uint16(udpLen))
	copy(udp[8:], f.payload)
	if !f.noUDPChecksum {
		ck := checksum(pseudoHeader(ip, udpLen), udp)
		if ck == 0 {
			ck = 0xffff
		}
		binary.BigEndian.PutUint16(udp[6:], ck)
	}
	return b
}

func pseudoHeader(ip []byte, udpLen int) []byte {
	ph := make([]byte, 12)
	copy(ph[0:8], ip[12:20])
	ph[9] = 17
	binary.BigEndian.PutUint16(ph[10:], uint16(udpLen))
	return ph
}

// parsedUDP is a frame parsed and checked by parseUDP.
type parsedUDP struct {
	dstMAC, srcMAC [6]byte
	src, dst       netip.AddrPort
	ttl            byte
	payload        []byte
}

// parseUDP parses an Ethernet/IPv4/UDP frame and verifies its lengths and
// both checksums.
func parseUDP(b []byte) (parsedUDP, error) {
	var p parsedUDP
	if len(b) < 42 {
		return p, fmt.Errorf("frame of %d bytes", len(b))
	}
	copy(p.dstMAC[:], b[0:6])
	copy(p.srcMAC[:], b[6:12])
	if et := binary.BigEndian.Uint16(b[12:]); et != 0x0800 {
		return p, fmt.Errorf("ethertype %#x", et)
	}
	ip := b[14:]
	ihl := int(ip[0]&0xf) * 4
	if ip[0]>>4 != 4 || ihl != 20 {
		return p, fmt.Errorf("version/ihl %#x", ip[0])
	}
	total := int(binary.BigEndian.Uint16(ip[2:]))
	if total != len(ip) {
		return p, fmt.Errorf("ip total length %d, frame carries %d", total, len(ip))
	}
	if checksum(ip[:ihl]) != 0 {
		return p, fmt.Errorf("bad ip header checksum %#04x", binary.BigEndian.Uint16(ip[10:]))
	}
	if ip[9] != 17 {
		return p, fmt.Errorf("protocol %d", ip[9])
	}
	p.ttl = ip[8]
	udp := ip[ihl:total]
	udpLen := int(binary.BigEndian.Uint16(udp[4:]))
	if udpLen != len(udp) {
		return p, fmt.Errorf("udp length %d, datagram carries %d", udpLen, len(udp))
	}
	if ck := binary.BigEndian.Uint16(udp[6:]); ck == 0 {
		return p, fmt.Errorf("no udp checksum")
	}
	if checksum(pseudoHeader(ip, udpLen), udp) != 0 {
		return p, fmt.Errorf("bad udp checksum %#04x", binary.BigEndian.Uint16(udp[6:]))
	}
	p.src = netip.AddrPortFrom(netip.AddrFrom4([4]byte(ip[12:16])), binary.BigEndian.Uint16(udp[0:]))
	p.dst = netip.AddrPortFrom(netip.AddrFrom4([4]byte(ip[16:20])), binary.BigEndian.Uint16(udp[2:]))
	p.payload = udp[8:]
	return p, nil
}

// arpFrame builds an ARP packet (op 1 request, 2 reply).
func arpFrame(op uint16, dstMAC, senderMAC [6]byte, sender, target netip.Addr) []byte {
	b := make([]byte, 14+28)
	copy(b[0:6], dstMAC[:])
	copy(b[6:12], senderMAC[:])
	binary.BigEndian.PutUint16(b[12:], 0x0806)
	a := b[14:]
	binary.BigEndian.PutUint16(a[0:], 1)
	binary.BigEndian.PutUint16(a[2:], 0x0800)
	a[4], a[5] = 6, 4
	binary.BigEndian.PutUint16(a[6:], op)
	copy(a[8:14], senderMAC[:])
	s, t := sender.As4(), target.As4()
	copy(a[14:18], s[:])
	copy(a[24:28], t[:])
	return b
}
