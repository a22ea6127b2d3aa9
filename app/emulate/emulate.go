// Package emulate runs the synthetic psp-header requests in dilated time: a
// request's service time is multiplied by Config.Dilation and the worker
// sleeps for it instead of spinning, so an experiment with 14 workers shows
// realistic queueing on a 2-core machine. With a dilation of 1000, the High
// Bimodal workload's 1µs and 100µs requests take 1ms and 100ms.
//
// Go's timers overshoot (by tens of microseconds to a millisecond under load,
// see BenchmarkSleep), so the worker sleeps for the duration minus
// Config.SpinTail and busy-spins the rest.
//
// A Handler is safe for concurrent use by all workers.
package emulate

import (
	"errors"
	"fmt"
	"time"

	"github.com/persephone-go/psp/app/spin"
	"github.com/persephone-go/psp/darc"
	"github.com/persephone-go/psp/nic"
	"github.com/persephone-go/psp/wire"
)

// Defaults applied by New.
const (
	DefaultDilation = 1000
	DefaultSpinTail = 100 * time.Microsecond
)

// ErrConfig wraps every configuration error.
var ErrConfig = errors.New("emulate: invalid config")

// Config configures the emulation. The zero value is a dilation of 1000 with
// a 100µs spinning tail.
type Config struct {
	// Dilation multiplies every service time. Default 1000.
	Dilation float64
	// SpinTail is the last part of each service time spent spinning rather
	// than sleeping, to absorb timer overshoot. Negative: never spin.
	// Default 100µs.
	SpinTail time.Duration
}

// Validate reports a bad config.
func (c Config) Validate() error {
	if c.Dilation < 0 || c.Dilation > 1e9 {
		return fmt.Errorf("%w: dilation %g, want 0 (default) or a positive factor up to 1e9", ErrConfig, c.Dilation)
	}
	return nil
}

// Sleeper waits for dilated durations: sleep, then spin the tail.
type Sleeper struct {
	dilation float64
	tail     time.Duration
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
	return &Sleeper{dilation: c.Dilation, tail: c.SpinTail}, nil
}

// Dilation returns the dilation factor.
func (s *Sleeper) Dilation() float64 { return s.dilation }

// Wait waits for the nominal duration d times the dilation.
func (s *Sleeper) Wait(d time.Duration) {
	total := time.Duration(float64(d) * s.dilation)
	if total <= 0 {
		return
	}
	start := time.Now()
	if total > s.tail {
		time.Sleep(total - s.tail)
	}
	spin.Wait(total - time.Since(start))
}

// Handler emulates psp-header requests: it waits for the header's service
// time times the dilation, then echoes the header.
type Handler struct{ sleeper *Sleeper }

// New returns a Handler for c.
func New(c Config) (*Handler, error) {
	s, err := NewSleeper(c)
	if err != nil {
		return nil, err
	}
	return &Handler{sleeper: s}, nil
}

// Handle implements dispatcher.Handler. Payloads shorter than the header are
// refused (no reply).
func (h *Handler) Handle(_ int, _ darc.Type, b *nic.Buffer) bool {
	hdr, err := wire.Decode(b.Payload())
	if err != nil {
		return false
	}
	h.sleeper.Wait(time.Duration(hdr.ServiceNs))
	spin.Echo(b)
	return true
}
