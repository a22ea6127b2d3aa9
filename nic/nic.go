// Package nic defines psp's dataplane contract and holds its dataplanes: the
// batched UDP-socket dataplane (the default, runs anywhere without root), an
// in-memory dataplane for tests and benchmarks, and the DPDK dataplane (in
// nic/dpdk, behind the dpdk build tag).
//
// Buffers are pooled and travel without copying: the net worker receives a
// burst into pooled buffers, the dispatcher hands a buffer to a worker, the
// worker writes its response into the same buffer when it fits and transmits
// it on its own TX queue, which returns the buffer to the pool.
package nic

import (
	"errors"
	"net/netip"
	"time"
)

// Buffer is one packet buffer owned by a dataplane's pool. Between Recv and
// Send (or Release) it belongs to exactly one goroutine: the net worker, then
// the dispatcher, then one application worker.
type Buffer struct {
	// Data is the buffer's whole payload room; the UDP payload is Data[:Len].
	// A worker builds its response in place (Data[:n], then Len = n).
	// For dataplanes that point Data into foreign memory (DPDK mbufs), Data is
	// valid only until the buffer is sent or released.
	Data []byte
	// Len is the payload length in bytes.
	Len int
	// WireLen is the payload length on the wire (larger than Len when the
	// datagram was truncated to fit Data).
	WireLen int
	// Peer is the sender's address: the reply goes there.
	Peer netip.AddrPort
	// DstPort is the UDP destination port the request arrived on (tenant
	// selection).
	DstPort uint16
	// RxTime is when the packet arrived (ns on the dataplane's clock, see
	// Dataplane.Now): the kernel's receive timestamp on the UDP dataplane,
	// the poll that returned it on DPDK and in memory.
	RxTime int64
	// Ref is private to the dataplane that owns the buffer (e.g. an mbuf
	// address).
	Ref uintptr
	// Index is private to the dataplane that owns the buffer (e.g. its slot in
	// the pool).
	Index int32
	// Flags are set by stream dataplanes on requests and by applications
	// on replies (see Flags); zero on datagrams.
	Flags Flags
	// Session is the connection's Framer for a request cut from a stream
	// (FromStream), nil for a datagram: an application keeps the state of
	// a connection in it (a name, a protocol version).
	Session Framer
	// Next, on a request cut from a stream, is the request of the same
	// connection that may start only once this one has completed (a write
	// after it, or anything after a write), chained to it by a dataplane
	// asked to (nic/tcp's Config.Chain) instead of held back until this
	// one's reply. The receiver owns it with this one: it takes Next off
	// (sets it to nil) before this buffer is sent, released or handed on,
	// and receives it as a new request once this one has completed or
	// been dropped. Nil otherwise.
	Next *Buffer
}

// Payload returns Data[:Len].
func (b *Buffer) Payload() []byte { return b.Data[:b.Len] }

// Dataplane is a source of request packets and a sink for responses.
//
// Recv and Release may be called only by the net worker goroutine; each TX
// queue by its own worker goroutine. Release may be called from any goroutine.
type Dataplane interface {
	// Recv fills bufs with up to len(bufs) received packets and returns how
	// many. It waits at most wait for the first packet (0: poll and return at
	// once) and returns 0, nil when none came. It returns ErrClosed after
	// Close.
	Recv(bufs []*Buffer, wait time.Duration) (int, error)
	// TxQueue returns transmit queue w (w in 0..n-1, n as given when the
	// dataplane was opened: one per worker, plus one for the dispatcher's own
	// replies when opened with one more), or nil when w is out of range.
	TxQueue(w int) TxQueue
	// Release returns buffers to the pool without transmitting them.
	Release(bufs ...*Buffer)
	// Now is the dataplane's clock in nanoseconds (monotonic).
	Now() int64
	// Stats returns counters since the dataplane was opened.
	Stats() Stats
	// Close stops the dataplane; pending Recv calls return ErrClosed.
	Close() error
}

// BufferPool is implemented by dataplanes that receive into a fixed pool of
// buffers.
type BufferPool interface {
	// RequestBuffers returns how many buffers Recv's callers may hold at
	// once (received and not yet sent or released) while the dataplane can
	// still receive a full burst: the pool minus what the receive path keeps
	// for itself (staged receive slots, a device's descriptor rings). A
	// dispatcher whose requests never hold more than this never stops
	// reading the network for want of buffers.
	RequestBuffers() int
}

// TxQueue is one worker's transmit queue. It is not safe for concurrent use.
type TxQueue interface {
	// Send transmits each buffer's Data[:Len] to its Peer and returns the
	// buffers to the pool, whether or not transmission succeeded. It returns
	// how many were transmitted.
	Send(bufs []*Buffer) (int, error)
}

// ReplyAllocator is implemented by dataplanes that can hand a worker more
// buffers for a reply longer than one datagram (nic/udp, nic/memnic and
// nic/dpdk do; the dispatcher's Reply uses it).
//
// AllocReply returns a free buffer addressed like req: a TxQueue sends it to
// req's Peer from req's DstPort. Its Data is its whole room and its Len is 0.
// It returns nil when no buffer is free. Any worker goroutine may call it for
// the request it holds. Every buffer it returns must be sent or released
// before req itself is (a dataplane may tie a reply to its request and rely
// on req going last).
type ReplyAllocator interface {
	AllocReply(req *Buffer) *Buffer
}

// Stats are a dataplane's counters.
type Stats struct {
	RxPackets uint64 `json:"rx_packets"` // packets handed to Recv's caller
	RxDropped uint64 `json:"rx_dropped"` // packets the dataplane dropped (no buffer, not UDP to us, runts, ...)
	TxPackets uint64 `json:"tx_packets"`
	TxErrors  uint64 `json:"tx_errors"`
	// RxTruncated counts packets handed to Recv's caller truncated to the
	// buffer size (Buffer.WireLen > Buffer.Len); they are also in RxPackets.
	RxTruncated uint64 `json:"rx_truncated"`
	// RxNoBuffer counts the times the receive path found the buffer pool
	// empty: packets then wait in the kernel's or the device's queue and
	// are dropped there (RxDropped) when it overflows.
	RxNoBuffer uint64 `json:"rx_no_buffer"`
}

// Errors returned by dataplanes.
var (
	// ErrClosed is returned by Recv after Close.
	ErrClosed = errors.New("nic: dataplane closed")
	// ErrNotSupported is wrapped by dataplanes this build or machine cannot
	// provide (e.g. DPDK without the dpdk build tag).
	ErrNotSupported = errors.New("nic: not supported")
)
