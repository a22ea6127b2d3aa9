package tpcc

import (
	"math"
	"testing"
	"time"

	"github.com/persephone-go/psp/app"
	"github.com/persephone-go/psp/app/spin"
	"github.com/persephone-go/psp/nic"
	"github.com/persephone-go/psp/wire"
)

func TestMixMatchesReference(t *testing.T) {
	sum := 0.0
	for _, tx := range Mix() {
		sum += tx.Ratio
		if m, ok := NominalMean(tx.Type); !ok || m != tx.Mean {
			t.Errorf("%s: NominalMean = %v, %v; want %v", tx.Name, m, ok, tx.Mean)
		}
	}
	if math.Abs(sum-1) > 1e-9 {
		t.Errorf("ratios sum to %g", sum)
	}
	if _, ok := NominalMean(wire.TypeShort); ok {
		t.Error("SHORT reported as a TPC-C type")
	}
}

func TestHandleUsesNominalMeanWhenZero(t *testing.T) {
	h, err := New(Config{Dilation: 50}) // StockLevel 100µs x 50 = 5ms
	if err != nil {
		t.Fatal(err)
	}
	b := &nic.Buffer{Data: make([]byte, 32)}
	wire.Header{ID: 3, Type: wire.TypeStockLevel}.Encode(b.Data)
	b.Len = 16
	start := time.Now()
	if !h.Handle(0, 9, b) {
		t.Fatal("refused")
	}
	if el := time.Since(start); el < 5*time.Millisecond {
		t.Errorf("StockLevel took %v, want >= 5ms (nominal 100µs x 50)", el)
	}
	spinning, _ := New(Config{})
	wire.Header{ID: 4, Type: wire.TypePayment, ServiceNs: 1000}.Encode(b.Data)
	start = time.Now()
	spinning.Handle(0, 6, b)
	if el := time.Since(start); el < time.Microsecond {
		t.Errorf("Payment with 1µs in the header took %v", el)
	}
}

func TestServiceCap(t *testing.T) {
	h, err := New(Config{MaxService: spin.Cap(50 * time.Microsecond)})
	if err != nil {
		t.Fatal(err)
	}
	b := &nic.Buffer{Data: make([]byte, 16), Len: 16}
	wire.Header{ID: 1, Type: wire.TypeStockLevel, ServiceNs: 100_000}.Encode(b.Data)
	if got := h.Serve(0, 9, b); got != app.RefuseOverCap {
		t.Errorf("100µs under a 50µs cap: %v, want RefuseOverCap", got)
	}
	wire.Header{ID: 2, Type: wire.TypePayment, ServiceNs: 0}.Encode(b.Data) // nominal 5.7µs
	if got := h.Serve(0, 6, b); got != app.Answer {
		t.Errorf("Payment at its nominal mean: %v, want Answer", got)
	}
	if _, err := New(Config{MaxService: -1}); err == nil {
		t.Error("a negative cap was accepted")
	}
}
