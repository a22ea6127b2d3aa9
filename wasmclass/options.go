package wasmclass

import (
	"cmp"
	"fmt"
	"time"

	"github.com/tetratelabs/wazero"

	"github.com/persephone-go/psp/wasmclass/internal/wasmbin"
)

// Defaults applied to zero Options fields.
const (
	DefaultMemoryLimitPages = 64      // 4 MiB
	DefaultMaxModuleSize    = 8 << 20 // 8 MiB
	// DefaultFuel is about 0.5 ms of the dearest work a module can do
	// (BenchmarkAdversarial measures a unit at 0.25-0.5 ns on the
	// project's machines).
	DefaultFuel           = 1_000_000
	DefaultInitFuelFactor = 100 // InitFuel = Fuel * factor
	// DefaultTimeLimit is the wall-clock limit of one call, far above what
	// the fuel budget buys: it catches a cost model that is wrong on this
	// machine, not ordinary calls.
	DefaultTimeLimit         = 20 * time.Millisecond
	DefaultStackLimit        = 4 << 20 // bytes of estimated frames
	DefaultBreakerThreshold  = 8       // faulting calls per window
	DefaultBreakerWindow     = time.Second
	DefaultBreakerBackoff    = 100 * time.Millisecond
	DefaultBreakerMaxBackoff = 30 * time.Second
	DefaultBreakerReset      = time.Minute
	// DefaultReloadBackoff and DefaultReloadMaxBackoff are the breaker's
	// backoff with Options.Reload: Envoy's reload backoff (a base of a
	// second, at most ten times that).
	DefaultReloadBackoff    = time.Second
	DefaultReloadMaxBackoff = 10 * time.Second
	DefaultCompileTimeout   = 30 * time.Second
	DefaultCompileMemory    = 2 << 30 // bytes of address space for a compiling child
	// MaxTypeName and MaxTypeNames bound the type names a module declares:
	// bytes per name and in all.
	MaxTypeName  = 64
	MaxTypeNames = 64 << 10
	// MaxCustomSections bounds the custom sections a module may carry; only
	// "name" (debug names, at most MaxNameSection bytes) and "psp.types"
	// reach the compiler or the host, the others are dropped at load.
	MaxCustomSections = 100
	MaxNameSection    = 1 << 20
)

// Bounds are the structural limits checked while a module is decoded,
// before anything is compiled (see Options.Bounds).
type Bounds = wasmbin.Bounds

// DefaultBounds are Options.Bounds' defaults.
var DefaultBounds = wasmbin.DefaultBounds

// Options configure how one classifier module is loaded and run. The zero
// value is the default for every field. Every field is per module, so that
// each Host (each tenant of a server) can have its own.
type Options struct {
	// MemoryLimitPages caps each instance's linear memory, in 64 KiB pages
	// (default 64 = 4 MiB). Modules declaring a larger minimum or maximum are
	// refused; memory.grow past it fails in the guest.
	MemoryLimitPages uint32
	// MaxModuleSize caps the module binary size in bytes (default 8 MiB).
	MaxModuleSize int
	// Bounds are structural limits (functions, locals, nesting, br_table
	// targets, code size...) checked before compiling; zero fields take
	// DefaultBounds'.
	Bounds Bounds
	// Fuel is the budget of each call into the classifier, in units of the
	// cost model (default 1,000,000, about 0.5 ms of the dearest work). A
	// batch call shares one budget.
	Fuel uint64
	// InitFuel is the budget of the module's start function and of
	// _initialize, which run once, at load (default 100 * Fuel): language
	// runtimes (Go) need far more than a classification to start.
	InitFuel uint64
	// TimeLimit is the wall-clock limit of one call (default 20 ms). A
	// call found running longer is stopped (it traps at its next fuel
	// check), counted as a FaultTime, and the module is disabled: its
	// packets go to UNKNOWN until it is replaced. It is enforced by a
	// watchdog goroutine per module that samples the instances every
	// TimeLimit/2; calls pay nothing for it.
	TimeLimit time.Duration
	// StackLimit bounds a call's stack, in bytes of estimated frames
	// (default 4 MiB): deeper calls trap. The fuel bounds it too: a byte
	// of frame in a recursive or indirect-calling function costs two units
	// (Fuel/2 bytes at most: 500 KB with the default budget).
	StackLimit uint32
	// CacheDir, if set, keeps compiled code on disk there so that restarts
	// skip compilation. Ignored when Cache is set.
	CacheDir string
	// Cache, if set, is a compilation cache shared with other modules (a
	// Host shares one across its module versions). The module does not
	// close it.
	Cache wazero.CompilationCache
	// CompileInChild compiles the module in a child process (the running
	// executable, which must call RunCompileChild first thing in main)
	// bounded by CompileTimeout and CompileMemory, and loads the compiled
	// code from a file cache the child fills. Without it compilation runs
	// in-process: CompileTimeout then only stops waiting for it.
	CompileInChild bool
	// CompileTimeout bounds compilation (default 30 s); in a child, it is
	// also the child's CPU-time limit, rounded up to a second.
	CompileTimeout time.Duration
	// CompileMemory bounds the child's address space, in bytes (default
	// 2 GiB).
	CompileMemory uint64
	// BreakerThreshold is the number of faulting calls of a module version,
	// all instances together, within BreakerWindow (default 8 per second)
	// that opens its circuit breaker: its packets then go to UNKNOWN
	// without calling it for a backoff, after which one call is tried; a
	// fault reopens it, a success closes it. Successful calls in between do
	// not reset the count. The backoff is BreakerBackoff (default 100 ms)
	// the first time and doubles at every opening (a failed half-open call
	// or a new run of faults), up to BreakerMaxBackoff (default 30 s); it
	// goes back to BreakerBackoff once the breaker has stayed closed for
	// BreakerReset (default a minute).
	BreakerThreshold  int
	BreakerWindow     time.Duration
	BreakerBackoff    time.Duration
	BreakerMaxBackoff time.Duration
	BreakerReset      time.Duration
	// Reload gives a faulting module a fresh instance for its next call
	// and shuts it out only when it crash-loops (Envoy's FAIL_RELOAD):
	// the breaker counts only the faults of instances that had not yet
	// answered a call (a fresh one that faults at once) and opens at the
	// first, for a backoff of BreakerBackoff (default
	// DefaultReloadBackoff with Reload) doubling at each new crash, up to
	// BreakerMaxBackoff (default DefaultReloadMaxBackoff). A fault of an
	// instance that had answered calls costs only the packets of that
	// call. Without Reload the breaker counts every faulting call
	// (BreakerThreshold).
	Reload bool

	// noFuel skips the instrumentation; only for the benchmark that
	// measures its cost (an uninstrumented guest can stall the process).
	noFuel bool
	// shared is the Host's own cache when Cache is it: compilations
	// register with it, so that it closes after the last of them.
	shared *sharedCache
	// syncSpares makes an instance build a spare on the calling goroutine
	// when none is ready after a trap; only for tests that count faults
	// call by call.
	syncSpares bool
}

// Merge returns o with every zero field replaced by base's: a tenant's
// options over the server's, say.
func (o Options) Merge(base Options) Options {
	o.MemoryLimitPages = cmp.Or(o.MemoryLimitPages, base.MemoryLimitPages)
	o.MaxModuleSize = cmp.Or(o.MaxModuleSize, base.MaxModuleSize)
	o.Bounds = cmp.Or(o.Bounds, base.Bounds)
	o.Fuel = cmp.Or(o.Fuel, base.Fuel)
	o.InitFuel = cmp.Or(o.InitFuel, base.InitFuel)
	o.TimeLimit = cmp.Or(o.TimeLimit, base.TimeLimit)
	o.StackLimit = cmp.Or(o.StackLimit, base.StackLimit)
	o.CacheDir = cmp.Or(o.CacheDir, base.CacheDir)
	if o.Cache == nil {
		o.Cache, o.shared = base.Cache, base.shared
	}
	o.CompileInChild = o.CompileInChild || base.CompileInChild
	o.CompileTimeout = cmp.Or(o.CompileTimeout, base.CompileTimeout)
	o.CompileMemory = cmp.Or(o.CompileMemory, base.CompileMemory)
	o.BreakerThreshold = cmp.Or(o.BreakerThreshold, base.BreakerThreshold)
	o.BreakerWindow = cmp.Or(o.BreakerWindow, base.BreakerWindow)
	o.BreakerBackoff = cmp.Or(o.BreakerBackoff, base.BreakerBackoff)
	o.BreakerMaxBackoff = cmp.Or(o.BreakerMaxBackoff, base.BreakerMaxBackoff)
	o.BreakerReset = cmp.Or(o.BreakerReset, base.BreakerReset)
	o.Reload = o.Reload || base.Reload
	o.noFuel = o.noFuel || base.noFuel
	o.syncSpares = o.syncSpares || base.syncSpares
	return o
}

// withDefaults validates o and fills in zero fields.
func (o Options) withDefaults() (Options, error) {
	if o.Reload {
		o.BreakerBackoff = cmp.Or(o.BreakerBackoff, DefaultReloadBackoff)
		o.BreakerMaxBackoff = cmp.Or(o.BreakerMaxBackoff, max(DefaultReloadMaxBackoff, o.BreakerBackoff))
	}
	o = o.Merge(Options{
		MemoryLimitPages: DefaultMemoryLimitPages, MaxModuleSize: DefaultMaxModuleSize, Bounds: DefaultBounds,
		Fuel: DefaultFuel, TimeLimit: DefaultTimeLimit, StackLimit: DefaultStackLimit,
		CompileTimeout: DefaultCompileTimeout, CompileMemory: DefaultCompileMemory,
		BreakerThreshold: DefaultBreakerThreshold, BreakerWindow: DefaultBreakerWindow,
		BreakerBackoff: DefaultBreakerBackoff, BreakerMaxBackoff: DefaultBreakerMaxBackoff,
		BreakerReset: DefaultBreakerReset,
	})
	o.Bounds = o.Bounds.WithDefaults()
	if o.MemoryLimitPages > 65536 {
		return o, fmt.Errorf("%w: MemoryLimitPages %d is over 65536 (4 GiB)", ErrBadSpec, o.MemoryLimitPages)
	}
	if o.MaxModuleSize < 0 {
		return o, fmt.Errorf("%w: negative MaxModuleSize %d", ErrBadSpec, o.MaxModuleSize)
	}
	if o.Fuel > 1<<62 || o.InitFuel > 1<<62 {
		return o, fmt.Errorf("%w: fuel over 2^62", ErrBadSpec)
	}
	if o.InitFuel == 0 {
		o.InitFuel = o.Fuel * DefaultInitFuelFactor
		if o.InitFuel/DefaultInitFuelFactor != o.Fuel || o.InitFuel > 1<<62 {
			o.InitFuel = 1 << 62
		}
	}
	if o.TimeLimit < 0 || o.CompileTimeout < 0 {
		return o, fmt.Errorf("%w: negative time limit", ErrBadSpec)
	}
	if o.StackLimit > 1<<30 {
		return o, fmt.Errorf("%w: StackLimit %d is over 1 GiB", ErrBadSpec, o.StackLimit)
	}
	if o.BreakerThreshold < 0 || o.BreakerWindow < 0 || o.BreakerBackoff < 0 || o.BreakerMaxBackoff < o.BreakerBackoff || o.BreakerReset < 0 {
		return o, fmt.Errorf("%w: breaker settings (threshold %d, window %v, backoff %v, max backoff %v) must be positive with max >= backoff",
			ErrBadSpec, o.BreakerThreshold, o.BreakerWindow, o.BreakerBackoff, o.BreakerMaxBackoff)
	}
	return o, nil
}
