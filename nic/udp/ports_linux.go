//go:build linux

package udp

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/persephone-go/psp/internal/sockstat"
	"github.com/persephone-go/psp/nic"
)

// Identifiers of the epoll set's eventfds (Recv with several ports): the
// sockets' are their ports.
const (
	epollClose = -1 // written by Close
	epollWake  = -2 // Dataplane.wake, written by WakeRecv
)

// rxSock is one port's receive socket.
type rxSock struct {
	port  uint16
	conn  socket
	raw   syscall.RawConn
	fd    int            // for epoll: a descriptor of the socket, kept open with conn
	drops sockstat.Drops // the kernel's drops at the socket
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
	cerr := s.raw.Control(func(fd uintptr) { dups, err = stampAndDup(fd, 1+len(d.tx)) })
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
// (milliseconds on a busy machine starting children; a server's compile
// children start at every hot swap). listenPort waits
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
	// Its drops stay counted in Stats (read before the socket closes; a
	// Stats running meanwhile may miss the last few).
	n, _ := s.drops.Read(s.raw)
	d.retiredDrops.Add(n)
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

// RecvFds returns a descriptor of each receive socket, for a caller that
// waits for input beside its own (a dataplane joined with this one, see
// package nic/join). They stay the dataplane's, open until RemovePort or
// Close: the caller only polls them.
func (d *Dataplane) RecvFds() []int {
	var fds []int
	for _, s := range *d.socks.Load() {
		s.raw.Control(func(fd uintptr) { fds = append(fds, int(fd)) })
	}
	return fds
}

// Owns reports whether b is one of the dataplane's buffers.
func (d *Dataplane) Owns(b *nic.Buffer) bool { return d.pool.Owns(b) }
