package harness

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/persephone-go/psp/report"
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
