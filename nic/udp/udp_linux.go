//go:build linux

package udp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/persephone-go/psp/nic"
	"github.com/persephone-go/psp/nic/internal/bufpool"
)

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

	// retiredDrops are the kernel drops of the sockets of ports removed.
	retiredDrops atomic.Uint64
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

// stampAndDup turns on the kernel's receive timestamps of the socket fd
// (SO_TIMESTAMPNS: each datagram is stamped when it arrives, so RxTime
// covers the time it waited for the net worker to read it) and returns n
// close-on-exec duplicates of fd (after an error, those made so far).
func stampAndDup(fd uintptr, n int) ([]int, error) {
	if err := unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1); err != nil {
		return nil, fmt.Errorf("SO_TIMESTAMPNS: %w", err)
	}
	dups := make([]int, 0, n)
	for range n {
		dup, err := unix.FcntlInt(fd, unix.F_DUPFD_CLOEXEC, 0)
		if err != nil {
			return dups, err
		}
		dups = append(dups, dup)
	}
	return dups, nil
}

func (d *Dataplane) setup() error {
	var err error
	if d.raw, err = d.conn.SyscallConn(); err != nil {
		return fmt.Errorf("udp: raw socket: %w", err)
	}
	var sa unix.Sockaddr
	var dups []int
	cerr := d.raw.Control(func(fd uintptr) {
		if sa, err = unix.Getsockname(int(fd)); err == nil {
			dups, err = stampAndDup(fd, d.cfg.Workers) // the transmit queues'
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

// Release implements nic.Dataplane.
func (d *Dataplane) Release(bufs ...*nic.Buffer) {
	for _, b := range bufs {
		d.pool.Put(b)
	}
}

// Stats implements nic.Dataplane. RxDropped is the kernel's count of
// datagrams dropped at the receive sockets, every port's and the removed
// ports' (their buffer was full: raise Config.ReadBuffer and
// net.core.rmem_max); after Close it stays at its last value.
func (d *Dataplane) Stats() nic.Stats {
	s := nic.Stats{RxPackets: d.rxPackets.Load(), RxTruncated: d.rxTruncated.Load(), RxNoBuffer: d.rxNoBuffer.Load()}
	s.RxDropped = d.retiredDrops.Load()
	for _, sock := range *d.socks.Load() {
		n, _ := sock.drops.Read(sock.raw)
		s.RxDropped += n
	}
	for _, q := range d.tx {
		s.TxPackets += q.txPackets.Load()
		s.TxErrors += q.txErrors.Load()
	}
	return s
}

// PortDrops is the kernel's count of datagrams dropped at one port's
// receive socket.
type PortDrops struct {
	Port  uint16 `json:"port"`
	Drops uint64 `json:"drops"`
}

// PortDrops returns each port's kernel drops (Stats.RxDropped adds them
// up, with the removed ports'), Addr's first. Safe from any goroutine.
func (d *Dataplane) PortDrops() []PortDrops {
	socks := *d.socks.Load()
	out := make([]PortDrops, len(socks))
	for i, sock := range socks {
		n, _ := sock.drops.Read(sock.raw)
		out[i] = PortDrops{Port: sock.port, Drops: n}
	}
	return out
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
