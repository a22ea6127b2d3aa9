package harness

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/persephone-go/psp/loadgen"
	"github.com/persephone-go/psp/report"
	"github.com/persephone-go/psp/server"
	"github.com/persephone-go/psp/workload"
)

func TestSweepValidate(t *testing.T) {
	w, err := workload.Builtin("high-bimodal")
	if err != nil {
		t.Fatal(err)
	}
	base := Sweep{Plan: Plan{Workload: w, Workers: 2, Duration: time.Second}, Policies: []string{"darc"}, Loads: []float64{0.5}, Out: t.TempDir()}
	if err := base.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, mutate := range map[string]func(*Sweep){
		"no policies":         func(s *Sweep) { s.Policies = nil },
		"no loads":            func(s *Sweep) { s.Loads = nil },
		"load out of range":   func(s *Sweep) { s.Loads = []float64{11} },
		"no out":              func(s *Sweep) { s.Out = "" },
		"two labels":          func(s *Sweep) { s.Target = &Target{Listen: "127.0.0.1:1"}; s.Policies = []string{"a", "b"} },
		"target without addr": func(s *Sweep) { s.Target = &Target{} },
		"no workers":          func(s *Sweep) { s.Plan.Workers = 0 },
		"no duration":         func(s *Sweep) { s.Plan.Duration = 0 },
		"negative prewarm":    func(s *Sweep) { s.Prewarm = -time.Second },
	} {
		s := base
		mutate(&s)
		if err := s.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestSweepAgainstRunningServer measures a server started in process as a
// Target, the way psp sweep --server --admin does.
func TestSweepAgainstRunningServer(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	srv, err := InProcess{}.Launch(context.Background(), ServerSpec{Policy: "cfcfs", Workers: 4, App: "emulate", Dilation: 2000})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	w, _ := workload.Builtin("high-bimodal")
	out := t.TempDir()
	sw := &Sweep{
		Plan:     Plan{Workload: w, Workers: 4, Duration: time.Second, Seed: 1},
		Policies: []string{"mine"},
		Loads:    []float64{0.3},
		Target:   &srv.Target,
		Out:      out,
	}
	res, err := sw.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Points) != 1 {
		t.Fatalf("points %+v", res.Points)
	}
	// The server's dilation (2000) sets the rate: 0.3 x 4 / (50.5µs x 2000),
	// a dozen Poisson arrivals in the second (1000 times more without it).
	if want := 0.3 * 4 / (50.5e-6 * 2000); res.Points[0].OfferedRate < want*0.4 || res.Points[0].OfferedRate > want*2.5 {
		t.Errorf("offered %.1f req/s, want %.1f (the server's dilation)", res.Points[0].OfferedRate, want)
	}
	if len(res.Points) != 1 || res.Points[0].Policy != "mine" || res.Points[0].Overall.Count == 0 {
		t.Fatalf("points %+v", res.Points)
	}
	if !(res.Points[0].MeanIdleWorkers >= 0) {
		t.Errorf("mean idle workers %v: the admin endpoint was not sampled", res.Points[0].MeanIdleWorkers)
	}
	pts, err := report.ReadFile(filepath.Join(out, "results.json"))
	if err != nil || len(pts) != 1 {
		t.Fatalf("results.json: %v %d", err, len(pts))
	}
	if !strings.HasSuffix(res.Files[len(res.Files)-1], ".png") {
		t.Errorf("files %v", res.Files)
	}
}

// countingLauncher counts the servers it launches.
type countingLauncher struct {
	InProcess
	n int
}

func (l *countingLauncher) Launch(ctx context.Context, spec ServerSpec) (*RunningServer, error) {
	l.n++
	return l.InProcess.Launch(ctx, spec)
}

// TestSweepCalibratesAlongside: with CalibrateAlongside, each policy runs
// a twin server beside its own, each point is judged against the overhead
// measured on the twin during that point, and no calibration runs before.
func TestSweepCalibratesAlongside(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	w, _ := workload.Builtin("high-bimodal")
	launcher := &countingLauncher{}
	sw := &Sweep{
		Plan:               Plan{Workload: w, Workers: 4, Duration: 2 * time.Second, Seed: 1},
		Server:             ServerSpec{App: "emulate", Dilation: 2000},
		Policies:           []string{"cfcfs"},
		Loads:              []float64{0.3, 0.5},
		Launcher:           launcher,
		Out:                t.TempDir(),
		Simulate:           50 * time.Millisecond,
		Calibrate:          1100,
		CalibrateAlongside: true,
	}
	res, err := sw.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if launcher.n != 2 {
		t.Errorf("%d servers launched, want 2 (the policy's and its twin)", launcher.n)
	}
	if _, ok := res.Overheads["cfcfs"]; ok {
		t.Errorf("a calibration ran before the points: %+v", res.Overheads)
	}
	if len(res.Tails) != 2 {
		t.Fatalf("%d comparisons, want 2: %+v", len(res.Tails), res.Tails)
	}
	// 4% of 4 workers' capacity for SHORT alone (2 ms): 80 requests/s,
	// about 160 in each 2 s point, 10% of them warm-up.
	for _, c := range res.Tails {
		if !c.Distribution() || c.OverheadSamples < 100 || c.OverheadSamples > 250 {
			t.Errorf("load %.2g: %d overhead samples, want the twin's 140 or so during the point", c.Load, c.OverheadSamples)
		}
		if c.OverheadP50Ns <= 0 || c.ExpectedDistP99 < c.SimP99 {
			t.Errorf("load %.2g: overhead p50 %dns, expected p99 %.3g below the replay's %.3g", c.Load, c.OverheadP50Ns, c.ExpectedDistP99, c.SimP99)
		}
	}
}

// TestSweepOverTCP: a sweep of servers listening on TCP replays each point
// on the connections the load generator used, compares it with the replay
// without them too, and writes both comparisons.
func TestSweepOverTCP(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	w, _ := workload.Builtin("high-bimodal")
	sw := &Sweep{
		Plan:               Plan{Workload: w, Workers: 4, Duration: 3 * time.Second, Seed: 1, Spec: loadgen.Spec{Conns: 3}},
		Server:             ServerSpec{App: "emulate", Dilation: 2000, Transport: server.TransportTCP},
		Policies:           []string{"darc"},
		Loads:              []float64{0.5},
		Launcher:           InProcess{},
		Out:                t.TempDir(),
		Simulate:           50 * time.Millisecond,
		CalibrateAlongside: true,
	}
	res, err := sw.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Tails) != 1 || len(res.WithoutConns) != 1 {
		t.Fatalf("%d comparisons, %d without connections, want 1 each", len(res.Tails), len(res.WithoutConns))
	}
	c, o := res.Tails[0], res.WithoutConns[0]
	if c.Conns != 3 || o.Conns != 0 || !c.Distribution() || !o.Distribution() {
		t.Errorf("replays on %d and %d connections (distribution model: %v, %v), want 3 and 0", c.Conns, o.Conns, c.Distribution(), o.Distribution())
	}
	// 3 connections at 20 requests/s: a connection's next request comes
	// 150 ms after its last on average, within a LONG request's 200 ms, so
	// SHORT requests wait for LONG replies. No reply leaves sooner on the
	// connections than without them, and some leave later. (The replays
	// follow the live send times, so how much later depends on the host:
	// the p99 of some 30 SHORT requests is their slowest.)
	if c.SimP99 < o.SimP99 || c.ExpectedDistP99 < o.ExpectedDistP99 {
		t.Errorf("SHORT p99 %.3g (expected %.3g) on the connections, below the %.3g (%.3g) without", c.SimP99, c.ExpectedDistP99, o.SimP99, o.ExpectedDistP99)
	}
	on, _ := res.replayed[0].point.TypeStat("SHORT")
	off, _ := res.unordered[0].point.TypeStat("SHORT")
	if !(on.MeanSlowdown > off.MeanSlowdown) {
		t.Errorf("SHORT mean slowdown %.3g on the connections, %.3g without: no reply waited for its connection", on.MeanSlowdown, off.MeanSlowdown)
	}
	if st, err := os.Stat(filepath.Join(sw.Out, "tails-without-conns.json")); err != nil || st.Size() == 0 {
		t.Errorf("tails-without-conns.json: %v", err)
	}
}

// TestSweepSampleAndDurationBounds: a point asked to measure more samples
// than a schedule holds, or to last longer than a day, is refused by name
// before anything runs (a huge sample count overflowed the point's
// duration into a negative one after the pre-warm).
func TestSweepSampleAndDurationBounds(t *testing.T) {
	w, err := workload.Builtin("high-bimodal")
	if err != nil {
		t.Fatal(err)
	}
	base := Sweep{Policies: []string{"darc"}, Loads: []float64{0.5}, Out: t.TempDir(),
		Plan: Plan{Workload: w, Workers: 2, Duration: time.Second}}
	for name, tc := range map[string]struct {
		edit func(*Sweep)
		want string
	}{
		"samples":   {func(s *Sweep) { s.Samples = 999999999999 }, "samples 999999999999, want 0 to 16777216"},
		"calibrate": {func(s *Sweep) { s.Calibrate = MaxSamples + 1 }, "calibration samples 16777217"},
		"duration":  {func(s *Sweep) { s.Plan.Duration = 25 * time.Hour }, "duration 25h0m0s, want > 0, up to 24h0m0s"},
	} {
		s := base
		tc.edit(&s)
		if err := s.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error with %q", name, err, tc.want)
		}
	}
	s := base
	s.Samples = MaxSamples
	p := s.Plan
	p.Load = 0.5
	if d := p.DurationFor(1<<62, "SHORT"); d <= 0 {
		t.Errorf("DurationFor(2^62) = %v, want a positive duration Validate refuses", d)
	}
	if err := base.Validate(); err != nil {
		t.Errorf("the base sweep: %v", err)
	}
}
