package dispatcher

import (
	"errors"

	"github.com/persephone-go/psp/darc"
	"github.com/persephone-go/psp/nic"
)

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
type MultiHandler interface {
	Handler
	HandleMulti(w int, typ darc.Type, b *nic.Buffer, r *Reply) bool
}

// Errors returned by Reply.Send. They are preallocated: a handler may
// compare them with == on its hot path.
var (
	// ErrNoReplyBuffer: the dataplane has no free buffer (or cannot hand
	// out extra buffers: it does not implement nic.ReplyAllocator).
	ErrNoReplyBuffer = errors.New("dispatcher: no buffer for another reply datagram")
	// ErrReplyTooLong: the datagram is longer than a buffer's room.
	ErrReplyTooLong = errors.New("dispatcher: reply datagram longer than a buffer")
)

// Reply sends the leading datagrams of a multi-datagram reply (see
// MultiHandler). Each worker owns one and reuses it for every request; it is
// valid only during the HandleMulti call it was passed to.
type Reply struct {
	req     *nic.Buffer
	alloc   nic.ReplyAllocator // nil: the dataplane cannot allocate
	dp      nic.Dataplane
	tx      nic.TxQueue
	pending []*nic.Buffer // queued, not yet transmitted; at most cap
	sent    int           // datagrams accepted by Send for this request
	txFail  bool          // a transmission failed
	noReply bool          // served without a reply
}

// newReply returns worker w's Reply, flushing every batch datagrams.
func newReply(dp nic.Dataplane, tx nic.TxQueue, batch int) *Reply {
	alloc, _ := dp.(nic.ReplyAllocator)
	return &Reply{alloc: alloc, dp: dp, tx: tx, pending: make([]*nic.Buffer, 0, max(batch, 1))}
}

// reset prepares r for the request in req.
func (r *Reply) reset(req *nic.Buffer) {
	r.req, r.sent, r.txFail, r.noReply = req, 0, false, false
}

// NoReply marks the request as served although no datagram answers it (a
// request that asked for no reply): it then counts as answered, not as
// dropped, when the handler returns false.
func (r *Reply) NoReply() { r.noReply = true }

// Send copies p into a fresh buffer addressed like the request and queues it
// as the reply's next datagram. Queued datagrams are transmitted in batches
// on the worker's TX queue, and the rest, with the request's buffer last,
// when the handler returns. It allocates nothing.
//
// # Errors
//
// ErrNoReplyBuffer when the dataplane has no free buffer, ErrReplyTooLong
// when p does not fit one (see Room); p is not sent and earlier datagrams
// stay queued.
func (r *Reply) Send(p []byte) error {
	if r.alloc == nil {
		return ErrNoReplyBuffer
	}
	if len(p) > len(r.req.Data) {
		return ErrReplyTooLong
	}
	if len(r.pending) == cap(r.pending) {
		r.flush()
	}
	b := r.alloc.AllocReply(r.req)
	if b == nil {
		return ErrNoReplyBuffer
	}
	if len(p) > len(b.Data) {
		r.dp.Release(b)
		return ErrReplyTooLong
	}
	b.Len = copy(b.Data, p)
	r.pending = append(r.pending, b)
	r.sent++
	return nil
}

// Room returns the longest datagram Send accepts: a buffer's payload room.
func (r *Reply) Room() int { return len(r.req.Data) }

// Sent returns how many datagrams Send accepted for the current request.
func (r *Reply) Sent() int { return r.sent }

// flush transmits the queued datagrams.
func (r *Reply) flush() {
	if len(r.pending) == 0 {
		return
	}
	if n, _ := r.tx.Send(r.pending); n != len(r.pending) {
		r.txFail = true
	}
	clear(r.pending)
	r.pending = r.pending[:0]
}

// finish transmits what is queued, then the request's buffer when answer is
// set (otherwise it releases it). It reports whether every datagram went out.
func (r *Reply) finish(answer bool) bool {
	if answer {
		if len(r.pending) == cap(r.pending) {
			r.flush()
		}
		r.pending = append(r.pending, r.req)
		r.flush()
	} else {
		r.flush()
		r.dp.Release(r.req)
	}
	r.req = nil
	return !r.txFail
}

// discard releases what is queued and the request's buffer (the handler
// panicked).
func (r *Reply) discard() {
	r.dp.Release(r.pending...)
	clear(r.pending)
	r.pending = r.pending[:0]
	r.dp.Release(r.req)
	r.req = nil
}
