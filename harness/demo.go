package harness

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/persephone-go/psp/examples/classifiers"
	"github.com/persephone-go/psp/loadgen"
	"github.com/persephone-go/psp/server"
	"github.com/persephone-go/psp/workload"
)

// DemoOptions are the settings of psp demo. The zero value of a field takes
// the default in its comment (see DefaultDemo).
type DemoOptions struct {
	Out   string    // output directory; "psp-demo"
	Loads []float64 // offered loads; 0.5, 0.8, 0.9
	// Samples sets each point's length: SHORT requests measured per point;
	// 1200 (over 1000, so the p99.9 is not the maximum). Duration, when
	// set, fixes the length instead.
	Samples  int
	Duration time.Duration // per load point; from Samples
	// Calibrate, when > 0, measures each server's overhead once, with this
	// many SHORT requests, before its points (Sweep.Calibrate); 0 (the
	// default): during every point, on a twin server beside it
	// (Sweep.CalibrateAlongside).
	Calibrate  int
	Dilation   float64  // emulated time dilation; 1000
	Workers    int      // emulated workers; 14
	Seed       uint64   // arrival schedules; 1
	Classifier string   // Wasm classifier file; "": the embedded C psp-header module
	Launcher   Launcher // default Exec{}
}

// DefaultDemo is psp demo's default setup: DARC against c-FCFS on 14
// emulated workers, High Bimodal dilated 1000x, at loads 0.5, 0.8 and 0.9,
// each point long enough for about 1200 SHORT requests.
var DefaultDemo = DemoOptions{
	Out:      "psp-demo",
	Loads:    []float64{0.5, 0.8, 0.9},
	Samples:  1200,
	Dilation: 1000,
	Workers:  14,
	Seed:     1,
}

// demoSimulated is how long the demo simulates each point (nominal time):
// about 200,000 SHORT requests at load 0.5.
const demoSimulated = 3 * time.Second

// withDefaults returns o with zero fields set from DefaultDemo.
func (o DemoOptions) withDefaults() DemoOptions {
	d := DefaultDemo
	if len(o.Loads) == 0 {
		o.Loads = d.Loads
	}
	if o.Samples == 0 && o.Duration == 0 {
		o.Samples = d.Samples
	}
	o.Out, o.Dilation = cmp.Or(o.Out, d.Out), cmp.Or(o.Dilation, d.Dilation)
	o.Workers, o.Seed = cmp.Or(o.Workers, d.Workers), cmp.Or(o.Seed, d.Seed)
	return o
}

// DemoClassifierFile is the name under which Demo writes the embedded
// classifier into the output directory.
const DemoClassifierFile = "pspheader.wasm"

// Demo builds psp demo's sweep: the paper's Figure 3 setup on this machine.
// For DARC and c-FCFS it starts a server with the emulate application (each
// request sleeps its service time x dilation, so 14 workers fit on two
// cores) and the Wasm psp-header classifier, plays High Bimodal at each
// load after a 2 s pre-warm, and simulates the same setup for the chart
// and for CompareTails: each server's overhead is measured during every
// point on a twin server (Sweep.CalibrateAlongside; or once before them,
// DemoOptions.Calibrate), and each point is replayed under its own policy and,
// as a contrast, under the other. Latencies run from each request's actual send to
// its reply's arrival (the kernel's receive timestamp): what the server
// and the network did, without the client's own scheduling delays.
// Unless o.Classifier is set, the embedded module is written to the output
// directory for the servers to load, so the demo runs anywhere.
func Demo(o DemoOptions) (*Sweep, error) {
	o = o.withDefaults()
	switch {
	case !(o.Dilation > 0):
		return nil, fmt.Errorf("demo: dilation %v, want > 0", o.Dilation)
	case o.Workers < 2:
		return nil, fmt.Errorf("demo: %d workers, want at least 2 (one reserved for SHORT, one spillway)", o.Workers)
	case o.Duration < 0 || o.Duration > server.MaxDuration:
		return nil, fmt.Errorf("demo: duration %v, want > 0, up to %v", o.Duration, server.MaxDuration)
	case o.Samples < 0 || o.Samples > MaxSamples:
		return nil, fmt.Errorf("demo: samples %d, want 1 to %d", o.Samples, MaxSamples)
	case o.Calibrate < 0 || o.Calibrate > MaxSamples:
		return nil, fmt.Errorf("demo: calibration samples %d, want 1 to %d (0: alongside every point)", o.Calibrate, MaxSamples)
	}
	samples := o.Samples
	if o.Duration > 0 {
		samples = 0
	}
	w, err := workload.Builtin("high-bimodal")
	if err != nil {
		return nil, fmt.Errorf("demo: %w", err)
	}
	cls := o.Classifier
	if cls == "" && len(classifiers.PSPHeader) == 0 {
		return nil, errors.New("demo: the embedded classifier is empty")
	}
	if cls == "" {
		if err := os.MkdirAll(o.Out, 0o755); err != nil {
			return nil, fmt.Errorf("demo: create output directory: %w", err)
		}
		cls = filepath.Join(o.Out, DemoClassifierFile)
		if err := os.WriteFile(cls, classifiers.PSPHeader, 0o644); err != nil {
			return nil, fmt.Errorf("demo: write the classifier: %w", err)
		}
	} else if _, err := os.Stat(cls); err != nil {
		return nil, fmt.Errorf("demo: classifier: %w", err)
	}
	return &Sweep{
		Plan: Plan{
			Workload: w,
			Workers:  o.Workers,
			Duration: o.Duration,
			Seed:     o.Seed,
			Spec:     loadgen.Spec{FromActualSend: true},
		},
		Samples:  samples,
		Policies: []string{"darc", "cfcfs"},
		Loads:    o.Loads,
		Server: ServerSpec{
			App:        server.AppEmulate,
			Dilation:   o.Dilation,
			Classifier: cls,
			MinSamples: 200,
		},
		Launcher:           o.Launcher,
		Prewarm:            2 * time.Second,
		Out:                o.Out,
		SLO:                10,
		Simulate:           demoSimulated,
		Calibrate:          o.Calibrate,
		CalibrateAlongside: o.Calibrate == 0,
		Contrast:           map[string]string{"darc": "cfcfs", "cfcfs": "darc"},
	}, nil
}
