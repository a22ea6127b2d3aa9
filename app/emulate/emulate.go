// Package emulate runs the synthetic psp-header requests in dilated time: a
// request's service time is multiplied by Config.Dilation and the worker
// sleeps for it instead of spinning, so an experiment with 14 workers shows
// realistic queueing on a 2-core machine. With a dilation of 1000, the High
// Bimodal workload's nominal 1µs and 100µs requests sleep 1ms and 100ms.
//
// Sleeping is imprecise (Go's time.Sleep rounds sub-millisecond sleeps up to
// about a millisecond; nanosleep(2), used here on Linux, overshoots by the
// thread's timer slack plus scheduling delay; see BenchmarkSleep), so the
// worker sleeps in Go's timer until 2ms before the end, then in nanosleep
// (which keeps the worker's Go processor, so never long) until the end
// minus the overshoot it has learned, and busy-spins the rest (see
// Sleeper).
//
// A Handler is safe for concurrent use by all workers.
package emulate

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/persephone-go/psp/app"
	"github.com/persephone-go/psp/app/spin"
	"github.com/persephone-go/psp/nic"
)

// Defaults applied by New.
const (
	DefaultDilation = 1000
	DefaultSpinTail = 50 * time.Microsecond
)

// minSleep is the shortest sleep worth taking; shorter waits spin.
const minSleep = 100 * time.Microsecond

// timerMargin is the part of a long sleep left to nanosleep after Go's
// timer (see WaitExactly): more than the timer's lateness.
const timerMargin = 2 * time.Millisecond

// initialOvershoot is the overshoot assumed before any sleep was measured
// (above nanosleep's overshoot at the default 50µs timer slack, which
// BenchmarkSleep measures).
const initialOvershoot = 100 * time.Microsecond

// maxOvershoot caps the learned overshoot, so that stalls (a descheduled
// thread on a busy machine) cannot make every later wait spin for long:
// spinning threads would take the cores the other workers and the
// dispatcher need to wake up on time.
const maxOvershoot = 500 * time.Microsecond

// overshootStep is the learning step of the overshoot's 90th percentile:
// the estimate rises by 9 steps after a sleep that overshot it and falls
// by one after a sleep that did not.
const overshootStep = 2 * time.Microsecond

// ErrConfig wraps every configuration error.
var ErrConfig = errors.New("emulate: invalid config")

// Config configures the emulation. The zero value is a dilation of 1000 with
// a 50µs minimum spinning tail.
type Config struct {
	// Dilation multiplies every service time. Default 1000.
	Dilation float64
	// SpinTail is the least part of each service time spent spinning rather
	// than sleeping, on top of the learned timer overshoot. Negative: only
	// the learned overshoot. Default 50µs.
	SpinTail time.Duration
	// MaxService caps the nominal service time a request may ask for
	// (before dilation); longer requests are refused as over the cap.
	// Default spin.DefaultMaxService (1ms: 1s of worker time at a dilation
	// of 1000).
	MaxService spin.Cap
}

// Validate reports a bad config.
func (c Config) Validate() error {
	if c.Dilation < 0 || c.Dilation > 1e9 {
		return fmt.Errorf("%w: dilation %g, want 0 (default) or a positive factor up to 1e9", ErrConfig, c.Dilation)
	}
	if err := c.MaxService.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	return nil
}

// Sleeper waits for dilated durations precisely without burning a core for
// the whole wait: it sleeps for the duration minus the timer overshoot it has
// learned and the spin tail, then busy-spins the rest. The estimate tracks
// the overshoot's 90th percentile, capped at 500µs, so nine waits in ten
// end on time and the tenth, woken late, ends late rather than making
// every wait spin longer. Waits too short to sleep (under 100µs plus the
// overshoot and the tail) spin entirely. It is safe for concurrent use.
//
// The spin does not yield to the Go scheduler: the dispatcher's workers
// run on threads of their own, each with its own Go processor, and a
// goroutine locked to its thread that yields hands its processor to
// another thread and back (two thread switches per turn).
type Sleeper struct {
	dilation  float64
	tail      time.Duration
	overshoot atomic.Int64 // ns, EWMA of measured sleep overshoots
}

// NewSleeper returns a Sleeper for c.
func NewSleeper(c Config) (*Sleeper, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if c.Dilation == 0 {
		c.Dilation = DefaultDilation
	}
	switch {
	case c.SpinTail == 0:
		c.SpinTail = DefaultSpinTail
	case c.SpinTail < 0:
		c.SpinTail = 0
	}
	s := &Sleeper{dilation: c.Dilation, tail: c.SpinTail}
	s.overshoot.Store(int64(initialOvershoot))
	return s, nil
}

// Dilation returns the dilation factor.
func (s *Sleeper) Dilation() float64 { return s.dilation }

// Overshoot returns the currently learned timer overshoot.
func (s *Sleeper) Overshoot() time.Duration { return time.Duration(s.overshoot.Load()) }

// Wait waits for the nominal duration d times the dilation.
func (s *Sleeper) Wait(d time.Duration) {
	s.WaitExactly(time.Duration(float64(d) * s.dilation))
}

// WaitExactly waits for total (not dilated).
func (s *Sleeper) WaitExactly(total time.Duration) {
	if total <= 0 {
		return
	}
	start := time.Now()
	over := time.Duration(s.overshoot.Load())
	if sleep := total - over - s.tail; sleep >= minSleep {
		// The bulk in Go's timer, which gives the processor up while
		// it waits but wakes up to about a millisecond late; the last
		// timerMargin in nanosleep.
		if bulk := sleep - timerMargin; bulk > 0 {
			time.Sleep(bulk)
		}
		if rest := sleep - time.Since(start); rest > 0 {
			t := time.Now()
			threadSleep(rest)
			measured := time.Since(t) - rest
			// A stochastic estimate of the 90th percentile. Racy
			// read-modify-write across workers is fine for an
			// estimate.
			if measured > over {
				over += 9 * overshootStep
			} else {
				over -= overshootStep
			}
			s.overshoot.Store(int64(min(max(over, 0), maxOvershoot)))
		}
	}
	for time.Since(start) < total {
	}
}

// Handler emulates psp-header requests: it waits for the header's service
// time times the dilation, then echoes the header.
type Handler struct {
	// Cap caps the nominal service a request may ask for; its Admit
	// refuses the requests over it before they are queued (app.Admitter).
	spin.Cap
	sleeper *Sleeper
}

// The dispatcher asks a Handler why it refuses a request, before and
// after queueing it.
var (
	_ app.OutcomeHandler = (*Handler)(nil)
	_ app.Admitter       = (*Handler)(nil)
)

// New returns a Handler for c.
func New(c Config) (*Handler, error) {
	s, err := NewSleeper(c)
	if err != nil {
		return nil, err
	}
	return &Handler{sleeper: s, Cap: c.MaxService}, nil
}

// Handle implements app.Handler.
func (h *Handler) Handle(w int, typ app.Type, b *nic.Buffer) bool {
	return h.Serve(w, typ, b) == app.Answer
}

// Serve implements app.OutcomeHandler. Payloads shorter than the
// header are refused, nominal service times above Config.MaxService are
// refused as over the cap (no reply).
func (h *Handler) Serve(_ int, _ app.Type, b *nic.Buffer) app.Outcome {
	hdr, o := h.Header(b)
	if o != app.Answer {
		return o
	}
	h.sleeper.Wait(time.Duration(hdr.ServiceNs))
	spin.Echo(b)
	return app.Answer
}
