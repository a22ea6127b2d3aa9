package nic

import (
	"errors"
	"net/netip"
)

// Stream dataplanes (nic/tcp) receive byte streams, not datagrams: an
// application's Protocol cuts each connection's bytes into requests, each
// of which then travels the pipeline exactly as a datagram does. A
// connection sees its requests run in its order (reads in a row may run at
// once: Frame.ReadOnly), and its replies leave in that order, whatever
// order the workers finish them in. A request that must wait for the one
// before it may be handed out chained to it (Buffer.Next): the receiver
// starts it once the one before has completed.

// Protocol is an application's byte-stream protocol, as a stream dataplane
// sees it. It is called from the dataplane's receive goroutine only.
type Protocol interface {
	// NewConn returns the framer of a new connection: id is unique for
	// the dataplane's life (never 0), peer is the client's address. The
	// framer is also the connection's session: every request of the
	// connection carries it in Buffer.Session.
	NewConn(id uint64, peer netip.AddrPort) Framer
	// TooManyConns returns what a connection over the dataplane's
	// connection limit is sent before it is closed (nil: nothing).
	TooManyConns() []byte
}

// Framer cuts one connection's byte stream into requests. The dataplane
// calls Frame on its receive goroutine only, whenever the connection has
// input it has not framed yet, and once more after the last request of a
// read (with what is left, possibly nothing), so a framer can ask for the
// held replies to be flushed while the connection waits for input.
type Framer interface {
	// Frame reports what the head of in (the connection's unframed input)
	// is. max is the longest request the dataplane accepts: a framer
	// whose head will be longer answers with its protocol's refusal
	// (FrameSkip or FrameClose) instead of FrameMore; a framer that asks
	// for more with max bytes in hand has its connection closed, counted
	// as a request too long. Frame must not keep in or modify it.
	Frame(in []byte, max int) Frame
}

// ConnCloser is implemented by Framers that hold something for their
// connection (memory, a place in a list): the dataplane calls ConnClosed
// once, on its receive goroutine, when the connection is closed.
type ConnCloser interface {
	ConnClosed()
}

// Pusher writes bytes to a stream connection that no request asked for (a
// Redis pub/sub message, sent to a subscriber when another client
// publishes). It may be called from any goroutine.
type Pusher interface {
	// Push sends p on the connection after the replies of every request
	// of it framed so far, before the replies of the requests framed
	// later; pushes keep their order. Push copies p. It returns
	// ErrConnClosed when the connection is closed or closing (nothing is
	// sent), and ErrOutputFull when p would take the bytes the connection
	// has not written past the dataplane's output bound (or, the
	// dataplane's memory used up, when the client is already behind): the
	// connection is then closed, as a client that does not read its
	// replies is.
	Push(p []byte) error
}

// PushTaker is implemented by Framers whose application pushes bytes to
// its connection (Pusher): a dataplane that can push calls TakePusher
// once, on its receive goroutine, before it frames the connection's first
// request. A framer given no pusher has a dataplane that cannot push.
type PushTaker interface {
	TakePusher(Pusher)
}

// PushWaiter is implemented by Framers whose connection may rightly send
// nothing for long while it waits for pushes (a Redis subscriber, which
// redis-server's timeout spares): the dataplane's receive goroutine asks
// WaitsForPush before it closes the connection as idle, and leaves it
// open while it reports true.
type PushWaiter interface {
	WaitsForPush() bool
}

// Errors of Pusher.Push.
var (
	ErrConnClosed = errors.New("nic: connection closed")
	ErrOutputFull = errors.New("nic: connection's output bound reached")
)

// PeerCloser is implemented by Framers that act when the peer has sent
// its last byte (it closed the connection, or its sending half) while
// requests of the connection may still be unanswered: the dataplane calls
// PeerClosed once, on its receive goroutine, and closes the connection
// once those requests are answered (a request that waits for something,
// such as a Redis BLPOP, should then be answered at once).
type PeerCloser interface {
	PeerClosed()
}

// FrameKind says what a Frame is.
type FrameKind uint8

// Frame kinds.
const (
	// FrameMore: the head of the input is incomplete; the dataplane
	// reads more before it calls Frame again.
	FrameMore FrameKind = iota
	// FrameRequest: in[:Len] is one request.
	FrameRequest
	// FrameSkip: discard the next Len bytes of the stream (they may run
	// past in: the rest is discarded as it arrives) and send Reply in
	// its turn (a value refused for its size, memcached's swallow).
	FrameSkip
	// FrameClose: send Reply in its turn, after the replies of the
	// requests before it, then close the connection (a protocol error).
	FrameClose
)

// Frame is a Framer's verdict on the head of a connection's input.
type Frame struct {
	Kind FrameKind
	// Len is the request's length (FrameRequest) or how many bytes to
	// discard (FrameSkip).
	Len int
	// Reply is sent in the request order (FrameSkip, FrameClose); the
	// dataplane copies it.
	Reply []byte
	// Flush sends every held reply (ReplyHold) up to this point of the
	// stream: after this request's reply (FrameRequest), or now
	// (FrameMore: the connection waits for input).
	Flush bool
	// DiscardHeld (FrameClose) drops the held replies instead of sending
	// them.
	DiscardHeld bool
	// ReadOnly (FrameRequest): the request changes nothing a later request
	// of the connection could see (a get). A connection's requests run in
	// their order: a request that is not ReadOnly starts once every
	// earlier one has finished, and no later one starts before it has;
	// ReadOnly requests in a row may run at once, on several workers.
	ReadOnly bool
}

// Flags are what a stream dataplane and an application tell each other
// about one request and its reply. Datagram dataplanes leave them zero
// and ignore them.
type Flags uint8

// Flags.
const (
	// FromStream (set by the dataplane on a request): the request was
	// cut from a connection's byte stream by the application's Framer;
	// it has no datagram framing, and Buffer.Session is its connection's
	// framer.
	FromStream Flags = 1 << iota
	// ReplyHold (set by the application on its reply): the reply may wait
	// until a later reply of the connection without ReplyHold, or a
	// Frame's Flush, sends it (memcached transmits only at those points;
	// redis-server writes once it has run what it read). A dataplane may
	// send held replies earlier, when they grow large.
	ReplyHold
	// ReplyDiscardHeld: drop the replies held before this one instead of
	// sending them (memcached's get of a key too long).
	ReplyDiscardHeld
	// ReplyClose: close the connection once this reply is sent (quit);
	// the connection's later requests are not answered.
	ReplyClose
	// Resumed (set by the dispatcher on a request): the request was
	// parked (app.Reply.Park) and runs again.
	Resumed
)
