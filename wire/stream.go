package wire

import (
	"net/netip"

	"github.com/persephone-go/psp/nic"
)

// Stream is the psp header's framing over a byte stream (nic.Protocol):
// every HeaderLen bytes are one request, and a reply is the bytes its
// handler writes (the header echoed, for the synthetic applications). The
// requests are independent (ReadOnly): those of one connection may run at
// once, on several workers, as datagrams would.
// Clients match replies to requests by their id, or by their order: a
// connection's replies come back in the order of its requests.
type Stream struct{}

// NewConn implements nic.Protocol.
func (Stream) NewConn(uint64, netip.AddrPort) nic.Framer { return headerFramer{} }

// TooManyConns implements nic.Protocol: nothing is said, the connection is
// closed.
func (Stream) TooManyConns() []byte { return nil }

type headerFramer struct{}

// Frame implements nic.Framer.
func (headerFramer) Frame(in []byte, _ int) nic.Frame {
	if len(in) < HeaderLen {
		return nic.Frame{Kind: nic.FrameMore}
	}
	return nic.Frame{Kind: nic.FrameRequest, Len: HeaderLen, ReadOnly: true}
}
