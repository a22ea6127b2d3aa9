package wasmclass

import (
	"fmt"

	"github.com/tetratelabs/wazero"
)

// Defaults applied to zero Options fields.
const (
	DefaultMemoryLimitPages  = 64      // 4 MiB
	DefaultMaxModuleSize     = 8 << 20 // 8 MiB
	DefaultFuel              = 1_000_000
	DefaultInitFuelFactor    = 100 // InitFuel = Fuel * factor
	DefaultBreakerThreshold  = 4
	DefaultBreakerBackoff    = 1024    // packets
	DefaultBreakerMaxBackoff = 1 << 20 // packets
)

// Options configure how classifiers are loaded and run. The zero value is
// the default for every field.
type Options struct {
	// MemoryLimitPages caps each instance's linear memory, in 64 KiB pages
	// (default 64 = 4 MiB). Modules declaring a larger minimum or maximum are
	// refused; memory.grow past it fails in the guest.
	MemoryLimitPages uint32
	// MaxModuleSize caps the module binary size in bytes (default 8 MiB).
	MaxModuleSize int
	// Fuel is the budget of each call into the classifier: loop iterations
	// plus entries into functions that call others (default 1,000,000,
	// roughly 1 ms of work). A batch call shares one budget.
	Fuel uint64
	// InitFuel is the budget of the module's start function and of
	// _initialize (default 100 * Fuel): language runtimes (Go) need far
	// more than a classification to start.
	InitFuel uint64
	// CacheDir, if set, keeps compiled code on disk there so that restarts
	// skip compilation. Ignored when Cache is set.
	CacheDir string
	// Cache, if set, is a compilation cache shared with other modules (a
	// Host shares one across its tenants). The module does not close it.
	Cache wazero.CompilationCache
	// BreakerThreshold is the number of consecutive faulting calls after
	// which an instance's circuit breaker opens (default 4).
	BreakerThreshold int
	// BreakerBackoff is the number of packets an open breaker sends to
	// UNKNOWN before the classifier is tried again (default 1024). Each
	// failed retry doubles it, up to BreakerMaxBackoff (default 1<<20); a
	// successful call resets it. Backoff counts packets, not time: a
	// classifier that sees no traffic is not retried, and the cost of a
	// faulty classifier stays a bounded fraction of its traffic.
	BreakerBackoff    int
	BreakerMaxBackoff int

	// noFuel skips the instrumentation; only for the benchmark that
	// measures its cost (an uninstrumented guest can stall the process).
	noFuel bool
}

// withDefaults validates o and fills in zero fields.
func (o Options) withDefaults() (Options, error) {
	if o.MemoryLimitPages == 0 {
		o.MemoryLimitPages = DefaultMemoryLimitPages
	}
	if o.MemoryLimitPages > 65536 {
		return o, fmt.Errorf("%w: MemoryLimitPages %d is over 65536 (4 GiB)", ErrBadSpec, o.MemoryLimitPages)
	}
	if o.MaxModuleSize == 0 {
		o.MaxModuleSize = DefaultMaxModuleSize
	}
	if o.MaxModuleSize < 0 {
		return o, fmt.Errorf("%w: negative MaxModuleSize %d", ErrBadSpec, o.MaxModuleSize)
	}
	if o.Fuel == 0 {
		o.Fuel = DefaultFuel
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
	if o.BreakerThreshold == 0 {
		o.BreakerThreshold = DefaultBreakerThreshold
	}
	if o.BreakerBackoff == 0 {
		o.BreakerBackoff = DefaultBreakerBackoff
	}
	if o.BreakerMaxBackoff == 0 {
		o.BreakerMaxBackoff = DefaultBreakerMaxBackoff
	}
	if o.BreakerThreshold < 0 || o.BreakerBackoff < 0 || o.BreakerMaxBackoff < o.BreakerBackoff {
		return o, fmt.Errorf("%w: breaker settings (threshold %d, backoff %d, max backoff %d) must be positive with max >= backoff",
			ErrBadSpec, o.BreakerThreshold, o.BreakerBackoff, o.BreakerMaxBackoff)
	}
	return o, nil
}
