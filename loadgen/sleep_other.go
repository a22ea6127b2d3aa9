//go:build !linux

package loadgen

import "time"

// sleepPrecise sleeps for d with the Go runtime's timers.
func sleepPrecise(d time.Duration) { time.Sleep(d) }
