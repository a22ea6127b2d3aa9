package dispatcher

import (
	"cmp"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Idle strategies: what a worker (and the dispatcher) does when it has nothing
// to do.
const (
	// IdleBusyPoll spins without ever sleeping (the paper's choice: lowest
	// latency, one fully busy core per worker).
	IdleBusyPoll = "busy-poll"
	// IdleSpinThenPark spins for Spec.Spin (the dispatcher: for
	// Spec.DispatcherSpin, giving its core away while it polls), then parks
	// until woken. It lets many workers share a few cores (laptops, CI,
	// emulated workloads).
	IdleSpinThenPark = "spin-then-park"
)

// Defaults applied by Spec.withDefaults.
const (
	DefaultWorkers      = 1
	DefaultBurst        = 32
	DefaultRingCapacity = 8
	DefaultMaxRequests  = 1 << 16
	DefaultSpin         = 50 * time.Microsecond
	// DefaultDispatcherSpin covers the gaps between requests at a few
	// hundred requests/s: at 200/s (Poisson) 98% of gaps are shorter.
	DefaultDispatcherSpin = 20 * time.Millisecond
	DefaultStatsInterval  = 100 * time.Millisecond
	DefaultDrainTimeout   = 5 * time.Second
	DefaultMinPayload     = 1
	DefaultLaneBuffers    = 2048
	DefaultInlineLimit    = 100 * time.Microsecond
	DefaultLaneProbation  = 64
	DefaultInPlaceLimit   = 20 * time.Microsecond
)

// Spec configures a Dispatcher. It is plain data: copy it freely. The zero
// value is a sensible default (one worker, spin-then-park, bursts of 32).
type Spec struct {
	// Workers is the number of application workers; it must equal the
	// policy's and the dataplane's worker count. Default 1.
	Workers int
	// CPUs, when not empty, pins threads to CPUs: CPUs[0] is the dispatcher's,
	// CPUs[1:] the workers' in order; when there are fewer worker CPUs than
	// workers they are reused round-robin (with a single entry everything is
	// pinned to it). CPUs this process may not use are refused by New.
	CPUs []int
	// Idle is IdleBusyPoll or IdleSpinThenPark (default).
	Idle string
	// Spin is how long an idle worker spins before parking under
	// IdleSpinThenPark. Default 50µs; negative: park at once.
	Spin time.Duration
	// DispatcherSpin is how long the dispatcher keeps polling the
	// dataplane after its last work before it parks, under
	// IdleSpinThenPark. A request that arrives while it polls is read at
	// once; one that arrives while it is parked waits for a thread
	// wake-up (tens of microseconds on a VM: StageReceive). For the first
	// Spin of it the dispatcher spins as a worker does; after that each
	// poll that finds nothing gives its CPU to any other thread ready to
	// run there (sched_yield), so polling costs only a core nothing else
	// wants. Default 20ms; negative: the dispatcher parks after Spin, as
	// a worker does.
	DispatcherSpin time.Duration
	// Burst is the receive burst size. Default 32.
	Burst int
	// RingCapacity is the capacity of each worker's rings (a worker holds at
	// most one request, so a few slots suffice). Default 8.
	RingCapacity int
	// MaxRequests bounds the requests held at once (queued or running);
	// arrivals beyond it are dropped for reason "overload". Default 65536.
	MaxRequests int
	// MinPayload is the shortest payload accepted; shorter ones are dropped
	// for reason "runt". Default 1 (empty datagrams are runts).
	MinPayload int
	// StatsInterval is how often the dispatcher publishes a Stats snapshot.
	// Default 100ms. With more than 4,000 types, publishes are 25µs per
	// type apart when that is longer (a publish reads every type).
	StatsInterval time.Duration
	// DrainTimeout bounds the graceful shutdown. Default 5s; negative: drop
	// the queued requests at once.
	DrainTimeout time.Duration
	// TypeNames names the type ids (index = id) in Stats; optional.
	TypeNames []string
	// Tenants are the dispatcher's tenants with a TenantPolicy (which
	// must already have them): each packet goes to the tenant its UDP
	// destination port names and is classified by that tenant's
	// classifier, inline or on the tenant's own lane (see TenantSpec). New's
	// classifier argument is then unused. A TenantPolicy without Tenants
	// makes a dispatcher whose tenants come with AddTenant.
	Tenants []TenantSpec
	// LaneCapacity bounds the packets one tenant's lane holds (waiting
	// for or in its classifier). Default 256.
	LaneCapacity int
	// LaneBuffers bounds the packets all lanes hold together: buffers the
	// dataplane must lend beside the policy's pool. Default 2048.
	LaneBuffers int
	// InlineLimit is the longest an IsolateAuto tenant's classifier call
	// may take on the dispatcher goroutine: a longer one moves the tenant
	// to its lane. Default 100µs (a batch of 32 takes 1-3 µs with the
	// example classifiers).
	InlineLimit time.Duration
	// LaneProbation is the number of consecutive clean calls (no fault,
	// none over InlineLimit) on its lane after which an IsolateAuto
	// tenant is classified inline again. Default 64: a classifier that
	// keeps faulting never comes back (its calls, refused by its open
	// breaker, count as faults), one a machine stall slowed down does.
	LaneProbation int
	// InPlaceLimit is the longest expected service time of a request the
	// dispatcher serves itself, on the chosen worker's behalf, when that
	// worker is parked (see "Serving in place" in the package
	// documentation): waking a parked thread costs more than such a
	// request. Only under IdleSpinThenPark. Default 20µs; negative: never
	// (every request is handed to its worker's thread).
	InPlaceLimit time.Duration
}

// Errors returned by New and Run.
var (
	// ErrSpec wraps every Spec validation error.
	ErrSpec = errors.New("dispatcher: invalid spec")
	// ErrRunning is returned by Run when the dispatcher already ran.
	ErrRunning = errors.New("dispatcher: Run called twice")
)

// withDefaults returns s with zero fields set to their defaults.
func (s Spec) withDefaults() Spec {
	s.Workers = cmp.Or(s.Workers, DefaultWorkers)
	s.Idle = cmp.Or(s.Idle, IdleSpinThenPark)
	s.Spin = cmp.Or(s.Spin, DefaultSpin)
	s.DispatcherSpin = cmp.Or(s.DispatcherSpin, DefaultDispatcherSpin)
	s.Burst = cmp.Or(s.Burst, DefaultBurst)
	s.RingCapacity = cmp.Or(s.RingCapacity, DefaultRingCapacity)
	s.MaxRequests = cmp.Or(s.MaxRequests, DefaultMaxRequests)
	s.MinPayload = cmp.Or(s.MinPayload, DefaultMinPayload)
	s.StatsInterval = cmp.Or(s.StatsInterval, DefaultStatsInterval)
	s.DrainTimeout = cmp.Or(s.DrainTimeout, DefaultDrainTimeout)
	s.LaneCapacity = cmp.Or(s.LaneCapacity, DefaultLaneCapacity)
	s.LaneBuffers = cmp.Or(s.LaneBuffers, DefaultLaneBuffers)
	s.InlineLimit = cmp.Or(s.InlineLimit, DefaultInlineLimit)
	s.LaneProbation = cmp.Or(s.LaneProbation, DefaultLaneProbation)
	s.InPlaceLimit = cmp.Or(s.InPlaceLimit, DefaultInPlaceLimit)
	return s
}

// Validate reports the first problem with s (after defaults), wrapping
// ErrSpec. It does not check CPUs against the machine: New does.
func (s Spec) Validate() error {
	s = s.withDefaults()
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrSpec}, args...)...)
	}
	switch {
	case s.Workers < 1:
		return bad("workers = %d, want >= 1", s.Workers)
	case s.Idle != IdleBusyPoll && s.Idle != IdleSpinThenPark:
		return bad("idle strategy %q, want %q or %q", s.Idle, IdleBusyPoll, IdleSpinThenPark)
	case s.Burst < 1 || s.Burst > 4096:
		return bad("burst = %d, want 1..4096", s.Burst)
	case s.RingCapacity < 2:
		return bad("ring capacity = %d, want >= 2", s.RingCapacity)
	case s.MaxRequests < s.Burst:
		return bad("max requests = %d, want >= burst (%d)", s.MaxRequests, s.Burst)
	case s.MinPayload < 0:
		return bad("min payload = %d, want >= 0", s.MinPayload)
	case s.StatsInterval < time.Millisecond:
		return bad("stats interval = %v, want >= 1ms", s.StatsInterval)
	case s.LaneCapacity < 1 || s.LaneBuffers < 1 || s.InlineLimit < 0 || s.LaneProbation < 1:
		return bad("lane capacity %d, lane buffers %d, inline limit %v, lane probation %d: want >= 1", s.LaneCapacity, s.LaneBuffers, s.InlineLimit, s.LaneProbation)
	}
	for _, c := range s.CPUs {
		if c < 0 {
			return bad("cpu %d is negative", c)
		}
	}
	return nil
}

// String describes s on one line.
func (s Spec) String() string {
	s = s.withDefaults()
	var b strings.Builder
	fmt.Fprintf(&b, "workers=%d idle=%s", s.Workers, s.Idle)
	if s.Idle == IdleSpinThenPark {
		fmt.Fprintf(&b, " spin=%v dispatcher-spin=%v", s.Spin, s.DispatcherSpin)
	}
	fmt.Fprintf(&b, " burst=%d ring=%d max-requests=%d", s.Burst, s.RingCapacity, s.MaxRequests)
	if len(s.CPUs) > 0 {
		fmt.Fprintf(&b, " cpus=%v", s.CPUs)
	}
	return b.String()
}

// Procs returns the GOMAXPROCS a process running a dispatcher for s needs
// so that no goroutine ready to run waits for a Go processor. Under
// spin-then-park that is one per worker and one for the dispatcher, since
// each may keep its processor while its thread sleeps in the kernel (the
// dispatcher waiting for packets, a worker in the last part of an
// emulated service time), plus one for everything else (admin, garbage
// collection): with fewer, a woken worker waits until the runtime's
// monitor takes a processor back from a sleeping thread, up to 10ms
// later (sysmon's longest period). Under busy-poll, where each of those threads spins on a core of
// its own, the machine's cores are the limit and Procs returns 0 (leave
// GOMAXPROCS alone).
func (s Spec) Procs() int {
	s = s.withDefaults()
	if s.Idle == IdleBusyPoll {
		return 0
	}
	return s.Workers + 2
}

// dispatcherCPU returns the CPU the dispatcher is pinned to, or -1.
func (s Spec) dispatcherCPU() int {
	if len(s.CPUs) == 0 {
		return -1
	}
	return s.CPUs[0]
}

// workerCPU returns the CPU worker w is pinned to, or -1.
func (s Spec) workerCPU(w int) int {
	switch len(s.CPUs) {
	case 0:
		return -1
	case 1:
		return s.CPUs[0]
	default:
		return s.CPUs[1+w%(len(s.CPUs)-1)]
	}
}
