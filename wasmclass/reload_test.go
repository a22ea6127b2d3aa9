package wasmclass

import (
	"context"
	"testing"
	"time"

	"github.com/persephone-go/psp/app"
	"github.com/persephone-go/psp/wire"
)

// header is a psp request header of type typ.
func header(typ uint32) []byte {
	b := make([]byte, wire.HeaderLen)
	wire.Header{Type: typ}.Encode(b)
	return b
}

// TestReloadKeepsAModuleThatFaultsSometimes: a module that traps on LONG
// requests, called one request at a time with SHORT ones in between, is
// shut out by the breaker under the open and closed policies (every SHORT
// then goes unclassified too), while under reload each LONG costs its own
// request only and every SHORT is classified by a fresh instance.
func TestReloadKeepsAModuleThatFaultsSometimes(t *testing.T) {
	ctx := context.Background()
	faultLong := fixture(t, "faultlong")
	for _, tc := range []struct {
		fail        FailPolicy
		shortsOK    bool // every SHORT classified SHORT
		breakerOpen bool
	}{
		{FailOpen, false, true},
		{FailClosed, false, true},
		{FailReload, true, false},
	} {
		h, err := NewHost(ctx, HostSpec{Name: "a", Wasm: faultLong, Fail: tc.fail, Options: Options{syncSpares: true, BreakerBackoff: time.Hour, BreakerMaxBackoff: time.Hour}})
		if err != nil {
			t.Fatal(err)
		}
		c, err := h.NewCaller()
		if err != nil {
			t.Fatal(err)
		}
		out := make([]app.Type, 1)
		shortsOK, longs := 0, 0
		for i := range 100 {
			typ := uint32(1 + i%2) // SHORT, LONG, SHORT...
			c.ClassifyBatch([][]byte{header(typ)}, out)
			switch {
			case typ == 1 && out[0] == app.Type(1):
				shortsOK++
			case typ == 2 && out[0] != app.Type(2):
				longs++
			}
		}
		st := h.Status()
		if (shortsOK == 50) != tc.shortsOK || (st.BreakersOpen == 1) != tc.breakerOpen || longs != 50 {
			t.Errorf("%v: %d of 50 SHORT classified, %d of 50 LONG faulted, breaker open %v, faults %+v",
				tc.fail, shortsOK, longs, st.BreakersOpen == 1, st.Faults)
		}
		if tc.fail == FailReload && st.Faults.Restarts < 49 {
			t.Errorf("reload: %d fresh instances for 50 traps", st.Faults.Restarts)
		}
		c.Close()
		h.Close(ctx)
	}
}

// TestReloadBacksOffACrashLoop: under reload, a module whose every fresh
// instance traps at once is shut out with a backoff that doubles at each
// crash (from BreakerBackoff), not retried on every request.
func TestReloadBacksOffACrashLoop(t *testing.T) {
	ctx := context.Background()
	const base = 40 * time.Millisecond
	h, err := NewHost(ctx, HostSpec{Name: "a", Wasm: fixture(t, "trap"), Fail: FailReload, Options: Options{syncSpares: true, BreakerBackoff: base, BreakerMaxBackoff: 4 * base}})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(ctx)
	c, err := h.NewCaller()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	out := make([]app.Type, 1)
	start := time.Now()
	calls := 0
	for time.Since(start) < 8*base {
		c.ClassifyBatch([][]byte{header(1)}, out)
		if out[0] != app.Faulted {
			t.Fatalf("a trapping module's packet: %d, want Faulted", out[0])
		}
		calls++
		time.Sleep(base / 20)
	}
	st := h.Status()
	// Crashes at 0, then after 1, 2 and 4 backoffs (capped): about 4 in 8
	// backoffs, every other packet refused by the open breaker.
	if st.Faults.Trap < 2 || st.Faults.Trap > 6 || st.Faults.BreakerOpen < uint64(calls)/2 {
		t.Errorf("%d packets in %v: %d trapped, %d refused by the open breaker: want a handful of traps", calls, 8*base, st.Faults.Trap, st.Faults.BreakerOpen)
	}
}
