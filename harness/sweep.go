package harness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/persephone-go/psp/report"
	"github.com/persephone-go/psp/server"
	"github.com/persephone-go/psp/sim"
	"github.com/persephone-go/psp/workload"
)

// Sweep measures psp servers at a range of loads under each policy: for
// every policy it starts a server (or measures Target), pre-warms it, plays
// Plan at each load and writes, in Out, results.csv, results.json, the
// charts (see WriteCharts), the servers' logs and, with Simulate, sim.json.
type Sweep struct {
	// Plan is the load played at each point; its Load and Rate are set per
	// point and its Spec.Server to the server measured. Plan.Spec.Dilation
	// zero takes the server's: Server.Dilation, or the running Target's, or
	// psp serve's default of 1000 for the emulate application.
	Plan Plan
	// Policies are the policies to start servers with; with Target, the
	// single label of the running server's policy.
	Policies []string
	// Loads are the offered loads, as fractions of the workers' capacity.
	Loads []float64
	// Server describes the servers to start (Policy, Workers and Dilation
	// are set per policy from the sweep).
	Server ServerSpec
	// Launcher starts them; default Exec{} (this executable's psp serve).
	Launcher Launcher
	// Target, when set, is a running server to measure instead.
	Target *Target
	// Prewarm is traffic sent at the middle load before each policy's first
	// point and not measured, so that DARC finishes profiling; zero: none.
	Prewarm time.Duration
	// Out is the output directory (created if missing).
	Out string
	// SLO, when > 0, is the p99.9 slowdown bound of the summaries and of the
	// charts' dashed line.
	SLO float64
	// Simulate, when > 0, also simulates the same policies and loads for
	// this simulated duration (nominal, undilated times) and draws them on
	// slowdown.png.
	Simulate time.Duration
	// Timeline, when > 0 and the server has an admin endpoint, records
	// each point over time (report.Point.Timeline): the per-type p99.9 per
	// bucket of this width (loadgen.Result.Timeline), the phases of a
	// phased plan and the reservations the server adopted, polled every
	// 100 ms; the sweep then also draws timeline-<policy>-<load>.png.
	Timeline time.Duration
	// Log receives one line per point (and per pre-warm); nil discards.
	Log io.Writer
}

// SweepResult is what a sweep measured and wrote.
type SweepResult struct {
	Points    []report.Point   // measured, in policy then load order
	SimPoints []report.Point   // simulated (Sweep.Simulate)
	Summaries []report.Summary // per policy, with Sweep.SLO
	Files     []string         // every file written, results first
}

// withDefaults returns s with zero fields set to their defaults.
func (s Sweep) withDefaults() Sweep {
	if s.Launcher == nil {
		s.Launcher = Exec{}
	}
	if s.Log == nil {
		s.Log = io.Discard
	}
	return s
}

// Validate reports the first problem with s.
func (s *Sweep) Validate() error {
	switch {
	case len(s.Policies) == 0:
		return errors.New("sweep: no policies")
	case len(s.Loads) == 0:
		return errors.New("sweep: no loads")
	case s.Out == "":
		return errors.New("sweep: no output directory")
	case s.Target != nil && len(s.Policies) > 1:
		return errors.New("sweep: a running server has one policy: give a single policy label")
	case s.Target != nil && s.Target.Listen == "":
		return errors.New("sweep: the running server's UDP address is missing")
	case s.Prewarm < 0:
		return fmt.Errorf("sweep: prewarm %v, want >= 0", s.Prewarm)
	case s.Timeline < 0:
		return fmt.Errorf("sweep: timeline bucket %v, want >= 0", s.Timeline)
	}
	for _, l := range s.Loads {
		if !(l > 0) || l > MaxLoad {
			return fmt.Errorf("sweep: load %v out of (0, %d]", l, MaxLoad)
		}
	}
	p := s.Plan
	p.Load = s.Loads[0]
	if err := p.Validate(); err != nil {
		return fmt.Errorf("sweep: %w", err)
	}
	return nil
}

// Run measures every policy at every load and writes the results. An
// interrupted sweep (ctx cancelled) still writes what it measured and
// returns it with an error wrapping ctx.Err().
func (s *Sweep) Run(ctx context.Context) (*SweepResult, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	sw := s.withDefaults()
	if err := os.MkdirAll(sw.Out, 0o755); err != nil {
		return nil, fmt.Errorf("sweep: create output directory: %w", err)
	}
	if err := sw.resolveDilation(ctx); err != nil {
		return nil, err
	}
	res := &SweepResult{}
	for _, policy := range sw.Policies {
		pts, err := sw.runPolicy(ctx, policy)
		res.Points = append(res.Points, pts...)
		if ctx.Err() != nil {
			break
		}
		if err != nil {
			return res, fmt.Errorf("sweep: %s: %w", policy, err)
		}
	}
	if len(res.Points) == 0 {
		return res, fmt.Errorf("sweep: interrupted before the first point: %w", ctx.Err())
	}
	if sw.SLO > 0 {
		res.Summaries = report.Summarize(res.Points, sw.SLO, true)
	}
	for _, name := range []string{"results.csv", "results.json"} {
		f := filepath.Join(sw.Out, name)
		if err := report.WriteFile(f, res.Points, res.Summaries); err != nil {
			return res, fmt.Errorf("sweep: %w", err)
		}
		res.Files = append(res.Files, f)
	}
	if sw.Simulate > 0 && ctx.Err() == nil {
		pts, err := sw.simulate(ctx)
		if err != nil {
			return res, fmt.Errorf("sweep: %w", err)
		}
		res.SimPoints = pts
		f := filepath.Join(sw.Out, "sim.json")
		if err := report.WriteFile(f, pts, nil); err != nil {
			return res, fmt.Errorf("sweep: %w", err)
		}
		res.Files = append(res.Files, f)
	}
	charts, err := WriteCharts(sw.Out, res.Points, res.SimPoints, report.PlotOptions{SLO: sw.SLO})
	res.Files = append(res.Files, charts...)
	if err != nil {
		return res, fmt.Errorf("sweep: %w", err)
	}
	if sw.Timeline > 0 {
		tls, err := WriteTimelines(sw.Out, res.Points)
		res.Files = append(res.Files, tls...)
		if err != nil {
			return res, fmt.Errorf("sweep: %w", err)
		}
	}
	if ctx.Err() != nil {
		return res, fmt.Errorf("sweep: interrupted: the files hold the %d points measured so far: %w", len(res.Points), ctx.Err())
	}
	return res, nil
}

// resolveDilation fills a zero Plan.Spec.Dilation with the server's.
func (s *Sweep) resolveDilation(ctx context.Context) error {
	switch {
	case s.Plan.Spec.Dilation != 0:
	case s.Target != nil && s.Target.Admin != "":
		c, err := NewAdminClient(s.Target.Admin, 0)
		if err != nil {
			return fmt.Errorf("sweep: %w", err)
		}
		st, err := c.Status(ctx)
		if err != nil {
			return fmt.Errorf("sweep: the running server's dilation: %w", err)
		}
		s.Plan.UseStatus(st)
	case s.Target == nil && s.Server.Dilation != 0:
		s.Plan.Spec.Dilation = s.Server.Dilation
	case s.Target == nil && (s.Server.App == "" || s.Server.App == server.AppEmulate):
		s.Plan.Spec.Dilation = server.DefaultEmulateDilation
	}
	if s.Target == nil && s.Server.Dilation == 0 {
		s.Server.Dilation = s.Plan.Spec.Dilation
	}
	return nil
}

// simulate runs the simulator on the sweep's workload, workers, policies
// and loads.
func (s *Sweep) simulate(ctx context.Context) ([]report.Point, error) {
	base := sim.Config{Workload: s.Plan.Workload, Workers: s.Plan.Workers, Duration: s.Simulate, Seed: s.Plan.Seed}
	if s.Plan.phased() {
		base.Phases, base.Duration = s.Plan.Phases.Scaled(float64(s.Simulate)/float64(s.Plan.Phases.Total())), 0
	}
	pts, err := sim.RunSweep(ctx, sim.Sweep{
		Base:     base,
		Policies: s.Policies,
		Loads:    s.Loads,
	})
	if err != nil {
		return nil, fmt.Errorf("simulate: %w", err)
	}
	return pts, nil
}

// runPolicy starts a server for policy (unless one is targeted), pre-warms
// it and measures each load.
func (s *Sweep) runPolicy(ctx context.Context, policy string) ([]report.Point, error) {
	target := s.Target
	if target == nil {
		spec := s.Server
		spec.Policy = policy
		spec.Workers = s.Plan.Workers
		spec.LogPath = filepath.Join(s.Out, "server-"+policy+".log")
		srv, err := s.Launcher.Launch(ctx, spec)
		if err != nil {
			return nil, err
		}
		defer func() {
			if err := srv.Stop(); err != nil {
				fmt.Fprintf(s.Log, "%s: server stop: %v\n", policy, err)
			}
		}()
		target = &srv.Target
	}
	var admin *AdminClient
	if target.Admin != "" {
		var err error
		if admin, err = NewAdminClient(target.Admin, 2*time.Second); err != nil {
			return nil, err
		}
	}
	plan := s.Plan
	plan.Spec.Server = target.Listen
	plan.Rate = 0
	if s.Prewarm > 0 {
		warm := plan
		warm.Duration = s.Prewarm
		warm.Load = s.Loads[len(s.Loads)/2]
		if plan.phased() {
			// The first phase's mix: the run starts with it.
			if err := plan.Validate(); err != nil {
				return nil, err
			}
			warm.Workload, warm.Phases = plan.Phases.Mix(0), workload.Phases{}
		}
		fmt.Fprintf(s.Log, "%s: pre-warming for %v at load %.2g\n", policy, s.Prewarm, warm.Load)
		if _, err := warm.Run(ctx, policy+" prewarm"); err != nil {
			return nil, err
		}
	}
	var points []report.Point
	for _, load := range s.Loads {
		plan.Load = load
		idle := startIdleSampler(ctx, admin)
		var reservations func() []report.Reservation
		if s.Timeline > 0 && admin != nil {
			reservations = startReservationPoller(ctx, admin)
		}
		res, err := plan.Run(ctx, fmt.Sprintf("%s load %.2g", policy, load))
		meanIdle, wasted := idle()
		var adopted []report.Reservation
		if reservations != nil {
			adopted = reservations()
		}
		if err != nil {
			return points, err
		}
		reservation := ""
		if admin != nil {
			if st, err := admin.Status(ctx); err == nil {
				if r := Reservation(st); r != "" {
					reservation = fmt.Sprintf(" [%s phase: %s]", st.Phase, r)
				}
			}
		}
		pt := plan.Point(res, policy, meanIdle, wasted)
		if s.Timeline > 0 {
			tl := res.Timeline(s.Timeline)
			at := 0.0
			for _, ph := range plan.Phases.Phases {
				tl.Phases = append(tl.Phases, report.PhaseMark{StartSec: at, Name: ph.Name})
				at += time.Duration(ph.Duration).Seconds()
			}
			tl.Reservations = adopted
			pt.Timeline = tl
		}
		points = append(points, pt)
		note := "sustained"
		if !res.Sustained {
			note = "NOT sustained: " + res.NotSustainedReason()
		}
		fmt.Fprintf(s.Log, "%s load %.2g: %.0f req/s, p99.9 slowdown %.4g, %s%s\n", policy, load, res.OfferedRate, pt.Overall.P999Slowdown, note, reservation)
		if res.Interrupted {
			break
		}
	}
	return points, nil
}

// startIdleSampler polls the server's /status every 250 ms (idle_workers
// and cpu_waste are means over the server's last stats interval) until
// the returned function is called; that function returns the means of the
// samples (NaN, shown as unknown, without an admin client or samples).
func startIdleSampler(ctx context.Context, admin *AdminClient) func() (idle, wasted float64) {
	if admin == nil {
		return func() (float64, float64) { return math.NaN(), math.NaN() }
	}
	stop := make(chan struct{})
	result := make(chan [2]float64, 1)
	go func() {
		idle, wasted, n := 0.0, 0.0, 0
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				if n == 0 {
					result <- [2]float64{math.NaN(), math.NaN()}
				} else {
					result <- [2]float64{idle / float64(n), wasted / float64(n)}
				}
				return
			case <-t.C:
				if st, err := admin.Status(ctx); err == nil {
					idle += st.IdleWorkers
					wasted += st.CPUWaste
					n++
				}
			}
		}
	}()
	return func() (float64, float64) {
		close(stop)
		r := <-result
		return r[0], r[1]
	}
}

// startReservationPoller polls the server's /status every 100 ms and
// keeps every reservation it sees adopted (times from the call) until the
// returned function is called, which returns them.
func startReservationPoller(ctx context.Context, admin *AdminClient) func() []report.Reservation {
	stop := make(chan struct{})
	result := make(chan []report.Reservation, 1)
	start := time.Now()
	go func() {
		var out []report.Reservation
		last := ""
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			if st, err := admin.Status(ctx); err == nil && len(st.Groups) > 0 {
				r := report.Reservation{AtSec: time.Since(start).Seconds()}
				for _, g := range st.Groups {
					r.Groups = append(r.Groups, report.ReservedGroup{Types: g.Types, Workers: len(g.Reserved), Spillway: g.Spillway})
				}
				if k := r.String(); k != last {
					last = k
					out = append(out, r)
				}
			}
			select {
			case <-stop:
				result <- out
				return
			case <-ctx.Done():
				result <- out
				return
			case <-t.C:
			}
		}
	}()
	return func() []report.Reservation {
		close(stop)
		return <-result
	}
}

// WriteCharts draws slowdown.png (points and slowdownOnly) and one
// latency-<type>.png per request type (points only: simulated and dilated
// latencies do not share a time scale) into dir, and returns the paths
// written.
func WriteCharts(dir string, points, slowdownOnly []report.Point, opt report.PlotOptions) ([]string, error) {
	if len(points)+len(slowdownOnly) == 0 {
		return nil, errors.New("charts: no points to plot")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("charts: create output directory: %w", err)
	}
	slowdown := filepath.Join(dir, "slowdown.png")
	all := append(append([]report.Point(nil), points...), slowdownOnly...)
	if err := report.PlotSlowdown(all, slowdown, opt); err != nil {
		return nil, err
	}
	paths := []string{slowdown}
	if len(points) == 0 {
		return paths, nil
	}
	lat, err := report.PlotLatencies(points, filepath.Join(dir, "latency-"), report.PlotOptions{Width: opt.Width, Height: opt.Height})
	return append(paths, lat...), err
}

// WriteTimelines draws, for every point that has a timeline,
// timeline-<policy>-<load>.png into dir (the p99.9 latency of each type and
// the reserved workers over time) and returns the paths written.
func WriteTimelines(dir string, points []report.Point) ([]string, error) {
	var paths []string
	for i := range points {
		p := &points[i]
		if p.Timeline == nil || len(p.Timeline.Buckets) == 0 {
			continue
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return paths, fmt.Errorf("charts: create output directory: %w", err)
		}
		name := fmt.Sprintf("timeline-%s-%s.png", safeName(p.Label(false)), strconv.FormatFloat(p.Load, 'f', -1, 64))
		path := filepath.Join(dir, name)
		title := fmt.Sprintf("%s under %s at load %.3g: p99.9 latency per %s", p.Workload, p.Policy, p.Load, report.FormatNs(p.Timeline.BucketSec*1e9))
		if err := report.PlotTimeline(p.Timeline, title, path, report.PlotOptions{}); err != nil {
			return paths, err
		}
		paths = append(paths, path)
	}
	return paths, nil
}

// safeName replaces the characters of s that do not belong in a file name.
func safeName(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '/' || r == '\\' || r == ' ' || r == '(' || r == ')' {
			return '_'
		}
		return r
	}, s)
}
