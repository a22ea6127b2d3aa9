package spin

import (
	"testing"
	"time"

	"github.com/persephone-go/psp/app"
	"github.com/persephone-go/psp/nic"
	"github.com/persephone-go/psp/wire"
)

func TestHandleSpinsAndEchoes(t *testing.T) {
	b := &nic.Buffer{Data: make([]byte, 64)}
	wire.Header{ID: 9, Type: wire.TypeShort, ServiceNs: 200_000}.Encode(b.Data)
	b.Len = 30
	start := time.Now()
	if !(Handler{}).Handle(0, 1, b) {
		t.Fatal("refused a valid request")
	}
	if el := time.Since(start); el < 200*time.Microsecond {
		t.Errorf("spun %v, want >= 200µs", el)
	}
	if h, _ := wire.Decode(b.Payload()); b.Len != wire.HeaderLen || h.ID != 9 {
		t.Errorf("reply len %d header %+v", b.Len, h)
	}
	wire.Header{ID: 10, Type: wire.TypeShort, ServiceNs: uint32(DefaultMaxService + 1)}.Encode(b.Data)
	b.Len = 16
	if got := (Handler{}).Serve(0, 1, b); got != app.RefuseOverCap {
		t.Errorf("a service time above the default cap: %v, want RefuseOverCap", got)
	}
	if !(Handler{MaxService: Cap(2 * DefaultMaxService)}).Handle(0, 1, b) {
		t.Error("refused a service time under a raised cap")
	}
	b.Len = 16
	wire.Header{ID: 11, Type: wire.TypeShort, ServiceNs: 2000}.Encode(b.Data)
	if got := (Handler{MaxService: Cap(time.Microsecond)}).Serve(0, 1, b); got != app.RefuseOverCap {
		t.Errorf("2µs under a 1µs cap: %v, want RefuseOverCap", got)
	}
	b.Len = 15
	if (Handler{}).Handle(0, 1, b) {
		t.Error("accepted a 15-byte runt")
	}
}

func TestAdmit(t *testing.T) {
	b := &nic.Buffer{Data: make([]byte, 64)}
	b.Len = 16
	wire.Header{ID: 1, Type: 4, ServiceNs: 9_990_000}.Encode(b.Data)
	if got := (Handler{}).Admit(4, b); got != app.RefuseOverCap {
		t.Errorf("9.99ms: %v, want RefuseOverCap", got)
	}
	wire.Header{ID: 1, Type: 4, ServiceNs: 900_000}.Encode(b.Data)
	if got := (Handler{}).Admit(4, b); got != app.Answer {
		t.Errorf("900µs: %v, want Answer", got)
	}
	b.Len = 3
	if got := (Handler{}).Admit(4, b); got != app.Refuse {
		t.Errorf("runt: %v, want Refuse", got)
	}
	if a := testing.AllocsPerRun(100, func() { (Handler{}).Admit(4, b) }); a != 0 {
		t.Errorf("Admit allocates %v times", a)
	}
}
