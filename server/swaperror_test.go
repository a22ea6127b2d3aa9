package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/persephone-go/psp/darc"
	"github.com/persephone-go/psp/wasmclass"
)

// A swap whose tenant is removed while the module loads fails with the
// host's ErrClosed: that is the tenant gone (404), not the module refused
// (it was answered 400 "classifier rejected").
func TestSwapErrorOfClosedHostIsUnknownTenant(t *testing.T) {
	err := swapError("a", fmt.Errorf("wasmclass: swap %q: wasmclass: load: compilation cache: %w", "a", wasmclass.ErrClosed))
	if !errors.Is(err, darc.ErrUnknownTenant) || errors.Is(err, ErrBadClassifier) {
		t.Fatalf("swapError = %v, want darc.ErrUnknownTenant and not ErrBadClassifier", err)
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
	if !errors.Is(err, wasmclass.ErrConflict) || errors.Is(err, ErrBadClassifier) {
		t.Fatalf("swapError = %v, want wasmclass.ErrConflict and not ErrBadClassifier", err)
	}
	if got := swapStatus(err); got != http.StatusConflict {
		t.Errorf("status %d, want %d", got, http.StatusConflict)
	}
	if got := refusal(err); got != "conflict" {
		t.Errorf("audit outcome %q, want conflict", got)
	}
}

// TestBadTenantClassifierNamedOnce: a tenant whose module does not load is
// named once in the error (the host and the server both named it).
func TestBadTenantClassifierNamedOnce(t *testing.T) {
	cfg := memConfig()
	cfg.Admin.Addr = "off"
	cfg.Tenants = []Tenant{{Name: "x", Ports: []uint16{17001}, Wasm: []byte("garbage")}}
	srv, err := New(context.Background(), cfg, Options{})
	if err == nil {
		srv.Close()
		t.Fatal("a tenant with a garbage module started")
	}
	if !errors.Is(err, ErrBadClassifier) || strings.Count(err.Error(), `tenant "x"`) != 1 {
		t.Fatalf("error %q: want ErrBadClassifier naming tenant \"x\" once", err)
	}
}
