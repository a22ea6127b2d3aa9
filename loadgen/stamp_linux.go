//go:build linux

package loadgen

import (
	"net"
	"unsafe"

	"golang.org/x/sys/unix"
)

// stampRoom is the room for the control message carrying a datagram's
// kernel receive timestamp (SCM_TIMESTAMPNS, a struct timespec).
const stampRoom = unix.SizeofCmsghdr + 16

// enableRxStamps asks the kernel to stamp each datagram conn receives with
// its arrival time, so that a reply's time is when it reached this host,
// not when the receiving goroutine got to run.
func enableRxStamps(conn *net.UDPConn) bool {
	raw, err := conn.SyscallConn()
	if err != nil {
		return false
	}
	ok := false
	_ = raw.Control(func(fd uintptr) {
		ok = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1) == nil
	})
	return ok
}

// rxStamp returns the kernel receive timestamp (ns since the Unix epoch) in
// a datagram's control messages, if there is one.
func rxStamp(oob []byte) (int64, bool) {
	for len(oob) >= unix.SizeofCmsghdr {
		h := (*unix.Cmsghdr)(unsafe.Pointer(&oob[0]))
		if h.Len < unix.SizeofCmsghdr || int(h.Len) > len(oob) {
			return 0, false
		}
		if h.Level == unix.SOL_SOCKET && h.Type == unix.SCM_TIMESTAMPNS && int(h.Len) >= stampRoom {
			ts := (*unix.Timespec)(unsafe.Pointer(&oob[unix.SizeofCmsghdr]))
			return ts.Nano(), true
		}
		oob = oob[min(len(oob), unix.CmsgSpace(int(h.Len)-unix.SizeofCmsghdr)):]
	}
	return 0, false
}
