package harness

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/persephone-go/psp/loadgen"
	"github.com/persephone-go/psp/report"
	"github.com/persephone-go/psp/server"
	"github.com/persephone-go/psp/workload"
)

// Plan is one load-generator run: a workload played at an offered load (or
// rate) for a duration, against Spec.Server.
type Plan struct {
	// Workload is what the requests are drawn from.
	Workload workload.Workload
	// Spec is how the load generator plays the schedule (server address,
	// dilation, warm-up, grace, request format, ...). Spec.Dilation zero
	// means 1, or the server's when the plan is given a server status (see
	// UseStatus).
	Spec loadgen.Spec
	// Workers is the server's worker count, to turn a load into a rate.
	Workers int
	// Rate is the offered rate in requests per second; when zero, Load
	// sets it.
	Rate float64
	// Load is the offered load as a fraction of the workers' capacity:
	// rate = Load x Workers / (mean service time x dilation).
	Load float64
	// Duration is the length of the schedule.
	Duration time.Duration
	// Seed draws the schedule: the same seed gives the same schedule.
	Seed uint64
	// Progress, when not nil, receives a progress bar of the run (runs of
	// 2 s and longer).
	Progress io.Writer
	// Preload, with the memcached format, stores every key of the key
	// space on the server before each run (loadgen.PreloadMemcached; the
	// redis format: loadgen.PreloadRedis, after a FLUSHALL), so
	// that its reads hit.
	Preload bool
	// Phases, when it has phases, is played instead of Workload: each
	// phase's mix for its duration, at its own load or at Load (Rate must
	// be zero), one schedule after the other. Duration is then the phases'
	// total: leave it zero.
	Phases workload.Phases
}

// phased reports whether the plan plays phases.
func (p *Plan) phased() bool { return len(p.Phases.Phases) > 0 }

// length is the length of the schedule.
func (p *Plan) length() time.Duration {
	if p.phased() {
		return p.Phases.Total()
	}
	return p.Duration
}

// WorkloadName names what the plan plays.
func (p *Plan) WorkloadName() string {
	if p.phased() {
		return p.Phases.Name
	}
	return p.Workload.Name
}

// phaseRate is the rate of phase i: its load (or the plan's) of its mix.
func (p *Plan) phaseRate(i int) float64 {
	load := p.Phases.Phases[i].Load
	if load == 0 {
		load = p.Load
	}
	mix := p.Phases.Mix(i)
	return loadgen.RateForLoad(&mix, load, p.Workers, p.dilation())
}

// schedule draws the plan's schedule: its workload's, or its phases' one
// after the other (phase i seeded with Seed+i).
func (p *Plan) schedule() (*loadgen.Schedule, error) {
	if !p.phased() {
		return loadgen.NewSchedule(&p.Workload, p.OfferedRate(), p.Duration, p.Seed)
	}
	var sched *loadgen.Schedule
	for i, ph := range p.Phases.Phases {
		mix := p.Phases.Mix(i)
		s, err := loadgen.NewSchedule(&mix, p.phaseRate(i), time.Duration(ph.Duration), p.Seed+uint64(i))
		if err != nil {
			return nil, fmt.Errorf("phase %q: %w", ph.Name, err)
		}
		if sched == nil {
			sched = s
		} else {
			sched = sched.Then(s)
		}
	}
	return sched, nil
}

// UseStatus takes the settings the plan left unset from a running
// server's status: its dilation.
func (p *Plan) UseStatus(st *server.Status) {
	if p.Spec.Dilation == 0 && st.Dilation > 0 {
		p.Spec.Dilation = st.Dilation
	}
}

// dilation is the dilation the plan runs with.
func (p *Plan) dilation() float64 {
	if p.Spec.Dilation == 0 {
		return 1
	}
	return p.Spec.Dilation
}

// OfferedRate is the rate the plan sends at, requests per second (with
// phases, the mean over them).
func (p *Plan) OfferedRate() float64 {
	switch {
	case p.Rate > 0:
		return p.Rate
	case p.phased():
		n := 0.0
		for i, ph := range p.Phases.Phases {
			n += p.phaseRate(i) * time.Duration(ph.Duration).Seconds()
		}
		return n / p.length().Seconds()
	}
	return loadgen.RateForLoad(&p.Workload, p.Load, p.Workers, p.dilation())
}

// OfferedLoad is the load the plan offers, as a fraction of the workers'
// capacity.
func (p *Plan) OfferedLoad() float64 {
	if p.Rate > 0 {
		return p.Workload.LoadForRate(p.Rate*p.dilation(), p.Workers)
	}
	return p.Load
}

// DurationFor returns how long the plan must run, at its rate, for type typ
// to get about n measured requests (after the load generator's warm-up
// share), rounded up to a tenth of a second; Plan.Duration when typ is not
// in the workload.
func (p *Plan) DurationFor(n int, typ string) time.Duration {
	share := 0.0
	for _, t := range p.Workload.Types {
		if t.Name == typ {
			share = t.Share
		}
	}
	rate := p.OfferedRate()
	if share <= 0 || rate <= 0 {
		return p.Duration
	}
	warm := p.Spec.Warmup
	switch {
	case warm == 0:
		warm = loadgen.DefaultWarmup
	case warm < 0:
		warm = 0
	}
	secs := float64(n) / (rate * share) / (1 - warm)
	if secs > maxDurationFor {
		// Past any duration Validate accepts (and past what a
		// time.Duration holds): Validate refuses it by name.
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(math.Ceil(secs*10)) * time.Second / 10
}

// maxDurationFor bounds DurationFor's seconds before they are turned into a
// time.Duration, which overflows past 292 years.
const maxDurationFor = 1e9

// MaxSamples bounds the measured requests a sweep's point or calibration
// asks for (Sweep.Samples, Sweep.Calibrate, psp demo --samples): as many as
// a schedule may hold (loadgen's bound, 2^27) for a type of an eighth of
// the requests.
const MaxSamples = 1 << 24

// Validate reports the first problem with p. With phases it resolves
// their mixes (workload.Phases.Validate).
func (p *Plan) Validate() error {
	if p.phased() {
		if err := p.Phases.Validate(""); err != nil {
			return err
		}
		switch {
		case p.Workers < 1:
			return fmt.Errorf("workers %d, want at least 1", p.Workers)
		case p.Duration != 0:
			return fmt.Errorf("duration %v with phases: the phases give it (leave it zero)", p.Duration)
		case p.Rate != 0:
			return errors.New("a rate with phases: give a load (each phase's rate follows from its mix)")
		case p.Spec.Dilation < 0:
			return fmt.Errorf("dilation %v, want > 0", p.Spec.Dilation)
		}
		for _, ph := range p.Phases.Phases {
			if ph.Load == 0 && !(p.Load > 0) {
				return fmt.Errorf("phase %q has no load of its own: give the plan a load", ph.Name)
			}
		}
		return nil
	}
	switch {
	case p.Workers < 1:
		return fmt.Errorf("workers %d, want at least 1", p.Workers)
	case p.Duration <= 0 || p.Duration > server.MaxDuration:
		return fmt.Errorf("duration %v, want > 0, up to %v", p.Duration, server.MaxDuration)
	case p.Rate < 0 || p.Load < 0:
		return errors.New("rate and load must not be negative")
	case p.Rate == 0 && p.Load == 0:
		return errors.New("give a rate (requests/s) or a load (fraction of the workers' capacity)")
	case p.Rate > 0 && p.Load > 0:
		return errors.New("give a rate or a load, not both")
	case p.Spec.Dilation < 0:
		return fmt.Errorf("dilation %v, want > 0", p.Spec.Dilation)
	}
	if err := p.Workload.Validate(); err != nil {
		return err
	}
	return nil
}

// Run draws the schedule and plays it. Cancelling ctx (Ctrl-C) ends the
// run early with what was measured (Result.Interrupted). desc labels the
// progress bar.
func (p *Plan) Run(ctx context.Context, desc string) (*loadgen.Result, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	sched, err := p.schedule()
	if err != nil {
		return nil, err
	}
	spec := p.Spec
	if err := spec.Validate(sched); err != nil { // before the preload, which would fail on it less clearly
		return nil, fmt.Errorf("loadgen: %w", err)
	}
	if p.Preload && spec.Format == loadgen.FormatMemcached {
		keys, size := spec.MemcachedKeys, spec.ValueSize
		if keys == 0 {
			keys = loadgen.DefaultMemcachedKeys
		}
		if size == 0 {
			size = loadgen.DefaultValueSize
		}
		if err := loadgen.PreloadMemcached(ctx, spec.Server, keys, size); err != nil {
			return nil, err
		}
	}
	if p.Preload && spec.Format == loadgen.FormatRedis {
		addr, _ := strings.CutPrefix(spec.Server, loadgen.TCPScheme)
		if err := loadgen.PreloadRedis(ctx, addr, cmp.Or(spec.RedisKeys, loadgen.DefaultRedisKeys), cmp.Or(spec.ValueSize, loadgen.DefaultValueSize)); err != nil {
			return nil, err
		}
	}
	var bar *progressbar.ProgressBar
	if p.Progress != nil && p.length() >= 2*time.Second {
		bar = progressbar.NewOptions(len(sched.Requests),
			progressbar.OptionSetWriter(p.Progress),
			progressbar.OptionSetDescription(desc),
			progressbar.OptionShowCount(),
			progressbar.OptionSetPredictTime(true),
			progressbar.OptionClearOnFinish(),
			progressbar.OptionThrottle(100*time.Millisecond))
		spec.Progress = func(sent, _ int) { _ = bar.Set(sent) }
	}
	res, err := loadgen.Run(ctx, spec, sched)
	if bar != nil {
		_ = bar.Finish()
	}
	return res, err
}

// Point turns a result of the plan into a report point labelled with
// policy; meanIdle and wasted are the server's mean idle workers and CPU
// waste (idle workers while requests waited) during the run, NaN when
// unknown.
func (p *Plan) Point(res *loadgen.Result, policy string, meanIdle, wasted float64) report.Point {
	return res.Point(loadgen.PointSpec{Policy: policy, Workload: p.WorkloadName(), Workers: p.Workers,
		Load: p.OfferedLoad(), MeanIdleWorkers: meanIdle, WastedWorkers: wasted})
}
