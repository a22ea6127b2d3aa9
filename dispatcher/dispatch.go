package dispatcher

import (
	"fmt"

	"github.com/persephone-go/psp/darc"
)

// Dispatch and serving in place: the policy assigns queued requests to
// idle workers (dispatch); each goes to its worker's ring, or is served by
// the dispatcher itself (below); the workers' completions come back to
// collect, which gives them to the policy.
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
// the limit, and one dispatch round serves in place for at most
// inPlaceRounds times the limit before it hands off what is left, so
// receiving is never held for long by a burst or by a request that turns
// out long.

// dispatch asks the policy for assignments and pushes them to the workers,
// or serves them in place (inPlace), asking again while it served
// some in place and the round has time left; requests the policy expired
// are dropped.
func (d *Dispatcher) dispatch(now int64) int {
	d.inPlaceEnd = 0
	total := 0
	round := inPlaceRounds * d.inPlaceLimit // expected service left to serve in place
	for {
		if len(d.followOns) > 0 {
			d.receiveFollowOns(now)
			d.inPlaceEnd = 0 // what accept did is no request's service
		}
		k := d.sched.Dispatch(now, d.assign)
		total += k
		served := 0
		for _, a := range d.assign[:k] {
			h := uint32(a.Request.Handle)
			b := d.table[h]
			d.table[h] = nil
			d.free = append(d.free, h)
			d.queued--
			t := a.Request.Type
			c := &d.counters[t]
			c.queued--
			if a.Worker < 0 {
				r := ReasonExpired
				if a.Worker == darc.Removed {
					r = ReasonRemoved
				}
				d.shed(b, t, r)
				continue
			}
			wait := now - a.Enqueued
			if wait > c.maxWait {
				c.maxWait = wait
			}
			c.dispatched++
			if wait > 0 {
				c.queueingNs += uint64(wait)
			}
			c.running++
			d.busy++
			w := d.workers[a.Worker]
			if b.Next != nil {
				// Received once b completes: a worker holds one request
				// at a time, so its completion says which.
				d.chained[a.Worker] = b.Next
				b.Next = nil
			}
			if d.inPlace(w, c, &round) {
				d.serveInPlace(w, task{buf: b, typ: t, accepted: a.Enqueued, dispatched: d.lastNow})
				served++
				continue
			}
			if !w.in.Push(task{buf: b, typ: t, accepted: a.Enqueued, dispatched: now}) {
				// A policy dispatches to idle workers only, and a worker holds
				// at most one request: a full ring is a policy bug.
				panic(fmt.Sprintf("dispatcher: policy %q dispatched to busy worker %d", d.policy.Name(), a.Worker))
			}
			if w.parked.Load() {
				select {
				case w.wake <- struct{}{}:
				default:
				}
				d.inPlaceEnd = 0 // a wake-up may be a system call
			}
		}
		if served == 0 || (d.queued == 0 && len(d.followOns) == 0) || round <= 0 {
			break
		}
		now = d.lastNow
	}
	d.flushInPlace()
	if len(d.release)+len(d.replies) > 0 {
		d.flush()
	}
	for len(d.followOns) > 0 {
		// Queued now, dispatched by the next step: the loop does not park
		// with requests queued.
		d.receiveFollowOns(now)
	}
	return total
}

// receiveFollowOns receives the requests chained to requests that
// completed or were dropped, as a burst from the dataplane is received.
func (d *Dispatcher) receiveFollowOns(now int64) {
	for len(d.followOns) > 0 {
		batch := d.followOns
		d.followOns = d.followSpare[:0] // what accept drops may chain more
		for rest := batch; len(rest) > 0; {
			k := min(len(rest), d.spec.Burst)
			d.accept(rest[:k], now)
			rest = rest[k:]
		}
		clear(batch)
		d.followSpare = batch[:0]
	}
}

// inPlaceRounds: one dispatch round serves in place at most this many
// times Spec.InPlaceLimit of expected service.
const inPlaceRounds = 4

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
	c := d.run(d.inPlaceRunner, w.id, tx, t, d.inPlaceEnd)
	d.inPlaceEnd = c.end
	d.counters[t.typ].inPlace++
	d.advance(c.end) // the handler's end: no clock read of its own
	d.complete(w.id, c, c.end)
	d.inPlaceStages.maybePublish(c.end)
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

// completionsPending reports whether a worker's completion ring holds a
// completion.
func (d *Dispatcher) completionsPending() bool {
	for _, w := range d.workers {
		if w.out.Len() > 0 {
			return true
		}
	}
	return false
}

// collect drains every worker's completion ring into the policy.
func (d *Dispatcher) collect(now int64) int {
	n := 0
	for _, w := range d.workers {
		for {
			c, ok := w.out.Pop()
			if !ok {
				break
			}
			n++
			d.complete(w.id, c, now)
		}
	}
	return n
}

// complete gives worker w's completion c to the policy and counts it.
func (d *Dispatcher) complete(w int, c completion, now int64) {
	d.busy--
	service := c.end - c.start
	if service < 0 {
		service = 0
	}
	d.sched.Complete(w, c.typ, service, now)
	if next := d.chained[w]; next != nil {
		d.chained[w] = nil
		if c.parked != nil {
			c.parked.Next = next // it waits with the parked request
		} else {
			d.followOns = append(d.followOns, next)
		}
	}
	tc := &d.counters[c.typ]
	tc.running--
	tc.completed++
	tc.serviceNs += uint64(service)
	if d.inPlaceLimit > 0 && c.outcome != outcomeShutdown {
		tc.expect.Add(service)
	}
	r := ReasonTxError
	switch c.outcome {
	case outcomeParked:
		d.park(c.parked, c.typ, c.parkAfter, now)
		return
	case outcomeAnswered:
		d.answered++
		tc.answered++
		return
	case outcomeApp:
		r = ReasonApp
	case outcomeServiceCap:
		r = ReasonServiceCap
	case outcomePanic:
		r = ReasonPanic
	case outcomeShutdown:
		r = ReasonShutdown
	}
	d.drops.add(r)
	tc.drops.add(r)
}
