package darc

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
)

// Defaults applied to zero-valued Config fields.
const (
	DefaultQueueCapacity   = 4096
	DefaultDelta           = 0.2
	DefaultSpillway        = 1
	DefaultMinSamples      = 50000
	DefaultDelayFactor     = 1.0
	DefaultDemandDeviation = 0.1
	DefaultHysteresis      = 0.25
	// DefaultMaxWindowFactor sets the default MaxWindow: this many times
	// MinSamples.
	DefaultMaxWindowFactor = 2
	DefaultGuaranteed      = 0.5
	DefaultDeadlineFactor  = 10.0
	DefaultDeadlineFloor   = int64(200e6) // 200 ms
	// UnknownBudgetShare is UNKNOWN's part of the pool relative to a known
	// type's: when guarantees are split, UNKNOWN gets one part for every
	// UnknownBudgetShare parts a known type gets.
	UnknownBudgetShare = 4
)

// Errors returned by New, the typed constructors, Config.Validate and Reserve.
// They are wrapped with context; test with errors.Is.
var (
	ErrInvalidConfig = errors.New("invalid darc config")
	ErrUnknownPolicy = errors.New("unknown policy")
)

// TypeProfile is a type's nominal profile: its mean service time and its
// share of the requests.
type TypeProfile struct {
	Type   Type
	MeanNs float64 // mean service time, ns; > 0
	Ratio  float64 // occurrence ratio, >= 0; ratios need not sum to 1
}

// Config configures every policy of the package. It is a plain, copyable
// value; zero-valued fields take the documented defaults. Constructors
// validate it once.
type Config struct {
	// Workers is the number of application workers (ids 0..Workers-1). Required.
	Workers int
	// NumTypes is the size of the type space: type ids 0..NumTypes-1, 0 being
	// Unknown. Zero means len(TypeNames), or the largest type in Profile + 1.
	NumTypes int
	// TypeNames optionally names types by id (TypeNames[0] names Unknown).
	TypeNames []string
	// QueueCapacity bounds each typed queue (each worker's queue for d-FCFS).
	// Default: without a Pool, 4096; with a Pool, each type's budget (the
	// queue can hold everything its type may hold). With a Pool, an explicit
	// QueueCapacity times NumTypes must fit in it: more queued requests
	// than buffers is refused.
	QueueCapacity int
	// Pool, when > 0, is the most requests the policy holds at once, queued
	// or running: the packet buffers the dataplane can lend to requests
	// while it keeps receiving. Part of it (Guaranteed) is divided into
	// per-type guarantees, the rest is shared: a type below its guarantee is
	// always admitted; past it, it borrows from the shared part up to its
	// budget. An arrival that finds no room is dropped (OverBudget) and
	// counted against its own type. No type can take the part another is
	// guaranteed, and the dataplane never runs dry. Zero: no pool; only
	// QueueCapacity bounds the queues.
	Pool int
	// Guaranteed is the share of the Pool divided into guarantees (0..1]:
	// every known type gets an equal part of it, UNKNOWN a quarter of that
	// (UnknownBudgetShare), after the fixed Guarantees. Default 0.5. Each
	// guarantee must be at least 1, or the config is refused.
	Guaranteed float64
	// Guarantees optionally fixes per-type guarantees (index = type id);
	// zero entries, and types past the end, take a part of the guaranteed
	// share. They add up to at most the Pool. Needs a Pool.
	Guarantees []int
	// Budgets optionally fixes per-type budgets (index = type id): the most
	// requests of that type held at once, queued or running (1..Pool). By
	// default a type may hold its guarantee plus the whole shared part.
	// Needs a Pool.
	Budgets []int
	// DeadlineFactor sets the automatic queue deadlines: a request that
	// waited in its queue longer than its type's deadline is dropped before
	// service (Dispatch returns it with Worker == Expired). A type's
	// automatic deadline is DeadlineFactor times the longest profiled mean
	// service time among the types that can hold up its workers (its DARC
	// group once DARC reserves; every known type before that and under the
	// other policies), and at least DeadlineFloor; none until a mean is
	// known. Default 10 (see RATIONALE.md); negative: no automatic deadlines.
	DeadlineFactor float64
	// DeadlineFloor is the least automatic deadline, ns, above the host's
	// scheduling noise. Default 200 ms; negative: none.
	DeadlineFloor int64
	// Deadlines optionally fixes per-type deadlines (index = type id), ns:
	// > 0 is the deadline, < 0 means none, 0 (and types past the end)
	// automatic.
	Deadlines []int64
	// Delta is the grouping factor of Algorithm 2: a type joins a group while
	// its mean is less than (1+Delta) times the group's shortest mean.
	// Default 0.2.
	Delta float64
	// Spillway is the number of spillway workers: the last Spillway worker ids.
	// They serve Unknown requests and long groups left without workers.
	// Default 1.
	Spillway int
	// MinSamples is the number of completions of known types a profiling
	// window needs before DARC leaves its startup phase or considers a
	// reservation update; FP re-sorts its type order every MinSamples
	// completions. Default 50000.
	MinSamples int
	// DelayFactor triggers an update check when the second-oldest queued
	// request of a type has waited more than DelayFactor times the type's
	// profiled mean. Default 1 (the prototype's); the paper uses 10, which
	// checks less often but can miss a change of workload that produces no
	// long queue (the phase experiment in tests/).
	DelayFactor float64
	// MaxWindow is the most completions of known types a profiling window
	// collects before the update check runs anyway, backlog or not (a new
	// window starts after every check). The queuing-delay trigger alone
	// misses a change of workload that builds no long queue, and at a few
	// hundred requests per second it lets one window span a whole phase,
	// so that a change is seen late and through a window mixing before and
	// after. Default DefaultMaxWindowFactor x MinSamples; negative: no
	// limit (the prototype's: checks on queuing delay only); at least
	// MinSamples.
	MaxWindow int
	// DemandDeviation: a check re-reserves only if some group's demand moved
	// from the demand it was reserved for by more than DemandDeviation times
	// its current allocation (in workers),
	// or the set of active types or their grouping changed. Default 0.1.
	DemandDeviation float64
	// Hysteresis widens the rounding band of an update that keeps the
	// reservation's shape: a group keeps its current worker count w while its
	// new demand stays within [w-0.5-Hysteresis, w+0.5+Hysteresis] workers,
	// and takes Algorithm 2's rounding once it leaves that band. Window noise
	// around a .5 boundary then no longer flips the count back and forth,
	// while a count off by one from the rounded demand is left as soon as a
	// window's demand crosses the far edge of the band. The first
	// reservation, shape changes and Reserve use the paper's rounding.
	// Default 0.25; negative disables it (the paper's and the prototype's
	// behaviour); at most 0.5.
	Hysteresis float64
	// StaticReserved is the number of workers DARC-static reserves for the
	// shortest type (0..Workers). Other policies ignore it.
	StaticReserved int
	// Profile optionally gives nominal profiles. DARC and DARC-static then
	// reserve from it at once and skip the startup phase; FP uses it for its
	// first type order.
	Profile []TypeProfile
	// Tenants, when not empty, makes the policy multi-tenant (DARC and
	// DARC-static only; see Tenants): each tenant has its own type space,
	// its own DARC over its home workers, lends and borrows idle workers,
	// and a share of the Pool. NumTypes, TypeNames, Profile, Budgets,
	// Guarantees and Deadlines then belong to the tenants and must be
	// unset here; the other fields apply to every tenant.
	Tenants []TenantConfig
	// LendAll makes a multi-tenant policy lend every idle worker (fully
	// work-conserving). By default a tenant whose DARC has several groups
	// keeps idle the workers reserved for its shorter groups and one more
	// they may steal, for its short requests, which a borrowed worker would
	// delay by one service time of the borrower's request (see
	// RATIONALE.md).
	LendAll bool
}

// withDefaults returns c with zero fields set to their defaults.
func (c Config) withDefaults() Config {
	if c.NumTypes == 0 {
		c.NumTypes = len(c.TypeNames)
		for _, p := range c.Profile {
			c.NumTypes = max(c.NumTypes, int(p.Type)+1)
		}
	}
	if c.QueueCapacity == 0 && c.Pool == 0 { // with a pool: each type's budget
		c.QueueCapacity = DefaultQueueCapacity
	}
	c.Guaranteed = cmp.Or(c.Guaranteed, DefaultGuaranteed)
	c.DeadlineFactor = cmp.Or(c.DeadlineFactor, DefaultDeadlineFactor)
	c.DeadlineFloor = cmp.Or(c.DeadlineFloor, DefaultDeadlineFloor)
	c.Delta = cmp.Or(c.Delta, DefaultDelta)
	c.Spillway = cmp.Or(c.Spillway, DefaultSpillway)
	c.MinSamples = cmp.Or(c.MinSamples, DefaultMinSamples)
	c.DelayFactor = cmp.Or(c.DelayFactor, DefaultDelayFactor)
	c.DemandDeviation = cmp.Or(c.DemandDeviation, DefaultDemandDeviation)
	c.Hysteresis = cmp.Or(c.Hysteresis, DefaultHysteresis)
	if c.MaxWindow == 0 && c.MinSamples <= math.MaxInt/DefaultMaxWindowFactor {
		c.MaxWindow = DefaultMaxWindowFactor * c.MinSamples
	}
	return c
}

// Validate reports the first problem with c (after defaults), wrapping
// ErrInvalidConfig.
func (c Config) Validate() error {
	if len(c.Tenants) > 0 {
		return c.validateTenants()
	}
	c = c.withDefaults()
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...)
	}
	switch {
	case c.Workers <= 0:
		return bad("workers = %d (need at least 1)", c.Workers)
	case c.NumTypes < 0:
		return bad("numtypes = %d (must be >= 0)", c.NumTypes)
	case c.NumTypes == 0:
		return bad("numtypes = 0 (set NumTypes, TypeNames or Profile)")
	case c.NumTypes > maxTypes:
		return bad("numtypes = %d (at most %d)", c.NumTypes, maxTypes)
	case len(c.TypeNames) > c.NumTypes:
		return bad("%d type names for %d types", len(c.TypeNames), c.NumTypes)
	case c.QueueCapacity < 0 || c.QueueCapacity > 1<<24:
		return bad("queue capacity = %d (must be 1..%d)", c.QueueCapacity, 1<<24)
	case !(c.Delta > 0) || math.IsInf(c.Delta, 0):
		return bad("delta = %v (must be > 0)", c.Delta)
	case c.Spillway < 0 || c.Spillway > c.Workers:
		return bad("spillway = %d (must be 1..workers=%d)", c.Spillway, c.Workers)
	case c.MinSamples < 0:
		return bad("min samples = %d (must be > 0)", c.MinSamples)
	case !(c.DelayFactor > 0) || math.IsInf(c.DelayFactor, 0):
		return bad("delay factor = %v (must be > 0)", c.DelayFactor)
	case c.MaxWindow > 0 && c.MaxWindow < c.MinSamples:
		return bad("max window = %d (must be at least min samples = %d, or negative for no limit)", c.MaxWindow, c.MinSamples)
	case !(c.DemandDeviation > 0) || math.IsInf(c.DemandDeviation, 0):
		return bad("demand deviation = %v (must be > 0)", c.DemandDeviation)
	case math.IsNaN(c.Hysteresis) || c.Hysteresis > 0.5:
		return bad("hysteresis = %v (must be at most 0.5; negative disables it)", c.Hysteresis)
	case c.StaticReserved < 0 || c.StaticReserved > c.Workers:
		return bad("static reserved = %d (must be 0..workers=%d)", c.StaticReserved, c.Workers)
	case c.Pool < 0 || c.Pool > 1<<24:
		return bad("pool = %d (must be 0..%d)", c.Pool, 1<<24)
	case c.Pool > 0 && c.QueueCapacity > 0 && int64(c.QueueCapacity)*int64(c.NumTypes) > int64(c.Pool):
		return bad("queue capacity %d x %d types = %d queued requests, more than the pool's %d buffers (use a queue capacity of at most %d, leave it unset to size each queue to its type's budget, or give the dataplane more buffers)",
			c.QueueCapacity, c.NumTypes, int64(c.QueueCapacity)*int64(c.NumTypes), c.Pool, c.Pool/c.NumTypes)
	case (len(c.Budgets) > 0 || len(c.Guarantees) > 0) && c.Pool == 0:
		return bad("budgets and guarantees need a pool (set Pool: the buffers requests may hold)")
	case len(c.Budgets) > c.NumTypes || len(c.Guarantees) > c.NumTypes:
		return bad("%d budgets and %d guarantees for %d types", len(c.Budgets), len(c.Guarantees), c.NumTypes)
	case !(c.Guaranteed > 0 && c.Guaranteed <= 1):
		return bad("guaranteed share = %v (must be in (0, 1])", c.Guaranteed)
	case math.IsNaN(c.DeadlineFactor) || math.IsInf(c.DeadlineFactor, 0) || c.DeadlineFactor > MaxDeadlineFactor:
		return bad("deadline factor = %v (must be a number up to %g; negative disables automatic deadlines)", c.DeadlineFactor, float64(MaxDeadlineFactor))
	case c.DeadlineFloor > MaxDeadline:
		return bad("deadline floor = %dns (at most %dns, %v; negative: no floor)", c.DeadlineFloor, MaxDeadline, time.Duration(MaxDeadline))
	case len(c.Deadlines) > c.NumTypes:
		return bad("%d deadlines for %d types", len(c.Deadlines), c.NumTypes)
	}
	for t, d := range c.Deadlines {
		if d > MaxDeadline {
			return bad("deadline of type %d = %dns (at most %dns, %v; negative: none)", t, d, MaxDeadline, time.Duration(MaxDeadline))
		}
	}
	if c.Pool > 0 {
		if _, err := splitPool(c.Pool, c.Guaranteed, c.Guarantees, c.Budgets, c.NumTypes); err != nil {
			return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
		}
	}
	if err := validateProfiles(c.Profile, c.NumTypes); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	return nil
}

// maxTypes bounds the type space so per-type tables stay small.
const maxTypes = 1 << 16

// Bounds on values the policy does arithmetic with: larger ones are
// refused by Validate and AddTenant/UpdateTenant, so that no sum, share or
// expiry time overflows.
const (
	// MaxWeight is the largest tenant weight (weights are relative: a
	// million to one is finer than any share of 1,024 workers).
	MaxWeight = 1e6
	// MaxDeadline is the longest queue deadline, and deadline floor, in
	// ns: one day. A request's expiry (its enqueue time plus its
	// deadline) then stays far from int64's end for 292 years of uptime.
	MaxDeadline = int64(24 * time.Hour)
	// MaxDeadlineFactor is the largest DeadlineFactor.
	MaxDeadlineFactor = 1e6
)

func validateProfiles(ps []TypeProfile, numTypes int) error {
	if len(ps) == 0 {
		return nil
	}
	seen := make(map[Type]bool, len(ps))
	sum := 0.0
	for _, p := range ps {
		switch {
		case p.Type == Unknown || int(p.Type) >= numTypes:
			return fmt.Errorf("profile type %d (must be 1..%d)", p.Type, numTypes-1)
		case seen[p.Type]:
			return fmt.Errorf("profile type %d given twice", p.Type)
		case !(p.MeanNs > 0) || math.IsInf(p.MeanNs, 0):
			return fmt.Errorf("profile type %d: mean %v ns (must be > 0)", p.Type, p.MeanNs)
		case !(p.Ratio >= 0) || math.IsInf(p.Ratio, 0):
			return fmt.Errorf("profile type %d: ratio %v (must be >= 0)", p.Type, p.Ratio)
		}
		seen[p.Type] = true
		sum += p.Ratio
	}
	if !(sum > 0) {
		return errors.New("profile ratios sum to 0 (give at least one type a share)")
	}
	return nil
}

// String renders c with defaults applied.
func (c Config) String() string {
	c = c.withDefaults()
	var b strings.Builder
	fmt.Fprintf(&b, "workers=%d types=%d queue=%d delta=%g spillway=%d min-samples=%d max-window=%d delay-factor=%g demand-deviation=%g hysteresis=%g static-reserved=%d",
		c.Workers, c.NumTypes, c.QueueCapacity, c.Delta, c.Spillway, c.MinSamples, c.MaxWindow, c.DelayFactor, c.DemandDeviation, c.Hysteresis, c.StaticReserved)
	fmt.Fprintf(&b, " pool=%d guaranteed=%g deadline-factor=%g deadline-floor=%dns", c.Pool, c.Guaranteed, c.DeadlineFactor, c.DeadlineFloor)
	if len(c.Guarantees) > 0 {
		fmt.Fprintf(&b, " guarantees=%v", c.Guarantees)
	}
	if len(c.Budgets) > 0 {
		fmt.Fprintf(&b, " budgets=%v", c.Budgets)
	}
	if len(c.Deadlines) > 0 {
		fmt.Fprintf(&b, " deadlines=%v", c.Deadlines)
	}
	if len(c.Tenants) > 0 {
		fmt.Fprintf(&b, " tenants=%d", len(c.Tenants))
	}
	if len(c.Profile) > 0 {
		b.WriteString(" profile=[")
		for i, p := range c.Profile {
			if i > 0 {
				b.WriteByte(' ')
			}
			fmt.Fprintf(&b, "%d:%gns/%g", p.Type, p.MeanNs, p.Ratio)
		}
		b.WriteByte(']')
	}
	return b.String()
}

// typeName returns the display name of type t.
func (c *Config) typeName(t int) string {
	if t < len(c.TypeNames) && c.TypeNames[t] != "" {
		return c.TypeNames[t]
	}
	if t == 0 {
		return "UNKNOWN"
	}
	return fmt.Sprintf("type%d", t)
}
