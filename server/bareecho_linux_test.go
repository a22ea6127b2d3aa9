//go:build linux

package server

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// bareEcho is the least a UDP server can do on this kernel: one locked
// thread polling a non-blocking socket with SO_TIMESTAMPNS (yielding its
// CPU after each empty poll, as psp's polling dispatcher does), echoing
// each datagram to its sender with sendto and timing it as psp's stages
// do, from the kernel's receive stamp.
type bareEcho struct {
	addr                       string
	fd                         int
	quit                       atomic.Bool
	done                       chan struct{}
	mu                         sync.Mutex // guards the three lists while the echo runs
	latency, receive, transmit durations
}

// startBareEcho starts a bareEcho on a free loopback port; the benchmark's
// cleanup stops it.
func startBareEcho(b *testing.B) *bareEcho {
	b.Helper()
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		b.Fatalf("bare echo: socket: %v", err)
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1); err != nil {
		b.Fatalf("bare echo: SO_TIMESTAMPNS: %v", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		b.Fatalf("bare echo: bind: %v", err)
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		b.Fatalf("bare echo: getsockname: %v", err)
	}
	e := &bareEcho{addr: fmt.Sprintf("127.0.0.1:%d", sa.(*unix.SockaddrInet4).Port), fd: fd, done: make(chan struct{})}
	go e.run()
	b.Cleanup(func() { e.stop(b) })
	return e
}

// run is the echo thread's loop.
func (e *bareEcho) run() {
	defer close(e.done)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	buf := make([]byte, 2048)
	oob := make([]byte, unix.CmsgSpace(int(unsafe.Sizeof(unix.Timespec{}))))
	var from unix.RawSockaddrAny
	iov := unix.Iovec{Base: &buf[0]}
	iov.SetLen(len(buf))
	var msg unix.Msghdr
	msg.Name = (*byte)(unsafe.Pointer(&from))
	msg.Iov = &iov
	msg.Iovlen = 1
	msg.Control = &oob[0]
	for !e.quit.Load() {
		// Preset every call, and no allocation while polling (garbage
		// would bring the collector's work onto this process's cores).
		msg.Namelen = uint32(unsafe.Sizeof(from))
		msg.SetControllen(len(oob))
		n, _, errno := unix.Syscall(unix.SYS_RECVMSG, uintptr(e.fd), uintptr(unsafe.Pointer(&msg)), unix.MSG_DONTWAIT)
		if errno != 0 { // EAGAIN: yield, as psp's polling dispatcher does, and poll again
			_, _, _ = unix.RawSyscall(unix.SYS_SCHED_YIELD, 0, 0, 0)
			continue
		}
		received := time.Now()
		_, _, _ = unix.Syscall6(unix.SYS_SENDTO, uintptr(e.fd), uintptr(unsafe.Pointer(&buf[0])), n, 0,
			uintptr(unsafe.Pointer(&from)), uintptr(msg.Namelen))
		sent := time.Now()
		oobn := int(msg.Controllen)
		msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
		if err != nil || len(msgs) == 0 || msgs[0].Header.Type != unix.SCM_TIMESTAMPNS || len(msgs[0].Data) < int(unsafe.Sizeof(unix.Timespec{})) {
			continue
		}
		ts := (*unix.Timespec)(unsafe.Pointer(&msgs[0].Data[0]))
		stamp := time.Unix(ts.Unix())
		e.mu.Lock()
		e.receive = append(e.receive, received.Sub(stamp))
		e.transmit = append(e.transmit, sent.Sub(received))
		e.latency = append(e.latency, sent.Sub(stamp))
		e.mu.Unlock()
	}
}

// reset forgets what was measured so far.
func (e *bareEcho) reset() {
	e.mu.Lock()
	e.latency, e.receive, e.transmit = e.latency[:0], e.receive[:0], e.transmit[:0]
	e.mu.Unlock()
}

// stop ends the echo (once; later calls only return the lists) and
// returns what it measured.
func (e *bareEcho) stop(b *testing.B) (latency, receive, transmit durations) {
	if e.quit.CompareAndSwap(false, true) {
		<-e.done
		if err := unix.Close(e.fd); err != nil {
			b.Errorf("bare echo: close: %v", err)
		}
	}
	return e.latency, e.receive, e.transmit
}
