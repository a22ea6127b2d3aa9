package harness

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/persephone-go/psp/examples/classifiers"
	"github.com/persephone-go/psp/server"
	"github.com/persephone-go/psp/workload"
)

// DemoOptions are the settings of psp demo. The zero value of a field takes
// the default in its comment (see DefaultDemo).
type DemoOptions struct {
	Out        string        // output directory; "psp-demo"
	Loads      []float64     // offered loads; 0.6, 0.8, 0.9
	Duration   time.Duration // per load point; 7s
	Dilation   float64       // emulated time dilation; 2000
	Workers    int           // emulated workers; 14
	Seed       uint64        // arrival schedules; 1
	Classifier string        // Wasm classifier file; "": the embedded C psp-header module
	Launcher   Launcher      // default Exec{}
}

// DefaultDemo is psp demo's default setup: DARC against c-FCFS on 14
// emulated workers, High Bimodal dilated 2000x, at loads 0.6, 0.8 and 0.9
// for 7 s each.
var DefaultDemo = DemoOptions{
	Out:      "psp-demo",
	Loads:    []float64{0.6, 0.8, 0.9},
	Duration: 7 * time.Second,
	Dilation: 2000,
	Workers:  14,
	Seed:     1,
}

// withDefaults returns o with zero fields set from DefaultDemo.
func (o DemoOptions) withDefaults() DemoOptions {
	d := DefaultDemo
	if o.Out == "" {
		o.Out = d.Out
	}
	if len(o.Loads) == 0 {
		o.Loads = d.Loads
	}
	if o.Duration == 0 {
		o.Duration = d.Duration
	}
	if o.Dilation == 0 {
		o.Dilation = d.Dilation
	}
	if o.Workers == 0 {
		o.Workers = d.Workers
	}
	if o.Seed == 0 {
		o.Seed = d.Seed
	}
	return o
}

// DemoClassifierFile is the name under which Demo writes the embedded
// classifier into the output directory.
const DemoClassifierFile = "pspheader.wasm"

// Demo builds psp demo's sweep: the paper's Figure 3 setup on this machine.
// For DARC and c-FCFS it starts a server with the emulate application (each
// request sleeps its service time x dilation, so 14 workers fit on two
// cores) and the Wasm psp-header classifier, plays High Bimodal at each
// load after a 2 s pre-warm, and simulates the same setup for the chart.
// Unless o.Classifier is set, the embedded module is written to the output
// directory for the servers to load, so the demo runs anywhere.
func Demo(o DemoOptions) (*Sweep, error) {
	o = o.withDefaults()
	switch {
	case !(o.Dilation > 0):
		return nil, fmt.Errorf("demo: dilation %v, want > 0", o.Dilation)
	case o.Workers < 2:
		return nil, fmt.Errorf("demo: %d workers, want at least 2 (one reserved for SHORT, one spillway)", o.Workers)
	case o.Duration < 0:
		return nil, fmt.Errorf("demo: duration %v, want > 0", o.Duration)
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
		},
		Policies: []string{"darc", "cfcfs"},
		Loads:    o.Loads,
		Server: ServerSpec{
			App:        server.AppEmulate,
			Dilation:   o.Dilation,
			Classifier: cls,
			MinSamples: 200,
		},
		Launcher: o.Launcher,
		Prewarm:  2 * time.Second,
		Out:      o.Out,
		SLO:      10,
		Simulate: 500 * time.Millisecond,
	}, nil
}
