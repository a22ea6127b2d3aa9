package dispatcher

import (
	"github.com/persephone-go/psp/app"
	"github.com/persephone-go/psp/nic"
)

// reply is a worker's app.Reply: it queues the leading datagrams of a
// multi-datagram reply and transmits them in batches on the worker's TX
// queue, the request's buffer last.
type reply struct {
	req     *nic.Buffer
	alloc   nic.ReplyAllocator // nil: the dataplane cannot allocate
	dp      nic.Dataplane
	tx      nic.TxQueue
	pending []*nic.Buffer // queued, not yet transmitted; at most cap
	sent    int           // datagrams accepted by Send for this request
	txFail  bool          // a transmission failed
	noReply bool          // served without a reply
	// hold keeps a finished request's datagrams queued for the next
	// flush (the dispatcher's, for the requests it serves in place: one
	// sendmmsg per dispatch round instead of one per request); failed
	// counts the datagrams flushes could not send since it was last
	// cleared, which the dispatcher settles after its flush.
	hold   bool
	failed int
}

// newReply returns worker w's Reply, flushing every batch datagrams.
func newReply(dp nic.Dataplane, tx nic.TxQueue, batch int) *reply {
	alloc, _ := dp.(nic.ReplyAllocator)
	return &reply{alloc: alloc, dp: dp, tx: tx, pending: make([]*nic.Buffer, 0, max(batch, 1))}
}

// reset prepares r for the request in req.
func (r *reply) reset(req *nic.Buffer) {
	r.req, r.sent, r.txFail, r.noReply = req, 0, false, false
}

// NoReply implements app.Reply: the request counts as answered, not as
// dropped, when the handler returns false.
func (r *reply) NoReply() { r.noReply = true }

// Send implements app.Reply. Queued datagrams are transmitted in batches on
// the worker's TX queue, and the rest, with the request's buffer last, when
// the handler returns; earlier datagrams stay queued when Send fails.
func (r *reply) Send(p []byte) error {
	if r.alloc == nil {
		return app.ErrNoReplyBuffer
	}
	if len(p) > len(r.req.Data) {
		return app.ErrReplyTooLong
	}
	if len(r.pending) == cap(r.pending) {
		r.flush()
	}
	b := r.alloc.AllocReply(r.req)
	if b == nil {
		return app.ErrNoReplyBuffer
	}
	if len(p) > len(b.Data) {
		r.dp.Release(b)
		return app.ErrReplyTooLong
	}
	b.Len = copy(b.Data, p)
	r.pending = append(r.pending, b)
	r.sent++
	return nil
}

// Room implements app.Reply: a buffer's payload room.
func (r *reply) Room() int { return len(r.req.Data) }

// Sent returns how many datagrams Send accepted for the current request.
func (r *reply) Sent() int { return r.sent }

// flush transmits the queued datagrams.
func (r *reply) flush() {
	if len(r.pending) == 0 {
		return
	}
	if n, _ := r.tx.Send(r.pending); n != len(r.pending) {
		r.txFail = true
		r.failed += len(r.pending) - max(n, 0)
	}
	clear(r.pending)
	r.pending = r.pending[:0]
}

// finish transmits what is queued, then the request's buffer when answer is
// set (otherwise it releases it). It reports whether every datagram went out;
// with hold set it queues them instead and reports true (the flush that
// sends them settles failures).
func (r *reply) finish(answer bool) bool {
	if r.hold {
		if answer {
			if len(r.pending) == cap(r.pending) {
				r.flush()
			}
			r.pending = append(r.pending, r.req)
		} else {
			r.dp.Release(r.req)
		}
		r.req = nil
		return true
	}
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
func (r *reply) discard() {
	r.dp.Release(r.pending...)
	clear(r.pending)
	r.pending = r.pending[:0]
	r.dp.Release(r.req)
	r.req = nil
}
