package sim

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/persephone-go/psp/darc"
	"github.com/persephone-go/psp/internal/connpick"
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
	// PolicyShinjuku is Shinjuku's own discipline (its prototype's
	// dispatcher): one queue per type; a free worker takes the head of the
	// queue whose head has waited longest relative to its type's mean
	// service time (Shinjuku's per-type SLOs, BVT-style); every slice that
	// reaches the quantum is preempted, whether or not anything waits,
	// paying PreemptCost, and the request goes back to the tail of its
	// type's queue keeping its arrival time.
	PolicyShinjuku = "shinjuku"
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
	return append(darc.PolicyNames(), PolicyTS, PolicyTSMultiQueue, PolicyShinjuku, PolicyPreempt)
}

func isPreemptive(policy string) bool {
	return policy == PolicyTS || policy == PolicyTSMultiQueue || policy == PolicyShinjuku || policy == PolicyPreempt
}

// TSConfig configures the preemptive policies (ts, ts-mq, shinjuku, preempt). Zero values take the
// defaults; a negative duration means zero (e.g. PreemptCost: -1 for free
// preemptions).
type TSConfig struct {
	Quantum      time.Duration // time slice of ts, ts-mq and shinjuku; default 5us
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
// Workload (or Phases) and Load (or Rate) is a sensible default.
type Config struct {
	Workload workload.Workload
	// Phases, when it has phases, is played instead of Workload: each
	// phase's mix for its duration, at its own load or at Load. Duration
	// is then the phases' total (leave it zero), Rate must be zero and the
	// point's Workload names the phase list.
	Phases workload.Phases
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
	// TS configures ts, ts-mq, shinjuku and preempt.
	TS TSConfig
	// NetworkRTT is added to every latency, not to slowdowns (which count
	// the time spent in the server): the network round trip between the
	// clients and the server (the paper's testbed: about 10us). Default 0.
	NetworkRTT time.Duration
	// DispatcherRate, when > 0, is the dispatcher's throughput in requests
	// per second: each request occupies the one dispatcher for
	// 1/DispatcherRate before it reaches its queue (receive, classify,
	// enqueue, dispatch and completion, charged at once), in arrival
	// order, so a faster arrival rate piles up in front of it. The wait
	// counts in latency and slowdown. Default 0: an infinitely fast
	// dispatcher (the paper's: up to 7 million requests/s).
	DispatcherRate float64
	// InPlaceLimit, when > 0, models psp serve's serving in place
	// (dispatcher.Spec.InPlaceLimit): a request the policy dispatches to
	// an idle worker runs on the dispatcher itself, as that worker, when
	// its type's expected service (darc.ServiceEstimate over the type's
	// services so far) is under the limit. The dispatcher then receives
	// and dispatches nothing until it is done: arrivals in the meantime
	// wait for it (the wait counts in latency), and freed workers are
	// noticed when it is done. Idle workers are taken to be parked (psp
	// serve on a machine whose threads outnumber its cores parks them at
	// once). Non-preemptive policies only. Default 0: off (every request
	// goes to its worker, the paper's dispatcher).
	InPlaceLimit time.Duration
	// Conns, when > 0, models clients that send over that many in-order
	// connections (TCP: a stream dataplane): each request goes on the
	// connection ConnPick chooses (a traced request on its Arrival.Conn),
	// and a request's reply leaves at the later of its completion and the
	// previous reply of its connection, so latency and slowdown run to
	// that reply. Throughput still counts completions. A dropped request
	// passes its turn when it is dropped. The requests of a connection may
	// run at once, as read-only ones do (the psp header's framing marks
	// every request so); the order in which requests that are not
	// read-only start is not modelled. Default 0: every request is
	// answered on its own, as over UDP. Not with Tenants.
	Conns int
	// ConnPick is how requests are assigned to Conns connections, as the
	// load generator assigns them (package connpick): by default an idle
	// connection (no request of it unanswered), else the one with the
	// fewest unanswered, as client libraries' pools do; or round robin,
	// request i on connection i mod Conns. Not with a Trace.
	ConnPick connpick.Policy
	// Misclassify is the fraction of requests the classifier labels with
	// another type, drawn uniformly among the other types: the policy
	// queues, dispatches and profiles them under that type, while results
	// keep their true type. With two types, 0.5 is a classifier answering
	// at random. Default 0; at most 1.
	Misclassify float64
	// Timeline, when > 0, records the run over time (Point.Timeline):
	// per-type p99.9 latency and slowdown in buckets of this width, the
	// reservations DARC adopts and the phases.
	Timeline time.Duration
	// Source labels the resulting point; default "sim".
	Source string
	// Trace, when not empty, is the run's arrivals instead of a Poisson
	// process at Rate drawn from Seed: to replay the requests a live run
	// actually sent, at the times it sent them. Times must not decrease
	// and are taken as they are (no Phases, no Dilation); Duration
	// defaults to just after the last arrival, Rate (for the report) to
	// the trace's mean rate over Duration, and Warmup is the fraction of
	// the trace's first requests not recorded.
	Trace []Arrival
	// TraceLatencies, when not nil, must have Trace's length: the run
	// writes each traced request's recorded latency into it, at the
	// request's index in Trace (ns from its arrival to its completion,
	// NetworkRTT included, as the point's statistics count it), and -1 for
	// the requests the statistics leave out (arrived in the warm-up,
	// dropped, expired). It gives the exact distribution behind the
	// point's quantiles; the run allocates nothing for it.
	TraceLatencies []int64
	// Tenants, when not empty, simulates a multi-tenant server (policies
	// darc and darc-static): each tenant offers its own workload at its own
	// load and has its own share of the workers and the pool, scheduled by
	// the multi-tenant policy of package darc (darc.Config.Tenants) as psp
	// serve schedules its tenants. Workload is then built from theirs (types
	// "tenant/type"), Load, when set, multiplies every tenant's load, and
	// the resulting point has one point per tenant (report.Point.Tenants).
	// Phases and Misclassify do not apply.
	Tenants []Tenant

	merged bool // Tenants merged into Workload and Rate
}

// Arrival is one request of a trace (Config.Trace).
type Arrival struct {
	// At is the arrival time, ns from the start.
	At int64
	// Type is the request's type, an index into the workload's types.
	Type int
	// ServiceNs is the request's service time.
	ServiceNs int64
	// Conn is the connection the request was sent on, 0 to
	// Config.Conns-1 (Config.Conns > 0).
	Conn int
}

// withDefaults returns c with zero fields set to their defaults (negative
// Warmup and TS durations to zero) and the offered rate and load derived
// from each other.
func (c Config) withDefaults() Config {
	c.Workers = cmp.Or(c.Workers, DefaultWorkers)
	c.Policy = cmp.Or(c.Policy, darc.NameDARC)
	if c.Duration == 0 && len(c.Trace) > 0 {
		c.Duration = time.Duration(c.Trace[len(c.Trace)-1].At + 1)
	}
	if c.Duration == 0 && len(c.Phases.Phases) == 0 {
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
	c.Source = cmp.Or(c.Source, DefaultSource)
	c.Dilation = cmp.Or(c.Dilation, 1)
	dilate := c.Dilation != 1 && c.Dilation > 0 && !math.IsInf(c.Dilation, 0)
	if len(c.Phases.Phases) > 0 && c.Phases.Validate("") == nil {
		if dilate {
			c.Phases = c.Phases.Dilated(c.Dilation)
		}
		c.Workload = c.Phases.Union()
		c.Duration = cmp.Or(c.Duration, c.Phases.Total())
	} else if dilate {
		c.Workload = c.Workload.Dilated(c.Dilation)
		if !c.merged {
			c.Tenants = slices.Clone(c.Tenants)
			for i := range c.Tenants {
				c.Tenants[i].Workload = c.Tenants[i].Workload.Dilated(c.Dilation)
			}
		}
	}
	if dilate {
		c.Dilation = 1 // applied
	}
	if len(c.Tenants) > 0 && c.Workers > 0 {
		c.mergeTenants()
	}
	c.TS.Quantum = orDefault(c.TS.Quantum, DefaultQuantum)
	c.TS.PreemptCost = orDefault(c.TS.PreemptCost, DefaultPreemptCost)
	c.TS.PreemptDelay = orDefault(c.TS.PreemptDelay, DefaultPreemptDelay)
	switch {
	case len(c.Phases.Phases) > 0:
		if c.Workers > 0 && c.Duration > 0 && c.Phases.Total() == c.Duration {
			// The mean rate over the phases.
			n := 0.0
			for i, ph := range c.Phases.Phases {
				n += c.phaseRate(i) * time.Duration(ph.Duration).Seconds()
			}
			c.Rate = n / c.Duration.Seconds()
		}
	case c.Rate > 0 && c.Workers > 0:
		c.Load = c.Workload.LoadForRate(c.Rate, c.Workers)
	case c.Load > 0 && c.Workers > 0:
		c.Rate = c.Workload.RateForLoad(c.Load, c.Workers)
	}
	return c
}

// phaseRate is the arrival rate of phase i: its load (or the run's) of
// its mix on the workers.
func (c *Config) phaseRate(i int) float64 {
	load := c.Phases.Phases[i].Load
	if load == 0 {
		load = c.Load
	}
	w := c.Phases.Mix(i)
	return w.RateForLoad(load, c.Workers)
}

// Validate reports the first problem with c (after defaults), wrapping
// ErrInvalidConfig or ErrUnknownPolicy.
func (c Config) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidConfig, fmt.Sprintf(format, args...))
	}
	if !(c.Dilation >= 0 && c.Dilation <= MaxDilation) {
		return bad("dilation = %g, want > 0 and at most %g", c.Dilation, float64(MaxDilation))
	}
	if c.TS.Quantum < 0 {
		return bad("quantum = %v, want > 0", c.TS.Quantum)
	}
	rate := c.Rate // as given: with phases, withDefaults sets it
	if len(c.Tenants) > 0 {
		if len(c.Phases.Phases) > 0 || c.Misclassify > 0 || len(c.Trace) > 0 || c.Conns != 0 {
			return bad("tenants with phases, a trace, connections or misclassification are not simulated")
		}
		if err := c.validateTenants(); err != nil {
			return err
		}
	}
	if err := c.checkDilation(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	c = c.withDefaults()
	switch {
	case c.Workers < 1:
		return bad("workers = %d, want >= 1", c.Workers)
	case c.Duration < 0:
		return bad("duration = %v, want > 0", c.Duration)
	case !(c.Warmup < 1):
		return bad("warmup = %g, want a fraction below 1", c.Warmup)
	case c.TS.Quantum <= 0:
		return bad("quantum = %v, want > 0", c.TS.Quantum)
	case !slices.Contains(PolicyNames(), c.Policy):
		return fmt.Errorf("policy %q: %w (valid: %s)", c.Policy, ErrUnknownPolicy, strings.Join(PolicyNames(), ", "))
	case c.NetworkRTT < 0 || c.NetworkRTT > MaxNetworkRTT:
		return bad("network round trip = %v, want 0 to %v", c.NetworkRTT, MaxNetworkRTT)
	case c.InPlaceLimit < 0:
		return bad("in-place limit = %v, want >= 0 (0: off)", c.InPlaceLimit)
	case c.InPlaceLimit > 0 && isPreemptive(c.Policy):
		return bad("in-place limit with preemptive policy %q: modelled for non-preemptive policies only", c.Policy)
	case !(c.DispatcherRate == 0 || c.DispatcherRate >= MinDispatcherRate) || math.IsInf(c.DispatcherRate, 0):
		return bad("dispatcher rate = %g, want at least %d requests/s (0: unbounded)", c.DispatcherRate, MinDispatcherRate)
	case !(c.Misclassify >= 0 && c.Misclassify <= 1):
		return bad("misclassify = %v, want a fraction in [0, 1]", c.Misclassify)
	case c.Conns < 0 || c.Conns > MaxConns:
		return bad("connections = %d, want 0 to %d (0: none)", c.Conns, MaxConns)
	case c.ConnPick != "" && !slices.Contains(connpick.Policies, c.ConnPick):
		return bad("connection policy %q, want %s or %s", c.ConnPick, connpick.Pool, connpick.RoundRobin)
	case c.ConnPick != "" && (c.Conns == 0 || len(c.Trace) > 0):
		return bad("connection policy %q without connections, or with a trace (its requests keep their connections)", c.ConnPick)
	case c.Timeline < 0:
		return bad("timeline bucket = %v, want >= 0", c.Timeline)
	case c.Timeline > 0 && c.Duration/c.Timeline > maxTimelineBuckets:
		return bad("timeline bucket %v: %d buckets over %v, at most %d", c.Timeline, c.Duration/c.Timeline, c.Duration, maxTimelineBuckets)
	}
	if len(c.Trace) == 0 && len(c.TraceLatencies) > 0 {
		return bad("%d trace latencies without a trace", len(c.TraceLatencies))
	}
	if len(c.Trace) > 0 {
		switch {
		case len(c.Phases.Phases) > 0:
			return bad("a trace and phases: give one")
		case c.Dilation != 1:
			return bad("dilation %g with a trace: give the trace's times and service times as they are", c.Dilation)
		case len(c.Trace) > math.MaxInt32:
			return bad("%d traced requests, at most %d", len(c.Trace), math.MaxInt32)
		case c.TraceLatencies != nil && len(c.TraceLatencies) != len(c.Trace):
			return bad("%d trace latencies for %d traced requests, want one each", len(c.TraceLatencies), len(c.Trace))
		}
		for i, a := range c.Trace {
			switch {
			case a.Type < 0 || a.Type >= len(c.Workload.Types):
				return bad("trace request %d has type %d, want 0..%d", i, a.Type, len(c.Workload.Types)-1)
			case a.ServiceNs < 0 || a.At < 0:
				return bad("trace request %d: negative time or service time", i)
			case i > 0 && a.At < c.Trace[i-1].At:
				return bad("trace request %d arrives at %d, before request %d (%d)", i, a.At, i-1, c.Trace[i-1].At)
			case a.Conn < 0 || a.Conn >= max(c.Conns, 1):
				return bad("trace request %d is on connection %d, want 0..%d (Conns %d)", i, a.Conn, max(c.Conns, 1)-1, c.Conns)
			}
		}
	}
	if len(c.Phases.Phases) > 0 {
		if err := c.Phases.Validate(""); err != nil {
			return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
		}
		switch {
		case rate > 0:
			return bad("rate = %g with phases: give a load (each phase's rate follows from its mix)", c.Rate)
		case c.Duration != c.Phases.Total():
			return bad("duration = %v with phases lasting %v: leave the duration out", c.Duration, c.Phases.Total())
		}
		for i, ph := range c.Phases.Phases {
			if ph.Load == 0 && !(c.Load > 0) {
				return bad("phase %q has no load and the run's load is %g, want > 0", ph.Name, c.Load)
			}
			if err := workload.CheckRate(c.phaseRate(i)); err != nil {
				return bad("phase %q: %v", ph.Name, err)
			}
		}
		return c.checkExpected()
	}
	for _, t := range c.Tenants {
		if err := workload.CheckRate(t.Rate); err != nil {
			return bad("tenant %q: %v", t.Name, err)
		}
	}
	if len(c.Tenants) > 0 {
		if err := c.validateMerged(); err != nil {
			return err
		}
	} else if err := c.Workload.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	if c.Rate <= 0 && !(c.Load > 0) {
		return bad("load = %g, want > 0 (or give a rate)", c.Load)
	}
	if len(c.Trace) > 0 {
		return nil
	}
	if err := workload.CheckRate(c.Rate); err != nil {
		return bad("%v", err)
	}
	return c.checkExpected()
}

// Bounds of Config's fields.
const (
	// MaxDilation bounds Dilation, as psp serve bounds app.dilation.
	MaxDilation = 1e6
	// MaxNetworkRTT bounds NetworkRTT.
	MaxNetworkRTT = time.Second
	// MinDispatcherRate is the least DispatcherRate (other than 0): a
	// slower dispatcher holds each request for more than a second.
	MinDispatcherRate = 1
	// MaxConns bounds Conns.
	MaxConns = 1 << 20
)

// checkExpected refuses a run expected to draw more arrivals than psp
// client would send (workload.MaxExpectedArrivals): it would run for
// hours and hold them all. c has its defaults.
func (c *Config) checkExpected() error {
	if err := workload.CheckExpected(c.Rate, c.Duration); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	return nil
}

// checkDilation checks, before defaults, that every workload of c stays
// valid once dilated by c.Dilation (0 and 1: not dilated).
func (c *Config) checkDilation() error {
	if c.Dilation == 0 || c.Dilation == 1 {
		return nil
	}
	switch {
	case len(c.Phases.Phases) > 0:
		p := c.Phases
		if p.Validate("") != nil {
			return nil // reported later, without the dilation
		}
		for i, ph := range p.Phases {
			m := p.Mix(i)
			if err := m.CheckDilation(c.Dilation); err != nil {
				return fmt.Errorf("phase %q: %w", ph.Name, err)
			}
		}
	case len(c.Tenants) > 0:
		for _, t := range c.Tenants {
			if err := t.Workload.CheckDilation(c.Dilation); err != nil {
				return fmt.Errorf("tenant %q: %w", t.Name, err)
			}
		}
	case len(c.Trace) == 0:
		w := c.Workload
		w.Types = slices.Clone(w.Types)
		if w.Validate() != nil {
			return nil // reported later, without the dilation
		}
		return w.CheckDilation(c.Dilation)
	}
	return nil
}

// maxTimelineBuckets bounds a timeline's length.
const maxTimelineBuckets = 1_000_000

// darcConfig builds the darc.Config for the run's policy, and with
// tenants the map from the workload's types to darc's.
func (c *Config) darcConfig() (darc.Config, tenantTypes) {
	d := c.Darc
	if len(c.Tenants) > 0 {
		d.Workers = c.Workers
		d.NumTypes, d.TypeNames, d.Profile = 0, nil, nil
		tt := c.tenantsDarc(&d)
		if d.MinSamples == 0 && c.Policy == darc.NameDARC {
			least := math.Inf(1)
			for _, t := range c.Tenants {
				least = min(least, t.Rate*c.Duration.Seconds())
			}
			d.MinSamples = int(min(max(least*0.05, 100), darc.DefaultMinSamples))
		}
		return d, tt
	}
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
	return d, tenantTypes{}
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
