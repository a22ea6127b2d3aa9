package harness

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/persephone-go/psp/loadgen"
	"github.com/persephone-go/psp/report"
	"github.com/persephone-go/psp/workload"
)

func seedPoint(policy string, load float64, seed uint64, slowdown float64, sustained bool) report.Point {
	return report.Point{Policy: policy, Load: load, Seed: seed, Sustained: sustained, WastedWorkers: math.NaN(),
		Overall: report.Stats{Count: 10, P999Slowdown: slowdown},
		Types:   []report.TypeStats{{Name: "A", Stats: report.Stats{Count: 10, P999Slowdown: slowdown}}}}
}

func TestSpreadsOverSeeds(t *testing.T) {
	pts := []report.Point{
		seedPoint("darc", 0.5, 1, 2, true), seedPoint("darc", 0.5, 2, 3, true), seedPoint("darc", 0.5, 3, 9, true),
		seedPoint("darc", 0.9, 1, 5, true), seedPoint("darc", 0.9, 2, 50, true), seedPoint("darc", 0.9, 3, 8, false),
		seedPoint("cfcfs", 0.5, 1, 20, true),
	}
	gs := groups(pts)
	if len(gs) != 2 || gs[0].label != "darc" || len(gs[0].loads) != 2 || len(gs[0].points[1]) != 3 {
		t.Fatalf("groups %+v", gs)
	}
	s := spreadOf(gs[0].points[0], slowdownMetric(""))
	if s.med != 3 || s.lo != 2 || s.hi != 9 || s.n != 3 || s.cell(fmtSlowdown) != "3.00 [2.00-9.00]" {
		t.Errorf("spread %+v %q", s, s.cell(fmtSlowdown))
	}
	if c := spreadOf(gs[0].points[1], slowdownMetric("A")).cell(fmtSlowdown); c != "8.00 [5.00-50.0] !" {
		t.Errorf("cell %q", c)
	}
	if c := spreadOf(gs[0].points[0], wasteMetric()).cell(fmtSlowdown); c != "-" {
		t.Errorf("unknown waste: %q", c)
	}
	// Highest load at slowdown 10 per seed: seed 1 holds both loads, seed 2
	// breaks at 0.9, seed 3 is not sustained there.
	ml := maxLoads(pts, report.SLO{Slowdown: 10})
	if got := ml["darc"]; len(got) != 3 || got[0] != 0.9 || got[1] != 0.5 || got[2] != 0.5 {
		t.Errorf("max loads %v", got)
	}
	if got := ml["cfcfs"]; len(got) != 1 || got[0] != 0 {
		t.Errorf("cfcfs max loads %v", got)
	}
	tab, sp := sloTable(pts, []string{"darc", "cfcfs"}, report.SLO{Slowdown: 10}, "darc")
	if sp["darc"].med != 0.5 || tab.Rows[1][1] != "none" || !strings.Contains(tab.Title, "slowdown <= 10") {
		t.Errorf("slo table %+v", tab)
	}
	lt := loadTable("t", gs, policyColumns([]string{"darc", "cfcfs"}, slowdownMetric("")), "")
	if len(lt.Rows) != 2 || lt.Rows[1][2] != "-" || lt.Rows[0][2] != "20.0" {
		t.Errorf("load table %+v", lt.Rows)
	}
	if r, at := ratioRange(gs, "cfcfs", "darc", slowdownMetric("")); r < 6.6 || r > 6.7 || at != 0.5 {
		t.Errorf("ratio %v at %v", r, at)
	}
}

func TestExperimentOptions(t *testing.T) {
	if _, err := LookupExperiment("fig2"); !errors.Is(err, ErrUnknownExperiment) {
		t.Errorf("fig2: %v", err)
	}
	e, err := LookupExperiment("fig3")
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range []ExperimentOptions{{Size: "medium"}, {Seeds: -1}, {Duration: -time.Second}, {Parallel: -2},
		{Seeds: MaxExperimentSeeds + 1}, {Seeds: 999999999}, {Duration: MaxExperimentDuration + time.Nanosecond}} {
		o.Out = t.TempDir()
		if _, err := e.Run(context.Background(), o); err == nil {
			t.Errorf("%+v accepted", o)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := e.Run(ctx, ExperimentOptions{Out: t.TempDir(), Size: SizeSmall}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled run: %v", err)
	}
	// Cancelled while a long simulation runs: it stops within the
	// simulation, not at its end (fig1 at 60 s a point took minutes).
	ctx, cancel = context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	fig1, err := LookupExperiment("fig1")
	if err != nil {
		t.Fatal(err)
	}
	_, err = fig1.Run(ctx, ExperimentOptions{Out: t.TempDir(), Size: SizeSmall, Duration: time.Minute, Parallel: 1})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("run cancelled after 300ms: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("run cancelled after 300ms returned after %v", d)
	}
	seen := map[string]bool{}
	for _, x := range Experiments() {
		if seen[x.Name] || x.Title == "" || x.Setup == "" || x.run == nil {
			t.Errorf("experiment %+v", x)
		}
		seen[x.Name] = true
	}
}

func TestPlanPhases(t *testing.T) {
	ph, err := workload.ParsePhases("phase-change")
	if err != nil {
		t.Fatal(err)
	}
	ph = ph.Scaled(0.1) // 0.5 s phases
	p := Plan{Phases: ph, Workers: 14, Load: 0.8, Seed: 3, Spec: loadgen.Spec{Dilation: 2000}}
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	sched, err := p.schedule()
	if err != nil {
		t.Fatal(err)
	}
	if sched.Duration != 2*time.Second || len(sched.Types) != 2 || p.WorkloadName() != "phase-change" {
		t.Errorf("schedule of %v, %d types", sched.Duration, len(sched.Types))
	}
	// Phase rates: 0.8 x 14 / (mean x 2000): 111, 111, 56, 56 requests/s.
	counts := make([]int, 4)
	for _, r := range sched.Requests {
		counts[r.At/int64(500*time.Millisecond)]++
	}
	for i, want := range []float64{55.4, 55.4, 28.1, 28} {
		if math.Abs(float64(counts[i])-want) > 4*math.Sqrt(want)+2 {
			t.Errorf("phase %d: %d requests, want about %.0f", i, counts[i], want)
		}
	}
	if r := p.OfferedRate(); r < 80 || r > 90 {
		t.Errorf("mean offered rate %.1f, want about 83", r)
	}
	for _, bad := range []Plan{
		{Phases: ph, Workers: 14, Load: 0.8, Duration: time.Second},
		{Phases: ph, Workers: 14, Rate: 100},
		{Phases: ph, Workers: 14},
		{Phases: ph, Load: 0.5},
	} {
		if err := bad.Validate(); err == nil {
			t.Errorf("accepted %+v", bad)
		}
	}
}
