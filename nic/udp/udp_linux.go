//go:build linux

package udp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/persephone-go/psp/nic"
	"github.com/persephone-go/psp/nic/internal/bufpool"
)

// sockaddrLen is the room for one peer address (sockaddr_in6 covers both
// families).
const sockaddrLen = unix.SizeofSockaddrInet6

// Identifiers of the epoll set's eventfds (Recv with several ports): the
// sockets' are their ports.
const (
	epollClose = -1 // written by Close
	epollWake  = -2 // Dataplane.wake, written by WakeRecv
)

// cmsgRoom is the room for one control message: the kernel's receive
// timestamp (SCM_TIMESTAMPNS, a struct timespec).
const cmsgRoom = unix.SizeofCmsghdr + 16

// noBufferWait is how long a waiting Recv sleeps when every buffer is in use
// (buffer returns do not wake it).
const noBufferWait = 50 * time.Microsecond

// Dataplane is a batched UDP-socket nic.Dataplane. Create it with Open.
type Dataplane struct {
	cfg    Config
	conn   socket
	raw    syscall.RawConn
	family int
	addr   netip.AddrPort
	pool   *bufpool.Pool
	start  time.Time

	// Further ports (Config.Ports, AddPort): each its own socket. socks
	// holds every port's receive socket, Addr's first, and is replaced
	// (never modified) when ports change; with more than one, Recv waits
	// on epfd, where wakeFd (an eventfd) ends the wait at Close.
	portsMu sync.Mutex
	socks   atomic.Pointer[[]*rxSock]
	epfd    int
	wakeFd  int
	events  []unix.EpollEvent // net worker only
	rr      int               // net worker only: the socket read first
	waiting atomic.Bool       // Recv may be in epoll_wait: it closes the epoll set after Close
	epDone  atomic.Bool       // the epoll set and its descriptors are closed

	closed    atomic.Bool
	closeOnce sync.Once
	closeErr  error

	rx rxState // net worker only
	// wake is an eventfd that a waiting Recv polls besides the socket
	// (Config.KernelWait): WakeRecv ends the wait.
	wake        *os.File
	wakeBuf     [8]byte
	staged      atomic.Int64
	rxPackets   atomic.Uint64
	rxTruncated atomic.Uint64
	rxNoBuffer  atomic.Uint64

	tx []*txQueue

	meminfo meminfoState
}

// meminfoState reads the socket's kernel drop counter (SO_MEMINFO) for Stats.
type meminfoState struct {
	mu   sync.Mutex
	vals [unix.SK_MEMINFO_VARS]uint32
	ok   bool
	call func(fd uintptr)
}

func (m *meminfoState) read(fd uintptr) {
	size := uint32(unsafe.Sizeof(m.vals))
	_, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, fd, unix.SOL_SOCKET, unix.SO_MEMINFO,
		uintptr(unsafe.Pointer(&m.vals[0])), uintptr(unsafe.Pointer(&size)), 0)
	m.ok = e == 0 && size > unix.SK_MEMINFO_DROPS*4
}

var _ nic.Dataplane = (*Dataplane)(nil)

// Open listens on cfg.Addr and returns the dataplane. The caller closes it.
func Open(cfg Config) (*Dataplane, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	pc, err := net.ListenPacket("udp", cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("udp: listen on %s: %w", cfg.Addr, err)
	}
	conn := pc.(*net.UDPConn)
	if err := conn.SetReadBuffer(cfg.ReadBuffer); err != nil {
		conn.Close()
		return nil, fmt.Errorf("udp: set SO_RCVBUF to %d: %w", cfg.ReadBuffer, err)
	}
	d := &Dataplane{cfg: cfg, start: time.Now(), epfd: -1, wakeFd: -1}
	if d.conn, err = d.adopt(conn); err != nil {
		return nil, err
	}
	if err := d.setup(); err != nil {
		d.Close()
		return nil, err
	}
	for _, p := range cfg.Ports {
		if p == d.addr.Port() {
			continue
		}
		if err := d.AddPort(p); err != nil {
			d.Close()
			return nil, err
		}
	}
	return d, nil
}

func (d *Dataplane) setup() error {
	var err error
	if d.raw, err = d.conn.SyscallConn(); err != nil {
		return fmt.Errorf("udp: raw socket: %w", err)
	}
	var sa unix.Sockaddr
	var dups []int
	cerr := d.raw.Control(func(fd uintptr) {
		if sa, err = unix.Getsockname(int(fd)); err != nil {
			return
		}
		// The kernel stamps each datagram when it arrives, so RxTime
		// covers the time it waited for the net worker to read it.
		if err = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1); err != nil {
			err = fmt.Errorf("SO_TIMESTAMPNS: %w", err)
			return
		}
		for range d.cfg.Workers {
			var dup int
			if dup, err = unix.FcntlInt(fd, unix.F_DUPFD_CLOEXEC, 0); err != nil {
				return
			}
			dups = append(dups, dup)
		}
	})
	if cerr != nil {
		err = cerr
	}
	for i, fd := range dups {
		if err != nil { // close the descriptors not handed to a queue
			unix.Close(fd)
			continue
		}
		var q *txQueue
		if q, err = newTxQueue(d, fd); err != nil {
			err = fmt.Errorf("udp: transmit queue %d: %w", i, err)
			continue
		}
		d.tx = append(d.tx, q)
	}
	if err != nil {
		return fmt.Errorf("udp: set up socket: %w", err)
	}
	switch sa := sa.(type) {
	case *unix.SockaddrInet4:
		d.family = unix.AF_INET
		d.addr = netip.AddrPortFrom(netip.AddrFrom4(sa.Addr), uint16(sa.Port))
	case *unix.SockaddrInet6:
		d.family = unix.AF_INET6
		d.addr = netip.AddrPortFrom(netip.AddrFrom16(sa.Addr).Unmap(), uint16(sa.Port))
	default:
		return fmt.Errorf("udp: unexpected socket address %T", sa)
	}
	d.pool = bufpool.New(d.cfg.Buffers+d.cfg.ExtraBuffers, d.cfg.BufSize)
	d.rx.init(d.cfg.Batch)
	if d.cfg.KernelWait {
		efd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
		if err != nil {
			return fmt.Errorf("udp: eventfd: %w", err)
		}
		d.wake = os.NewFile(uintptr(efd), "psp-recv-wake")
		binary.NativeEndian.PutUint64(d.wakeBuf[:], 1)
		d.rx.pollFds = append(d.rx.pollFds, unix.PollFd{Fd: int32(efd), Events: unix.POLLIN})
	}
	d.meminfo.call = d.meminfo.read
	d.socks.Store(&[]*rxSock{{port: d.addr.Port(), conn: d.conn, raw: d.raw, fd: -1}})
	return nil
}

// adopt returns c as the dataplane's socket: c itself, or, under
// Config.KernelWait, its descriptor out of Go's poller (see unpolled).
func (d *Dataplane) adopt(c *net.UDPConn) (socket, error) {
	if !d.cfg.KernelWait {
		return c, nil
	}
	return unpoll(c)
}

// Addr returns the address the dataplane is bound to (with the port the
// kernel chose for ":0").
func (d *Dataplane) Addr() netip.AddrPort { return d.addr }

// Config returns the configuration with defaults filled in.
func (d *Dataplane) Config() Config { return d.cfg }

// Now implements nic.Dataplane: nanoseconds since Open (monotonic).
func (d *Dataplane) Now() int64 { return int64(time.Since(d.start)) }

// RequestBuffers implements nic.BufferPool: the pool minus the batch of
// buffers Recv keeps staged for the next recvmmsg.
func (d *Dataplane) RequestBuffers() int { return d.cfg.Buffers - d.cfg.Batch }

// ExtraBuffers returns Config.ExtraBuffers: pool buffers beyond
// RequestBuffers.
func (d *Dataplane) ExtraBuffers() int { return d.cfg.ExtraBuffers }

// FreeBuffers returns how many pool buffers are not held by a caller
// (including those staged for the next receive). It scans the pool.
func (d *Dataplane) FreeBuffers() int { return d.pool.Free() + int(d.staged.Load()) }

// Recv implements nic.Dataplane. It receives at most Config.Batch packets
// per call. Receiving allocates nothing; a bounded wait that ends with no
// packet allocates once (the runtime's timeout error), which only happens
// on an idle server.
func (d *Dataplane) Recv(bufs []*nic.Buffer, wait time.Duration) (int, error) {
	if d.closed.Load() {
		d.unstage()
		return 0, nic.ErrClosed
	}
	want := d.stage(min(len(bufs), d.cfg.Batch))
	if want < min(len(bufs), d.cfg.Batch) {
		d.rxNoBuffer.Add(1)
	}
	if want == 0 {
		if len(bufs) > 0 && wait > 0 { // every buffer is in use: let workers return some
			time.Sleep(min(wait, noBufferWait))
		}
		return 0, nil
	}
	if socks := *d.socks.Load(); len(socks) > 1 {
		return d.recvPorts(bufs, socks, want, wait)
	}
	d.rx.off, d.rx.want, d.rx.block = 0, want, false
	var err error
	if wait > 0 && d.cfg.KernelWait && d.rx.drained {
		d.rx.got, d.rx.errno = 0, 0
	} else {
		err = d.raw.Read(d.rx.call)
	}
	if err == nil && d.rx.errno == 0 && d.rx.got == 0 && wait > 0 && d.cfg.KernelWait {
		d.rx.timeout = unix.NsecToTimespec(int64(wait))
		err = d.raw.Read(d.rx.pollCall)
	} else if err == nil && d.rx.errno == 0 && d.rx.got == 0 && wait > 0 {
		d.rx.block = true
		if err = d.conn.SetReadDeadline(time.Now().Add(wait)); err == nil {
			err = d.raw.Read(d.rx.call)
			if derr := d.conn.SetReadDeadline(time.Time{}); err == nil {
				err = derr
			}
		}
	}
	switch {
	case err == nil && d.rx.errno != 0:
		return 0, fmt.Errorf("udp: recvmmsg: %w", d.rx.errno)
	case err == nil:
	case errors.Is(err, os.ErrDeadlineExceeded):
		return 0, nil
	case errors.Is(err, net.ErrClosed) || d.closed.Load():
		d.unstage()
		return 0, nic.ErrClosed
	default:
		return 0, fmt.Errorf("udp: receive: %w", err)
	}
	n := d.rx.got
	d.rx.drained = n < want
	if n == 0 {
		return 0, nil
	}
	now, wall := d.clocks()
	d.fill(bufs, 0, n, d.addr.Port(), now, wall)
	return d.received(n), nil
}

// clocks reads the time once as both the dataplane's monotonic clock and
// the wall clock, to turn the kernel's wall-clock receive stamps into the
// former.
func (d *Dataplane) clocks() (now, wall int64) {
	t := time.Now()
	return int64(t.Sub(d.start)), t.UnixNano()
}

// fill hands over staged slots from..from+n-1, received on port at now
// (wall: the same instant on the wall clock), in bufs.
func (d *Dataplane) fill(bufs []*nic.Buffer, from, n int, port uint16, now, wall int64) {
	truncated := 0
	for i := from; i < from+n; i++ {
		b := d.rx.bufs[i]
		h := &d.rx.hdrs[i]
		b.WireLen = int(h.Len)
		b.Len = min(b.WireLen, len(b.Data))
		if b.WireLen > b.Len {
			truncated++
		}
		b.Peer = parseSockaddr(d.rx.names[i][:h.Hdr.Namelen])
		b.DstPort = port
		b.RxTime = now
		if stamp, ok := d.rx.stamp(i); ok && stamp <= wall {
			b.RxTime = now - (wall - stamp)
		}
		bufs[i] = b
		d.rx.bufs[i] = nil
	}
	if truncated > 0 {
		d.rxTruncated.Add(uint64(truncated))
	}
}

// received counts n packets handed over and returns n.
func (d *Dataplane) received(n int) int {
	d.staged.Add(-int64(n))
	d.rxPackets.Add(uint64(n))
	return n
}

// recvPorts is Recv with several ports: the sockets epoll says are
// readable (waiting at most wait for one), each read into the next free
// slots, starting with a different socket at each call.
func (d *Dataplane) recvPorts(bufs []*nic.Buffer, socks []*rxSock, want int, wait time.Duration) (int, error) {
	// Closing the epoll set while epoll_wait runs can lose Close's wake-up
	// (the eventfd leaves the set before the waiter sees it): whoever is
	// last, Close or this call, closes it.
	d.waiting.Store(true)
	defer func() {
		d.waiting.Store(false)
		if d.closed.Load() {
			d.closeEpoll()
		}
	}()
	if d.closed.Load() {
		d.unstage()
		return 0, nic.ErrClosed
	}
	got, woken := 0, false
	for round := 0; round < 2 && got == 0 && !woken; round++ {
		ms := 0
		if round == 1 {
			if wait <= 0 {
				break
			}
			ms = int(max((wait+time.Millisecond-1)/time.Millisecond, 1))
		}
		n, err := unix.EpollWait(d.epfd, d.events, ms)
		switch {
		case err == unix.EINTR && d.closed.Load():
			d.unstage()
			return 0, nic.ErrClosed
		case err == unix.EINTR:
			round-- // a signal, not the end of the wait: wait again
			continue
		case err != nil:
			if d.closed.Load() {
				d.unstage()
				return 0, nic.ErrClosed
			}
			return 0, fmt.Errorf("udp: epoll_wait: %w", err)
		}
		if d.closed.Load() {
			d.unstage()
			return 0, nic.ErrClosed
		}
		d.rr++
		for k := range n {
			e := &d.events[(k+d.rr)%n]
			if e.Fd == epollWake { // WakeRecv: reset the eventfd
				var buf [8]byte
				_, _, _ = unix.Syscall(unix.SYS_READ, uintptr(d.rx.pollFds[1].Fd), uintptr(unsafe.Pointer(&buf[0])), 8)
				woken = true // a wake-up before the wait ends the next wait
			}
			if e.Fd < 0 {
				continue // a wake-up: WakeRecv's or Close's
			}
			port := uint16(e.Fd)
			var s *rxSock
			for _, x := range socks {
				if x.port == port {
					s = x
				}
			}
			if s == nil || got == want {
				continue // removed meanwhile; or no slot left: next call
			}
			d.rx.off, d.rx.want, d.rx.block = got, want-got, false
			err := s.raw.Read(d.rx.call)
			switch {
			case err == nil && d.rx.errno != 0:
				return d.received(got), fmt.Errorf("udp: recvmmsg on port %d: %w", port, d.rx.errno)
			case err != nil && (errors.Is(err, net.ErrClosed) || d.closed.Load()):
				if d.closed.Load() {
					d.unstage()
					return 0, nic.ErrClosed
				}
				continue // this port was removed
			case err != nil:
				return d.received(got), fmt.Errorf("udp: receive on port %d: %w", port, err)
			}
			now, wall := d.clocks()
			d.fill(bufs, got, d.rx.got, port, now, wall)
			got += d.rx.got
		}
	}
	return d.received(got), nil
}

// stage makes sure the first want receive slots hold a buffer and returns
// how many leading slots do (fewer when the pool runs dry).
func (d *Dataplane) stage(want int) int {
	r := &d.rx
	added := 0
	for i := range want {
		if r.bufs[i] != nil {
			continue
		}
		b := d.pool.Get()
		if b != nil {
			added++
		} else if b = r.takeLast(i + 1); b == nil {
			want = i
			break
		}
		r.setSlot(i, b)
	}
	d.staged.Add(int64(added))
	return want
}

// takeLast removes and returns the staged buffer in the highest slot at or
// after from, or nil when there is none.
func (r *rxState) takeLast(from int) *nic.Buffer {
	for j := len(r.bufs) - 1; j >= from; j-- {
		if b := r.bufs[j]; b != nil {
			r.bufs[j] = nil
			r.iovs[j].Base = nil
			return b
		}
	}
	return nil
}

func (r *rxState) setSlot(i int, b *nic.Buffer) {
	r.bufs[i] = b
	r.iovs[i].Base = &b.Data[0]
	r.iovs[i].SetLen(len(b.Data))
}

// unstage returns staged buffers to the pool (after Close).
func (d *Dataplane) unstage() {
	for i, b := range d.rx.bufs {
		if b != nil {
			d.rx.bufs[i] = nil
			d.rx.iovs[i].Base = nil
			d.staged.Add(-1)
			d.pool.Put(b)
		}
	}
}

// rxState is the net worker's recvmmsg state, reused on every call.
type rxState struct {
	hdrs  []unix.Mmsghdr
	iovs  []unix.Iovec
	names [][sockaddrLen]byte
	ctrl  [][cmsgRoom]byte
	bufs  []*nic.Buffer // staged buffers, one per slot
	call  func(fd uintptr) bool
	// pollCall and its state: Config.KernelWait.
	pollCall func(fd uintptr) bool
	pollFds  []unix.PollFd
	timeout  unix.Timespec

	off   int // first slot of this call
	want  int
	block bool
	got   int
	errno syscall.Errno
	// drained: the last receive on the main socket took fewer datagrams
	// than it asked for, so the socket was empty then; a waiting Recv
	// under KernelWait then goes straight to ppoll (which returns at once
	// if a datagram came since), one system call fewer per wake-up.
	drained bool
}

func (r *rxState) init(batch int) {
	r.hdrs = make([]unix.Mmsghdr, batch)
	r.iovs = make([]unix.Iovec, batch)
	r.names = make([][sockaddrLen]byte, batch)
	r.ctrl = make([][cmsgRoom]byte, batch)
	r.bufs = make([]*nic.Buffer, batch)
	for i := range r.hdrs {
		r.hdrs[i].Hdr.Iov = &r.iovs[i]
		r.hdrs[i].Hdr.SetIovlen(1)
		r.hdrs[i].Hdr.Name = &r.names[i][0]
		r.hdrs[i].Hdr.Control = &r.ctrl[i][0]
	}
	r.call = r.recvmmsg // bound once: passing it to RawConn.Read allocates nothing
	r.pollCall = r.pollRecvmmsg
	r.pollFds = make([]unix.PollFd, 1, 2)
}

// pollRecvmmsg runs inside RawConn.Read (Config.KernelWait): it waits in
// ppoll(2) on this thread for up to r.timeout, then receives.
func (r *rxState) pollRecvmmsg(fd uintptr) bool {
	r.pollFds[0] = unix.PollFd{Fd: int32(fd), Events: unix.POLLIN}
	for {
		n, _, e := unix.Syscall6(unix.SYS_PPOLL, uintptr(unsafe.Pointer(&r.pollFds[0])), uintptr(len(r.pollFds)),
			uintptr(unsafe.Pointer(&r.timeout)), 0, 0, 0)
		switch {
		case e == unix.EINTR:
			continue
		case e != 0:
			r.got, r.errno = 0, e
			return true
		case n == 0: // timed out
			r.got, r.errno = 0, 0
			return true
		}
		if len(r.pollFds) > 1 && r.pollFds[1].Revents != 0 { // WakeRecv: reset the eventfd
			var buf [8]byte
			_, _, _ = unix.Syscall(unix.SYS_READ, uintptr(r.pollFds[1].Fd), uintptr(unsafe.Pointer(&buf[0])), 8)
		}
		r.block = false
		r.recvmmsg(fd)
		return true
	}
}

// RecvWakeable reports whether WakeRecv can end a waiting Recv: with
// Config.KernelWait.
func (d *Dataplane) RecvWakeable() bool { return d.wake != nil }

// WakeRecv ends a Recv waiting in the kernel (Config.KernelWait) at once,
// or makes the next waiting Recv return at once; it may be called from any
// goroutine and costs one write(2). Without KernelWait it does nothing.
func (d *Dataplane) WakeRecv() {
	if d.wake != nil {
		_, _ = d.wake.Write(d.wakeBuf[:])
	}
}

// stamp returns the kernel's receive timestamp of message i (ns since the
// Unix epoch), if the kernel attached one.
func (r *rxState) stamp(i int) (int64, bool) {
	h := &r.hdrs[i].Hdr
	c := r.ctrl[i][:]
	if h.Controllen < cmsgRoom || h.Flags&unix.MSG_CTRUNC != 0 {
		return 0, false
	}
	hdr := (*unix.Cmsghdr)(unsafe.Pointer(&c[0]))
	if hdr.Level != unix.SOL_SOCKET || hdr.Type != unix.SCM_TIMESTAMPNS || hdr.Len < cmsgRoom {
		return 0, false
	}
	ts := (*unix.Timespec)(unsafe.Pointer(&c[unix.SizeofCmsghdr]))
	return ts.Nano(), true
}

// recvmmsg runs inside RawConn.Read; returning false asks the poller to wait
// for the socket to become readable.
func (r *rxState) recvmmsg(fd uintptr) bool {
	for i := range r.want {
		r.hdrs[r.off+i].Hdr.Namelen = sockaddrLen
		r.hdrs[r.off+i].Hdr.SetControllen(cmsgRoom)
	}
	for {
		n, _, e := unix.Syscall6(unix.SYS_RECVMMSG, fd, uintptr(unsafe.Pointer(&r.hdrs[r.off])), uintptr(r.want),
			unix.MSG_TRUNC|unix.MSG_DONTWAIT, 0, 0)
		switch e {
		case 0:
			r.got, r.errno = int(n), 0
			return true
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			r.got, r.errno = 0, 0
			return !r.block
		default:
			r.got, r.errno = 0, e
			return true
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

// AllocReply implements nic.ReplyAllocator: a free pool buffer addressed to
// req's peer, or nil when the pool is empty (or the dataplane is closed).
func (d *Dataplane) AllocReply(req *nic.Buffer) *nic.Buffer {
	if d.closed.Load() {
		return nil
	}
	b := d.pool.Get()
	if b == nil {
		return nil
	}
	b.Peer, b.DstPort, b.RxTime = req.Peer, req.DstPort, req.RxTime
	return b
}

// Release implements nic.Dataplane.
func (d *Dataplane) Release(bufs ...*nic.Buffer) {
	for _, b := range bufs {
		d.pool.Put(b)
	}
}

// Stats implements nic.Dataplane. RxDropped is the kernel's count of
// datagrams dropped at the receive socket (its buffer was full: raise
// Config.ReadBuffer and net.core.rmem_max); after Close it stays at its last
// value.
func (d *Dataplane) Stats() nic.Stats {
	s := nic.Stats{RxPackets: d.rxPackets.Load(), RxTruncated: d.rxTruncated.Load(), RxNoBuffer: d.rxNoBuffer.Load()}
	s.RxDropped = d.kernelDrops()
	for _, q := range d.tx {
		s.TxPackets += q.txPackets.Load()
		s.TxErrors += q.txErrors.Load()
	}
	return s
}

// kernelDrops returns the receive socket's drop count (SO_MEMINFO).
func (d *Dataplane) kernelDrops() uint64 {
	m := &d.meminfo
	m.mu.Lock()
	defer m.mu.Unlock()
	if !d.closed.Load() {
		if err := d.raw.Control(m.call); err != nil {
			m.ok = false
		}
	}
	if !m.ok {
		return 0
	}
	return uint64(m.vals[unix.SK_MEMINFO_DROPS])
}

// Close implements nic.Dataplane. It is idempotent.
func (d *Dataplane) Close() error {
	d.closeOnce.Do(func() {
		d.closed.Store(true)
		d.portsMu.Lock()
		defer d.portsMu.Unlock()
		errs := []error{d.conn.Close()}
		if d.wakeFd >= 0 {
			var one [8]byte
			one[0] = 1
			unix.Write(d.wakeFd, one[:]) // ends an epoll_wait in Recv
			if !d.waiting.Load() {
				d.closeEpoll() // else the waiting Recv closes it, once woken
			}
		}
		if p := d.socks.Load(); p != nil {
			for _, s := range (*p)[1:] {
				errs = append(errs, s.conn.Close())
			}
		}
		if d.wake != nil { // after the socket: no Recv polls it any more
			errs = append(errs, d.wake.Close())
		}
		for _, q := range d.tx {
			errs = append(errs, q.conn.Close())
			if p := q.socks.Load(); p != nil {
				for _, s := range (*p)[1:] {
					errs = append(errs, s.conn.Close())
				}
			}
		}
		if err := errors.Join(errs...); err != nil {
			d.closeErr = fmt.Errorf("udp: close: %w", err)
		}
	})
	return d.closeErr
}

// txQueue is one worker's transmit queue on its own descriptor (one per
// port: a reply leaves from the port its request came to).
type txQueue struct {
	d     *Dataplane
	conn  socket
	raw   syscall.RawConn
	socks atomic.Pointer[[]*txSock] // every port's, Addr's first
	hdrs  []unix.Mmsghdr
	iovs  []unix.Iovec
	names [][sockaddrLen]byte
	call  func(fd uintptr) bool

	n, off, sent, failed int
	firstErr             syscall.Errno

	txPackets atomic.Uint64
	txErrors  atomic.Uint64
	_         [64]byte // keep workers' counters off each other's cache lines
}

func newTxQueue(d *Dataplane, fd int) (*txQueue, error) {
	conn, err := d.txSocket(fd)
	if err != nil {
		return nil, err
	}
	q := &txQueue{d: d, conn: conn}
	if q.raw, err = q.conn.SyscallConn(); err != nil {
		q.conn.Close()
		return nil, err
	}
	q.socks.Store(&[]*txSock{{port: 0, conn: q.conn, raw: q.raw}})
	batch := d.cfg.Batch
	q.hdrs = make([]unix.Mmsghdr, batch)
	q.iovs = make([]unix.Iovec, batch)
	q.names = make([][sockaddrLen]byte, batch)
	for i := range q.hdrs {
		q.hdrs[i].Hdr.Iov = &q.iovs[i]
		q.hdrs[i].Hdr.SetIovlen(1)
		q.hdrs[i].Hdr.Name = &q.names[i][0]
	}
	q.call = q.sendmmsg
	return q, nil
}

// txSocket turns fd, a duplicate of a receive socket's descriptor that
// the caller hands over, into a transmit queue's socket.
func (d *Dataplane) txSocket(fd int) (socket, error) {
	if d.cfg.KernelWait {
		return &unpolled{fd: fd}, nil
	}
	f := os.NewFile(uintptr(fd), "udp-tx")
	pc, err := net.FilePacketConn(f) // dups fd again
	f.Close()
	if err != nil {
		return nil, err
	}
	return pc.(*net.UDPConn), nil
}

// Send implements nic.TxQueue. Datagrams that cannot be sent (an address
// of the other family, a kernel error) are counted in Stats.TxErrors; the
// first such error is returned. After Close it returns nic.ErrClosed.
func (q *txQueue) Send(bufs []*nic.Buffer) (int, error) {
	if socks := *q.socks.Load(); len(socks) > 1 {
		return q.sendPorts(bufs, socks)
	}
	return q.send(bufs, q.raw)
}

// sendPorts sends each buffer from the socket of its DstPort (Addr's when
// the port is not served any more): runs of one port at a time, reordering
// bufs (which Send owns).
func (q *txQueue) sendPorts(bufs []*nic.Buffer, socks []*txSock) (int, error) {
	total := 0
	var firstErr error
	for len(bufs) > 0 {
		port := bufs[0].DstPort
		k := 1
		for i := 1; i < len(bufs); i++ {
			if bufs[i].DstPort == port {
				bufs[i], bufs[k] = bufs[k], bufs[i]
				k++
			}
		}
		raw := q.raw
		for _, s := range socks[1:] {
			if s.port == port {
				raw = s.raw
			}
		}
		n, err := q.send(bufs[:k], raw)
		total += n
		if err != nil && firstErr == nil {
			firstErr = err
		}
		bufs = bufs[k:]
	}
	return total, firstErr
}

// send transmits bufs through the socket raw.
func (q *txQueue) send(bufs []*nic.Buffer, raw syscall.RawConn) (int, error) {
	d := q.d
	total, failed := 0, 0
	var firstErr error
	for len(bufs) > 0 {
		chunk := bufs[:min(len(bufs), len(q.hdrs))]
		bufs = bufs[len(chunk):]
		k := 0
		for _, b := range chunk {
			nl := encodeSockaddr(d.family, b.Peer, &q.names[k])
			if nl == 0 || b.Len < 0 || b.Len > len(b.Data) || len(b.Data) == 0 {
				failed++
				if firstErr == nil {
					firstErr = fmt.Errorf("udp: send to %v: bad peer or length %d", b.Peer, b.Len)
				}
				continue
			}
			q.iovs[k].Base = &b.Data[0]
			q.iovs[k].SetLen(b.Len)
			q.hdrs[k].Hdr.Namelen = uint32(nl)
			k++
		}
		q.n, q.off, q.sent, q.failed, q.firstErr = k, 0, 0, 0, 0
		var err error
		if k > 0 {
			err = raw.Write(q.call)
		}
		for i := range k {
			q.iovs[i].Base = nil // do not keep pool memory reachable from here
		}
		for _, b := range chunk {
			d.pool.Put(b)
		}
		total += q.sent
		failed += q.failed + (k - q.sent - q.failed) // unsent after an error
		switch {
		case err != nil && (errors.Is(err, net.ErrClosed) || d.closed.Load()):
			firstErr = nic.ErrClosed
		case err != nil && firstErr == nil:
			firstErr = fmt.Errorf("udp: send: %w", err)
		case q.firstErr != 0 && firstErr == nil:
			firstErr = fmt.Errorf("udp: sendmmsg: %w", q.firstErr)
		}
	}
	q.txPackets.Add(uint64(total))
	if failed > 0 {
		q.txErrors.Add(uint64(failed))
	}
	return total, firstErr
}

// sendmmsg runs inside RawConn.Write; returning false asks the poller to
// wait until the socket is writable.
func (q *txQueue) sendmmsg(fd uintptr) bool {
	for q.off < q.n {
		n, _, e := unix.Syscall6(unix.SYS_SENDMMSG, fd, uintptr(unsafe.Pointer(&q.hdrs[q.off])), uintptr(q.n-q.off),
			unix.MSG_DONTWAIT, 0, 0)
		switch e {
		case 0:
			q.off += int(n)
			q.sent += int(n)
		case unix.EINTR:
		case unix.EAGAIN:
			return false
		default: // the datagram at q.off failed: count it and go on
			if q.firstErr == 0 {
				q.firstErr = e
			}
			q.failed++
			q.off++
		}
	}
	return true
}

// parseSockaddr decodes a kernel sockaddr_in or sockaddr_in6; IPv4-mapped
// IPv6 addresses become IPv4.
func parseSockaddr(b []byte) netip.AddrPort {
	if len(b) < 4 {
		return netip.AddrPort{}
	}
	port := binary.BigEndian.Uint16(b[2:4])
	switch binary.NativeEndian.Uint16(b[0:2]) {
	case unix.AF_INET:
		if len(b) >= 8 {
			return netip.AddrPortFrom(netip.AddrFrom4([4]byte(b[4:8])), port)
		}
	case unix.AF_INET6:
		if len(b) >= 24 {
			return netip.AddrPortFrom(netip.AddrFrom16([16]byte(b[8:24])).Unmap(), port)
		}
	}
	return netip.AddrPort{}
}

// encodeSockaddr writes peer as a sockaddr of the socket's family and returns
// its length, or 0 when peer cannot be reached from such a socket.
func encodeSockaddr(family int, peer netip.AddrPort, b *[sockaddrLen]byte) int {
	ip := peer.Addr()
	switch {
	case !ip.IsValid():
		return 0
	case family == unix.AF_INET:
		if !ip.Is4() && !ip.Is4In6() {
			return 0
		}
		binary.NativeEndian.PutUint16(b[0:2], unix.AF_INET)
		binary.BigEndian.PutUint16(b[2:4], peer.Port())
		a := ip.Unmap().As4()
		copy(b[4:8], a[:])
		clear(b[8:16])
		return unix.SizeofSockaddrInet4
	default:
		binary.NativeEndian.PutUint16(b[0:2], unix.AF_INET6)
		binary.BigEndian.PutUint16(b[2:4], peer.Port())
		clear(b[4:8])  // flow info
		a := ip.As16() // IPv4 peers become IPv4-mapped
		copy(b[8:24], a[:])
		clear(b[24:28]) // scope id
		return unix.SizeofSockaddrInet6
	}
}

// rxSock is one port's receive socket.
type rxSock struct {
	port uint16
	conn socket
	raw  syscall.RawConn
	fd   int // for epoll: a descriptor of the socket, kept open with conn
}

// txSock is one port's transmit descriptor of a txQueue.
type txSock struct {
	port uint16
	conn socket
	raw  syscall.RawConn
}

// Ports returns the UDP ports the dataplane receives on, Addr's first.
func (d *Dataplane) Ports() []uint16 {
	socks := *d.socks.Load()
	ports := make([]uint16, len(socks))
	for i, s := range socks {
		ports[i] = s.port
	}
	return ports
}

// AddPort starts receiving on port (of Addr's IP) as well, with a socket of
// its own; replies to its requests leave from it. Safe while the dataplane
// runs. Adding a port served already does nothing.
func (d *Dataplane) AddPort(port uint16) error {
	if port == 0 {
		return fmt.Errorf("udp: add port 0: want a port number")
	}
	d.portsMu.Lock()
	defer d.portsMu.Unlock()
	if d.closed.Load() {
		return fmt.Errorf("udp: add port %d: %w", port, nic.ErrClosed)
	}
	old := *d.socks.Load()
	for _, s := range old {
		if s.port == port {
			return nil
		}
	}
	addr := netip.AddrPortFrom(d.addr.Addr(), port)
	pc, err := listenPort(addr)
	if err != nil {
		return fmt.Errorf("udp: listen on %s: %w", addr, err)
	}
	uc := pc.(*net.UDPConn)
	if err := uc.SetReadBuffer(d.cfg.ReadBuffer); err != nil {
		uc.Close()
		return fmt.Errorf("udp: port %d: set SO_RCVBUF: %w", port, err)
	}
	conn, err := d.adopt(uc)
	if err != nil {
		return fmt.Errorf("udp: port %d: %w", port, err)
	}
	s := &rxSock{port: port, conn: conn, fd: -1}
	fail := func(err error) error {
		conn.Close()
		return err
	}
	if s.raw, err = conn.SyscallConn(); err != nil {
		return fail(fmt.Errorf("udp: port %d: %w", port, err))
	}
	// Dups: one for epoll, one per transmit queue.
	var dups []int
	cerr := s.raw.Control(func(fd uintptr) {
		if err = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1); err != nil {
			err = fmt.Errorf("SO_TIMESTAMPNS: %w", err)
			return
		}
		for range 1 + len(d.tx) {
			var dup int
			if dup, err = unix.FcntlInt(fd, unix.F_DUPFD_CLOEXEC, 0); err != nil {
				return
			}
			dups = append(dups, dup)
		}
	})
	if cerr != nil {
		err = cerr
	}
	closeDups := func() {
		for _, fd := range dups {
			unix.Close(fd)
		}
	}
	if err != nil {
		closeDups()
		return fail(fmt.Errorf("udp: port %d: dup: %w", port, err))
	}
	if d.epfd < 0 {
		if err := d.initEpoll(); err != nil {
			closeDups()
			return fail(err)
		}
	}
	s.fd = dups[0]
	if err := unix.EpollCtl(d.epfd, unix.EPOLL_CTL_ADD, s.fd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(port)}); err != nil {
		closeDups()
		return fail(fmt.Errorf("udp: port %d: epoll: %w", port, err))
	}
	var txs []*txSock
	for i, q := range d.tx {
		tc, err := d.txSocket(dups[1+i])
		if err == nil {
			var raw syscall.RawConn
			if raw, err = tc.SyscallConn(); err == nil {
				txs = append(txs, &txSock{port: port, conn: tc, raw: raw})
				continue
			}
			tc.Close()
		}
		for _, t := range txs {
			t.conn.Close()
		}
		for _, fd := range dups[2+i:] {
			unix.Close(fd)
		}
		unix.EpollCtl(d.epfd, unix.EPOLL_CTL_DEL, s.fd, nil)
		unix.Close(s.fd)
		_ = q
		return fail(fmt.Errorf("udp: port %d: transmit queue %d: %w", port, i, err))
	}
	for i, q := range d.tx {
		cur := *q.socks.Load()
		next := append(append(make([]*txSock, 0, len(cur)+1), cur...), txs[i])
		q.socks.Store(&next)
	}
	next := append(append(make([]*rxSock, 0, len(old)+1), old...), s)
	d.socks.Store(&next)
	return nil
}

// A port just closed (RemovePort) may stay bound for a moment by a child
// process starting: fork copies every descriptor, and the child drops the
// close-on-exec ones only at exec, later if it is descheduled in between
// (measured up to 3.6 ms on a busy 2-core VM starting children; a
// server's compile children start at every hot swap). listenPort waits
// out such a child: EADDRINUSE is retried every bindRetryWait, at most
// bindRetries times.
const (
	bindRetries   = 100
	bindRetryWait = time.Millisecond
)

// listenPort binds a UDP socket to addr, retrying EADDRINUSE (see
// bindRetries).
func listenPort(addr netip.AddrPort) (net.PacketConn, error) {
	for i := 0; ; i++ {
		pc, err := net.ListenPacket("udp", addr.String())
		if err == nil || !errors.Is(err, syscall.EADDRINUSE) || i == bindRetries {
			return pc, err
		}
		time.Sleep(bindRetryWait)
	}
}

// RemovePort stops receiving on port (not Addr's) and closes its sockets;
// replies still owed to its requests leave from Addr's port. Safe while the
// dataplane runs.
func (d *Dataplane) RemovePort(port uint16) error {
	d.portsMu.Lock()
	defer d.portsMu.Unlock()
	if port == d.addr.Port() {
		return fmt.Errorf("udp: remove port %d: it is the listen address's", port)
	}
	old := *d.socks.Load()
	i := slices.IndexFunc(old, func(s *rxSock) bool { return s.port == port })
	if i < 0 {
		return nil
	}
	s := old[i]
	next := slices.Delete(slices.Clone(old), i, i+1)
	d.socks.Store(&next)
	unix.EpollCtl(d.epfd, unix.EPOLL_CTL_DEL, s.fd, nil)
	unix.Close(s.fd)
	errs := []error{s.conn.Close()}
	for _, q := range d.tx {
		cur := *q.socks.Load()
		if j := slices.IndexFunc(cur, func(t *txSock) bool { return t.port == port }); j >= 0 {
			t := cur[j]
			nt := slices.Delete(slices.Clone(cur), j, j+1)
			q.socks.Store(&nt)
			errs = append(errs, t.conn.Close())
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("udp: remove port %d: %w", port, err)
	}
	return nil
}

// closeEpoll closes the epoll set, its eventfd and the descriptors it
// watches, once.
func (d *Dataplane) closeEpoll() {
	if d.epfd < 0 || !d.epDone.CompareAndSwap(false, true) {
		return
	}
	for _, s := range *d.socks.Load() {
		if s.fd >= 0 {
			unix.Close(s.fd)
		}
	}
	unix.Close(d.epfd)
	unix.Close(d.wakeFd)
}

// initEpoll creates the epoll set of the receive sockets (Addr's first)
// and the eventfd Close writes to.
func (d *Dataplane) initEpoll() error {
	ep, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return fmt.Errorf("udp: epoll_create: %w", err)
	}
	wake, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		unix.Close(ep)
		return fmt.Errorf("udp: eventfd: %w", err)
	}
	var main int
	cerr := d.raw.Control(func(fd uintptr) { main, err = unix.FcntlInt(fd, unix.F_DUPFD_CLOEXEC, 0) })
	if cerr != nil {
		err = cerr
	}
	if err == nil {
		err = unix.EpollCtl(ep, unix.EPOLL_CTL_ADD, main, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(d.addr.Port())})
	}
	if err == nil {
		err = unix.EpollCtl(ep, unix.EPOLL_CTL_ADD, wake, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: epollClose})
	}
	if err == nil && d.wake != nil { // WakeRecv (Config.KernelWait) ends the wait too
		err = unix.EpollCtl(ep, unix.EPOLL_CTL_ADD, int(d.rx.pollFds[1].Fd), &unix.EpollEvent{Events: unix.EPOLLIN, Fd: epollWake})
	}
	if err != nil {
		unix.Close(ep)
		unix.Close(wake)
		return fmt.Errorf("udp: epoll: %w", err)
	}
	(*d.socks.Load())[0].fd = main
	d.epfd, d.wakeFd = ep, wake
	d.events = make([]unix.EpollEvent, 64)
	return nil
}
