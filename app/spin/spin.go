// Package spin is the paper's synthetic application: each request carries its
// service time in the psp header (package wire) and the worker busy-spins for
// that long, then echoes the header back.
//
// A Handler is stateless and safe for concurrent use by all workers.
package spin

import (
	"time"

	"github.com/persephone-go/psp/darc"
	"github.com/persephone-go/psp/nic"
	"github.com/persephone-go/psp/wire"
)

// MaxService is the longest service time a request may ask for (the paper's
// longest is 500µs); longer requests are refused, so a garbage header cannot
// hold a worker for seconds.
const MaxService = 10 * time.Millisecond

// Handler spins for the header's service time and echoes the header.
// Payloads shorter than the header and service times above MaxService are
// refused (no reply; the dispatcher counts them).
type Handler struct{}

// Handle implements dispatcher.Handler.
func (Handler) Handle(_ int, _ darc.Type, b *nic.Buffer) bool {
	h, err := wire.Decode(b.Payload())
	if err != nil || time.Duration(h.ServiceNs) > MaxService {
		return false
	}
	Wait(time.Duration(h.ServiceNs))
	Echo(b)
	return true
}

// Echo turns the request in b into its response: the request's header,
// unchanged (id and type echoed), and nothing after it.
func Echo(b *nic.Buffer) {
	if b.Len > wire.HeaderLen {
		b.Len = wire.HeaderLen
	}
}

// Wait busy-spins for d on the monotonic clock, without yielding.
func Wait(d time.Duration) {
	if d <= 0 {
		return
	}
	start := time.Now()
	for time.Since(start) < d {
	}
}
