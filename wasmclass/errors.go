package wasmclass

import (
	"errors"
	"fmt"
)

// Errors returned by Load, NewHost and Host.Swap. The returned errors wrap
// one of these (test with errors.Is) and say what exactly is wrong.
var (
	// ErrTooLarge: the module binary exceeds Options.MaxModuleSize.
	ErrTooLarge = errors.New("module too large")
	// ErrInvalidModule: the binary is not a well-formed WebAssembly module,
	// or wazero refused to compile it.
	ErrInvalidModule = errors.New("invalid wasm module")
	// ErrBadABI: an export is missing, has the wrong kind or signature, or
	// returns a value the ABI forbids (version, buffer, number of types,
	// type names).
	ErrBadABI = errors.New("classifier ABI violation")
	// ErrForbiddenImport: the module imports something other than the
	// wasi_snapshot_preview1 functions psp provides, or with another type.
	ErrForbiddenImport = errors.New("forbidden import")
	// ErrMemoryLimit: the module's memory declaration exceeds
	// Options.MemoryLimitPages, or its tables exceed MaxTableElements.
	ErrMemoryLimit = errors.New("memory over limit")
	// ErrClosed: the module or host was closed.
	ErrClosed = errors.New("closed")
	// ErrBadSpec: a HostSpec or Options value is invalid.
	ErrBadSpec = errors.New("invalid spec")
	// ErrLimit: the module exceeds a structural bound (Options.Bounds,
	// type names, custom sections).
	ErrLimit = errors.New("module over a structural limit")
	// ErrCompile: compilation failed, ran out of time or memory
	// (Options.CompileTimeout, Options.CompileMemory).
	ErrCompile = errors.New("compilation failed")
	// ErrSuperseded: a newer push to the same Host started before this
	// one could land; this one never will. It is a conflict: it wraps
	// ErrConflict.
	ErrSuperseded = fmt.Errorf("%w: superseded by a newer push", ErrConflict)
	// ErrNoPrevious: Rollback found no previous version (never swapped).
	ErrNoPrevious = errors.New("no previous version")
	// ErrConflict: a conditional swap or rollback (SwapIf, RollbackIf)
	// found another module running than the one it expected to replace,
	// or a newer push started before it landed (ErrSuperseded).
	ErrConflict = errors.New("conflict")
)
