//go:build linux

package udp

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// socket is what the dataplane needs of a UDP socket: a *net.UDPConn, or
// an unpolled descriptor (Config.KernelWait).
type socket interface {
	SyscallConn() (syscall.RawConn, error)
	SetReadDeadline(t time.Time) error
	Close() error
}

// errNoDeadline: an unpolled socket has no deadlines (its reads wait in
// ppoll with a timeout of their own).
var errNoDeadline = errors.New("udp: unpolled socket: no deadlines")

// unpollWait is how long an unpolled socket's Read or Write waits in one
// ppoll for its descriptor before it checks whether it was closed.
const unpollWait = time.Millisecond

// unpolled is a socket descriptor that Go's network poller does not watch,
// for a dataplane whose threads wait for their sockets themselves
// (Config.KernelWait: the dispatcher in ppoll, transmit queues that never
// wait in practice). The poller watches its descriptors edge-triggered:
// every datagram received and every datagram's send-buffer space returned
// wakes a thread blocked in the poller that then finds nothing to do,
// which doubled the CPU spent per request in front of a loopback client
// (one epoll_pwait per datagram, measured with strace). It implements
// syscall.RawConn itself: Read and Write call f until it reports done,
// waiting in ppoll in between.
type unpolled struct {
	fd     int
	mu     sync.RWMutex // held shared by every call on fd, exclusively by Close
	closed atomic.Bool
}

// unpoll moves c's socket out of Go's poller: it duplicates the
// descriptor and closes c (which removes it from the poller); the caller
// owns the result.
func unpoll(c *net.UDPConn) (*unpolled, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		c.Close()
		return nil, err
	}
	dup := -1
	cerr := raw.Control(func(fd uintptr) { dup, err = unix.FcntlInt(fd, unix.F_DUPFD_CLOEXEC, 0) })
	c.Close()
	if err = errors.Join(cerr, err); err != nil {
		if dup >= 0 {
			unix.Close(dup)
		}
		return nil, fmt.Errorf("udp: duplicate socket: %w", err)
	}
	return &unpolled{fd: dup}, nil
}

// SyscallConn returns u itself.
func (u *unpolled) SyscallConn() (syscall.RawConn, error) { return u, nil }

// SetReadDeadline is not supported: it returns errNoDeadline.
func (u *unpolled) SetReadDeadline(time.Time) error { return errNoDeadline }

// Control implements syscall.RawConn.
func (u *unpolled) Control(f func(fd uintptr)) error {
	u.mu.RLock()
	defer u.mu.RUnlock()
	if u.closed.Load() {
		return net.ErrClosed
	}
	f(uintptr(u.fd))
	return nil
}

// Read implements syscall.RawConn: f is called until it returns true,
// with a wait for the descriptor to become readable in between.
func (u *unpolled) Read(f func(fd uintptr) bool) error { return u.io(f, unix.POLLIN) }

// Write implements syscall.RawConn: f is called until it returns true,
// with a wait for the descriptor to become writable in between.
func (u *unpolled) Write(f func(fd uintptr) bool) error { return u.io(f, unix.POLLOUT) }

func (u *unpolled) io(f func(fd uintptr) bool, events int16) error {
	u.mu.RLock()
	defer u.mu.RUnlock()
	for {
		if u.closed.Load() {
			return net.ErrClosed
		}
		if f(uintptr(u.fd)) {
			return nil
		}
		fds := [1]unix.PollFd{{Fd: int32(u.fd), Events: events}}
		ts := unix.NsecToTimespec(int64(unpollWait))
		_, _, e := unix.Syscall6(unix.SYS_PPOLL, uintptr(unsafe.Pointer(&fds[0])), 1, uintptr(unsafe.Pointer(&ts)), 0, 0, 0)
		if e != 0 && e != unix.EINTR {
			return fmt.Errorf("udp: ppoll: %w", e)
		}
	}
}

// Close closes the descriptor once no call uses it (a waiting one returns
// within unpollWait, or its own timeout for a Recv waiting in ppoll).
func (u *unpolled) Close() error {
	if u.closed.Swap(true) {
		return net.ErrClosed
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	return unix.Close(u.fd)
}
