package memcached

import "encoding/binary"

// UDP framing (memcached's protocol.txt, "UDP protocol"): every datagram
// starts with an 8-byte header, big-endian:
//
//	0 u16 request id (chosen by the client, echoed in every reply datagram)
//	2 u16 sequence number
//	4 u16 total number of datagrams in this message
//	6 u16 reserved, 0
//
// memcached accepts a request only when the total is 1 (it does not
// reassemble multi-datagram requests; it drops them) and ignores the
// sequence number and the reserved field. It answers each response object
// of a command separately (a get of several keys: one per key), split into
// datagrams of at most UDPMaxPayload bytes, numbered from 0 with the total
// of that response; a response that is empty but heads the output queue
// goes out as a header-only datagram with a total of 0.
const (
	UDPHeaderLen  = 8
	UDPMaxPayload = 1400
	udpDataSize   = UDPMaxPayload - UDPHeaderLen
)

// FrameHeader is the UDP frame header.
type FrameHeader struct {
	RequestID uint16
	Seq       uint16
	Total     uint16
	Reserved  uint16
}

// ParseFrameHeader decodes the header at the start of a datagram.
func ParseFrameHeader(p []byte) (FrameHeader, bool) {
	if len(p) < UDPHeaderLen {
		return FrameHeader{}, false
	}
	return FrameHeader{
		RequestID: binary.BigEndian.Uint16(p[0:]),
		Seq:       binary.BigEndian.Uint16(p[2:]),
		Total:     binary.BigEndian.Uint16(p[4:]),
		Reserved:  binary.BigEndian.Uint16(p[6:]),
	}, true
}

// Put encodes h into p[:UDPHeaderLen].
func (h FrameHeader) Put(p []byte) {
	binary.BigEndian.PutUint16(p[0:], h.RequestID)
	binary.BigEndian.PutUint16(p[2:], h.Seq)
	binary.BigEndian.PutUint16(p[4:], h.Total)
	binary.BigEndian.PutUint16(p[6:], h.Reserved)
}

// AppendRequest appends a single-datagram request with the given id and
// body (one or more commands) to dst.
func AppendRequest(dst []byte, id uint16, body []byte) []byte {
	var h [UDPHeaderLen]byte
	FrameHeader{RequestID: id, Total: 1}.Put(h[:])
	return append(append(dst, h[:]...), body...)
}
