package dispatcher

import (
	"github.com/persephone-go/psp/app"
	"github.com/persephone-go/psp/darc"
	"github.com/persephone-go/psp/nic"
)

// Serving in place.
//
// The policy decides which worker runs a request; the dispatcher decides
// how the request gets there. Handing a request to a worker parked in the
// Go scheduler costs a thread wake-up (tens of microseconds on a VM, the
// StageHandoff histogram measures it live), far more than a short request's
// service. So when the worker the policy chose is parked and the request's
// type is profiled as shorter than Spec.InPlaceLimit, the dispatcher runs
// the request itself, on that worker's behalf: same worker id for the
// application, same completion for the policy, reply on the dispatcher's
// own TX queue. The policy's semantics are unchanged (a request runs only
// on a worker the policy chose, and the policy sees that worker busy for
// exactly the request's service); only the thread differs. On two cores
// this maps DARC onto the machine: the dispatcher's core serves the
// short types' reserved workers, the other core the long types.
//
// Bounds: a type is served in place only once it has an expected service
// (darc.ServiceEstimate: a running median of its measured services) under
// the limit,
// and one dispatch round serves in place for at most inPlaceRounds times
// the limit before it hands off what is left, so receiving is never held
// for long by a burst or by a request that turns out long.

// inPlaceRounds: one dispatch round serves in place at most this many
// times Spec.InPlaceLimit of expected service.
const inPlaceRounds = 4

// HandOffs counts the requests of a type handed to a worker thread rather
// than served in place, by why (only while serving in place is on).
type HandOffs struct {
	// Awake: the worker was spinning or polling, so the hand-off was a
	// ring push.
	Awake uint64 `json:"awake"`
	// Long: the type's expected service exceeded Spec.InPlaceLimit.
	Long uint64 `json:"long"`
	// Unprofiled: fewer than a few services of the type were measured.
	Unprofiled uint64 `json:"unprofiled"`
	// Burst: the dispatch round had used its time for serving in place.
	Burst uint64 `json:"burst"`
}

// Total is the sum of all reasons.
func (h HandOffs) Total() uint64 { return h.Awake + h.Long + h.Unprofiled + h.Burst }

// runner runs requests and records their stages: a worker goroutine's, or
// the dispatcher's for the requests it serves in place, which holds their
// replies until the end of the dispatch round (held, with their stamps)
// and sends them together.
type runner struct {
	one    []*nic.Buffer
	multi  app.MultiHandler
	reply  *reply // app.MultiHandler applications, and the dispatcher's runner
	stages *stageRecorder
	held   []heldRequest
}

// heldRequest is a request served in place whose reply waits for the end of
// the dispatch round.
type heldRequest struct {
	typ darc.Type
	st  stamps
}

func (d *Dispatcher) newRunner(tx nic.TxQueue, stages *stageRecorder, hold bool) *runner {
	r := &runner{one: make([]*nic.Buffer, 1), stages: stages}
	r.multi, _ = d.app.(app.MultiHandler)
	if r.multi != nil || hold {
		// A multi-datagram reply may take several slots: room for a
		// round's replies without a flush in the middle, in the common
		// case.
		room := d.spec.Burst
		if hold {
			room = 2 * max(d.spec.Burst, d.spec.Workers)
		}
		r.reply = newReply(d.dp, tx, room)
		r.reply.hold = hold
	}
	if hold {
		r.held = make([]heldRequest, 0, 2*max(d.spec.Burst, d.spec.Workers))
	}
	return r
}

// run runs t as worker w and transmits its reply on tx (or, holding,
// queues it); it records the request's stages (holding: once sent) and
// returns its completion.
func (d *Dispatcher) run(r *runner, w int, tx nic.TxQueue, t task) completion {
	st := stamps{received: t.buf.RxTime, accepted: t.accepted, dispatched: t.dispatched}
	var outcome uint8
	switch {
	case r.reply != nil:
		if r.reply.tx != tx {
			r.reply.flush()
			r.reply.tx = tx
		}
		r.reply.reset(t.buf)
		var answer, panicked bool
		st.started = d.dp.Now()
		if r.multi != nil {
			answer, panicked = d.handleMulti(r.multi, w, t.typ, t.buf, r.reply)
			st.finished = d.dp.Now()
			outcome = multiOutcome(r.reply, answer, panicked)
		} else {
			outcome = d.handle(w, t.typ, t.buf)
			st.finished = d.dp.Now()
			r.reply.finish(outcome == outcomeAnswered)
		}
	default:
		st.started = d.dp.Now()
		outcome = d.handle(w, t.typ, t.buf)
		st.finished = d.dp.Now()
		r.one[0] = t.buf
		if outcome == outcomeAnswered {
			if n, _ := tx.Send(r.one); n != 1 {
				outcome = outcomeTxError
			}
		} else {
			d.dp.Release(r.one...)
		}
		r.one[0] = nil
	}
	switch {
	case r.held != nil && outcome == outcomeAnswered:
		r.held = append(r.held, heldRequest{typ: t.typ, st: st})
		if len(r.held) == cap(r.held) {
			d.flushInPlace()
		}
	default:
		if outcome == outcomeAnswered {
			st.sent = d.dp.Now()
		}
		r.stages.record(int(t.typ), &st)
	}
	return completion{typ: t.typ, start: st.started, end: st.finished, outcome: outcome}
}

// flushInPlace sends the replies of the requests served in place this
// round, in one batch, and records their stages. The requests were counted
// answered when they completed; datagrams the dataplane could not send are
// counted against the batch's last requests (a TxQueue reports how many
// failed, not which), as transmit errors instead.
func (d *Dispatcher) flushInPlace() {
	r := d.inPlaceRunner
	if len(r.held) == 0 && len(r.reply.pending) == 0 {
		return
	}
	r.reply.flush()
	now := d.dp.Now()
	failed := min(r.reply.failed, len(r.held))
	r.reply.failed, r.reply.txFail = 0, false
	for i := range r.held {
		h := &r.held[i]
		if i >= len(r.held)-failed {
			c := &d.counters[h.typ]
			d.answered--
			c.answered--
			d.drops.TxError++
			c.drops.TxError++
		} else {
			h.st.sent = now
		}
		r.stages.record(int(h.typ), &h.st)
	}
	r.held = r.held[:0]
	r.stages.maybePublish(now)
}

// inPlace reports whether the request of type c's counters, assigned to
// w, is to be served in place; when not, it counts why.
func (d *Dispatcher) inPlace(w *worker, c *typeCounters, round *int64) bool {
	if d.inPlaceLimit <= 0 {
		return false
	}
	switch {
	case !w.parked.Load():
		c.handOffs.Awake++
	case !c.expect.Ready():
		c.handOffs.Unprofiled++
	case c.expect.Ns() > d.inPlaceLimit:
		c.handOffs.Long++
	case *round <= 0:
		c.handOffs.Burst++
	default:
		*round -= c.expect.Ns()
		return true
	}
	return false
}

// serveInPlace runs t on the dispatcher goroutine as worker w and
// completes it in the policy at once.
func (d *Dispatcher) serveInPlace(w *worker, t task) {
	tx := d.ownTx
	if tx == nil {
		// The policy holds w idle: its worker goroutine touches neither
		// its TX queue nor its reply until it is handed a request.
		tx = w.tx
	}
	c := d.run(d.inPlaceRunner, w.id, tx, t)
	d.counters[t.typ].inPlace++
	d.advance(c.end) // the handler's end: no clock read of its own
	d.complete(w.id, c, c.end)
	d.inPlaceStages.maybePublish(c.end)
}
