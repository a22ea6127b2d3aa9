package dispatcher

import (
	"github.com/persephone-go/psp/app"
	"github.com/persephone-go/psp/darc"
	"github.com/persephone-go/psp/nic"
)

// Receive, classify and enqueue: step hands each burst from the dataplane
// to accept, which routes every packet to its tenant by destination port;
// each tenant's packets are classified in one call, inline or on the
// tenant's lane (collectLanes takes those back), and each request is
// admitted and enqueued in the policy, or shed.

// accept routes each packet of a received burst to its tenant: inline
// tenants' packets are classified and enqueued in this burst, the others
// go to their lanes.
func (d *Dispatcher) accept(bufs []*nic.Buffer, now int64) {
	mt := d.mt
	mt.inline = mt.inline[:0]
	if mt.sole >= 0 && !mt.tenants[mt.sole].onLane {
		d.acceptSole(bufs, now)
		return
	}
	var kicked uint64 // lanes to wake, by index (the first 64; others always)
	for _, b := range bufs {
		d.received++
		if !d.intact(b) {
			continue
		}
		k := mt.tenantOf(b.DstPort)
		if k < 0 {
			c := &d.counters[darc.Unknown]
			c.received++
			d.refuse(b, c, ReasonNoTenant)
			continue
		}
		t := mt.tenants[k]
		t.received++
		if !t.onLane {
			if t.n == 0 {
				mt.inline = append(mt.inline, int(k))
			}
			t.bufs[t.n] = b
			t.pays[t.n] = b.Payload()
			t.n++
			continue
		}
		if mt.classifying >= d.spec.LaneBuffers || !t.lane.push(b) {
			c := &d.counters[t.base]
			c.received++
			d.refuse(b, c, ReasonClassifierBusy)
			continue
		}
		mt.classifying++
		if k < 64 {
			kicked |= 1 << k
		} else {
			t.lane.kick()
		}
	}
	for kicked != 0 {
		k := trailingZeros(kicked)
		kicked &= kicked - 1
		mt.tenants[k].lane.kick()
	}
	for _, k := range mt.inline {
		t := mt.tenants[k]
		n := t.n
		t.n = 0
		d.classifyEnqueue(t, t.bufs[:n], now)
		clear(t.bufs[:n])
	}
	if len(d.release)+len(d.replies) > 0 {
		d.flush()
	}
}

// tenantOf returns the tenant of a packet to port, or -1.
func (mt *tenantRouter) tenantOf(port uint16) int32 {
	if k := mt.route[port]; k >= 0 {
		return k
	}
	return mt.dflt
}

func trailingZeros(x uint64) int {
	n := 0
	for x&1 == 0 {
		x >>= 1
		n++
	}
	return n
}

// acceptSole is accept when one tenant, classified inline, gets every
// packet (a server of one classifier): no routes to look up.
func (d *Dispatcher) acceptSole(bufs []*nic.Buffer, now int64) {
	t := d.mt.tenants[d.mt.sole]
	n := 0
	for _, b := range bufs {
		if !d.intact(b) {
			continue
		}
		bufs[n] = b // in place: n never passes the loop's index
		t.pays[n] = b.Payload()
		n++
	}
	d.received += uint64(len(bufs))
	t.received += uint64(n)
	d.classifyEnqueue(t, bufs[:n], now)
	if len(d.release)+len(d.replies) > 0 {
		d.flush()
	}
}

// intact reports whether b can be classified; a runt or a truncated
// packet is counted and released. A request cut from a stream is whole:
// the application's framer decided its length.
func (d *Dispatcher) intact(b *nic.Buffer) bool {
	switch {
	case b.Len < d.spec.MinPayload && b.Flags&nic.FromStream == 0:
		d.drops.Runt++
	case b.WireLen > b.Len:
		d.drops.Truncated++
	default:
		return true
	}
	d.release = append(d.release, b)
	return false
}

// classifyEnqueue classifies t's packets bufs (their payloads in t.pays)
// inline and enqueues them.
func (d *Dispatcher) classifyEnqueue(t *routedTenant, bufs []*nic.Buffer, now int64) {
	n := len(bufs)
	d.classifyInline(t, n)
	live := !t.removed
	for i, b := range bufs {
		local := t.types[i]
		t.pays[i] = nil
		if live && int(local) < t.numTypes { // Faulted is out of range
			d.enqueue(b, t.base+local, now)
		} else {
			d.enqueueTenant(t, b, local, now)
		}
	}
}

// classifyInline classifies t's n packets of the burst on the dispatcher
// goroutine. An IsolateAuto tenant whose call faulted or took longer than
// Spec.InlineLimit is moved to its lane for its next packets.
func (d *Dispatcher) classifyInline(t *routedTenant, n int) {
	t.calls++
	if t.lane == nil {
		// Always inline (a trusted classifier): nothing to decide, so
		// nothing timed.
		t.spec.Classifier.ClassifyBatch(t.pays[:n], t.types[:n])
		return
	}
	var before uint64
	if t.faults != nil {
		before = t.faults.FaultTotal()
	}
	start := d.dp.Now()
	t.spec.Classifier.ClassifyBatch(t.pays[:n], t.types[:n])
	dt := d.dp.Now() - start
	t.busyNs += uint64(max(dt, 0))
	if dt > int64(d.spec.InlineLimit) || (t.faults != nil && t.faults.FaultTotal() != before) {
		t.escalate(uint64(d.spec.LaneProbation), start)
	}
}

// Growing lane probation (IsolateAuto): each escalation within
// laneProbationReset of the previous one doubles the clean lane calls the
// tenant needs before it comes back inline, up to maxProbationDoublings
// doublings; a tenant that behaved for laneProbationReset starts again
// from Spec.LaneProbation.
const (
	laneProbationReset    = int64(60e9) // one minute
	maxProbationDoublings = 10
)

// escalate moves t to its lane (at time now, dispatcher clock), setting
// its probation.
func (t *routedTenant) escalate(base uint64, now int64) {
	switch {
	case t.probation == 0 || (t.escalations > 0 && now-t.lastEscalation > laneProbationReset):
		t.probation = base
	case t.probation < base<<maxProbationDoublings:
		t.probation *= 2
	}
	t.onLane = true
	t.escalations++
	t.lastEscalation = now
	t.lane.clean.Store(0)
}

// collectLanes takes the packets the lanes classified and enqueues them.
func (d *Dispatcher) collectLanes(now int64) int {
	mt := d.mt
	n := 0
	for _, t := range mt.tenants {
		l := t.lane
		if l == nil {
			continue
		}
		if l.inflight == 0 {
			continue
		}
		for {
			c, ok := l.out.Pop()
			if !ok {
				break
			}
			l.inflight--
			mt.classifying--
			n++
			d.enqueueTenant(t, c.buf, c.typ, now)
		}
		// Back inline once it behaved on its lane: with nothing in flight
		// the lane calls the classifier no more (its last call ended
		// before the dispatcher took its packets).
		if l.inflight == 0 && t.onLane && t.spec.Isolation == IsolateAuto && !t.removed &&
			l.clean.Load() >= max(t.probation, uint64(d.spec.LaneProbation)) {
			t.onLane = false
		}
	}
	if n > 0 && len(d.release)+len(d.replies) > 0 {
		d.flush()
	}
	return n
}

// enqueueTenant enqueues b of tenant t's local type local: the same path
// as accept's after classification.
func (d *Dispatcher) enqueueTenant(t *routedTenant, b *nic.Buffer, local darc.Type, now int64) {
	if local == darc.Faulted && !t.removed {
		d.faulted(b, t.base)
		return
	}
	if int(local) >= t.numTypes {
		local = darc.Unknown
	}
	typ := t.base + local
	if t.removed {
		c := &d.counters[typ]
		c.received++
		d.refuse(b, c, ReasonRemoved)
		return
	}
	d.enqueue(b, typ, now)
}

// enqueue admits b, of global type typ, into the policy's typed queues,
// or drops it counted by reason: the path every classified request takes.
func (d *Dispatcher) enqueue(b *nic.Buffer, typ darc.Type, now int64) {
	c := &d.counters[typ]
	c.received++
	if d.admit != nil {
		if r, ok := d.admitted(typ, b); !ok {
			d.refuse(b, c, r)
			return
		}
	}
	d.admitQueued(b, typ, c, now)
}

// admitQueued queues b, of type typ (counters c), received and admitted,
// in the policy, or sheds it: the last leg of enqueue, and the way back
// of a parked request.
func (d *Dispatcher) admitQueued(b *nic.Buffer, typ darc.Type, c *typeCounters, now int64) {
	if len(d.free) == 0 {
		d.shed(b, typ, ReasonOverload)
		return
	}
	h := d.free[len(d.free)-1]
	switch d.sched.Enqueue(darc.Request{Handle: uint64(h), Type: typ}, now) {
	case darc.Accepted:
		d.free = d.free[:len(d.free)-1]
		d.table[h] = b
		d.tableTyp[h] = typ
		d.queued++
		c.queued++
	case darc.OverBudget:
		d.shed(b, typ, ReasonBudget)
	case darc.NoTenant:
		d.refuse(b, c, ReasonRemoved)
	default:
		d.shed(b, typ, ReasonQueueFull)
	}
}

// admitted asks the application whether to queue b, treating a panic as a
// refusal.
func (d *Dispatcher) admitted(t darc.Type, b *nic.Buffer) (r Reason, ok bool) {
	defer func() {
		if recover() != nil {
			r, ok = ReasonApp, false
		}
	}()
	switch d.admit.Admit(t, b) {
	case app.Answer:
		return 0, true
	case app.RefuseOverCap:
		return ReasonServiceCap, false
	}
	return ReasonApp, false
}

// faulted drops b, which its tenant's classifier failed on (the tenant
// fails closed), counted as received and dropped under typ (the tenant's
// UNKNOWN), with an "overloaded" reply where the application gives one.
func (d *Dispatcher) faulted(b *nic.Buffer, typ darc.Type) {
	d.counters[typ].received++
	d.shed(b, typ, ReasonClassifierFault)
}

// refuse drops b, received, for reason r, counted in all and in c (its
// type's counters), and releases its buffer.
func (d *Dispatcher) refuse(b *nic.Buffer, c *typeCounters, r Reason) {
	d.drops.add(r)
	c.drops.add(r)
	d.release = append(d.release, b)
}

// shed drops request b of type t, which the server chose not to serve,
// counting it for reason r: with an app.OverloadReplier application the
// request gets an "overloaded" reply, else its buffer is released.
func (d *Dispatcher) shed(b *nic.Buffer, t darc.Type, r Reason) {
	d.drops.add(r)
	d.counters[t].drops.add(r)
	if d.replier != nil && d.replyOverloaded(t, b) {
		d.replies = append(d.replies, b)
		d.replied++
		return
	}
	d.release = append(d.release, b)
}

// replyOverloaded asks the application for an "overloaded" reply, treating
// a panic as a refusal.
func (d *Dispatcher) replyOverloaded(t darc.Type, b *nic.Buffer) (ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	return d.replier.ReplyOverloaded(t, b)
}

// takeNext takes the request chained to b, which is dropped, off it: it
// is received as if b had completed.
func (d *Dispatcher) takeNext(b *nic.Buffer) {
	if b.Next != nil {
		d.followOns = append(d.followOns, b.Next)
		b.Next = nil
	}
}

// flush releases the buffers of dropped requests and sends the
// "overloaded" replies gathered during a step.
func (d *Dispatcher) flush() {
	for _, b := range d.release {
		d.takeNext(b)
	}
	for _, b := range d.replies {
		d.takeNext(b)
	}
	if len(d.release) > 0 {
		d.dp.Release(d.release...)
		clear(d.release)
		d.release = d.release[:0]
	}
	if len(d.replies) > 0 {
		d.ownTx.Send(d.replies) // returns every buffer to the pool
		clear(d.replies)
		d.replies = d.replies[:0]
	}
}
