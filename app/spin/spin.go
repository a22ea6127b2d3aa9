// Package spin is the paper's synthetic application: each request carries its
// service time in the psp header (package wire) and the worker busy-spins for
// that long, then echoes the header back.
//
// A Handler is stateless and safe for concurrent use by all workers.
package spin

import (
	"fmt"
	"time"

	"github.com/persephone-go/psp/app"
	"github.com/persephone-go/psp/nic"
	"github.com/persephone-go/psp/wire"
)

// DefaultMaxService is the default cap on the service time one request may
// ask for: twice the paper's longest request (500µs) and above every
// built-in workload's longest (the rocksdb SCAN, 635µs). Longer requests
// are refused, so a garbage or hostile header cannot hold a worker for
// long.
const DefaultMaxService = time.Millisecond

// MaxServiceLimit is the largest cap a synthetic application accepts: the
// header's service field is 32-bit nanoseconds.
const MaxServiceLimit = time.Duration(1<<32 - 1)

// Cap is the synthetic applications' cap on the service time a request may
// ask for (in the header's nominal time, before any dilation). Zero means
// DefaultMaxService.
type Cap time.Duration

// Validate reports a cap out of range.
func (c Cap) Validate() error {
	if c < 0 || time.Duration(c) > MaxServiceLimit {
		return fmt.Errorf("max service %v out of range (want 0 for the default %v, up to %v)", time.Duration(c), DefaultMaxService, MaxServiceLimit)
	}
	return nil
}

// Over reports whether a request asking for serviceNs exceeds the cap.
func (c Cap) Over(serviceNs uint32) bool {
	limit := time.Duration(c)
	if limit == 0 {
		limit = DefaultMaxService
	}
	return time.Duration(serviceNs) > limit
}

// Handler spins for the header's service time and echoes the header.
// Payloads shorter than the header are refused, and requests asking for
// more than MaxService are refused as over the cap (no reply; the
// dispatcher counts them).
type Handler struct {
	// MaxService caps the service time a request may ask for (zero:
	// DefaultMaxService).
	MaxService Cap
}

// Handle implements app.Handler.
func (h Handler) Handle(w int, typ app.Type, b *nic.Buffer) bool {
	return h.Serve(w, typ, b) == app.Answer
}

// Admit implements app.Admitter: the header and the cap are checked
// before the request is queued, so a flood of requests over the cap costs
// no worker anything.
func (h Handler) Admit(typ app.Type, b *nic.Buffer) app.Outcome { return h.MaxService.Admit(typ, b) }

// Header decodes the psp header of the request in b under cap c: Refuse
// for a payload shorter than the header, RefuseOverCap for a service time
// over the cap, Answer with the header otherwise.
func (c Cap) Header(b *nic.Buffer) (wire.Header, app.Outcome) {
	hdr, err := wire.Decode(b.Payload())
	switch {
	case err != nil:
		return hdr, app.Refuse
	case c.Over(hdr.ServiceNs):
		return hdr, app.RefuseOverCap
	}
	return hdr, app.Answer
}

// Admit implements app.Admitter for any synthetic application under cap
// c (an application embedding its Cap has it): the check of Header.
func (c Cap) Admit(_ app.Type, b *nic.Buffer) app.Outcome {
	_, o := c.Header(b)
	return o
}

// Serve implements app.OutcomeHandler.
func (h Handler) Serve(_ int, _ app.Type, b *nic.Buffer) app.Outcome {
	hdr, o := h.MaxService.Header(b)
	if o != app.Answer {
		return o
	}
	Wait(time.Duration(hdr.ServiceNs))
	Echo(b)
	return app.Answer
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
