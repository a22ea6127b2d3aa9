package loadgen

import (
	"time"

	"golang.org/x/sys/unix"
)

// sleepPrecise waits for d: the bulk in the Go runtime's timer, which gives
// the processor up but wakes up to a millisecond late on some kernels (its
// poller waits in whole milliseconds), and the last timerMargin in
// nanosleep(2) with the thread's timer slack lowered to 1µs, which keeps
// the Go processor but wakes on time. The sender is not locked to its
// thread: a locked goroutine that sleeps in system calls and never goes
// through the scheduler gets preempted by the runtime's monitor every
// 10ms, each time handing its processor to another thread and back.
func sleepPrecise(d time.Duration) {
	if d > timerMargin {
		time.Sleep(d - timerMargin)
		return // the caller looks at the clock again
	}
	_ = unix.Prctl(unix.PR_SET_TIMERSLACK, 1000, 0, 0, 0)
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

// timerMargin is the part of a wait left to nanosleep.
const timerMargin = 2 * time.Millisecond
