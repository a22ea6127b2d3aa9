package dispatcher

import (
	"github.com/persephone-go/psp/darc"
	"github.com/persephone-go/psp/nic"
	"github.com/persephone-go/psp/wire"
)

// Classifier maps a burst of request payloads to request types in the
// policy's type space (0 = darc.Unknown). dstPorts[i] is the UDP destination
// port of payloads[i] (tenant selection). ClassifyBatch must write
// out[:len(payloads)], must not keep the payload slices, and is called by the
// dispatcher goroutine only. A *wasmclass.Caller satisfies it.
type Classifier interface {
	ClassifyBatch(payloads [][]byte, dstPorts []uint16, out []darc.Type)
}

// HeaderNumTypes is the size of the psp-header type space: the wire type ids
// 0..11 (see package wire), the same space as the example Wasm psp-header
// classifiers.
const HeaderNumTypes = 12

// HeaderTypeNames returns the names of the psp-header types, index = id.
// Ids 3 and 4 are unused by the paper's workloads and unnamed.
func HeaderTypeNames() []string {
	return []string{"UNKNOWN", "SHORT", "LONG", "", "", "NewOrder", "Payment",
		"Delivery", "OrderStatus", "StockLevel", "GET", "SCAN"}
}

// HeaderClassifier is the native psp-header classifier: the type is the
// header's type field (wire.TypeOf). Payloads shorter than the header and
// type ids outside 0..HeaderNumTypes-1 are Unknown. It is stateless and safe
// for concurrent use.
type HeaderClassifier struct{}

// ClassifyBatch implements Classifier.
func (HeaderClassifier) ClassifyBatch(payloads [][]byte, _ []uint16, out []darc.Type) {
	out = out[:len(payloads)]
	for i, p := range payloads {
		t := wire.TypeOf(p)
		if t >= HeaderNumTypes {
			t = wire.TypeUnknown
		}
		out[i] = darc.Type(t)
	}
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
	Handle(w int, typ darc.Type, b *nic.Buffer) bool
}

// OutcomeHandler is implemented by applications that say why they refuse a
// request. The dispatcher calls Serve instead of Handle when the
// application implements it; Serve has Handle's contract otherwise, its
// nic.Outcome saying whether to transmit the response (nic.Answer) or why
// not (nic.Refuse: reason "app"; nic.RefuseOverCap: reason "service_cap").
type OutcomeHandler interface {
	Serve(w int, typ darc.Type, b *nic.Buffer) nic.Outcome
}

// Admitter is implemented by applications that can refuse a request from
// its payload alone (a malformed header, a service time over the cap):
// the dispatcher calls Admit for every classified request before queueing
// it, and drops the request at once for the reason the outcome gives
// (nic.Refuse: "app", nic.RefuseOverCap: "service_cap"), without waking a
// worker or letting it into the policy's profile. nic.Answer admits it.
// Admit runs on
// the dispatcher goroutine, concurrently with the workers: it must be fast,
// allocation-free and must not keep or modify b. Serve or Handle still
// sees every admitted request.
type Admitter interface {
	Admit(typ darc.Type, b *nic.Buffer) nic.Outcome
}

// OverloadReplier is implemented by applications whose protocol can tell a
// client that its request was shed (a status such as "overloaded, try
// again later"), so the client can back off or go elsewhere instead of
// waiting for a timeout.
//
// When the dispatcher drops a request it chose not to serve (its type over
// its budget or queue capacity, past its deadline, the request table full,
// or still queued at shutdown), it calls ReplyOverloaded on the request's
// buffer: the
// application writes its reply in place, as Handle does (b.Data, b.Len;
// b.Peer is the destination), and returns true to send it, false to drop
// the request silently (e.g. a payload it cannot parse). The dispatcher
// sends the reply on a TX queue of its own (the dataplane's queue number
// Spec.Workers, when the dataplane was opened with one more queue than
// workers; without it no reply is sent) and still counts the request as
// dropped for reason.
//
// ReplyOverloaded runs on the dispatcher goroutine, concurrently with the
// workers' Handle calls, for every shed request: it must be fast (no
// blocking, no I/O, no allocation on the common path) and must not keep b.
// A panic counts as false.
type OverloadReplier interface {
	ReplyOverloaded(typ darc.Type, b *nic.Buffer) bool
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(w int, typ darc.Type, b *nic.Buffer) bool

// Handle implements Handler.
func (f HandlerFunc) Handle(w int, typ darc.Type, b *nic.Buffer) bool { return f(w, typ, b) }
