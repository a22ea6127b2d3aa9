//go:build linux

package tcp

import (
	"errors"
	"net/netip"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/persephone-go/psp/nic"
)

// maxIov is the most pieces one sendmsg writes.
const maxIov = 64

// maxHeld is the most bytes of replies held (nic.ReplyHold) before they
// are written without waiting for their flush: holding is for writing
// many small replies at once, not for buffering a pipeline's output.
const maxHeld = 64 << 10

// keepCap is the most capacity a connection keeps in a buffer it no longer
// uses (a reply copied aside, bytes held or not yet sent).
const keepCap = 64 << 10

// conn is one connection.
type conn struct {
	d       *Dataplane
	id      uint64
	peer    netip.AddrPort
	local   netip.AddrPort
	framer  nic.Framer
	since   int64
	liveIdx int

	// The Recv goroutine's alone.
	in           []byte // input; in[inOff:inEnd] is not framed yet
	inOff, inEnd int
	skip         int64 // bytes still to discard (nic.FrameSkip)
	partialSince int64 // when the incomplete head of the input began (0: none)
	eof          bool  // the peer sent its last byte
	stopped      bool  // the framer closed the connection: read no more
	isPending    bool  // on Dataplane.pending
	memPaused    bool  // on Dataplane.memPaused

	lastActive atomic.Int64 // last byte in or out, dataplane clock

	mu sync.Mutex
	// Guarded by mu. fd is read without it only by the Recv goroutine,
	// the only one that closes it.
	fd         int
	interest   uint32 // epoll events asked for
	readOff    bool
	pipePaused bool
	next, head uint64 // the next request's turn; the turn being answered
	slots      []slot // by turn, modulo len(slots)
	held       []byte // replies held (nic.ReplyHold) until a flush
	spill      []byte // bytes written but not taken by the socket: spill[spillOff:]
	spillOff   int
	stored     int  // bytes in slots' data
	closing    bool // a closing reply or frame was sent: nothing after it
	draining   bool // close once every reply is sent (the peer is done)
	closeReq   bool // the Recv goroutine was asked to close it
	closeWhy   closeReason
	dead       bool
	parts      [][]byte // pieces of the next write
	iov        []unix.Iovec
	// The connection's requests run in its order: queue[queueHead:] holds
	// those framed that may not start yet; running counts those started
	// (or chained, Config.Chain) and not finished, writes those of them
	// that are not ReadOnly.
	queue     []*nic.Buffer
	queueHead int
	running   int
	writes    int
	onRun     bool // on Dataplane.toRun
	// flushQueued: on Dataplane.toFlush, for its pushed bytes to be
	// written by the Recv goroutine.
	flushQueued bool
	// batching: Send is taking several replies of this connection; their
	// pieces are written together at the end (the pool buffers they point
	// into go back after that).
	batching bool
}

// slot is one turn of a connection's replies.
type slot struct {
	done        bool
	flags       nic.Flags
	flushAfter  bool   // send the held replies after this one (Frame.Flush)
	close       bool   // a framer's closing entry
	discardHeld bool   // ... which drops the held replies
	pushed      bool   // bytes pushed by the application (Push), done
	data        []byte // reply bytes that came before their turn
}

func (c *conn) slot(seq uint64) *slot { return &c.slots[seq&uint64(len(c.slots)-1)] }

// push takes the next turn, for a request; mu held.
func (c *conn) push(flush bool) uint64 {
	seq := c.next
	c.next++
	s := c.slot(seq)
	s.done, s.flags, s.close, s.discardHeld, s.pushed = false, 0, false, false, false
	s.flushAfter = flush
	return seq
}

// pushDone takes the next turn for the framer's own reply (and close);
// mu held.
func (c *conn) pushDone(reply []byte, flush, close, discardHeld bool) {
	seq := c.push(flush)
	s := c.slot(seq)
	s.done, s.close, s.discardHeld = true, close, discardHeld
	if len(reply) > 0 && !c.dead {
		s.data = append(s.data[:0], reply...)
		c.store(len(reply))
	}
	if seq == c.head {
		c.advance(nil)
	}
}

// Push implements nic.Pusher: p goes in a turn of its own, after the
// turns taken so far (one per request framed, and the framer's own
// replies), done from the start; pushes in a row share one turn. A push
// whose turn has come is not written at once: the connection is queued
// for the Recv goroutine, which writes what was pushed meanwhile in one
// write (as redis-server writes a client's output once per event loop
// turn): a PUBLISH to many subscribers, or many PUBLISHes in a row, cost
// the pushing goroutine no system call per message. The turn
// ring has room for them: the framer stops reading at MaxPipeline turns
// in flight, pushes included, and the pushes between two framed turns take
// one turn, so at most 2*MaxPipeline+1 turns are in flight, fewer than the
// ring's ringSize. The bytes are counted in the connection's output
// (MaxOutput) and in the dataplane's memory until the socket takes them.
func (c *conn) Push(p []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dead || c.closeReq || c.closing || c.draining {
		c.d.stats.pushesRefused.Add(1)
		return nic.ErrConnClosed
	}
	if len(p) == 0 {
		return nil
	}
	// A client that does not read what it is sent is closed, as one
	// that leaves more than MaxOutput of its replies unread; and so is
	// one that left bytes unread in its socket (spill) when the
	// dataplane's memory is used up: reading stops then, but pushes come
	// from requests of other connections already read.
	unread := c.spillLen() + len(c.held) + c.stored
	if unread+len(p) > c.d.cfg.MaxOutput || (c.spillLen() > 0 && c.d.mem.Load()+int64(len(p)) > c.d.cfg.Memory) {
		c.d.stats.pushesRefused.Add(1)
		c.fail(closeOutput)
		return nic.ErrOutputFull
	}
	if c.next > c.head {
		if t := c.slot(c.next - 1); t.pushed {
			t.data = append(t.data, p...)
			c.store(len(p))
			c.d.stats.pushes.Add(1)
			if c.next-1 == c.head && len(t.data) >= maxHeld {
				// Pushed faster than the Recv goroutine writes:
				// written now, so that what waits for it stays small
				// and the socket shows whether the client reads.
				c.advance(nil)
			}
			return nil
		}
		if c.next-c.head >= uint64(len(c.slots)) {
			// Not reached (see above); a push is never dropped unsaid.
			c.d.stats.pushesRefused.Add(1)
			c.fail(closeOutput)
			return nic.ErrOutputFull
		}
	}
	seq := c.push(false)
	s := c.slot(seq)
	s.done, s.pushed = true, true
	s.data = append(s.data[:0], p...)
	c.store(len(p))
	if seq == c.head && !c.flushQueued {
		c.flushQueued = true
		c.d.ask(&c.d.toFlush, c)
	}
	c.d.stats.pushes.Add(1)
	return nil
}

// mayRun reports whether a request may start now; mu held.
func (c *conn) mayRun(readOnly bool) bool {
	return c.running == 0 || (readOnly && c.writes == 0)
}

// start counts a request started; mu held.
func (c *conn) start(readOnly bool) {
	c.running++
	if !readOnly {
		c.writes++
	}
}

// queued returns the requests framed that may not start yet; mu held.
func (c *conn) queued() []*nic.Buffer { return c.queue[c.queueHead:] }

// popQueued takes the first queued request off; mu held.
func (c *conn) popQueued() *nic.Buffer {
	b := c.queue[c.queueHead]
	c.queue[c.queueHead] = nil
	c.queueHead++
	if c.queueHead == len(c.queue) {
		c.queue, c.queueHead = c.queue[:0], 0
	}
	return b
}

// admission is what becomes of a request just framed.
type admission uint8

const (
	admitRun   admission = iota // it starts now
	admitChain                  // it starts when the one framed before it completes
	admitQueue                  // it waits on the connection's queue
)

// admit starts the request b just framed if it may start now (and none
// before it waits), chains it to tail, the request framed just before it,
// when tail is not nil (every running request of the connection is in
// tail's chain), and queues it otherwise; mu held.
func (c *conn) admit(b *nic.Buffer, readOnly bool, tail *nic.Buffer) admission {
	switch {
	case len(c.queued()) == 0 && c.mayRun(readOnly):
		c.start(readOnly)
		return admitRun
	case tail != nil:
		c.start(readOnly)
		tail.Next = b
		return admitChain
	}
	c.queue = append(c.queue, b)
	return admitQueue
}

// finished counts a request finished and hands the next queued ones to
// the Recv goroutine if they may now start; mu held.
func (c *conn) finished(readOnly bool) {
	c.running--
	if !readOnly {
		c.writes--
	}
	if q := c.queued(); len(q) > 0 && !c.onRun && !c.dead && c.mayRun(c.d.meta[q[0].Index].readOnly) {
		c.onRun = true
		d := c.d
		d.reqMu.Lock()
		d.toRun = append(d.toRun, c)
		d.reqMu.Unlock()
		if d.waiting.Load() {
			d.WakeRecv()
		}
	}
}

// settle completes turn seq with b's reply (nil: none). It reports whether
// the reply will be sent (the connection is open). Any goroutine.
func (c *conn) settle(seq uint64, b *nic.Buffer, readOnly bool) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.settleLocked(seq, b, readOnly)
}

// unchainLocked takes the requests chained to b (Config.Chain) off it and
// puts them back at the head of c's queue, as started requests no longer
// (or drops them, c closed): b's receiver answered or released b without
// taking them. mu held.
func (c *conn) unchainLocked(b *nic.Buffer) {
	var chain []*nic.Buffer
	for next := b.Next; next != nil; {
		after := next.Next
		next.Next = nil
		c.running--
		if !c.d.meta[next.Index].readOnly {
			c.writes--
		}
		chain = append(chain, next)
		next = after
	}
	b.Next = nil
	if c.dead {
		for _, q := range chain {
			c.d.put(q)
			c.d.stats.requestsDropped.Add(1)
		}
		return
	}
	c.queue = append(chain, c.queued()...)
	c.queueHead = 0
}

// settleLocked is settle with mu held.
func (c *conn) settleLocked(seq uint64, b *nic.Buffer, readOnly bool) bool {
	c.finished(readOnly)
	s := c.slot(seq)
	s.done = true
	var payload []byte
	if b != nil {
		s.flags = b.Flags
		payload = b.Data[:b.Len]
	}
	if c.dead || c.closeReq {
		if len(payload) > 0 {
			c.d.stats.repliesDropped.Add(1)
		}
		return false
	}
	if seq != c.head {
		if len(payload) > 0 {
			s.data = append(s.data, payload...)
			c.store(len(payload))
			c.checkOutput()
		}
		return true
	}
	c.advance(payload)
	return true
}

// chunk takes a part of turn seq's reply ahead of its end (nic.Reply);
// it reports whether it will be sent.
func (c *conn) chunk(seq uint64, b *nic.Buffer) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.chunkLocked(seq, b)
}

// chunkLocked is chunk with mu held.
func (c *conn) chunkLocked(seq uint64, b *nic.Buffer) bool {
	if c.dead || c.closeReq {
		c.d.stats.repliesDropped.Add(1)
		return false
	}
	p := b.Data[:b.Len]
	s := c.slot(seq)
	if seq == c.head && !c.closing {
		c.flushHeld()
		c.emit(s.data)
		c.emit(p)
		c.output()
		c.release(s)
		return true
	}
	s.data = append(s.data, p...)
	c.store(len(p))
	c.checkOutput()
	return true
}

// advance sends the replies whose turn has come, head first; headPayload
// is the head's reply in a pool buffer (sent without a copy when the
// socket takes it). mu held.
func (c *conn) advance(headPayload []byte) {
	from := c.head
	extra := headPayload
	// held counts the bytes this call added to c.held, accounted for
	// together (an atomic add less per reply) before anything that
	// reads or empties c.held.
	held := 0
	for c.head < c.next {
		s := c.slot(c.head)
		if !s.done {
			if len(s.data) > 0 && !c.closing { // a long reply under way
				c.accountHeld(&held)
				c.flushHeld()
				c.emit(s.data)
				c.output()
				c.release(s)
			}
			break
		}
		if c.closing || c.dead {
			if len(s.data)+len(extra) > 0 {
				c.d.stats.repliesDropped.Add(1)
			}
		} else {
			if s.discardHeld || s.flags&nic.ReplyDiscardHeld != 0 {
				c.account(held - len(c.held))
				held = 0
				c.held = c.held[:0]
			}
			if s.flags&nic.ReplyHold != 0 && !s.close {
				c.held = append(c.held, s.data...)
				c.held = append(c.held, extra...)
				held += len(s.data) + len(extra)
				if len(c.held) >= maxHeld || s.flushAfter {
					c.accountHeld(&held)
					c.flushHeld()
				}
			} else {
				c.accountHeld(&held)
				c.flushHeld()
				c.emit(s.data)
				c.emit(extra)
			}
			if s.close || s.flags&nic.ReplyClose != 0 {
				c.closing = true
			}
		}
		extra = nil
		c.head++
	}
	c.accountHeld(&held)
	c.output()
	for seq := from; seq < c.head; seq++ {
		c.release(c.slot(seq))
	}
	if c.pipePaused && c.next-c.head <= uint64(c.d.cfg.MaxPipeline/2) {
		c.pipePaused = false
		c.d.ask(&c.d.toResume, c)
	}
	if !c.batching {
		c.closeIfDone()
	}
}

// accountHeld accounts for the *held bytes advance added to c.held
// (see advance) and zeroes it.
func (c *conn) accountHeld(held *int) {
	if *held != 0 {
		c.account(*held)
		*held = 0
	}
}

// flushNow sends the held replies (a Frame's Flush with nothing in turn
// before it); mu held.
func (c *conn) flushNow() {
	if c.head < c.next {
		c.slot(c.next - 1).flushAfter = true
		return
	}
	c.flushHeld()
}

// flushHeld sends the held replies; mu held.
func (c *conn) flushHeld() {
	if len(c.held) == 0 || c.dead {
		return
	}
	c.emit(c.held)
	c.write() // now, even in a batch: held is reused at once
	c.account(-len(c.held))
	c.held = c.held[:0]
}

// release forgets s's copied reply; mu held.
func (c *conn) release(s *slot) {
	if len(s.data) > 0 {
		c.store(-len(s.data))
	}
	s.data = s.data[:0]
	if cap(s.data) > keepCap {
		s.data = nil
	}
}

// emit queues p for the next write.
func (c *conn) emit(p []byte) {
	if len(p) > 0 {
		c.parts = append(c.parts, p)
	}
}

// output writes the queued pieces, unless a batch of replies is being
// taken (batching: the batch writes them all at its end, in one sendmsg).
// mu held.
func (c *conn) output() {
	if !c.batching {
		c.write()
	}
}

// write writes the queued pieces; what the socket does not take is copied
// aside and written when it is writable. mu held.
func (c *conn) write() {
	if len(c.parts) == 0 {
		return
	}
	defer func() {
		clear(c.parts)
		c.parts = c.parts[:0]
	}()
	if c.dead || c.closeReq {
		return
	}
	if c.spillLen() > 0 {
		for _, p := range c.parts {
			c.toSpill(p)
		}
		c.writeSpill()
		return
	}
	for i := 0; i < len(c.parts); {
		j := min(i+maxIov, len(c.parts))
		n, err := c.send(c.parts[i:j])
		if err != nil {
			c.fail(closeReset)
			return
		}
		// copy aside what the socket did not take, in order
		for _, p := range c.parts[i:j] {
			if n >= len(p) {
				n -= len(p)
				continue
			}
			c.toSpill(p[n:])
			n = 0
		}
		i = j
		if c.spillLen() > 0 {
			for _, p := range c.parts[i:] {
				c.toSpill(p)
			}
			c.setInterest(c.interest | unix.EPOLLOUT)
			c.checkOutput()
			return
		}
	}
}

// send writes pieces with one sendmsg; a full socket is not an error.
func (c *conn) send(pieces [][]byte) (int, error) {
	c.iov = c.iov[:0]
	for _, p := range pieces {
		c.iov = append(c.iov, unix.Iovec{Base: &p[0], Len: uint64(len(p))})
	}
	msg := unix.Msghdr{Iov: &c.iov[0], Iovlen: uint64(len(c.iov))}
	for {
		r, e := sendmsgRaw(c.fd, &msg, unix.MSG_NOSIGNAL|unix.MSG_DONTWAIT)
		clear(c.iov)
		switch e {
		case 0:
			c.wrote(r)
			return r, nil
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			return 0, nil
		default:
			c.d.stats.txErrors.Add(1)
			return 0, e
		}
	}
}

func (c *conn) wrote(n int) {
	if n > 0 {
		c.d.stats.bytesOut.Add(uint64(n))
		c.lastActive.Store(c.d.Now())
	}
}

// account adds n bytes (negative: gives them back) to the memory the
// dataplane holds.
func (c *conn) account(n int) { c.d.mem.Add(int64(n)) }

// store counts n bytes more in slots' data.
func (c *conn) store(n int) {
	c.stored += n
	c.account(n)
}

func (c *conn) spillLen() int { return len(c.spill) - c.spillOff }

func (c *conn) toSpill(p []byte) {
	c.spill = append(c.spill, p...)
	c.d.mem.Add(int64(len(p)))
}

// writeSpill writes what was copied aside; mu held.
func (c *conn) writeSpill() {
	for c.spillLen() > 0 && !c.dead && !c.closeReq {
		rest := c.spill[c.spillOff:]
		n, err := unix.SendmsgN(c.fd, rest, nil, nil, unix.MSG_NOSIGNAL|unix.MSG_DONTWAIT)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if errors.Is(err, unix.EAGAIN) {
			c.setInterest(c.interest | unix.EPOLLOUT)
			c.checkOutput()
			return
		}
		if err != nil {
			c.d.stats.txErrors.Add(1)
			c.fail(closeReset)
			return
		}
		c.wrote(n)
		c.spillOff += n
		c.d.mem.Add(-int64(n))
	}
	if c.spillLen() == 0 {
		c.spill, c.spillOff = c.spill[:0], 0
		if cap(c.spill) > keepCap {
			c.spill = nil
		}
		c.setInterest(c.interest &^ unix.EPOLLOUT)
		c.closeIfDone()
	}
}

// checkOutput fails the connection when its client leaves more than
// MaxOutput bytes unread; mu held.
func (c *conn) checkOutput() {
	if c.spillLen()+len(c.held)+c.stored > c.d.cfg.MaxOutput {
		c.fail(closeOutput)
	}
}

// fail drops what c holds and asks for it to be closed; mu held.
func (c *conn) fail(why closeReason) {
	c.drop()
	c.requestClose(why)
}

// drop forgets every reply c holds; mu held.
func (c *conn) drop() {
	c.account(-len(c.held))
	c.held = nil
	if n := c.spillLen(); n > 0 {
		c.d.mem.Add(-int64(n))
	}
	c.spill, c.spillOff = nil, 0
	for i := range c.slots {
		c.release(&c.slots[i])
	}
}

// drained reports whether every reply is sent; mu held.
func (c *conn) drained() bool { return c.head == c.next && c.spillLen() == 0 }

// closeIfDone asks for c to be closed once it has said its last word;
// mu held.
func (c *conn) closeIfDone() {
	switch {
	case c.closing && c.spillLen() == 0:
		c.requestClose(closeProtocol)
	case c.draining && c.drained():
		c.requestClose(c.closeWhy)
	}
}

func (c *conn) requestClose(why closeReason) {
	if c.closeReq || c.dead {
		return
	}
	c.closeReq, c.closeWhy = true, why
	c.d.ask(&c.d.toClose, c)
}

// setInterest changes c's epoll events; mu held.
func (c *conn) setInterest(want uint32) {
	if want == c.interest || c.dead {
		return
	}
	ev := unix.EpollEvent{Events: want, Fd: int32(c.fd)}
	if unix.EpollCtl(c.d.epfd, unix.EPOLL_CTL_MOD, c.fd, &ev) == nil {
		c.interest = want
	}
}
