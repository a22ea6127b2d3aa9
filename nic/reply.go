package nic

import "errors"

// Reply sends the leading datagrams of a reply longer than one datagram.
// The dispatcher hands one to applications that answer with several
// datagrams (dispatcher.MultiHandler); the request's own buffer carries the
// last datagram. A Reply is valid only during the call it was passed to,
// and only the worker goroutine that received it may use it.
type Reply interface {
	// Send copies p into a fresh buffer addressed like the request and
	// queues it as the reply's next datagram; queued datagrams go out in
	// order, before the request's buffer. It allocates nothing. It returns
	// ErrNoReplyBuffer when no buffer is free (or the dataplane cannot hand
	// out more: it does not implement ReplyAllocator) and ErrReplyTooLong
	// when p does not fit a buffer (see Room); p is then not sent.
	Send(p []byte) error
	// Room returns the longest datagram Send accepts.
	Room() int
	// NoReply marks the request as served although no datagram answers it
	// (a request that asked for no reply).
	NoReply()
}

// Errors returned by Reply.Send. They are preallocated: a handler may
// compare them with == on its hot path.
var (
	ErrNoReplyBuffer = errors.New("nic: no buffer for another reply datagram")
	ErrReplyTooLong  = errors.New("nic: reply datagram longer than a buffer")
)

// Outcome is what an application did with a request, for applications
// that say why they refuse one (dispatcher.OutcomeHandler and
// dispatcher.Admitter).
type Outcome uint8

// Outcomes.
const (
	// Answer: transmit the response built in the buffer (Admit: queue the
	// request).
	Answer Outcome = iota
	// Refuse: drop the request without a reply (counted as reason "app").
	Refuse
	// RefuseOverCap: drop it because it asks for more service than the
	// application's cap on a request (counted as reason "service_cap").
	RefuseOverCap
)
