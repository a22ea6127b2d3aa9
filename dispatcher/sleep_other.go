//go:build !linux

package dispatcher

import (
	"runtime"
	"time"
)

// preciseSleep sleeps for d (see sleep_linux.go).
func preciseSleep(d time.Duration) { time.Sleep(d) }

// lowerTimerSlack is a no-op outside Linux.
func lowerTimerSlack() {}

// yieldCPU lets other goroutines run (see sleep_linux.go).
func yieldCPU() { runtime.Gosched() }
