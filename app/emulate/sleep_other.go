//go:build !linux

package emulate

import "time"

// threadSleep sleeps for d (see sleep_linux.go).
func threadSleep(d time.Duration) { time.Sleep(d) }
