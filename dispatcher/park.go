package dispatcher

import (
	"github.com/persephone-go/psp/darc"
	"github.com/persephone-go/psp/nic"
)

// Parked requests (app.Reply.Park): a request whose handler parked it
// left its worker free and waits here, its buffer and the requests of its
// connection chained behind it (nic.Buffer.Next) kept, until the
// application's app.Parker signals that it may be answered or its time
// limit passes. It is then queued again under its type, counted received
// once: parked, it is in flight (Stats.Parked) but neither queued nor
// running. The dispatcher looks at the application's epoch once a step
// while requests are parked, and at their time limits with the same
// resolution as its idle wait (recvWaitIdle). Shutdown drops them.

// parkedRequest is one parked request.
type parkedRequest struct {
	buf      *nic.Buffer
	typ      darc.Type
	deadline int64 // when to run it again at the latest (dataplane clock); 0: no limit
}

// park takes the request b of type typ, which its handler parked on a
// worker, off the workers: after is the handler's time limit (ns; <= 0
// none). A request the application unparks already is queued again at
// once; beyond the request table's size one is shed as an overload.
func (d *Dispatcher) park(b *nic.Buffer, typ darc.Type, after, now int64) {
	if d.unpark(b) {
		// Signalled while it ran: the epoch's move may have been seen
		// already, with other requests parked.
		b.Flags |= nic.Resumed
		d.admitQueued(b, typ, &d.counters[typ], now)
		return
	}
	if len(d.parked) >= len(d.table) {
		d.shed(b, typ, ReasonOverload)
		return
	}
	p := parkedRequest{buf: b, typ: typ}
	if after > 0 {
		p.deadline = now + after
		if d.parkNext == 0 || p.deadline < d.parkNext {
			d.parkNext = p.deadline
		}
	}
	d.parked = append(d.parked, p)
	d.counters[typ].parked++
}

// wakeParked queues again, in the order they parked, the parked requests
// the application unparks (when its epoch moved) and those whose time
// limit passed; draining, it drops them all. It returns how many it
// queued or dropped.
func (d *Dispatcher) wakeParked(now int64) int {
	if d.draining {
		n := len(d.parked)
		d.dropParked()
		return n
	}
	epoch := d.parker.ParkEpoch()
	moved := epoch != d.parkEpoch
	if !moved && (d.parkNext == 0 || now < d.parkNext) {
		return 0
	}
	d.parkEpoch = epoch
	var next int64
	kept := d.parked[:0]
	n := 0
	for _, p := range d.parked {
		if (p.deadline != 0 && now >= p.deadline) || (moved && d.unpark(p.buf)) {
			d.counters[p.typ].parked--
			p.buf.Flags |= nic.Resumed
			d.admitQueued(p.buf, p.typ, &d.counters[p.typ], now)
			n++
			continue
		}
		kept = append(kept, p)
		if p.deadline != 0 && (next == 0 || p.deadline < next) {
			next = p.deadline
		}
	}
	clear(d.parked[len(kept):])
	d.parked = kept
	d.parkNext = next
	if len(d.release)+len(d.replies) > 0 {
		d.flush()
	}
	return n
}

// unpark asks the application whether b should run again, treating a
// panic as yes: the handler then answers it.
func (d *Dispatcher) unpark(b *nic.Buffer) (yes bool) {
	defer func() {
		if recover() != nil {
			yes = true
		}
	}()
	return d.parker.Unpark(b)
}

// dropParked drops the parked requests as shut down (with an "overloaded"
// reply where the application gives one), and the requests chained to
// them with them.
func (d *Dispatcher) dropParked() {
	for i, p := range d.parked {
		d.counters[p.typ].parked--
		d.shed(p.buf, p.typ, ReasonShutdown)
		d.parked[i] = parkedRequest{}
	}
	d.parked = d.parked[:0]
	d.parkNext = 0
	d.flush()
}
