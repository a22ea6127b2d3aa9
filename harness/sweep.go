package harness

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	json "github.com/goccy/go-json"

	"github.com/persephone-go/psp/admin"
	"github.com/persephone-go/psp/loadgen"
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
	// Samples, when > 0, sets the duration of each point instead of
	// Plan.Duration: long enough for the workload's shortest type (the one
	// whose tail shows the policy) to get about this many measured
	// requests at that load, so that its p99.9 rests on enough of them
	// (over 1000: the p99.9 is then not the sample's maximum).
	Samples int
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
	// slowdown.png; and it replays each measured point in the simulator
	// (the requests the load generator sent, at the undilated times it
	// sent them) to compare the shortest type's tails (CompareTails).
	Simulate time.Duration
	// Calibrate, when > 0 with Simulate, measures each server's overhead
	// distribution for CompareTails (TailComparison.ExpectWithOverhead):
	// before each policy's pre-warm and points, it plays the workload's
	// shortest type alone at CalibrationLoad of the workers' capacity, so
	// that requests almost never find the workers busy and cannot queue,
	// for about Calibrate measured requests; each request's overhead is its
	// latency minus its service time (OverheadDist). Over 1000, so that
	// the overhead's p99.9 is not its maximum.
	Calibrate int
	// CalibrateAlongside, with Simulate and servers the sweep launches,
	// measures the overhead during each point instead of before them: a
	// twin of the policy's server (same spec) runs beside it, and during
	// each point it is played the calibration's traffic (the shortest type
	// alone at CalibrationLoad) for the point's length. The host's bursts
	// during the point then fall in both, and each point is compared with
	// the overhead of its own time. Calibrate is then not used.
	CalibrateAlongside bool
	// Contrast maps a policy to another whose replay of the policy's
	// measured points is also compared with them (SweepResult.Contrasts,
	// contrasts.json): the check's negative control. A live server showing
	// its policy must be far from another policy's replay of the very same
	// requests, or the comparison could not tell policies apart.
	Contrast map[string]string
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
	Points    []report.Point // measured, in policy then load order
	SimPoints []report.Point // simulated (Sweep.Simulate)
	// Replays are the measured points replayed in the simulator
	// (Sweep.Simulate), in the same order, written to replays.json.
	Replays   []report.Point
	Summaries []report.Summary // per policy, with Sweep.SLO
	// Tails compares the shortest type's measured tails with the
	// replayed ones (Sweep.Simulate), written to tails.json.
	Tails []TailComparison
	// Overheads are, per policy, the server's overhead distribution
	// measured by the calibration (Sweep.Calibrate).
	Overheads map[string]OverheadDist
	// Contrasts compare the measured points with their replays under
	// another policy (Sweep.Contrast), written to contrasts.json.
	Contrasts []TailComparison
	// WithoutConns, for a run over TCP (Sweep.Simulate), compares the
	// measured points with replays that ignore their connections (every
	// request answered on its own, as over UDP), written to
	// tails-without-conns.json: what the connections' reply order adds.
	WithoutConns []TailComparison
	Files        []string // every file written, results first

	// replayed are Replays with their requests of the shortest type;
	// contrasted the replays under the contrast policies, unordered
	// those without connections.
	replayed, contrasted, unordered []replayed
}

// replayed is one measured point replayed in the simulator.
type replayed struct {
	point     report.Point // labelled with the measured point's policy
	simPolicy string       // the policy the simulator ran
	conns     int          // the connections it modelled (sim.Config.Conns)
	// times are the shortest type's replayed requests, latencies and
	// service times on the live server's scale.
	times []RequestTime
	// onConns, for a replay on connections, is every replayed request
	// with its connection, for the overhead model (ConnSlowdownQuantile).
	onConns []ConnRequest
	// overhead, when set, is the overhead measured during the point
	// (Sweep.CalibrateAlongside); else the policy's calibration counts.
	overhead *OverheadDist
}

// CalibrationLoad is the load, as a fraction of the workers' capacity, at
// which a sweep's calibration (Sweep.Calibrate) plays the shortest type
// alone: with 14 workers and 1 ms requests, 560 requests a second keep 0.56
// workers busy on average, so a request finds all 14 busy almost never.
const CalibrationLoad = 0.04

// A calibration whose sender's p99 lag exceeds calibrationQuietLag ran
// while the host was busy elsewhere: the load generator itself missed its
// send times by milliseconds, and so did the server's threads. Its
// overheads would hold the host's burst, not the server's usual cost, and
// make any live tail look within the bound. It is measured again, up to
// calibrationAttempts times in all, and the quietest one kept.
const (
	calibrationQuietLag = time.Millisecond
	calibrationAttempts = 3
)

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
	case s.Samples < 0 || s.Samples > MaxSamples:
		return fmt.Errorf("sweep: samples %d, want 0 to %d", s.Samples, MaxSamples)
	case s.Calibrate < 0 || s.Calibrate > MaxSamples:
		return fmt.Errorf("sweep: calibration samples %d, want 0 to %d", s.Calibrate, MaxSamples)
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
	if s.Samples > 0 && p.Duration == 0 && !p.phased() {
		p.Duration = time.Second // set per point
	}
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
		err := sw.runPolicy(ctx, policy, res)
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
		if len(res.Replays) > 0 {
			f = filepath.Join(sw.Out, "replays.json")
			if err := report.WriteFile(f, res.Replays, nil); err != nil {
				return res, fmt.Errorf("sweep: %w", err)
			}
			res.Files = append(res.Files, f)
			if res.Tails, err = sw.compareTails(res, res.replayed); err != nil {
				return res, fmt.Errorf("sweep: %w", err)
			}
			f = filepath.Join(sw.Out, "tails.json")
			if err := writeJSONFile(f, res.Tails); err != nil {
				return res, fmt.Errorf("sweep: %w", err)
			}
			res.Files = append(res.Files, f)
		}
		for _, c := range []struct {
			replays []replayed
			into    *[]TailComparison
			file    string
		}{{res.contrasted, &res.Contrasts, "contrasts.json"}, {res.unordered, &res.WithoutConns, "tails-without-conns.json"}} {
			if len(c.replays) == 0 {
				continue
			}
			if *c.into, err = sw.compareTails(res, c.replays); err != nil {
				return res, fmt.Errorf("sweep: %s: %w", c.file, err)
			}
			f = filepath.Join(sw.Out, c.file)
			if err := writeJSONFile(f, *c.into); err != nil {
				return res, fmt.Errorf("sweep: %w", err)
			}
			res.Files = append(res.Files, f)
		}
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
		c, err := admin.NewClient(s.Target.Admin, 0)
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

// compareTails compares the shortest type's measured tails with replays
// of them, under the constant overhead model and, where the policy's
// server was calibrated, the distribution model.
func (s *Sweep) compareTails(res *SweepResult, replays []replayed) ([]TailComparison, error) {
	w := &s.Plan.Workload
	pts := make([]report.Point, len(replays))
	for i := range replays {
		pts[i] = replays[i].point
	}
	tails, err := CompareTails(res.Points, pts, w, ShortestType(w), s.Plan.dilation())
	if err != nil {
		return nil, err
	}
	for i := range tails {
		c := &tails[i]
		for _, rp := range replays {
			if rp.point.Policy != c.Policy || round(rp.point.Load) != round(c.Load) {
				continue
			}
			if rp.simPolicy != c.Policy {
				c.SimPolicy = rp.simPolicy
			}
			c.Conns = rp.conns
			o := rp.overhead
			if o == nil {
				if po, ok := res.Overheads[c.Policy]; ok {
					o = &po
				}
			}
			switch {
			case o == nil:
			case rp.onConns != nil:
				c.ExpectOnConnsWithOverhead(rp.onConns, o)
			default:
				c.ExpectWithOverhead(rp.times, o)
			}
			break
		}
	}
	return tails, nil
}

// conns returns the connections the sweep's runs open: Plan.Spec.Conns
// (or loadgen's default) over TCP, 0 over UDP.
func (s *Sweep) conns() int {
	tcp := s.Server.Transport == server.TransportTCP
	if s.Target != nil {
		tcp = strings.HasPrefix(s.Target.Listen, loadgen.TCPScheme)
	}
	if !tcp {
		return 0
	}
	return cmp.Or(s.Plan.Spec.Conns, loadgen.DefaultConns)
}

// simulate runs the simulator on the sweep's workload, workers, policies
// and loads (over the runs' connections).
func (s *Sweep) simulate(ctx context.Context) ([]report.Point, error) {
	base := sim.Config{Workload: s.Plan.Workload, Workers: s.Plan.Workers, Duration: s.Simulate, Seed: s.Plan.Seed, Conns: s.conns()}
	if base.Conns > 0 {
		base.ConnPick = s.Plan.Spec.ConnPick // the live runs' choice
	}
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

// launch starts a server for policy on the plan's workers, logging to
// server-POLICY[suffix].log in Out.
func (s *Sweep) launch(ctx context.Context, policy, suffix string) (*RunningServer, error) {
	spec := s.Server
	spec.Policy = policy
	spec.Workers = s.Plan.Workers
	spec.LogPath = filepath.Join(s.Out, "server-"+policy+suffix+".log")
	return s.Launcher.Launch(ctx, spec)
}

// stop stops srv (what names it) and reports a failure to Log.
func (s *Sweep) stop(srv *RunningServer, policy, what string) {
	if err := srv.Stop(); err != nil {
		fmt.Fprintf(s.Log, "%s: %s stop: %v\n", policy, what, err)
	}
}

// runPolicy starts a server for policy (unless one is targeted),
// calibrates its overhead (Calibrate), pre-warms it and measures each load
// into res; with Simulate, it replays each point's schedule in the
// simulator (under the policy, and under its Contrast).
func (s *Sweep) runPolicy(ctx context.Context, policy string, res *SweepResult) error {
	target := s.Target
	if target == nil {
		srv, err := s.launch(ctx, policy, "")
		if err != nil {
			return err
		}
		defer s.stop(srv, policy, "server")
		target = &srv.Target
	}
	var client *admin.Client
	if target.Admin != "" {
		var err error
		if client, err = admin.NewClient(target.Admin, 2*time.Second); err != nil {
			return err
		}
	}
	plan := s.Plan
	plan.Spec.Server = target.Listen
	plan.Rate = 0
	replay := s.Simulate > 0 && slices.Contains(sim.PolicyNames(), policy) && !plan.phased()
	contrast := s.Contrast[policy]
	if !slices.Contains(sim.PolicyNames(), contrast) {
		contrast = ""
	}
	var twin *Target // the calibration's twin (CalibrateAlongside)
	if replay && s.CalibrateAlongside && s.Target == nil {
		tw, err := s.launch(ctx, policy, "-twin")
		if err != nil {
			return fmt.Errorf("calibration twin: %w", err)
		}
		defer s.stop(tw, policy, "calibration twin")
		twin = &tw.Target
	}
	if replay && s.Calibrate > 0 && twin == nil {
		// Before the pre-warm: a policy that profiles its workload (DARC)
		// sees the calibration's single type, and the pre-warm's mix then
		// makes it reserve for the mix again.
		o, err := s.calibrate(ctx, plan, policy)
		if err != nil {
			return err
		}
		if res.Overheads == nil {
			res.Overheads = map[string]OverheadDist{}
		}
		res.Overheads[policy] = o
	}
	if s.Prewarm > 0 {
		warm := plan
		warm.Duration = s.Prewarm
		warm.Load = s.Loads[len(s.Loads)/2]
		if plan.phased() {
			// The first phase's mix: the run starts with it.
			if err := plan.Validate(); err != nil {
				return err
			}
			warm.Workload, warm.Phases = plan.Phases.Mix(0), workload.Phases{}
		}
		fmt.Fprintf(s.Log, "%s: pre-warming for %v at load %.2g\n", policy, s.Prewarm, warm.Load)
		if _, err := warm.Run(ctx, policy+" prewarm"); err != nil {
			return err
		}
	}
	for _, load := range s.Loads {
		plan.Load = load
		if s.Samples > 0 && !plan.phased() {
			plan.Duration = plan.DurationFor(s.Samples, ShortestType(&plan.Workload))
		}
		idle := startIdleSampler(ctx, client)
		var reservations func() []report.Reservation
		if s.Timeline > 0 && client != nil {
			reservations = startReservationPoller(ctx, client)
		}
		var alongside func() (*OverheadDist, error)
		if twin != nil {
			alongside = s.calibrateAlongside(ctx, plan, *twin, policy)
		}
		lg, err := plan.Run(ctx, fmt.Sprintf("%s load %.2g", policy, load))
		var overhead *OverheadDist
		if alongside != nil {
			o, aerr := alongside()
			if err == nil && aerr != nil {
				err = aerr
			}
			overhead = o
		}
		meanIdle, wasted := idle()
		var adopted []report.Reservation
		if reservations != nil {
			adopted = reservations()
		}
		if err != nil {
			return err
		}
		reservation := ""
		if client != nil {
			if st, err := client.Status(ctx); err == nil {
				if r := admin.Reservation(st); r != "" {
					reservation = fmt.Sprintf(" [%s phase: %s]", st.Phase, r)
				}
			}
		}
		pt := plan.Point(lg, policy, meanIdle, wasted)
		if s.Timeline > 0 {
			tl := lg.Timeline(s.Timeline)
			at := 0.0
			for _, ph := range plan.Phases.Phases {
				tl.Phases = append(tl.Phases, report.PhaseMark{StartSec: at, Name: ph.Name})
				at += time.Duration(ph.Duration).Seconds()
			}
			tl.Reservations = adopted
			pt.Timeline = tl
		}
		res.Points = append(res.Points, pt)
		if replay {
			rp, err := s.replay(ctx, &plan, lg, policy, lg.Conns)
			if err != nil {
				return err
			}
			rp.point.Policy, rp.overhead = policy, overhead
			res.Replays = append(res.Replays, rp.point)
			res.replayed = append(res.replayed, rp)
			if contrast != "" {
				cp, err := s.replay(ctx, &plan, lg, contrast, lg.Conns)
				if err != nil {
					return err
				}
				cp.point.Policy, cp.point.Source = policy, fmt.Sprintf("%s under %s", ReplaySource, contrast)
				cp.overhead = overhead
				res.contrasted = append(res.contrasted, cp)
			}
			if lg.Conns > 0 {
				up, err := s.replay(ctx, &plan, lg, policy, 0)
				if err != nil {
					return err
				}
				up.point.Policy, up.point.Source = policy, ReplaySource+" without connections"
				up.overhead = overhead
				res.unordered = append(res.unordered, up)
			}
		}
		note := "sustained"
		if !lg.Sustained {
			note = "NOT sustained: " + lg.NotSustainedReason()
		}
		fmt.Fprintf(s.Log, "%s load %.2g: %.0f req/s, p99.9 slowdown %.4g, %s (sender lag p99 %v, max %v)%s\n", policy, load, lg.OfferedRate, pt.Overall.P999Slowdown, note,
			lg.LagP99.Round(time.Microsecond), lg.LagMax.Round(time.Microsecond), reservation)
		if lg.Interrupted {
			break
		}
	}
	return nil
}

// calibrate measures the overhead distribution of the server plan
// targets (see Sweep.Calibrate).
func (s *Sweep) calibrate(ctx context.Context, plan Plan, policy string) (OverheadDist, error) {
	cal, name := calibrationPlan(plan)
	cal.Duration = cal.DurationFor(s.Calibrate, name)
	var lg *loadgen.Result
	for attempt := 1; ; attempt++ {
		r, err := cal.Run(ctx, policy+" calibration")
		if err != nil {
			return OverheadDist{}, fmt.Errorf("calibration: %w", err)
		}
		if lg == nil || r.LagP99 < lg.LagP99 {
			lg = r
		}
		if r.LagP99 <= calibrationQuietLag || attempt == calibrationAttempts {
			break
		}
		fmt.Fprintf(s.Log, "%s: calibration %d of %d ran while the host was busy (sender lag p99 %v, over %v): calibrating again\n",
			policy, attempt, calibrationAttempts, r.LagP99.Round(time.Microsecond), calibrationQuietLag)
	}
	o := overheadOf(lg)
	fmt.Fprintf(s.Log, "%s: overhead calibration, %d %s requests at %.0f req/s: %s\n", policy, len(o.Ns), name, lg.OfferedRate, describeOverhead(&o, lg))
	return o, nil
}

// calibrateAlongside starts playing the calibration's traffic at twin for
// plan's length, beside plan's own run; the function it returns waits for
// the result (see Sweep.CalibrateAlongside).
func (s *Sweep) calibrateAlongside(ctx context.Context, plan Plan, twin Target, policy string) func() (*OverheadDist, error) {
	cal, name := calibrationPlan(plan)
	cal.Spec.Server, cal.Duration, cal.Progress = twin.Listen, plan.Duration, nil
	done := make(chan struct{})
	var o OverheadDist
	var err error
	go func() {
		defer close(done)
		lg, rerr := cal.Run(ctx, policy+" calibration alongside")
		if rerr != nil {
			err = fmt.Errorf("calibration alongside: %w", rerr)
			return
		}
		o = overheadOf(lg)
		fmt.Fprintf(s.Log, "%s load %.2g: overhead alongside, %d %s requests: %s\n", policy, plan.Load, len(o.Ns), name, describeOverhead(&o, lg))
	}()
	return func() (*OverheadDist, error) {
		<-done
		if err != nil {
			return nil, err
		}
		return &o, nil
	}
}

// calibrationPlan returns plan turned into its calibration (the shortest
// type alone at CalibrationLoad) and that type's name.
func calibrationPlan(plan Plan) (Plan, string) {
	w := &plan.Workload
	name := ShortestType(w)
	cal := plan
	for _, t := range w.Types {
		if t.Name == name {
			t.Share = 1
			cal.Workload = workload.Workload{Name: w.Name + " (" + name + " only)", Types: []workload.TypeSpec{t}}
		}
	}
	cal.Load, cal.Rate = CalibrationLoad, 0
	return cal, name
}

// overheadOf returns the overheads of a calibration run's requests.
func overheadOf(lg *loadgen.Result) OverheadDist {
	var reqs []RequestTime
	for _, q := range lg.AppendSamples(nil, 0) {
		reqs = append(reqs, RequestTime{LatencyNs: q.LatencyNs, ServiceNs: q.ServiceNs})
	}
	o := NewOverheadDist(reqs)
	o.Sent, o.Lost = lg.Sent, lg.Lost
	return o
}

// describeOverhead summarises o, measured by the run lg, for a log line.
func describeOverhead(o *OverheadDist, lg *loadgen.Result) string {
	ms := func(v int64) string { return time.Duration(v).Round(time.Microsecond).String() }
	return fmt.Sprintf("p50 %s, p99 %s, p99.9 %s, max %s (%d lost; sender lag p99 %s, max %s)",
		ms(o.Quantile(0.5)), ms(o.Quantile(0.99)), ms(o.Quantile(0.999)), ms(o.Quantile(1)), o.Lost,
		ms(int64(lg.LagP99)), ms(int64(lg.LagMax)))
}

// ReplaySource labels simulated replays of measured points.
const ReplaySource = "sim (same schedule)"

// replay simulates what the load generator sent in res under policy: the
// same requests, arriving at the (undilated) times they were actually sent,
// so that the simulator sees the very arrivals the server saw, bursts left
// by a late sender included, and the same warm-up share; with conns > 0
// (a run over TCP: res.Conns), each on the connection it was sent on,
// replies in order per connection. It returns the point with the shortest
// type's replayed requests on the live scale. It stops early, with ctx's
// error, when ctx is cancelled.
func (s *Sweep) replay(ctx context.Context, plan *Plan, res *loadgen.Result, policy string, conns int) (replayed, error) {
	d := plan.dilation()
	warm := plan.Spec.Warmup
	switch {
	case warm == 0:
		warm = loadgen.DefaultWarmup
	case warm < 0:
		warm = -1
	}
	sched := res.Schedule()
	trace := make([]sim.Arrival, 0, res.Sent)
	for i := range int(res.Sent) {
		at, ok := res.SentAt(i)
		if !ok {
			continue
		}
		q := &sched.Requests[i]
		a := sim.Arrival{At: int64(float64(at) / d), Type: int(q.Type), ServiceNs: int64(q.ServiceNs)}
		if conns > 0 {
			a.Conn = res.Conn(i)
		}
		trace = append(trace, a)
	}
	if len(trace) == 0 {
		return replayed{}, fmt.Errorf("replay %s at load %.2g: no request was sent", policy, plan.Load)
	}
	latencies := make([]int64, len(trace))
	cfg := sim.Config{
		Workload: plan.Workload,
		Workers:  plan.Workers,
		Policy:   policy,
		Rate:     plan.OfferedRate() * d,
		Duration: time.Duration(float64(plan.Duration) / d),
		Seed:     plan.Seed,
		Warmup:   warm,
		Source:   ReplaySource,
		Trace:    trace,
		Conns:    conns,

		TraceLatencies: latencies,
	}
	pt, err := sim.RunContext(ctx, cfg)
	if err != nil {
		return replayed{}, fmt.Errorf("replay %s at load %.2g: %w", policy, plan.Load, err)
	}
	pt.Load = plan.OfferedLoad()
	short := slices.Index(plan.Workload.TypeNames(), ShortestType(&plan.Workload))
	var times []RequestTime
	for i, l := range latencies {
		if l >= 0 && trace[i].Type == short {
			times = append(times, RequestTime{LatencyNs: int64(float64(l) * d), ServiceNs: int64(float64(trace[i].ServiceNs) * d)})
		}
	}
	rp := replayed{point: pt, simPolicy: policy, conns: conns, times: times}
	if conns > 0 {
		// Each request's completion, warm-up included: the order of
		// replies does not change when requests run, so it is that of
		// the replay without connections.
		done := make([]int64, len(trace))
		cfg.Conns, cfg.Warmup, cfg.TraceLatencies = 0, -1, done
		for i := range trace {
			trace[i].Conn = 0
		}
		if _, err := sim.RunContext(ctx, cfg); err != nil {
			return replayed{}, fmt.Errorf("replay %s at load %.2g: %w", policy, plan.Load, err)
		}
		rp.onConns = make([]ConnRequest, len(trace))
		last := make([]int, conns)
		for i := range last {
			last[i] = -1
		}
		k := 0
		for i := range int(res.Sent) {
			if _, ok := res.SentAt(i); !ok {
				continue
			}
			a := trace[k]
			r := ConnRequest{SentNs: int64(float64(a.At) * d), DoneNs: -1, ServiceNs: int64(float64(a.ServiceNs) * d),
				Prev: last[res.Conn(i)], Measured: latencies[k] >= 0 && a.Type == short}
			if done[k] >= 0 {
				r.DoneNs = int64(float64(a.At+done[k]) * d)
			}
			rp.onConns[k], last[res.Conn(i)] = r, k
			k++
		}
	}
	return rp, nil
}

// startIdleSampler polls the server's /status every 250 ms (idle_workers
// and cpu_waste are means over the server's last stats interval) until
// the returned function is called; that function returns the means of the
// samples (NaN, shown as unknown, without an admin client or samples).
func startIdleSampler(ctx context.Context, client *admin.Client) func() (idle, wasted float64) {
	if client == nil {
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
				if st, err := client.Status(ctx); err == nil {
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
func startReservationPoller(ctx context.Context, client *admin.Client) func() []report.Reservation {
	stop := make(chan struct{})
	result := make(chan []report.Reservation, 1)
	start := time.Now()
	go func() {
		var out []report.Reservation
		last := ""
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			if st, err := client.Status(ctx); err == nil && len(st.Groups) > 0 {
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

// writeJSONFile writes v as indented JSON into path.
func writeJSONFile(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
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
