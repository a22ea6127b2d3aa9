package server

import (
	"errors"
	"fmt"
	"time"

	"github.com/persephone-go/psp/darc"
	"github.com/persephone-go/psp/internal/boundedfile"
	"github.com/persephone-go/psp/wasmclass"
)

// readWasm reads a classifier file, refusing absurd sizes before loading.
func readWasm(path string) ([]byte, error) {
	bin, err := boundedfile.Read(path, maxWasmFileBytes)
	if err != nil {
		return nil, fmt.Errorf("classifier: %w", err)
	}
	return bin, nil
}

// classifierInfo is the classifier part of a tenant's status.
func classifierInfo(ts wasmclass.Status) TenantInfo {
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

// swapError maps a classifier host's swap or rollback error to the
// server's.
func swapError(name string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, wasmclass.ErrClosed):
		// The tenant was removed (or the server is stopping) while the
		// module loaded: there is no tenant left to swap, and nothing is
		// wrong with the module.
		return fmt.Errorf("%w %q (removed while its classifier loaded): %w", darc.ErrUnknownTenant, name, err)
	case errors.Is(err, wasmclass.ErrNoPrevious), errors.Is(err, wasmclass.ErrConflict):
		// A conflict includes a push superseded by a newer one for the
		// tenant (the newest wins): the module is not at fault.
		return err
	default:
		return fmt.Errorf("%w: %w", ErrBadClassifier, err)
	}
}
