package testenv

import "time"

// Every calls f every interval in a goroutine of its own, a sampler or a
// poller beside the work a test measures, until the stop it returns is
// called; stop returns once f has returned for the last time.
func Every(interval time.Duration, f func()) (stop func()) {
	quit := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-quit:
				return
			case <-time.After(interval):
			}
			f()
		}
	}()
	return func() {
		close(quit)
		<-done
	}
}
