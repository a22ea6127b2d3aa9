//go:build linux

package emulate

import (
	"time"

	"golang.org/x/sys/unix"
)

// threadSleep blocks the calling OS thread for d with nanosleep(2), after
// lowering the thread's timer slack to 1µs (workers that are not locked
// to a thread may run on any thread): unlike time.Sleep, whose wake-ups
// are rounded to about a millisecond when the process is otherwise idle,
// it wakes within the timer slack plus scheduling delay. The thread keeps
// its Go processor while it sleeps: callers keep d short (see
// WaitExactly).
func threadSleep(d time.Duration) {
	_ = unix.Prctl(unix.PR_SET_TIMERSLACK, 1000, 0, 0, 0)
	ts := unix.NsecToTimespec(int64(d))
	for unix.Nanosleep(&ts, &ts) == unix.EINTR {
	}
}
