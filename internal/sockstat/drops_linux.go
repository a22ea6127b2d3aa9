//go:build linux

package sockstat

import (
	"sync"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Drops reads one socket's kernel drop counter. The zero value is ready.
type Drops struct {
	mu   sync.Mutex
	vals [unix.SK_MEMINFO_VARS]uint32
	last uint64 // the last count read
	ok   bool   // the last getsockopt succeeded
	call func(fd uintptr)
}

func (d *Drops) read(fd uintptr) {
	size := uint32(unsafe.Sizeof(d.vals))
	_, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, fd, unix.SOL_SOCKET, unix.SO_MEMINFO,
		uintptr(unsafe.Pointer(&d.vals[0])), uintptr(unsafe.Pointer(&size)), 0)
	d.ok = e == 0 && size > unix.SK_MEMINFO_DROPS*4
}

// Read returns the datagrams the kernel dropped at raw's socket since it
// was opened. ok is false when the kernel does not say (then n is the last
// count read, or 0); after the socket is closed Read returns the last
// count it read.
func (d *Drops) Read(raw syscall.RawConn) (n uint64, ok bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.call == nil {
		d.call = d.read
	}
	if err := raw.Control(d.call); err != nil || !d.ok {
		return d.last, false
	}
	d.last = uint64(d.vals[unix.SK_MEMINFO_DROPS])
	return d.last, true
}
