//go:build linux

package dispatcher

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// parkTimeout bounds one futex sleep, so that a worker re-checks its ring
// and the stop flag at least this often even if a wake-up were lost.
const parkTimeout = 100e6 // 100ms

// futex(2) operations (linux/futex.h; x/sys/unix does not name them).
const (
	futexWait        = 0
	futexWake        = 1
	futexPrivateFlag = 128
)

var parkTimeoutSpec = unix.NsecToTimespec(parkTimeout)

// block sleeps in futex(2) while the state is parkAsleep.
func (p *parker) block() {
	_, _, _ = unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(&p.state)),
		futexWait|futexPrivateFlag, uintptr(parkAsleep), uintptr(unsafe.Pointer(&parkTimeoutSpec)), 0, 0)
}

// unblock wakes the thread sleeping in block, if any.
func (p *parker) unblock() {
	_, _, _ = unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(&p.state)),
		futexWake|futexPrivateFlag, 1, 0, 0, 0)
}
