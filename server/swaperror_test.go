package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/persephone-go/psp/wasmclass"
)

// A swap whose tenant is removed while the module loads fails with the
// host's ErrClosed: that is the tenant gone (404), not the module refused
// (it was answered 400 "classifier rejected").
func TestSwapErrorOfClosedHostIsUnknownTenant(t *testing.T) {
	err := swapError("a", fmt.Errorf("wasmclass: swap %q: wasmclass: load: compilation cache: %w", "a", wasmclass.ErrClosed))
	if !errors.Is(err, ErrUnknownTenant) || errors.Is(err, ErrBadClassifier) {
		t.Fatalf("swapError = %v, want ErrUnknownTenant and not ErrBadClassifier", err)
	}
	if got := swapStatus(err); got != http.StatusNotFound {
		t.Errorf("status %d, want %d", got, http.StatusNotFound)
	}
	if err := swapError("a", fmt.Errorf("wasmclass: %w", wasmclass.ErrInvalidModule)); !errors.Is(err, ErrBadClassifier) {
		t.Errorf("a bad module: %v, want ErrBadClassifier", err)
	}
}

// A push superseded by a newer one for the same tenant (concurrent pushes:
// the newest wins) conflicts with that push, 409; it was answered 400
// "classifier rejected", as if the module were bad (4 pushers a tenant for
// 30 s: 11,960 such answers, 6 swaps landed).
func TestSwapErrorOfSupersededPushIsConflict(t *testing.T) {
	err := swapError("a", fmt.Errorf("wasmclass: swap %q: %w (%w) (the running version stays)", "a", wasmclass.ErrSuperseded, context.Canceled))
	if !errors.Is(err, ErrConflict) || errors.Is(err, ErrBadClassifier) {
		t.Fatalf("swapError = %v, want ErrConflict and not ErrBadClassifier", err)
	}
	if got := swapStatus(err); got != http.StatusConflict {
		t.Errorf("status %d, want %d", got, http.StatusConflict)
	}
	if got := refusal(err); got != "conflict" {
		t.Errorf("audit outcome %q, want conflict", got)
	}
}
