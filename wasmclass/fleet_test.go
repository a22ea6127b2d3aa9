package wasmclass

import (
	"context"
	"encoding/hex"
	"errors"
	"testing"

	"github.com/persephone-go/psp/app"
)

// TestSwapIfRefusesAnotherVersion: a conditional swap or rollback lands
// only over the version it names, by SHA-256 or number.
func TestSwapIfRefusesAnotherVersion(t *testing.T) {
	ctx := context.Background()
	h, v1, v2 := twoVersions(t)
	sum1, sum2 := hex.EncodeToString(sha256Of(v1)), hex.EncodeToString(sha256Of(v2))
	for _, exp := range []Expect{{SHA256: sum2}, {Version: 2}, {SHA256: sum1, Version: 7}} {
		if _, err := h.SwapIf(ctx, v2, exp); !errors.Is(err, ErrConflict) {
			t.Fatalf("swap expecting %+v over version 1: %v, want ErrConflict", exp, err)
		}
	}
	if st := h.Status(); st.Version != 1 || st.SHA256 != sum1 {
		t.Fatalf("after refused swaps: version %d, %s", st.Version, st.SHA256)
	}
	if v, err := h.SwapIf(ctx, v2, Expect{SHA256: sum1, Version: 1}); err != nil || v != 2 {
		t.Fatalf("swap expecting version 1: %d, %v", v, err)
	}
	if _, err := h.RollbackIf(ctx, Expect{SHA256: sum1}); !errors.Is(err, ErrConflict) {
		t.Fatalf("rollback expecting the old module: %v, want ErrConflict", err)
	}
	if v, err := h.RollbackIf(ctx, Expect{SHA256: sum2}); err != nil || v != 3 {
		t.Fatalf("rollback expecting the new module: %d, %v", v, err)
	}
	if st := h.Status(); st.SHA256 != sum1 {
		t.Fatalf("after the rollback: %s, want %s", st.SHA256, sum1)
	}
}

// TestFailPolicyMarksFaults: a fail-closed or reloading tenant's faulting
// packets come out app.Faulted, a fail-open tenant's app.Unknown, and a
// good module's answers are unchanged.
func TestFailPolicyMarksFaults(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		closed FailPolicy
		module string
		want   app.Type
	}{
		{FailOpen, "trap", app.Unknown},
		{FailClosed, "trap", app.Faulted},
		{FailReload, "trap", app.Faulted},
		{FailClosed, "outofrange", app.Faulted},
		{FailClosed, "const2", 2},
		{FailReload, "const2", 2},
	} {
		h, err := NewHost(ctx, HostSpec{Name: "a", Wasm: fixture(t, tc.module), MaxTypes: 16, Fail: tc.closed, Options: Options{syncSpares: true}})
		if err != nil {
			t.Fatal(err)
		}
		c, err := h.NewCaller()
		if err != nil {
			t.Fatal(err)
		}
		payloads := [][]byte{make([]byte, 16), make([]byte, 16), make([]byte, 16)}
		out := make([]app.Type, len(payloads))
		for range 3 { // past the breaker's opening too
			c.ClassifyBatch(payloads, out)
			for i, got := range out {
				if got != tc.want {
					t.Errorf("%s, closed %v: packet %d: %d, want %d", tc.module, tc.closed, i, got, tc.want)
				}
			}
		}
		c.Close()
		h.Close(ctx)
	}
}
