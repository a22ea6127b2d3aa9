//go:build linux

package udp

import (
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/persephone-go/psp/nic"
)

// cmsgRoom is the room for one control message: the kernel's receive
// timestamp (SCM_TIMESTAMPNS, a struct timespec).
const cmsgRoom = unix.SizeofCmsghdr + 16

// noBufferWait is how long a waiting Recv sleeps when every buffer is in use
// (buffer returns do not wake it).
const noBufferWait = 50 * time.Microsecond

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
