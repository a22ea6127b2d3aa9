package app

import (
	"errors"
	"time"

	"github.com/persephone-go/psp/nic"
)

// Type is a request type id in the scheduler's global type space.
// Type 0 is Unknown; known types are 1 up to the type count less one.
type Type uint32

// Unknown is the type of requests the classifier did not recognise. They are
// queued on the UNKNOWN queue and served only by spillway workers, at the
// lowest priority.
const Unknown Type = 0

// Faulted is what a classifier answers for a request it failed to classify
// (a fault of its own) when the request's tenant fails closed: the driver
// drops the request, counted, instead of queueing it as Unknown. It is
// never a queue; a policy given it treats it as any type out of range.
const Faulted Type = ^Type(0)

// Classifier maps a burst of one tenant's request payloads to the
// tenant's request types (0 = Unknown; the dispatcher maps them into the
// policy's type space). ClassifyBatch must write out[:len(payloads)], must
// not keep the payload slices, and is called by one goroutine only: the
// dispatcher's, or a tenant's lane. A *wasmclass.Caller satisfies it.
type Classifier interface {
	ClassifyBatch(payloads [][]byte, out []Type)
}

// Handler is an application: what a worker runs for each request.
//
// Handle processes the request b.Payload() of type typ on worker w (0-based;
// handlers may keep per-worker scratch state indexed by w) and writes the
// response in place into b.Data, setting b.Len (b.Peer is the destination).
// It returns true to transmit the response, false to drop the request
// without a reply (counted as dropped for reason "app"). Handle is called
// concurrently by all workers, each with its own w; it must not keep b.
type Handler interface {
	Handle(w int, typ Type, b *nic.Buffer) bool
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(w int, typ Type, b *nic.Buffer) bool

// Handle implements Handler.
func (f HandlerFunc) Handle(w int, typ Type, b *nic.Buffer) bool { return f(w, typ, b) }

// MultiHandler is a Handler that may answer a request with more than one
// datagram. Workers call HandleMulti instead of Handle when the application
// implements it.
//
// HandleMulti processes the request in b like Handle, sends the reply's
// leading datagrams, in order, with r.Send, and writes the last datagram in
// place into b (setting b.Len), returning true to transmit it. Returning
// false sends no final datagram; the request then counts as answered if r
// sent anything or called r.NoReply, and as dropped for reason "app"
// otherwise. The datagrams go out in the order they were sent, b last.
//
// The Reply is the worker's own, reused for every request; it is valid
// only during the call.
type MultiHandler interface {
	Handler
	HandleMulti(w int, typ Type, b *nic.Buffer, r Reply) bool
}

// OutcomeHandler is implemented by applications that say why they refuse a
// request. The dispatcher calls Serve instead of Handle when the
// application implements it; Serve has Handle's contract otherwise, its
// Outcome saying whether to transmit the response (Answer) or why not
// (Refuse: reason "app"; RefuseOverCap: reason "service_cap").
type OutcomeHandler interface {
	Serve(w int, typ Type, b *nic.Buffer) Outcome
}

// Admitter is implemented by applications that can refuse a request from
// its payload alone (a malformed header, a service time over the cap):
// the dispatcher calls Admit for every classified request before queueing
// it, and drops the request at once for the reason the outcome gives
// (Refuse: "app", RefuseOverCap: "service_cap"), without waking a worker
// or letting it into the policy's profile. Answer admits it. Admit runs on
// the dispatcher goroutine, concurrently with the workers: it must be fast,
// allocation-free and must not keep or modify b. Serve or Handle still
// sees every admitted request.
type Admitter interface {
	Admit(typ Type, b *nic.Buffer) Outcome
}

// OverloadReplier is implemented by applications whose protocol can tell a
// client that its request was shed (a status such as "overloaded, try
// again later"), so the client can back off or go elsewhere instead of
// waiting for a timeout.
//
// When the dispatcher drops a request it chose not to serve (its type over
// its budget or queue capacity, past its deadline, the request table full,
// or still queued at shutdown), it calls ReplyOverloaded on the request's
// buffer: the application writes its reply in place, as Handle does
// (b.Data, b.Len; b.Peer is the destination), and returns true to send it,
// false to drop the request silently (e.g. a payload it cannot parse). The
// dispatcher sends the reply on a TX queue of its own (the dataplane's
// queue number Spec.Workers, when the dataplane was opened with one more
// queue than workers; without it no reply is sent) and still counts the
// request as dropped for reason.
//
// ReplyOverloaded runs on the dispatcher goroutine, concurrently with the
// workers' Handle calls, for every shed request: it must be fast (no
// blocking, no I/O, no allocation on the common path) and must not keep b.
// A panic counts as false.
type OverloadReplier interface {
	ReplyOverloaded(typ Type, b *nic.Buffer) bool
}

// Outcome is what an application did with a request, for applications
// that say why they refuse one (OutcomeHandler and Admitter).
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

// Reply sends the leading datagrams of a reply longer than one datagram.
// The dispatcher hands one to applications that answer with several
// datagrams (MultiHandler); the request's own buffer carries the last
// datagram. A Reply is valid only during the call it was passed to, and
// only the worker goroutine that received it may use it.
type Reply interface {
	// Send copies p into a fresh buffer addressed like the request and
	// queues it as the reply's next datagram; queued datagrams go out in
	// order, before the request's buffer. It allocates nothing. It returns
	// ErrNoReplyBuffer when no buffer is free (or the dataplane cannot hand
	// out more: it does not implement nic.ReplyAllocator) and
	// ErrReplyTooLong when p does not fit a buffer (see Room); p is then
	// not sent.
	Send(p []byte) error
	// Room returns the longest datagram Send accepts.
	Room() int
	// NoReply marks the request as served although no datagram answers it
	// (a request that asked for no reply).
	NoReply()
	// Park marks the request as waiting for something to happen (a
	// Redis BLPOP on an empty list): when the handler then returns false
	// having sent nothing, the request is neither answered nor dropped.
	// The dispatcher keeps its buffer aside, with the requests of its
	// connection chained behind it, holding no worker, and runs it again
	// (the same type, nic.Resumed set in its flags) when the
	// application's Parker says it may now be answered, or once after
	// has passed (after <= 0: no time limit). Only an application that
	// implements Parker can park: for any other the request is dropped
	// (reason "app").
	Park(after time.Duration)
}

// Parker is implemented by applications whose handlers park requests
// (Reply.Park). Both methods run on the dispatcher goroutine while
// requests are parked, concurrently with the workers' handlers: they
// must be fast and must not block.
type Parker interface {
	// ParkEpoch returns a counter the application advances after
	// anything that may let a parked request be answered (a push to a
	// list a parked request waits on, its connection's end). The
	// dispatcher looks at it between its steps; when it has moved, it
	// asks Unpark of each parked request.
	ParkEpoch() uint64
	// Unpark reports whether the parked request b should run again now.
	// The application marks what it signalled before it advances the
	// epoch, so a request marked after the dispatcher read the epoch is
	// seen at its next move.
	Unpark(b *nic.Buffer) bool
}

// Errors returned by Reply.Send. They are preallocated: a handler may
// compare them with == on its hot path.
var (
	ErrNoReplyBuffer = errors.New("app: no buffer for another reply datagram")
	ErrReplyTooLong  = errors.New("app: reply datagram longer than a buffer")
)
