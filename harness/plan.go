package harness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
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
	// space on the server before each run (loadgen.PreloadMemcached), so
	// that its reads hit.
	Preload bool
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

// OfferedRate is the rate the plan sends at, requests per second.
func (p *Plan) OfferedRate() float64 {
	if p.Rate > 0 {
		return p.Rate
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
	return time.Duration(math.Ceil(secs*10)) * time.Second / 10
}

// Validate reports the first problem with p.
func (p *Plan) Validate() error {
	switch {
	case p.Workers < 1:
		return fmt.Errorf("workers %d, want at least 1", p.Workers)
	case p.Duration <= 0:
		return fmt.Errorf("duration %v, want > 0", p.Duration)
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
	sched, err := loadgen.NewSchedule(&p.Workload, p.OfferedRate(), p.Duration, p.Seed)
	if err != nil {
		return nil, err
	}
	spec := p.Spec
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
	var bar *progressbar.ProgressBar
	if p.Progress != nil && p.Duration >= 2*time.Second {
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
// policy; meanIdle is the server's mean idle workers during the run (NaN
// when unknown).
func (p *Plan) Point(res *loadgen.Result, policy string, meanIdle float64) report.Point {
	return res.Point(loadgen.PointSpec{Policy: policy, Workload: p.Workload.Name, Workers: p.Workers,
		Load: p.OfferedLoad(), MeanIdleWorkers: meanIdle})
}
