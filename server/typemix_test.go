package server

import (
	"bytes"
	"net/http"
	"net/netip"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/persephone-go/psp/nic/memnic"
	"github.com/persephone-go/psp/wire"
)

// TestTypeShareGauge: psp_type_share_ratio gives each type's share of its
// tenant's requests over the last window, and follows a change of mix.
func TestTypeShareGauge(t *testing.T) {
	r, _ := startLogged(t, memConfig())
	h := r.srv.Handler()
	dp := r.srv.Dataplane().(*memnic.Dataplane)
	peer := netip.MustParseAddrPort("10.0.0.9:1")
	send := func(short, long int) {
		for i := range short + long {
			typ := wire.TypeShort
			if i >= short {
				typ = wire.TypeLong
			}
			inject(dp, header(uint32(i), typ, 100), peer)
		}
	}
	shares := func() map[string]float64 {
		t.Helper()
		rec := do(t, h, "GET", "/metrics", "", nil)
		if rec.Code != http.StatusOK {
			t.Fatalf("metrics: %d", rec.Code)
		}
		p := expfmt.NewTextParser(model.UTF8Validation)
		fams, err := p.TextToMetricFamilies(bytes.NewReader(rec.Body.Bytes()))
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]float64{}
		for _, m := range fams["psp_type_share_ratio"].GetMetric() {
			out[m.GetLabel()[0].GetValue()] = m.GetGauge().GetValue()
		}
		return out
	}
	wait := func(want map[string]float64) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			got := shares()
			ok := true
			for typ, w := range want {
				ok = ok && got[typ] > w-0.01 && got[typ] < w+0.01
			}
			if ok {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("psp_type_share_ratio %v, want %v", got, want)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	send(300, 100)
	wait(map[string]float64{"SHORT": 0.75, "LONG": 0.25, "UNKNOWN": 0})
	// A window later (the ring filled with samples of the counters as they
	// are now), only what came since counts.
	for range shareSlots {
		r.srv.mix.sample(r.srv.disp.Stats())
	}
	send(0, 200)
	wait(map[string]float64{"SHORT": 0, "LONG": 1})
}
