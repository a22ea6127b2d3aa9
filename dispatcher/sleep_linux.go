//go:build linux

package dispatcher

import (
	"time"

	"golang.org/x/sys/unix"
)

// preciseSleep blocks the calling OS thread for d with nanosleep(2). Go's
// timers round short sleeps up to about a millisecond when the process is
// otherwise idle (measured: a 20µs Recv wait or time.Sleep takes ~1.08ms);
// a blocking nanosleep on the dispatcher's locked thread wakes within tens of
// microseconds.
func preciseSleep(d time.Duration) {
	ts := unix.NsecToTimespec(int64(d))
	for unix.Nanosleep(&ts, &ts) == unix.EINTR {
	}
}

// lowerTimerSlack asks the kernel to wake this thread's sleeps within 1µs
// of their deadline instead of the default 50µs.
func lowerTimerSlack() {
	_ = unix.Prctl(unix.PR_SET_TIMERSLACK, 1000, 0, 0, 0)
}
