package server

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/persephone-go/psp/wasmclass"
)

// wasmTenants holds the Wasm classifier host and the dispatcher's caller.
type wasmTenants struct {
	host   *wasmclass.Host
	caller *wasmclass.Caller
	specs  []Tenant
}

// openWasmTenants reads every tenant's classifier file and loads them.
func openWasmTenants(ctx context.Context, specs []Tenant, opts wasmclass.Options) (*wasmTenants, error) {
	hs := wasmclass.HostSpec{Options: opts}
	for _, t := range specs {
		bin := t.Wasm
		if len(bin) == 0 {
			var err error
			if bin, err = readWasm(t.Classifier); err != nil {
				return nil, fmt.Errorf("server: tenant %q: %w", t.Name, err)
			}
		} else if len(bin) > maxWasmFileBytes {
			return nil, fmt.Errorf("server: tenant %q: classifier of %d bytes, larger than %d", t.Name, len(bin), maxWasmFileBytes)
		}
		closed, _ := failClosed(t.Fail) // validated
		hs.Tenants = append(hs.Tenants, wasmclass.TenantSpec{Name: t.Name, Ports: t.Ports, Wasm: bin, MaxTypes: t.MaxTypes,
			Options: t.ClassifierOptions.wasm(wasmclass.Options{}), FailClosed: closed})
	}
	host, err := wasmclass.NewHost(ctx, hs)
	if err != nil {
		return nil, fmt.Errorf("server: classifiers: %w", err)
	}
	caller, err := host.NewCaller()
	if err != nil {
		host.Close(ctx)
		return nil, fmt.Errorf("server: classifiers: %w", err)
	}
	return &wasmTenants{host: host, caller: caller, specs: specs}, nil
}

// readWasm reads a classifier file, refusing absurd sizes before loading.
func readWasm(path string) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("classifier: %w", err)
	}
	if fi.Size() > maxWasmFileBytes {
		return nil, fmt.Errorf("classifier %s: %d bytes, larger than %d", path, fi.Size(), maxWasmFileBytes)
	}
	bin, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("classifier: %w", err)
	}
	return bin, nil
}

func (w *wasmTenants) types() []string { return w.host.Types() }

func (w *wasmTenants) describe() string {
	var parts []string
	for _, t := range w.specs {
		p := "default"
		if len(t.Ports) > 0 {
			p = fmt.Sprintf("ports %v", t.Ports)
		}
		src := t.Classifier
		if src == "" {
			src = fmt.Sprintf("%d-byte module", len(t.Wasm))
		}
		parts = append(parts, fmt.Sprintf("wasm tenant %s=%s (%s)", t.Name, src, p))
	}
	return strings.Join(parts, ", ")
}

func (w *wasmTenants) status() []TenantInfo {
	var out []TenantInfo
	for i, ts := range w.host.Status() {
		ti := classifierInfo(ts)
		if i < len(w.specs) {
			ti.Ports = w.specs[i].Ports
			ti.Fail = failName(w.specs[i].Fail)
		}
		out = append(out, ti)
	}
	return out
}

// classifierInfo is the classifier part of a tenant's status.
func classifierInfo(ts wasmclass.TenantStatus) TenantInfo {
	ti := TenantInfo{Name: ts.Name, Version: ts.Version, Types: ts.TypeNames, BreakerOpen: ts.BreakersOpen > 0,
		Faults: map[string]uint64{
			"trap": ts.Faults.Trap, "fuel": ts.Faults.Fuel, "bad_count": ts.Faults.BadCount,
			"out_of_range": ts.Faults.OutOfRange, "breaker_open": ts.Faults.BreakerOpen,
			"time": ts.Faults.Time, "unavailable": ts.Faults.Unavailable,
		},
		Restarts: ts.Faults.Restarts, Disabled: ts.Disabled,
		SHA256: ts.SHA256, Size: ts.Size, PreviousSHA256: ts.PreviousSHA256}
	if !ts.LoadedAt.IsZero() {
		ti.LoadedAt = ts.LoadedAt.UTC().Format(time.RFC3339Nano)
	}
	return ti
}

// declared marks, by global type id, the types the loaded classifiers
// declare (type 0, UNKNOWN, included).
func (w *wasmTenants) declared(numTypes int) []bool {
	d := make([]bool, numTypes)
	if numTypes > 0 {
		d[0] = true
	}
	for _, ts := range w.host.Status() {
		for l := 1; l < ts.NumTypes; l++ {
			if id := int(ts.BaseType) + l - 1; id < numTypes {
				d[id] = true
			}
		}
	}
	return d
}

func (w *wasmTenants) swap(ctx context.Context, name string, wasm []byte, exp wasmclass.Expect) (int, error) {
	v, err := w.host.SwapIf(ctx, name, wasm, exp)
	return v, swapError(name, err)
}

func (w *wasmTenants) rollback(ctx context.Context, name string, exp wasmclass.Expect) (int, error) {
	v, err := w.host.RollbackIf(ctx, name, exp)
	return v, swapError(name, err)
}

// swapError maps a classifier host's swap or rollback error to the
// server's.
func swapError(name string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, wasmclass.ErrUnknownTenant):
		return fmt.Errorf("%w %q: %w", ErrUnknownTenant, name, err)
	case errors.Is(err, wasmclass.ErrNoPrevious):
		return fmt.Errorf("%w: %w", ErrNoPrevious, err)
	case errors.Is(err, wasmclass.ErrConflict):
		return fmt.Errorf("%w: %w", ErrConflict, err)
	default:
		return fmt.Errorf("%w: %w", ErrBadClassifier, err)
	}
}

// close closes the caller (the dispatcher has stopped) and the host.
func (w *wasmTenants) close() error {
	err := w.caller.Close()
	if herr := w.host.Close(context.Background()); err == nil {
		err = herr
	}
	if err != nil {
		return fmt.Errorf("server: close classifiers: %w", err)
	}
	return nil
}
