package sim

import (
	"context"
	"fmt"
	"runtime"
	"sync"

	"github.com/persephone-go/psp/report"
)

// Sweep runs Base at every load for every policy.
type Sweep struct {
	// Base is the configuration of every run; its Policy, Load and Rate are
	// replaced by each run's.
	Base     Config
	Policies []string
	Loads    []float64
	// Parallel is the number of runs simulated at once; default GOMAXPROCS.
	Parallel int
	// Progress, if set, is called after each run with the number of runs
	// done, the total and the run's point. Calls are serialised.
	Progress func(done, total int, p report.Point)
}

// RunSweep simulates every (load, policy) pair and returns the points
// ordered by load, then by policy in the order given. Every run uses
// Base.Seed, so policies see the same arrivals at a given load. It stops
// early, returning ctx's error, when ctx is cancelled.
func RunSweep(ctx context.Context, s Sweep) ([]report.Point, error) {
	if len(s.Policies) == 0 || len(s.Loads) == 0 {
		return nil, fmt.Errorf("sweep: %w: need at least one policy and one load", ErrInvalidConfig)
	}
	total := len(s.Policies) * len(s.Loads)
	configs := make([]Config, total)
	for li, load := range s.Loads {
		for pi, pol := range s.Policies {
			c := s.Base
			c.Policy, c.Load, c.Rate = pol, load, 0
			if err := c.Validate(); err != nil {
				return nil, fmt.Errorf("sweep %s at load %g: %w", pol, load, err)
			}
			configs[li*len(s.Policies)+pi] = c
		}
	}
	points, err := RunAll(ctx, configs, s.Parallel, s.Progress)
	if err != nil {
		return nil, fmt.Errorf("sweep: %w", err)
	}
	return points, nil
}

// RunAll simulates every configuration, parallel at once (0: GOMAXPROCS),
// and returns their points in the order of configs. progress, when set, is
// called after each run with the number done, the total and the run's
// point; calls are serialised. It stops early, returning ctx's error, when
// ctx is cancelled, and returns the first error of a run otherwise.
func RunAll(ctx context.Context, configs []Config, parallel int, progress func(done, total int, p report.Point)) ([]report.Point, error) {
	total := len(configs)
	par := parallel
	if par <= 0 {
		par = runtime.GOMAXPROCS(0)
	}
	par = max(1, min(par, total))
	points := make([]report.Point, total)
	errs := make([]error, total)
	jobs := make(chan int)
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		done int
	)
	for range par {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				points[i], errs[i] = RunContext(ctx, configs[i])
				mu.Lock()
				done++
				if progress != nil && errs[i] == nil {
					progress(done, total, points[i])
				}
				mu.Unlock()
			}
		}()
	}
	var ctxErr error
feed:
	for i := range configs {
		select {
		case jobs <- i:
		case <-ctx.Done():
			ctxErr = ctx.Err()
			break feed
		}
	}
	close(jobs)
	wg.Wait()
	if ctxErr == nil {
		ctxErr = ctx.Err() // a run stopped early
	}
	if ctxErr != nil {
		return nil, ctxErr
	}
	for i, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("%s at load %g: %w", configs[i].Policy, configs[i].Load, err)
		}
	}
	return points, nil
}
