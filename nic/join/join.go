// Package join serves two dataplanes as one, so that one dispatcher
// schedules the requests of both over the same workers: the TCP dataplane
// of a server and its UDP one (a memcached listening on both, as memcached
// did). The waiter (nic/tcp) waits in epoll for its own input and for the
// member's (nic/udp) receive sockets; each Recv takes the member's
// datagrams first, then the waiter's requests. Every buffer goes back to
// the dataplane that lent it.
//
// Recv, like any dataplane's, is called by one goroutine; TX queues each
// by their own; the rest from any goroutine.
package join

import (
	"errors"
	"fmt"
	"time"

	"github.com/persephone-go/psp/nic"
)

// Waiter is the dataplane whose Recv waits for both (nic/tcp).
type Waiter interface {
	nic.Dataplane
	nic.ReplyAllocator
	// Watch makes a waiting Recv return when fd is readable.
	Watch(fd int) error
	// Owns reports whether b is one of the dataplane's buffers.
	Owns(b *nic.Buffer) bool
	WakeRecv()
}

// Member is the dataplane joined to the waiter (nic/udp).
type Member interface {
	nic.Dataplane
	nic.ReplyAllocator
	// RecvFds returns the descriptors its input arrives on.
	RecvFds() []int
	Owns(b *nic.Buffer) bool
}

// Dataplane is a waiter and a member served as one.
type Dataplane struct {
	waiter Waiter
	member Member
	// offset turns the waiter's clock into the member's, which is the
	// joined dataplane's: both count from their own start.
	offset int64
	tx     []*txQueue
}

// New joins member to waiter. Both must have the same number of TX queues;
// closing the joined dataplane closes both.
func New(waiter Waiter, member Member) (*Dataplane, error) {
	for _, fd := range member.RecvFds() {
		if err := waiter.Watch(fd); err != nil {
			return nil, fmt.Errorf("join: %w", err)
		}
	}
	d := &Dataplane{waiter: waiter, member: member, offset: member.Now() - waiter.Now()}
	for w := 0; ; w++ {
		a, b := waiter.TxQueue(w), member.TxQueue(w)
		if a == nil || b == nil {
			if a != nil || b != nil {
				return nil, errors.New("join: the dataplanes have different numbers of TX queues")
			}
			break
		}
		d.tx = append(d.tx, &txQueue{d: d, waiter: a, member: b})
	}
	return d, nil
}

// Members returns the waiter and the member.
func (d *Dataplane) Members() []nic.Dataplane { return []nic.Dataplane{d.waiter, d.member} }

// Recv implements nic.Dataplane.
func (d *Dataplane) Recv(bufs []*nic.Buffer, wait time.Duration) (int, error) {
	n, err := d.member.Recv(bufs, 0)
	if err != nil {
		return n, err
	}
	if n > 0 {
		wait = 0
	}
	k, err := d.waiter.Recv(bufs[n:], wait)
	for _, b := range bufs[n : n+k] {
		b.RxTime += d.offset
	}
	if n+k == 0 && err == nil && wait > 0 {
		// the wait may have ended on a datagram
		n, err = d.member.Recv(bufs, 0)
	}
	return n + k, err
}

// TxQueue implements nic.Dataplane.
func (d *Dataplane) TxQueue(w int) nic.TxQueue {
	if w < 0 || w >= len(d.tx) {
		return nil
	}
	return d.tx[w]
}

// AllocReply implements nic.ReplyAllocator.
func (d *Dataplane) AllocReply(req *nic.Buffer) *nic.Buffer {
	if d.waiter.Owns(req) {
		return d.waiter.AllocReply(req)
	}
	return d.member.AllocReply(req)
}

// ReplyRoom is the room of the buffers AllocReply returns for req: that
// of the dataplane req came from, when it says (see nic/tcp), else req's.
func (d *Dataplane) ReplyRoom(req *nic.Buffer) int {
	var from nic.Dataplane = d.member
	if d.waiter.Owns(req) {
		from = d.waiter
	}
	if r, ok := from.(interface{ ReplyRoom(*nic.Buffer) int }); ok {
		return r.ReplyRoom(req)
	}
	return len(req.Data)
}

// Release implements nic.Dataplane.
func (d *Dataplane) Release(bufs ...*nic.Buffer) {
	for len(bufs) > 0 {
		run, mine := d.run(bufs)
		if mine {
			d.waiter.Release(bufs[:run]...)
		} else {
			d.member.Release(bufs[:run]...)
		}
		bufs = bufs[run:]
	}
}

// run returns the length of the leading run of bufs lent by one
// dataplane, and whether that is the waiter.
func (d *Dataplane) run(bufs []*nic.Buffer) (int, bool) {
	mine := d.waiter.Owns(bufs[0])
	n := 1
	for n < len(bufs) && d.waiter.Owns(bufs[n]) == mine {
		n++
	}
	return n, mine
}

// Now implements nic.Dataplane: the member's clock.
func (d *Dataplane) Now() int64 { return d.member.Now() }

// Stats implements nic.Dataplane: both dataplanes' counters added.
func (d *Dataplane) Stats() nic.Stats {
	a, b := d.waiter.Stats(), d.member.Stats()
	return nic.Stats{RxPackets: a.RxPackets + b.RxPackets, RxDropped: a.RxDropped + b.RxDropped,
		TxPackets: a.TxPackets + b.TxPackets, TxErrors: a.TxErrors + b.TxErrors,
		RxTruncated: a.RxTruncated + b.RxTruncated, RxNoBuffer: a.RxNoBuffer + b.RxNoBuffer}
}

// RequestBuffers implements nic.BufferPool: what both lend.
func (d *Dataplane) RequestBuffers() int {
	n := 0
	for _, dp := range d.Members() {
		if bp, ok := dp.(nic.BufferPool); ok {
			n += bp.RequestBuffers()
		}
	}
	return n
}

// ExtraBuffers returns both dataplanes' buffers beyond those they lend.
func (d *Dataplane) ExtraBuffers() int {
	n := 0
	for _, dp := range d.Members() {
		if eb, ok := dp.(interface{ ExtraBuffers() int }); ok {
			n += eb.ExtraBuffers()
		}
	}
	return n
}

// RecvWakeable reports that WakeRecv works.
func (d *Dataplane) RecvWakeable() bool { return true }

// WakeRecv ends the waiter's wait.
func (d *Dataplane) WakeRecv() { d.waiter.WakeRecv() }

// AddPort receives on port too, on both dataplanes.
func (d *Dataplane) AddPort(port uint16) error {
	type ports interface{ AddPort(uint16) error }
	w, ok1 := d.waiter.(ports)
	m, ok2 := d.member.(ports)
	if !ok1 || !ok2 {
		return fmt.Errorf("join: port %d: %w", port, nic.ErrNotSupported)
	}
	if err := m.AddPort(port); err != nil {
		return err
	}
	for _, fd := range d.member.RecvFds() {
		d.waiter.Watch(fd) // already watched: EEXIST, harmless
	}
	return w.AddPort(port)
}

// RemovePort stops receiving on port, on both dataplanes.
func (d *Dataplane) RemovePort(port uint16) error {
	type ports interface{ RemovePort(uint16) error }
	var errs []error
	for _, dp := range d.Members() {
		if p, ok := dp.(ports); ok {
			errs = append(errs, p.RemovePort(port))
		}
	}
	return errors.Join(errs...)
}

// Close implements nic.Dataplane: it closes both.
func (d *Dataplane) Close() error {
	return errors.Join(d.waiter.Close(), d.member.Close())
}

// txQueue sends each buffer on the queue of the dataplane that lent it.
type txQueue struct {
	d              *Dataplane
	waiter, member nic.TxQueue
}

// Send implements nic.TxQueue.
func (q *txQueue) Send(bufs []*nic.Buffer) (int, error) {
	sent := 0
	var errs error
	for len(bufs) > 0 {
		run, mine := q.d.run(bufs)
		var n int
		var err error
		if mine {
			n, err = q.waiter.Send(bufs[:run])
		} else {
			n, err = q.member.Send(bufs[:run])
		}
		sent += n
		if err != nil && errs == nil {
			errs = err
		}
		bufs = bufs[run:]
	}
	return sent, errs
}
