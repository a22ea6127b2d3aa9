package spin

import (
	"net/netip"

	"github.com/persephone-go/psp/nic"
	"github.com/persephone-go/psp/wire"
)

// Stream is the psp header's framing (package wire) over a byte stream (nic.Protocol):
// every wire.HeaderLen bytes are one request, and a reply is the bytes its
// handler writes (the header echoed, for spin, emulate and tpcc). The
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
	if len(in) < wire.HeaderLen {
		return nic.Frame{Kind: nic.FrameMore}
	}
	return nic.Frame{Kind: nic.FrameRequest, Len: wire.HeaderLen, ReadOnly: true}
}
