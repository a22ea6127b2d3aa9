//go:build linux

package dispatcher

import (
	"time"

	"golang.org/x/sys/unix"
)

// preciseSleep blocks the calling OS thread for d with nanosleep(2), at a
// timer slack of 1µs (the dispatcher goroutine is not always locked to its
// thread, so it sets the slack of whichever thread it runs on). Go's
// timers round short sleeps up to about a millisecond when the process is
// otherwise idle; nanosleep wakes within tens of microseconds.
func preciseSleep(d time.Duration) {
	lowerTimerSlack()
	ts := unix.NsecToTimespec(int64(d))
	for unix.Nanosleep(&ts, &ts) == unix.EINTR {
	}
}

// lowerTimerSlack asks the kernel to wake this thread's sleeps within 1µs
// of their deadline instead of the default 50µs.
func lowerTimerSlack() {
	_ = unix.Prctl(unix.PR_SET_TIMERSLACK, 1000, 0, 0, 0)
}

// yieldCPU gives the calling thread's CPU to any other thread ready to run
// on it (sched_yield(2)), and returns at once when there is none: a
// polling dispatcher then costs only a core that nothing else wants
// (without it, polling took the client's tail far past parking's; see
// RATIONALE.md). A raw call: it does not block, so the goroutine keeps
// its P rather than handing it over for the call.
func yieldCPU() {
	_, _, _ = unix.RawSyscall(unix.SYS_SCHED_YIELD, 0, 0, 0)
}
