//go:build linux

package emulate

import (
	"time"

	"golang.org/x/sys/unix"
)

// threadSleep blocks the calling OS thread for d with nanosleep(2): unlike
// time.Sleep, whose wake-ups are rounded to about a millisecond when the
// process is otherwise idle, it wakes within the thread's timer slack (the
// dispatcher's workers lower it to 1µs) plus scheduling delay.
func threadSleep(d time.Duration) {
	ts := unix.NsecToTimespec(int64(d))
	for unix.Nanosleep(&ts, &ts) == unix.EINTR {
	}
}
