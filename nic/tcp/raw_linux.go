//go:build linux

package tcp

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// The receive loop and the writers make their non-blocking system calls
// (read, sendmsg and epoll_wait without a timeout on non-blocking sockets)
// as raw calls: none of them can block, so the goroutine keeps its P
// through the call instead of handing it to the scheduler and taking it
// back after (entersyscall and exitsyscall; a call the scheduler's monitor
// finds in progress has its P handed to another thread, which then has to
// be woken and put back to sleep). A wait with a timeout goes through the
// scheduler as usual.

// readRaw reads from the non-blocking fd into p.
func readRaw(fd int, p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	n, _, e := unix.RawSyscall(unix.SYS_READ, uintptr(fd), uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}

// sendmsgRaw sends msg on the non-blocking fd.
func sendmsgRaw(fd int, msg *unix.Msghdr, flags int) (int, unix.Errno) {
	n, _, e := unix.RawSyscall(unix.SYS_SENDMSG, uintptr(fd), uintptr(unsafe.Pointer(msg)), uintptr(flags))
	return int(n), e
}

// epollWait waits up to timeout ms for events on epfd; a timeout of 0
// only polls, as a raw call.
func epollWait(epfd int, events []unix.EpollEvent, timeout int) (int, error) {
	if timeout != 0 {
		return unix.EpollWait(epfd, events, timeout)
	}
	n, _, e := unix.RawSyscall6(unix.SYS_EPOLL_PWAIT, uintptr(epfd), uintptr(unsafe.Pointer(&events[0])), uintptr(len(events)), 0, 0, 0)
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}
