// Package tpcc is the paper's TPC-C workload as a synthetic application: the
// five transaction types (wire.TypeNewOrder ... wire.TypeStockLevel) each
// take the service time in their psp header, or the type's nominal mean when
// the header carries 0 (Payment 5.7µs, OrderStatus 6µs, NewOrder 20µs,
// Delivery 88µs, StockLevel 100µs). The worker busy-spins, or, with a
// dilation, sleeps in dilated time like package emulate. The reply echoes
// the header.
//
// A Handler is safe for concurrent use by all workers.
package tpcc

import (
	"fmt"
	"time"

	"github.com/persephone-go/psp/app"
	"github.com/persephone-go/psp/app/emulate"
	"github.com/persephone-go/psp/app/spin"
	"github.com/persephone-go/psp/nic"
	"github.com/persephone-go/psp/wire"
)

// Transaction is one TPC-C transaction type with its nominal service time
// and share of the paper's mix.
type Transaction struct {
	Type  uint32
	Name  string
	Mean  time.Duration
	Ratio float64
}

// Mix returns the paper's TPC-C transactions, shortest first.
func Mix() []Transaction {
	return []Transaction{
		{wire.TypePayment, "Payment", 5700 * time.Nanosecond, 0.44},
		{wire.TypeOrderStatus, "OrderStatus", 6 * time.Microsecond, 0.04},
		{wire.TypeNewOrder, "NewOrder", 20 * time.Microsecond, 0.44},
		{wire.TypeDelivery, "Delivery", 88 * time.Microsecond, 0.04},
		{wire.TypeStockLevel, "StockLevel", 100 * time.Microsecond, 0.04},
	}
}

// NominalMean returns the nominal service time of a wire type, and whether
// it is a TPC-C type.
func NominalMean(typ uint32) (time.Duration, bool) {
	switch typ {
	case wire.TypePayment:
		return 5700 * time.Nanosecond, true
	case wire.TypeOrderStatus:
		return 6 * time.Microsecond, true
	case wire.TypeNewOrder:
		return 20 * time.Microsecond, true
	case wire.TypeDelivery:
		return 88 * time.Microsecond, true
	case wire.TypeStockLevel:
		return 100 * time.Microsecond, true
	}
	return 0, false
}

// Config configures the application.
type Config struct {
	// Dilation, when > 0, emulates: service times are multiplied by it and
	// the worker sleeps (see package emulate). 0: busy-spin in real time.
	Dilation float64
	// SpinTail is emulate's spin tail (dilation only).
	SpinTail time.Duration
	// MaxService caps the nominal service time a request may ask for;
	// longer requests are refused as over the cap. Default
	// spin.DefaultMaxService.
	MaxService spin.Cap
}

// Handler runs TPC-C transactions.
type Handler struct {
	// Cap caps the nominal service a request may ask for; its Admit
	// refuses the requests over it before they are queued (app.Admitter).
	spin.Cap
	sleeper *emulate.Sleeper // nil: spin
}

// The dispatcher asks a Handler why it refuses a request, before and
// after queueing it.
var (
	_ app.OutcomeHandler = (*Handler)(nil)
	_ app.Admitter       = (*Handler)(nil)
)

// New returns a Handler for c.
func New(c Config) (*Handler, error) {
	if err := c.MaxService.Validate(); err != nil {
		return nil, fmt.Errorf("tpcc: %w", err)
	}
	h := &Handler{Cap: c.MaxService}
	if c.Dilation > 0 {
		s, err := emulate.NewSleeper(emulate.Config{Dilation: c.Dilation, SpinTail: c.SpinTail})
		if err != nil {
			return nil, err
		}
		h.sleeper = s
	}
	return h, nil
}

// Handle implements app.Handler.
func (h *Handler) Handle(w int, typ app.Type, b *nic.Buffer) bool {
	return h.Serve(w, typ, b) == app.Answer
}

// Serve implements app.OutcomeHandler. Requests of other types run
// for their header's service time; payloads shorter than the header are
// refused, service times above Config.MaxService refused as over the cap.
func (h *Handler) Serve(_ int, _ app.Type, b *nic.Buffer) app.Outcome {
	hdr, o := h.Header(b)
	if o != app.Answer {
		return o
	}
	d := time.Duration(hdr.ServiceNs)
	if d == 0 {
		d, _ = NominalMean(hdr.Type)
	}
	if h.sleeper != nil {
		h.sleeper.Wait(d)
	} else {
		spin.Wait(d)
	}
	spin.Echo(b)
	return app.Answer
}
