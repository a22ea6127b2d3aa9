// Package wire encodes and decodes the psp request header: the 16-byte,
// little-endian payload of the Perséphone prototype's synthetic requests.
//
//	offset 0  u32 request id
//	offset 4  u32 request type (0 = UNKNOWN)
//	offset 8  u32 reserved (psp: the tenant-local flags, 0 today)
//	offset 12 u32 service time in nanoseconds
//
// Responses echo the header (id and type) back to the client. Functions here
// decode in place and allocate nothing.
package wire

import (
	"encoding/binary"
	"errors"
)

// HeaderLen is the length of a psp request header in bytes.
const HeaderLen = 16

// DefaultPort is the prototype's UDP port.
const DefaultPort = 6789

// Request types of the paper's workloads, as sent on the wire.
const (
	TypeUnknown     uint32 = 0
	TypeShort       uint32 = 1
	TypeLong        uint32 = 2
	TypeNewOrder    uint32 = 5
	TypePayment     uint32 = 6
	TypeDelivery    uint32 = 7
	TypeOrderStatus uint32 = 8
	TypeStockLevel  uint32 = 9
	TypeGet         uint32 = 10
	TypeScan        uint32 = 11
)

// ErrShort is returned when a payload is shorter than HeaderLen.
var ErrShort = errors.New("wire: payload shorter than the 16-byte psp header")

// Header is a decoded psp request header.
type Header struct {
	ID        uint32
	Type      uint32
	Reserved  uint32
	ServiceNs uint32
}

// Decode reads a header from the start of b.
func Decode(b []byte) (Header, error) {
	if len(b) < HeaderLen {
		return Header{}, ErrShort
	}
	return Header{
		ID:        binary.LittleEndian.Uint32(b[0:]),
		Type:      binary.LittleEndian.Uint32(b[4:]),
		Reserved:  binary.LittleEndian.Uint32(b[8:]),
		ServiceNs: binary.LittleEndian.Uint32(b[12:]),
	}, nil
}

// Encode writes h into the first HeaderLen bytes of b, which must be long
// enough.
func (h Header) Encode(b []byte) {
	_ = b[HeaderLen-1]
	binary.LittleEndian.PutUint32(b[0:], h.ID)
	binary.LittleEndian.PutUint32(b[4:], h.Type)
	binary.LittleEndian.PutUint32(b[8:], h.Reserved)
	binary.LittleEndian.PutUint32(b[12:], h.ServiceNs)
}

// TypeOf returns the type field of a payload, or TypeUnknown when the payload
// is too short. It is the native header classifier.
func TypeOf(b []byte) uint32 {
	if len(b) < HeaderLen {
		return TypeUnknown
	}
	return binary.LittleEndian.Uint32(b[4:])
}
