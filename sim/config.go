package sim

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/persephone-go/psp/darc"
	"github.com/persephone-go/psp/workload"
)

// Policies simulated here rather than in package darc.
const (
	// PolicyTS is time sharing on one queue: every request runs for at most
	// a quantum while others wait; a preempted request costs PreemptCost and
	// goes back to the tail of the queue.
	PolicyTS = "ts"
	// PolicyTSMultiQueue is time sharing with one queue per type: a worker
	// takes the head of the non-empty queue of the type with the shortest
	// mean service time; preempted requests go back to the tail of their
	// type's queue.
	PolicyTSMultiQueue = "ts-mq"
	// PolicyPreempt is a single FIFO queue without time slicing, where a
	// short request that waits while long ones run preempts one of them
	// PreemptDelay later (paying PreemptCost); the preempted request goes
	// back to the tail of the queue and the worker takes the oldest short
	// request. Short types are those of the shortest DARC group (mean within
	// a factor 1+Delta of the shortest mean).
	PolicyPreempt = "preempt"
)

// Defaults applied to zero-valued Config fields.
const (
	DefaultWorkers      = 16
	DefaultDuration     = time.Second
	DefaultWarmup       = 0.1
	DefaultQuantum      = 5 * time.Microsecond
	DefaultPreemptCost  = time.Microsecond
	DefaultPreemptDelay = time.Microsecond
	DefaultSource       = "sim"
)

// Errors returned by Run and RunSweep, wrapped with context.
var (
	ErrInvalidConfig = errors.New("invalid simulation config")
	ErrUnknownPolicy = errors.New("unknown policy")
)

// PolicyNames lists every policy the simulator runs: the darc package's and
// its own preemptive ones.
func PolicyNames() []string {
	return append(darc.PolicyNames(), PolicyTS, PolicyTSMultiQueue, PolicyPreempt)
}

func isPreemptive(policy string) bool {
	return policy == PolicyTS || policy == PolicyTSMultiQueue || policy == PolicyPreempt
}

// TSConfig configures the preemptive policies. Zero values take the
// defaults; a negative duration means zero (e.g. PreemptCost: -1 for free
// preemptions).
type TSConfig struct {
	Quantum      time.Duration // time slice of ts and ts-mq; default 5us
	PreemptCost  time.Duration // worker time lost per preemption; default 1us
	PreemptDelay time.Duration // preempt: from a short request's arrival to the preemption; default 1us
}

func orDefault(d, def time.Duration) time.Duration {
	switch {
	case d == 0:
		return def
	case d < 0:
		return 0
	}
	return d
}

// Config describes one simulated run: a workload offered at one load to
// Workers workers under one policy. The zero value of every field except
// Workload and Load (or Rate) is a sensible default.
type Config struct {
	Workload workload.Workload
	// Workers is the number of application workers; default 16.
	Workers int
	// Policy is one of PolicyNames(); default "darc".
	Policy string
	// Load is the offered load, a fraction of the workers' capacity:
	// rate = Load x Workers / mean service time. Ignored when Rate > 0.
	Load float64
	// Rate is the offered rate in requests per second; overrides Load.
	Rate float64
	// Duration is the simulated time during which requests arrive; default
	// 1s. Requests still queued at its end run to completion.
	Duration time.Duration
	// Seed makes the run deterministic; the same seed gives the same
	// arrivals to every policy.
	Seed uint64
	// Warmup is the fraction of Duration whose arrivals are not recorded;
	// default 0.1, negative for none.
	Warmup float64
	// Dilation multiplies every service time (default 1): a run with the
	// time scale of an emulated server with that dilation, which matters
	// for absolute times such as darc's deadline floor. Load and slowdowns
	// are unchanged; Rate, Duration and latencies are on the dilated scale.
	Dilation float64
	// Darc is the base configuration of the darc policies (Delta,
	// QueueCapacity, Pool and Budgets, deadlines, MinSamples,
	// StaticReserved, ...): budgets and deadlines work as in the live
	// server; the preemptive policies have neither. Workers, NumTypes and
	// TypeNames are set by the simulator; Profile is set to the workload's
	// nominal profile for fp and darc-static when empty (DARC learns its
	// own). When MinSamples is 0, DARC's startup phase is shortened to 5% of
	// the expected arrivals (between 100 and darc.DefaultMinSamples), so it
	// ends inside the warm-up. QueueCapacity also bounds the preemptive
	// policies' per-type queues.
	Darc darc.Config
	// TS configures ts, ts-mq and preempt.
	TS TSConfig
	// Source labels the resulting point; default "sim".
	Source string
	// Trace, when not empty, is the run's arrivals instead of a Poisson
	// process at Rate drawn from Seed: to replay the requests a live run
	// actually sent, at the times it sent them. Times must not decrease;
	// Duration defaults to just after the last arrival, Rate (for the
	// report) to the trace's mean rate over Duration, and Warmup is the
	// fraction of the trace's first requests not recorded.
	Trace []Arrival
}

// Arrival is one request of a trace (Config.Trace).
type Arrival struct {
	// At is the arrival time, ns from the start.
	At int64
	// Type is the request's type, an index into the workload's types.
	Type int
	// ServiceNs is the request's service time.
	ServiceNs int64
}

// withDefaults returns c with zero fields set to their defaults (negative
// Warmup and TS durations to zero) and the offered rate and load derived
// from each other.
func (c Config) withDefaults() Config {
	if c.Workers == 0 {
		c.Workers = DefaultWorkers
	}
	if c.Policy == "" {
		c.Policy = darc.NameDARC
	}
	if c.Duration == 0 && len(c.Trace) > 0 {
		c.Duration = time.Duration(c.Trace[len(c.Trace)-1].At + 1)
	}
	if c.Duration == 0 {
		c.Duration = DefaultDuration
	}
	if len(c.Trace) > 0 && c.Rate == 0 && c.Duration > 0 {
		c.Rate = float64(len(c.Trace)) / c.Duration.Seconds()
	}
	if c.Warmup == 0 {
		c.Warmup = DefaultWarmup
	} else if c.Warmup < 0 {
		c.Warmup = 0
	}
	if c.Source == "" {
		c.Source = DefaultSource
	}
	if c.Dilation == 0 {
		c.Dilation = 1
	}
	if c.Dilation != 1 && c.Dilation > 0 && !math.IsInf(c.Dilation, 0) {
		c.Workload = c.Workload.Dilated(c.Dilation)
		c.Dilation = 1 // applied
	}
	c.TS.Quantum = orDefault(c.TS.Quantum, DefaultQuantum)
	c.TS.PreemptCost = orDefault(c.TS.PreemptCost, DefaultPreemptCost)
	c.TS.PreemptDelay = orDefault(c.TS.PreemptDelay, DefaultPreemptDelay)
	switch {
	case c.Rate > 0 && c.Workers > 0:
		c.Load = c.Workload.LoadForRate(c.Rate, c.Workers)
	case c.Load > 0 && c.Workers > 0:
		c.Rate = c.Workload.RateForLoad(c.Load, c.Workers)
	}
	return c
}

// Validate reports the first problem with c (after defaults), wrapping
// ErrInvalidConfig or ErrUnknownPolicy.
func (c Config) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidConfig, fmt.Sprintf(format, args...))
	}
	if c.Dilation < 0 || math.IsNaN(c.Dilation) || math.IsInf(c.Dilation, 0) {
		return bad("dilation = %g, want > 0", c.Dilation)
	}
	c = c.withDefaults()
	switch {
	case c.Workers < 1:
		return bad("workers = %d, want >= 1", c.Workers)
	case c.Duration < 0:
		return bad("duration = %v, want > 0", c.Duration)
	case c.Warmup >= 1:
		return bad("warmup = %g, want a fraction below 1", c.Warmup)
	case c.TS.Quantum <= 0:
		return bad("quantum = %v, want > 0", c.TS.Quantum)
	case !slices.Contains(PolicyNames(), c.Policy):
		return fmt.Errorf("policy %q: %w (valid: %s)", c.Policy, ErrUnknownPolicy, strings.Join(PolicyNames(), ", "))
	}
	if err := c.Workload.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	for i, a := range c.Trace {
		switch {
		case a.Type < 0 || a.Type >= len(c.Workload.Types):
			return bad("trace request %d has type %d, want 0..%d", i, a.Type, len(c.Workload.Types)-1)
		case a.ServiceNs < 0 || a.At < 0:
			return bad("trace request %d: negative time or service time", i)
		case i > 0 && a.At < c.Trace[i-1].At:
			return bad("trace request %d arrives at %d, before request %d (%d)", i, a.At, i-1, c.Trace[i-1].At)
		}
	}
	if c.Rate <= 0 && !(c.Load > 0) {
		return bad("load = %g, want > 0 (or give a rate)", c.Load)
	}
	return nil
}

// darcConfig builds the darc.Config for the run's policy.
func (c *Config) darcConfig() darc.Config {
	d := c.Darc
	d.Workers = c.Workers
	d.NumTypes = len(c.Workload.Types) + 1
	d.TypeNames = append([]string{"UNKNOWN"}, c.Workload.TypeNames()...)
	if len(d.Profile) == 0 && (c.Policy == darc.NameFP || c.Policy == darc.NameDARCStatic) {
		d.Profile = nominalProfile(&c.Workload)
	}
	if d.MinSamples == 0 && (c.Policy == darc.NameDARC) {
		expected := c.Rate * c.Duration.Seconds()
		d.MinSamples = int(min(max(expected*0.05, 100), darc.DefaultMinSamples))
	}
	return d
}

// nominalProfile is the workload's profile in darc's type space (workload
// type index i is darc type i+1).
func nominalProfile(w *workload.Workload) []darc.TypeProfile {
	ps := make([]darc.TypeProfile, len(w.Types))
	for i, t := range w.Types {
		ps[i] = darc.TypeProfile{Type: darc.Type(i + 1), MeanNs: t.Service.MeanNs(), Ratio: t.Share}
	}
	return ps
}
