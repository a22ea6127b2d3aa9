//go:build linux

package tcp

import (
	"cmp"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/persephone-go/psp/internal/accept"
	"github.com/persephone-go/psp/nic"
	"github.com/persephone-go/psp/nic/internal/bufpool"
)

// Tuning of the receive loop.
const (
	// maxEvents is how many epoll events one Recv takes.
	maxEvents = 256
	// acceptBurst is the most connections accepted per listener event.
	acceptBurst = 64
	// minRead is the least room a read is given; a connection's input
	// buffer starts at inBufStart and doubles up to MaxRequest plus
	// minRead, and shrinks back once empty.
	minRead    = 4 << 10
	inBufStart = 16 << 10
	// sweepEvery is how often idle and partial timeouts are checked.
	sweepEvery = 100 * time.Millisecond
	// fdReserve is how many file descriptors are kept for the rest of the
	// process when MaxConns is fitted under RLIMIT_NOFILE.
	fdReserve = 64
)

// Buffer kinds (bufMeta.kind).
const (
	kindFree uint8 = iota
	kindRequest
	kindChunk
)

// bufMeta is what the dataplane knows of a buffer it lent, by Buffer.Index.
type bufMeta struct {
	c        *conn
	seq      uint64
	kind     uint8
	readOnly bool // Frame.ReadOnly: may run beside the connection's other reads
	heap     int  // bytes of Data allocated beyond the pool (a long request)
}

// Dataplane is a TCP dataplane: see the package documentation.
type Dataplane struct {
	cfg      Config
	start    time.Time
	epfd     int
	wakeFd   int
	pool     *bufpool.Pool
	meta     []bufMeta
	tx       []*txQueue
	stats    counters
	mem      atomic.Int64
	maxConns int
	addr     netip.AddrPort
	reserve  int // pool buffers kept for replies

	// The Recv goroutine's state; recvMu is held by Recv and by whatever
	// changes the listeners or closes the dataplane.
	recvMu    sync.Mutex
	lns       []*listener
	byFd      []*conn
	live      []*conn
	pending   []*conn // connections with input framed in part
	memPaused []*conn
	events    []unix.EpollEvent
	nextID    uint64
	lastSweep int64
	fatal     error
	chained   int // requests this Recv chained (Config.Chain): they count against its burst
	// events[evNext:evEnd] were returned by the last epoll wait and not
	// yet seen: the burst filled up before them.
	evNext, evEnd int

	// Requests of other goroutines to the Recv goroutine.
	reqMu    sync.Mutex
	toClose  []*conn
	toResume []*conn
	toRun    []*conn // connections with a queued request that may now run
	spare    []*conn // toRun's other slice
	toFlush  []*conn // connections with pushed bytes to write (conn.Push)
	flushing []*conn // toFlush's other slice
	woken    atomic.Bool
	// waiting is set while Recv waits in epoll_wait: only then must a
	// request that may now run wake it.
	waiting atomic.Bool

	closed    atomic.Bool
	closeOnce sync.Once
}

// listener is one listening socket.
type listener struct {
	fd       int
	addr     netip.AddrPort
	loop     *accept.Loop // its errors, pauses and counters
	off      bool         // out of the epoll set, pausing after an error
	resumeAt int64        // when it goes back in
}

// Open listens on cfg.Addr and cfg.Ports.
func Open(cfg Config) (*Dataplane, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	d := &Dataplane{cfg: cfg, start: time.Now(), epfd: -1, wakeFd: -1, events: make([]unix.EpollEvent, maxEvents)}
	d.pool = bufpool.New(cfg.Buffers+cfg.ExtraBuffers, cfg.BufSize)
	d.meta = make([]bufMeta, cfg.Buffers+cfg.ExtraBuffers)
	d.reserve = min(cfg.Buffers/4, 32*cfg.Workers)
	d.maxConns = fitConns(cfg.MaxConns)
	if err := d.setup(); err != nil {
		d.closeFds()
		return nil, err
	}
	d.tx = make([]*txQueue, cfg.Workers)
	for i := range d.tx {
		d.tx[i] = &txQueue{d: d}
	}
	return d, nil
}

// fitConns lowers want so that the connections fit the process's file
// descriptor limit (the soft limit, which Go raises to the hard one at
// start) with fdReserve to spare.
func fitConns(want int) int {
	soft, _, err := accept.FileLimit()
	if err != nil || soft == unix.RLIM_INFINITY {
		return want
	}
	open := 0
	if ents, err := os.ReadDir("/proc/self/fd"); err == nil {
		open = len(ents)
	}
	room := int(min(soft, 1<<30)) - open - fdReserve
	return max(min(want, room), 1)
}

func (d *Dataplane) setup() error {
	var err error
	if d.epfd, err = unix.EpollCreate1(unix.EPOLL_CLOEXEC); err != nil {
		return fmt.Errorf("tcp: epoll: %w", err)
	}
	if d.wakeFd, err = unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC); err != nil {
		return fmt.Errorf("tcp: eventfd: %w", err)
	}
	if err := d.epollAdd(d.wakeFd, unix.EPOLLIN); err != nil {
		return err
	}
	ap, err := netip.ParseAddrPort(d.cfg.Addr)
	if err != nil {
		return fmt.Errorf("tcp: address %q: %w", d.cfg.Addr, err)
	}
	ln, err := d.listen(ap)
	if err != nil {
		return err
	}
	d.addr = ln.addr
	for _, p := range d.cfg.Ports {
		if p == d.addr.Port() {
			continue
		}
		if _, err := d.listen(netip.AddrPortFrom(ap.Addr(), p)); err != nil {
			return err
		}
	}
	return nil
}

// listen opens a listening socket on ap and adds it to the epoll set.
func (d *Dataplane) listen(ap netip.AddrPort) (*listener, error) {
	family := unix.AF_INET
	if ap.Addr().Is6() && !ap.Addr().Is4In6() {
		family = unix.AF_INET6
	}
	fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("tcp: socket: %w", err)
	}
	fail := func(op string, err error) (*listener, error) {
		unix.Close(fd)
		return nil, fmt.Errorf("tcp: %s %s: %w", op, ap, err)
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1); err != nil {
		return fail("setsockopt", err)
	}
	if err := unix.Bind(fd, sockaddr(ap)); err != nil {
		return fail("listen", err)
	}
	if err := unix.Listen(fd, d.cfg.Backlog); err != nil {
		return fail("listen", err)
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		return fail("getsockname", err)
	}
	ln := &listener{fd: fd, addr: addrPort(sa)}
	ln.loop = accept.NewLoop(accept.Options{Name: cmp.Or(d.cfg.Name, "tcp") + " " + ln.addr.String(), Log: d.cfg.Log})
	if err := d.epollAdd(fd, unix.EPOLLIN); err != nil {
		unix.Close(fd)
		return nil, err
	}
	d.lns = append(d.lns, ln)
	return ln, nil
}

func (d *Dataplane) epollAdd(fd int, events uint32) error {
	ev := unix.EpollEvent{Events: events, Fd: int32(fd)}
	if err := unix.EpollCtl(d.epfd, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
		return fmt.Errorf("tcp: epoll add: %w", err)
	}
	return nil
}

// Addr returns the address the dataplane listens on (its first listener).
func (d *Dataplane) Addr() netip.AddrPort { return d.addr }

// Config returns the configuration with defaults filled in.
func (d *Dataplane) Config() Config { return d.cfg }

// MaxConns returns the connection limit in force: Config.MaxConns, lowered
// to fit the process's file descriptor limit.
func (d *Dataplane) MaxConns() int { return d.maxConns }

// Now implements nic.Dataplane.
func (d *Dataplane) Now() int64 { return int64(time.Since(d.start)) }

// RequestBuffers implements nic.BufferPool: the pool less the buffers kept
// for replies longer than a buffer (nic.ReplyAllocator).
func (d *Dataplane) RequestBuffers() int { return d.cfg.Buffers - d.reserve }

// ExtraBuffers returns Config.ExtraBuffers (the dispatcher's lanes).
func (d *Dataplane) ExtraBuffers() int { return d.cfg.ExtraBuffers }

// FreeBuffers returns how many pool buffers are free (for tests).
func (d *Dataplane) FreeBuffers() int { return d.pool.Free() }

// ConnStats returns the connection counters.
func (d *Dataplane) ConnStats() ConnStats {
	return d.stats.snapshot(d.maxConns, d.mem.Load())
}

// Stats implements nic.Dataplane: a request is a packet.
func (d *Dataplane) Stats() nic.Stats {
	s := &d.stats
	return nic.Stats{RxPackets: s.rxRequests.Load(), TxPackets: s.txReplies.Load(), TxErrors: s.txErrors.Load(),
		RxNoBuffer: s.rxNoBuffer.Load()}
}

// Conns lists the open connections. It may be called from any goroutine;
// it waits for a running Recv to return.
func (d *Dataplane) Conns() []ConnInfo {
	d.WakeRecv()
	d.recvMu.Lock()
	defer d.recvMu.Unlock()
	out := make([]ConnInfo, 0, len(d.live))
	for _, c := range d.live {
		c.mu.Lock()
		out = append(out, ConnInfo{ID: c.id, Peer: c.peer, Local: c.local, Since: c.since,
			LastActive: c.lastActive.Load(), Outstanding: int(c.next - c.head)})
		c.mu.Unlock()
	}
	return out
}

// Owns reports whether b is one of the dataplane's buffers.
func (d *Dataplane) Owns(b *nic.Buffer) bool { return d.pool.Owns(b) }

// Watch makes a waiting Recv return when fd is readable (the input of a
// dataplane joined with this one, see package nic/join). The descriptor
// stays the caller's; closing it ends the watch.
func (d *Dataplane) Watch(fd int) error {
	return d.epollAdd(fd, unix.EPOLLIN)
}

// RecvWakeable reports that WakeRecv works (the dispatcher's recvWaker).
func (d *Dataplane) RecvWakeable() bool { return true }

// WakeRecv ends a waiting Recv at once, or makes the next one return at
// once. Any goroutine may call it.
func (d *Dataplane) WakeRecv() {
	if d.woken.CompareAndSwap(false, true) {
		var one = [8]byte{1}
		unix.Write(d.wakeFd, one[:])
	}
}

// ask queues c for the Recv goroutine (to close it or read it again) and
// wakes it.
func (d *Dataplane) ask(list *[]*conn, c *conn) {
	d.reqMu.Lock()
	*list = append(*list, c)
	d.reqMu.Unlock()
	d.WakeRecv()
}

// Recv implements nic.Dataplane: it returns up to len(bufs) requests,
// framed from the connections' input, waiting at most wait for the first.
func (d *Dataplane) Recv(bufs []*nic.Buffer, wait time.Duration) (int, error) {
	if d.closed.Load() {
		return 0, nic.ErrClosed
	}
	d.recvMu.Lock()
	defer d.recvMu.Unlock()
	if d.closed.Load() {
		return 0, nic.ErrClosed
	}
	if d.fatal != nil {
		return 0, d.fatal
	}
	now := d.Now()
	d.chained = 0
	d.serveAsks(now)
	n := d.runQueued(bufs)
	n += d.framePending(bufs[n:], now)
	first, ne := d.evNext, d.evEnd
	d.evNext, d.evEnd = 0, 0
	if first == ne {
		// The events of the last wait are all seen: wait again.
		timeout := 0
		if n == 0 && len(d.pending) == 0 && wait > 0 {
			// Announce the wait, then look once more: a request that may
			// now run is either seen here or wakes the wait.
			d.waiting.Store(true)
			if d.hasQueued() {
				d.waiting.Store(false)
			} else {
				timeout = int((wait + time.Millisecond - 1) / time.Millisecond)
			}
		}
		var err error
		first = 0
		ne, err = epollWait(d.epfd, d.events, timeout)
		d.waiting.Store(false)
		if err != nil && !errors.Is(err, unix.EINTR) {
			return n, fmt.Errorf("tcp: epoll wait: %w", err)
		}
		if d.closed.Load() {
			return n, nic.ErrClosed
		}
		now = d.Now()
	}
	for i := first; i < ne; i++ {
		ev := &d.events[i]
		fd := int(ev.Fd)
		if fd == d.wakeFd {
			var buf [8]byte
			unix.Read(d.wakeFd, buf[:])
			d.woken.Store(false)
			d.serveAsks(now)
			continue
		}
		if ln := d.listenerOf(fd); ln != nil {
			d.accept(ln, now)
			continue
		}
		if fd >= len(d.byFd) || d.byFd[fd] == nil {
			continue
		}
		c := d.byFd[fd]
		if ev.Events&unix.EPOLLOUT != 0 {
			d.writable(c)
			if c.dead {
				continue
			}
		}
		if ev.Events&(unix.EPOLLIN|unix.EPOLLRDHUP|unix.EPOLLHUP|unix.EPOLLERR) != 0 && !c.eof && !c.readOff {
			if n+d.chained >= len(bufs) {
				// The burst is full: the next Recv starts from this
				// event instead of waiting again (a connection closed or
				// paused since is skipped then).
				d.evNext, d.evEnd = i, ne
				break
			}
			if d.read(c, now) {
				n += d.frame(c, bufs[n:], now)
			}
		}
	}
	n += d.runQueued(bufs[n:])
	if now-d.lastSweep >= int64(sweepEvery) {
		d.sweep(now)
		d.lastSweep = now
	}
	if d.fatal != nil && n == 0 {
		return 0, d.fatal
	}
	return n, nil
}

func (d *Dataplane) listenerOf(fd int) *listener {
	for _, ln := range d.lns {
		if ln.fd == fd {
			return ln
		}
	}
	return nil
}

// serveAsks applies what other goroutines asked for: connections to close
// and connections to read again.
func (d *Dataplane) serveAsks(now int64) {
	d.reqMu.Lock()
	closes, resumes := d.toClose, d.toResume
	d.toClose, d.toResume = nil, nil
	flushes := d.toFlush
	d.toFlush, d.flushing = d.flushing[:0], nil
	d.reqMu.Unlock()
	for i, c := range flushes {
		c.mu.Lock()
		c.flushQueued = false
		if !c.dead {
			c.advance(nil)
		}
		c.mu.Unlock()
		flushes[i] = nil
	}
	d.reqMu.Lock()
	if d.flushing == nil {
		d.flushing = flushes[:0]
	}
	d.reqMu.Unlock()
	for _, c := range closes {
		d.closeConn(c, c.closeWhy)
	}
	for _, c := range resumes {
		if c.dead {
			continue
		}
		c.mu.Lock()
		c.pipePaused = false
		c.mu.Unlock()
		d.setRead(c, true)
		d.addPending(c)
	}
	if len(d.memPaused) > 0 && d.mem.Load() < d.cfg.Memory-d.cfg.Memory/8 {
		for _, c := range d.memPaused {
			if !c.dead {
				c.memPaused = false
				d.setRead(c, true)
				d.addPending(c)
			}
		}
		d.memPaused = d.memPaused[:0]
	}
	for _, ln := range d.lns {
		if ln.off && now >= ln.resumeAt {
			if err := d.epollAdd(ln.fd, unix.EPOLLIN); err == nil {
				ln.off = false
			}
		}
	}
}

// hasQueued reports whether a connection has a queued request that may
// now run.
func (d *Dataplane) hasQueued() bool {
	d.reqMu.Lock()
	defer d.reqMu.Unlock()
	return len(d.toRun) > 0
}

// runQueued moves the queued requests that may now run into bufs.
func (d *Dataplane) runQueued(bufs []*nic.Buffer) int {
	d.reqMu.Lock()
	if len(d.toRun) == 0 {
		d.reqMu.Unlock()
		return 0
	}
	conns := d.toRun
	d.toRun = d.spare[:0]
	d.reqMu.Unlock()
	n := 0
	for i, c := range conns {
		c.mu.Lock()
		c.onRun = false
		var tail *nic.Buffer // every running request of c is in its chain
	queue:
		for n+d.chained < len(bufs) && len(c.queued()) > 0 {
			ro := d.meta[c.queued()[0].Index].readOnly
			switch {
			case c.mayRun(ro):
				first := c.running == 0
				b := c.popQueued()
				c.start(ro)
				bufs[n] = b
				n++
				tail = nil
				if first && d.cfg.Chain {
					tail = b
				}
			case tail != nil:
				b := c.popQueued()
				c.start(ro)
				tail.Next = b
				tail = b
				d.chained++
			default:
				break queue
			}
		}
		if q := c.queued(); len(q) > 0 && c.mayRun(d.meta[q[0].Index].readOnly) {
			c.onRun = true // no room left in bufs: next time
			d.reqMu.Lock()
			d.toRun = append(d.toRun, c)
			d.reqMu.Unlock()
		}
		c.mu.Unlock()
		conns[i] = nil
	}
	d.spare = conns[:0]
	return n
}

func (d *Dataplane) addPending(c *conn) {
	if !c.isPending {
		c.isPending = true
		d.pending = append(d.pending, c)
	}
}

// framePending frames the input left over from earlier calls (the
// request buffers or the caller's slice ran out).
func (d *Dataplane) framePending(bufs []*nic.Buffer, now int64) int {
	n := 0
	// d.pending lists a connection once (isPending), so each kept is
	// appended to keep once, without a search. frame's addPending of the
	// connection it frames appends past the entries read here; those are
	// dropped, c.isPending carrying the request to keep it.
	pending := d.pending
	keep := pending[:0]
	for _, c := range pending {
		c.isPending = false
		if c.dead {
			continue
		}
		framed := n+d.chained < len(bufs)
		if framed {
			n += d.frame(c, bufs[n:], now)
		}
		// Not framed (the burst is full) or more left: keep it. A
		// connection with no input left is framed too: the end of its
		// input is the framer's cue to flush the replies it holds.
		if !framed || c.isPending || (n+d.chained >= len(bufs) && c.inOff < c.inEnd) {
			c.isPending = true
			keep = append(keep, c)
		}
	}
	clear(pending[len(keep):])
	d.pending = keep
	return n
}

// accept accepts the connections waiting on ln. An error that a pause may
// cure takes ln out of the epoll set for that pause (the connections wait
// in its backlog); a fatal one is returned by Recv.
func (d *Dataplane) accept(ln *listener, now int64) {
	for range acceptBurst {
		fd, sa, err := unix.Accept4(ln.fd, unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC)
		if errors.Is(err, unix.EAGAIN) {
			return
		}
		if err != nil {
			pause, ferr := ln.loop.Failed(err)
			if ferr != nil {
				d.fatal = fmt.Errorf("tcp: %w", ferr)
				return
			}
			d.stats.acceptErrors.Add(1)
			if pause > 0 {
				ln.off = true
				ln.resumeAt = now + int64(pause)
				unix.EpollCtl(d.epfd, unix.EPOLL_CTL_DEL, ln.fd, nil)
				return
			}
			continue
		}
		ln.loop.Accepted()
		if int(d.stats.current.Load()) >= d.maxConns {
			d.stats.rejected.Add(1)
			ln.loop.Refused()
			if msg := d.cfg.Protocol.TooManyConns(); len(msg) > 0 {
				unix.SendmsgN(fd, msg, nil, nil, unix.MSG_NOSIGNAL|unix.MSG_DONTWAIT)
			}
			unix.Close(fd)
			continue
		}
		d.adopt(fd, sa, ln, now)
	}
}

// adopt serves the accepted connection fd.
func (d *Dataplane) adopt(fd int, sa unix.Sockaddr, ln *listener, now int64) {
	unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
	d.nextID++
	peer := addrPort(sa)
	c := &conn{d: d, id: d.nextID, fd: fd, peer: peer, local: ln.addr, since: now, interest: unix.EPOLLIN | unix.EPOLLRDHUP}
	c.lastActive.Store(now)
	c.slots = make([]slot, ringSize(d.cfg.MaxPipeline))
	c.framer = d.cfg.Protocol.NewConn(c.id, peer)
	if pt, ok := c.framer.(nic.PushTaker); ok {
		pt.TakePusher(c)
	}
	if err := d.epollAdd(fd, c.interest); err != nil {
		unix.Close(fd)
		d.stats.acceptErrors.Add(1)
		return
	}
	if fd >= len(d.byFd) {
		d.byFd = slices.Grow(d.byFd, fd+1-len(d.byFd))[:fd+1]
	}
	d.byFd[fd] = c
	c.liveIdx = len(d.live)
	d.live = append(d.live, c)
	d.stats.current.Add(1)
	d.stats.accepted.Add(1)
}

// ringSize is the size of a connection's reply ring: room for MaxPipeline
// requests and the framer's own entries between them, a power of two.
func ringSize(pipeline int) int {
	n := 8
	for n < 2*pipeline+2 {
		n *= 2
	}
	return n
}

// read reads what c has sent into its input buffer; it reports whether
// there is input to frame.
func (d *Dataplane) read(c *conn, now int64) bool {
	if c.inOff == c.inEnd {
		c.inOff, c.inEnd = 0, 0
		if cap(c.in) > inBufStart {
			d.mem.Add(-int64(cap(c.in)))
			c.in = nil
		}
	}
	if c.in == nil {
		if !d.takeMem(inBufStart) {
			d.pauseForMemory(c)
			return false
		}
		c.in = make([]byte, inBufStart)
	}
	if len(c.in)-c.inEnd < minRead {
		if c.inOff > 0 && c.inEnd-c.inOff < len(c.in)/2 {
			c.inEnd = copy(c.in, c.in[c.inOff:c.inEnd])
			c.inOff = 0
		} else {
			grown := 2 * len(c.in)
			if grown > d.cfg.MaxRequest+minRead {
				grown = d.cfg.MaxRequest + minRead
			}
			if grown <= len(c.in) || !d.takeMem(int64(grown-len(c.in))) {
				if grown > len(c.in) {
					d.pauseForMemory(c)
					return c.inEnd > c.inOff
				}
				return c.inEnd > c.inOff // full at MaxRequest: the framer decides
			}
			in := make([]byte, grown)
			c.inEnd = copy(in, c.in[c.inOff:c.inEnd])
			c.inOff = 0
			c.in = in
		}
	}
	if c.skip > 0 {
		// skip what can be read of the bytes to discard
	}
	got, err := readRaw(c.fd, c.in[c.inEnd:])
	switch {
	case got > 0:
		c.inEnd += got
		d.stats.bytesIn.Add(uint64(got))
		c.lastActive.Store(now)
		return true
	case err == nil: // end of stream: answer what is in, then close
		c.eof = true
		d.setRead(c, false)
		if pc, ok := c.framer.(nic.PeerCloser); ok {
			pc.PeerClosed()
		}
		return true // frame decides when the input is done
	case errors.Is(err, unix.EAGAIN), errors.Is(err, unix.EINTR):
		return false
	default:
		d.closeConn(c, closeReset)
		return false
	}
}

// takeMem takes n bytes of Config.Memory, if they are there.
func (d *Dataplane) takeMem(n int64) bool {
	if d.mem.Add(n) > d.cfg.Memory {
		d.mem.Add(-n)
		return false
	}
	return true
}

func (d *Dataplane) pauseForMemory(c *conn) {
	if c.memPaused {
		return
	}
	c.memPaused = true
	d.stats.memoryPauses.Add(1)
	d.setRead(c, false)
	d.memPaused = append(d.memPaused, c)
}

// setRead adds or removes c's interest in input.
func (d *Dataplane) setRead(c *conn, on bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dead {
		return
	}
	c.readOff = !on
	want := c.interest &^ (unix.EPOLLIN | unix.EPOLLRDHUP)
	if on && !c.eof {
		want |= unix.EPOLLIN | unix.EPOLLRDHUP
	}
	c.setInterest(want)
}

// frame cuts c's input into requests, into bufs; it returns how many.
func (d *Dataplane) frame(c *conn, bufs []*nic.Buffer, now int64) int {
	n := 0
	var tail *nic.Buffer // the request framed last, when every running request of c is in its chain
	// mayBeFull: c's pipeline was full, or nearly, when last looked at
	// under c.mu (it can only have emptied since): the check under the
	// lock is skipped while it cannot be full, a lock less per request.
	mayBeFull := true
	framed := uint64(0) // requests, counted in the stats once, at the end
	defer func() {
		if framed > 0 {
			d.stats.rxRequests.Add(framed)
		}
	}()
	for !c.dead {
		if c.skip > 0 {
			k := min(c.skip, int64(c.inEnd-c.inOff))
			c.inOff += int(k)
			c.skip -= k
			if c.skip > 0 {
				break
			}
		}
		in := c.in[c.inOff:c.inEnd]
		if mayBeFull {
			c.mu.Lock()
			full := c.next-c.head >= uint64(d.cfg.MaxPipeline)
			if full && !c.pipePaused {
				c.pipePaused = true
				d.stats.pipelinePauses.Add(1)
			}
			mayBeFull = c.next-c.head+1 >= uint64(d.cfg.MaxPipeline)
			c.mu.Unlock()
			if full {
				d.setRead(c, false)
				break
			}
		}
		if c.stopped {
			break
		}
		f := c.framer.Frame(in, d.cfg.MaxRequest)
		switch f.Kind {
		case nic.FrameRequest:
			if f.Len <= 0 || f.Len > len(in) {
				d.closeConn(c, closeProtocol)
				return n
			}
			if n+d.chained >= len(bufs) {
				d.addPending(c)
				return n
			}
			b := d.requestBuffer(f.Len)
			if b == nil {
				d.stats.rxNoBuffer.Add(1)
				d.addPending(c)
				return n
			}
			b.Len = copy(b.Data, in[:f.Len])
			b.WireLen = b.Len
			b.Peer, b.DstPort, b.RxTime = c.peer, c.local.Port(), now
			b.Flags, b.Session = nic.FromStream, c.framer
			m := &d.meta[b.Index]
			m.c, m.kind, m.readOnly = c, kindRequest, f.ReadOnly
			c.mu.Lock()
			m.seq = c.push(f.Flush)
			first := c.running == 0
			switch c.admit(b, f.ReadOnly, tail) {
			case admitRun:
				bufs[n] = b
				n++
				tail = nil
				if first && d.cfg.Chain {
					tail = b
				}
			case admitChain:
				tail = b
				d.chained++
			default:
				tail = nil
			}
			mayBeFull = c.next-c.head+1 >= uint64(d.cfg.MaxPipeline)
			c.mu.Unlock()
			c.inOff += f.Len
			c.partialSince = 0
			framed++
		case nic.FrameSkip:
			k := min(f.Len, len(in))
			c.inOff += k
			c.skip = int64(f.Len - k)
			if f.Reply != nil || f.Flush {
				c.mu.Lock()
				c.pushDone(f.Reply, f.Flush, false, false)
				c.mu.Unlock()
				mayBeFull = true
			}
			c.partialSince = 0
		case nic.FrameClose:
			c.stopped = true
			c.inOff = c.inEnd
			c.mu.Lock()
			c.pushDone(f.Reply, false, true, f.DiscardHeld)
			c.mu.Unlock()
			d.setRead(c, false)
			return n
		default: // FrameMore
			if f.Flush {
				c.mu.Lock()
				c.flushNow()
				c.mu.Unlock()
			}
			if c.eof {
				// No more input: what is left can never be a request.
				c.inOff, c.partialSince = c.inEnd, 0
				d.closeWhenDone(c, closePeer)
				return n
			}
			switch {
			case len(in) == 0:
				c.partialSince = 0
			case len(in) >= d.cfg.MaxRequest:
				d.closeConn(c, closeTooLong)
			case c.partialSince == 0:
				c.partialSince = now
			}
			return n
		}
	}
	if c.eof && c.skip > 0 && !c.dead {
		d.closeWhenDone(c, closePeer) // the bytes to skip will not come
	}
	return n
}

// requestBuffer returns a pool buffer with room for n bytes, or nil.
func (d *Dataplane) requestBuffer(n int) *nic.Buffer {
	b := d.pool.Get()
	if b == nil {
		return nil
	}
	if n > len(b.Data) {
		if !d.takeMem(int64(n)) {
			d.pool.Put(b)
			return nil
		}
		b.Data = make([]byte, n)
		d.meta[b.Index].heap = n
	}
	return b
}

// put returns b to the pool.
func (d *Dataplane) put(b *nic.Buffer) {
	m := &d.meta[b.Index]
	if m.heap > 0 {
		d.mem.Add(-int64(m.heap))
	}
	*m = bufMeta{}
	d.pool.Put(b)
}

// closeWhenDone closes c once its requests are answered and its replies
// written.
func (d *Dataplane) closeWhenDone(c *conn, why closeReason) {
	c.mu.Lock()
	c.draining = true
	if c.closeReq {
		why = c.closeWhy // the first cause counts (a reply's write met the reset before the read met the end)
	}
	c.closeWhy = why
	done := c.drained()
	c.mu.Unlock()
	if done {
		d.closeConn(c, why)
	}
}

// writable sends what c could not send before.
func (d *Dataplane) writable(c *conn) {
	c.mu.Lock()
	c.writeSpill()
	close := c.closeReq
	c.mu.Unlock()
	if close {
		d.closeConn(c, c.closeWhy)
	}
}

// closeConn closes c at once, for why, or for the cause of a close asked
// for earlier: the first cause counts. Only the Recv goroutine calls it.
func (d *Dataplane) closeConn(c *conn, why closeReason) {
	c.mu.Lock()
	if c.dead {
		c.mu.Unlock()
		return
	}
	if c.closeReq {
		why = c.closeWhy
	}
	c.dead = true
	c.drop()
	queued := c.queued()
	c.queue, c.queueHead = nil, 0
	fd := c.fd
	d.stats.closed[why].Add(1)
	unix.Close(fd) // leaves the epoll set with it
	c.fd = -1
	c.mu.Unlock()
	for _, b := range queued { // never handed out
		d.put(b)
		d.stats.requestsDropped.Add(1)
	}
	if fd < len(d.byFd) && d.byFd[fd] == c {
		d.byFd[fd] = nil
	}
	last := len(d.live) - 1
	d.live[c.liveIdx] = d.live[last]
	d.live[c.liveIdx].liveIdx = c.liveIdx
	d.live[last] = nil
	d.live = d.live[:last]
	if c.in != nil {
		d.mem.Add(-int64(cap(c.in)))
		c.in = nil
	}
	if cc, ok := c.framer.(nic.ConnCloser); ok {
		cc.ConnClosed()
	}
	d.stats.current.Add(-1)
}

// sweep closes the connections past their idle or partial timeouts.
func (d *Dataplane) sweep(now int64) {
	idle, partial := int64(d.cfg.IdleTimeout), int64(d.cfg.PartialTimeout)
	for i := 0; i < len(d.live); i++ {
		c := d.live[i]
		switch {
		case partial > 0 && c.partialSince != 0 && now-c.partialSince > partial:
			d.closeConn(c, closePartial)
			i--
		case idle > 0 && now-c.lastActive.Load() > idle:
			c.mu.Lock()
			quiet := c.next == c.head || c.spillLen() > 0
			c.mu.Unlock()
			if pw, ok := c.framer.(nic.PushWaiter); ok && quiet && pw.WaitsForPush() {
				quiet = false
			}
			if quiet {
				d.closeConn(c, closeIdle)
				i--
			}
		}
	}
}

// TxQueue implements nic.Dataplane.
func (d *Dataplane) TxQueue(w int) nic.TxQueue {
	if w < 0 || w >= len(d.tx) {
		return nil
	}
	return d.tx[w]
}

// AllocReply implements nic.ReplyAllocator: a pool buffer for the next
// part of req's reply, or nil when none is free.
func (d *Dataplane) AllocReply(req *nic.Buffer) *nic.Buffer {
	if d.closed.Load() {
		return nil
	}
	b := d.pool.Get() // nil when none is free
	if b == nil {
		return nil
	}
	rm := &d.meta[req.Index]
	m := &d.meta[b.Index]
	m.c, m.seq, m.kind = rm.c, rm.seq, kindChunk
	b.Peer, b.DstPort, b.RxTime, b.Session = req.Peer, req.DstPort, req.RxTime, req.Session
	return b
}

// ReplyRoom is the room of the buffers AllocReply returns: the pool's,
// which a request longer than a pooled buffer exceeds (it is read into a
// buffer of its own length).
func (d *Dataplane) ReplyRoom(*nic.Buffer) int { return d.pool.BufSize() }

// Release implements nic.Dataplane: a request released unanswered sends
// nothing in its turn.
func (d *Dataplane) Release(bufs ...*nic.Buffer) {
	for _, b := range bufs {
		m := d.meta[b.Index]
		if m.kind == kindRequest && m.c != nil {
			if b.Next != nil {
				m.c.mu.Lock()
				m.c.unchainLocked(b)
				m.c.mu.Unlock()
			}
			m.c.settle(m.seq, nil, m.readOnly)
		}
		d.put(b)
	}
}

// txQueue is one worker's transmit queue.
type txQueue struct{ d *Dataplane }

// Send implements nic.TxQueue: each buffer goes to its connection in its
// request's turn; the replies of one connection that come in a row are
// written together. Every buffer is back in the pool when Send returns. It
// returns how many were not dropped (their connection closed).
func (q *txQueue) Send(bufs []*nic.Buffer) (int, error) {
	d := q.d
	sent := 0
	defer func() {
		if sent > 0 {
			d.stats.txReplies.Add(uint64(sent))
		}
	}()
	for i := 0; i < len(bufs); {
		c := d.meta[bufs[i].Index].c
		j := i + 1
		for j < len(bufs) && d.meta[bufs[j].Index].c == c {
			j++
		}
		if c != nil {
			c.mu.Lock()
			c.batching = true
			for _, b := range bufs[i:j] {
				m := &d.meta[b.Index]
				var ok bool
				if m.kind == kindChunk {
					ok = c.chunkLocked(m.seq, b)
				} else {
					if b.Next != nil {
						c.unchainLocked(b)
					}
					ok = c.settleLocked(m.seq, b, m.readOnly)
				}
				if ok {
					sent++
				}
			}
			c.batching = false
			c.write()
			c.closeIfDone()
			c.mu.Unlock()
		}
		for _, b := range bufs[i:j] {
			d.put(b)
		}
		i = j
	}
	return sent, nil
}

// Close implements nic.Dataplane: it closes the listeners and every
// connection (what their sockets take of the replies already written is
// sent by the kernel). It is idempotent.
func (d *Dataplane) Close() error {
	d.closeOnce.Do(func() {
		d.closed.Store(true)
		d.WakeRecv()
		d.recvMu.Lock()
		defer d.recvMu.Unlock()
		for len(d.live) > 0 {
			d.closeConn(d.live[0], closeShutdown)
		}
		d.closeFds()
	})
	return nil
}

func (d *Dataplane) closeFds() {
	for _, ln := range d.lns {
		unix.Close(ln.fd)
	}
	d.lns = nil
	if d.wakeFd >= 0 {
		unix.Close(d.wakeFd)
	}
	if d.epfd >= 0 {
		unix.Close(d.epfd)
	}
}

// Ports returns the listening ports, Addr's first.
func (d *Dataplane) Ports() []uint16 {
	d.WakeRecv()
	d.recvMu.Lock()
	defer d.recvMu.Unlock()
	ps := make([]uint16, len(d.lns))
	for i, ln := range d.lns {
		ps[i] = ln.addr.Port()
	}
	return ps
}

// AddPort listens on port too, on Addr's IP.
func (d *Dataplane) AddPort(port uint16) error {
	if port == 0 {
		return fmt.Errorf("tcp: port 0 cannot be served")
	}
	d.WakeRecv()
	d.recvMu.Lock()
	defer d.recvMu.Unlock()
	if d.closed.Load() {
		return nic.ErrClosed
	}
	for _, ln := range d.lns {
		if ln.addr.Port() == port {
			return nil
		}
	}
	_, err := d.listen(netip.AddrPortFrom(d.addr.Addr(), port))
	return err
}

// RemovePort stops listening on port (not Addr's); its open connections
// stay.
func (d *Dataplane) RemovePort(port uint16) error {
	d.WakeRecv()
	d.recvMu.Lock()
	defer d.recvMu.Unlock()
	for i, ln := range d.lns {
		if ln.addr.Port() == port && i > 0 {
			unix.Close(ln.fd)
			d.lns = slices.Delete(d.lns, i, i+1)
			return nil
		}
	}
	return nil
}

func sockaddr(ap netip.AddrPort) unix.Sockaddr {
	if a := ap.Addr(); a.Is4() || a.Is4In6() {
		return &unix.SockaddrInet4{Port: int(ap.Port()), Addr: a.Unmap().As4()}
	}
	return &unix.SockaddrInet6{Port: int(ap.Port()), Addr: ap.Addr().As16()}
}

func addrPort(sa unix.Sockaddr) netip.AddrPort {
	switch sa := sa.(type) {
	case *unix.SockaddrInet4:
		return netip.AddrPortFrom(netip.AddrFrom4(sa.Addr), uint16(sa.Port))
	case *unix.SockaddrInet6:
		return netip.AddrPortFrom(netip.AddrFrom16(sa.Addr).Unmap(), uint16(sa.Port))
	}
	return netip.AddrPort{}
}
