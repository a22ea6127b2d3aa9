package loadgen

import (
	"time"

	"golang.org/x/sys/unix"
)

// sleepPrecise blocks the calling OS thread for d with nanosleep(2). The
// Go runtime's timers wake up to a millisecond late on some kernels (its
// poller waits in whole milliseconds); nanosleep is accurate to the
// kernel's timer slack (50 µs by default). The caller should hold its OS
// thread (runtime.LockOSThread) so the sleep does not stall other
// goroutines.
func sleepPrecise(d time.Duration) {
	ts := unix.NsecToTimespec(d.Nanoseconds())
	for {
		var rem unix.Timespec
		err := unix.Nanosleep(&ts, &rem)
		if err != unix.EINTR {
			return
		}
		ts = rem
	}
}
