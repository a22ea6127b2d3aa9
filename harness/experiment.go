package harness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	json "github.com/goccy/go-json"

	"github.com/persephone-go/psp/report"
	"github.com/persephone-go/psp/server"
)

// Sizes of an experiment run: SizeFull reproduces the figure with seeds
// and durations chosen so that each point's p99.9 is stable; SizeSmall
// runs the same code in seconds (CI, a first look).
const (
	SizeFull  = "full"
	SizeSmall = "small"
)

// Bounds of ExperimentOptions: each seed is a run of every point (a
// thousand give percentiles far steadier than any figure needs), and a
// point's duration is capped as the server caps every duration.
const (
	MaxExperimentSeeds    = 1000
	MaxExperimentDuration = server.MaxDuration
)

// ExperimentOptions are the settings of an experiment run. The zero value
// runs the full size into "psp-experiments/<name>".
type ExperimentOptions struct {
	// Out is the output directory; default psp-experiments/<name>.
	Out string
	// Size is SizeFull (default) or SizeSmall.
	Size string
	// Seeds, when > 0, overrides the size's number of seeds (simulated
	// runs: seeds 1..Seeds; live runs: one schedule per seed).
	Seeds int
	// Duration, when > 0, overrides the size's duration of each point
	// (simulated time; for live experiments, each measured run).
	Duration time.Duration
	// Parallel is the number of simulations run at once; 0: GOMAXPROCS.
	Parallel int
	// Launcher starts the servers of live experiments; default Exec{}.
	Launcher Launcher
	// Log receives progress lines; nil discards them.
	Log io.Writer
	// Progress, when set, receives the live experiments' progress bars.
	Progress io.Writer
	// Transport is how the live experiments' requests reach their servers:
	// "udp" (the default) or "tcp".
	Transport string
}

// Table is one printed table of an experiment's result.
type Table struct {
	Title  string     `json:"title"`
	Header []string   `json:"header"`
	Rows   [][]string `json:"rows"`
	// Note is printed under the table.
	Note string `json:"note,omitempty"`
}

// ExperimentResult is what an experiment measured and wrote.
type ExperimentResult struct {
	Name  string `json:"name"`
	Title string `json:"title"`
	Size  string `json:"size"`
	// Measured says in one line what was measured and what it showed.
	Measured string  `json:"measured"`
	Tables   []Table `json:"tables"`
	// Points are every run's point (per seed), simulated or measured.
	Points    []report.Point   `json:"points"`
	Summaries []report.Summary `json:"summaries,omitempty"`
	Files     []string         `json:"files"`
	ElapsedS  float64          `json:"elapsed_s"`
}

// Experiment is one of the paper's figures or tables, reproduced by a
// simulation of the paper's testbed or by a time-dilated live run.
type Experiment struct {
	// Name is the command-line name, e.g. "fig1".
	Name string
	// Title says what the paper's figure shows.
	Title string
	// Setup describes the full-size setup in one line.
	Setup string
	// Live reports that the experiment starts psp servers.
	Live bool
	run  func(ctx context.Context, x *expRun) error
}

// expRun is one run of an experiment: its options and what it collects.
type expRun struct {
	opt   ExperimentOptions
	small bool
	res   *ExperimentResult
}

// logf writes a progress line.
func (x *expRun) logf(format string, args ...any) {
	if x.opt.Log != nil {
		fmt.Fprintf(x.opt.Log, format+"\n", args...)
	}
}

// seeds returns the seeds to run: the option's count or the size's.
func (x *expRun) seeds(full, small int) []uint64 {
	n := full
	if x.small {
		n = small
	}
	if x.opt.Seeds > 0 {
		n = x.opt.Seeds
	}
	out := make([]uint64, n)
	for i := range out {
		out[i] = uint64(i + 1)
	}
	return out
}

// duration returns the duration of a point: the option's or the size's.
func (x *expRun) duration(full, small time.Duration) time.Duration {
	switch {
	case x.opt.Duration > 0:
		return x.opt.Duration
	case x.small:
		return small
	}
	return full
}

// pick returns full or small by size.
func pick[T any](x *expRun, full, small T) T {
	if x.small {
		return small
	}
	return full
}

// path returns the path of an output file and records it.
func (x *expRun) path(name string) string {
	p := filepath.Join(x.opt.Out, name)
	x.res.Files = append(x.res.Files, p)
	return p
}

// table adds a table to the result.
func (x *expRun) table(t Table) { x.res.Tables = append(x.res.Tables, t) }

// Experiments lists every experiment, in the paper's order.
func Experiments() []Experiment {
	return []Experiment{
		expFig1(), expFig3(), expFig3Live(), expFig4(), expFig7(), expFig7Live(),
		expFig9(), expFig10(), expTPCC(), expRocksDB(), expRedis(), expDefaults(),
	}
}

// ExperimentNames lists the experiments' names.
func ExperimentNames() []string {
	var out []string
	for _, e := range Experiments() {
		out = append(out, e.Name)
	}
	return out
}

// ErrUnknownExperiment is returned by LookupExperiment.
var ErrUnknownExperiment = errors.New("unknown experiment")

// LookupExperiment returns the experiment called name.
func LookupExperiment(name string) (Experiment, error) {
	for _, e := range Experiments() {
		if e.Name == name {
			return e, nil
		}
	}
	return Experiment{}, fmt.Errorf("experiment %q: %w (experiments: %s)", name, ErrUnknownExperiment, strings.Join(ExperimentNames(), ", "))
}

// Run runs the experiment and writes into the output directory:
// results.json and results.csv (every point), experiment.json (the
// result, tables included), tables.txt (the printed tables) and its
// charts.
func (e Experiment) Run(ctx context.Context, opt ExperimentOptions) (*ExperimentResult, error) {
	switch opt.Size {
	case "":
		opt.Size = SizeFull
	case SizeFull, SizeSmall:
	default:
		return nil, fmt.Errorf("experiment %s: size %q, want %s or %s", e.Name, opt.Size, SizeFull, SizeSmall)
	}
	switch {
	case opt.Seeds < 0 || opt.Seeds > MaxExperimentSeeds:
		return nil, fmt.Errorf("experiment %s: %d seeds, want 1 to %d", e.Name, opt.Seeds, MaxExperimentSeeds)
	case opt.Duration < 0 || opt.Duration > MaxExperimentDuration:
		return nil, fmt.Errorf("experiment %s: duration %v, want > 0 and at most %v", e.Name, opt.Duration, MaxExperimentDuration)
	case opt.Parallel < 0:
		return nil, fmt.Errorf("experiment %s: parallel %d, want >= 0", e.Name, opt.Parallel)
	}
	if opt.Out == "" {
		opt.Out = filepath.Join("psp-experiments", e.Name)
	}
	if opt.Launcher == nil {
		opt.Launcher = Exec{}
	}
	if err := os.MkdirAll(opt.Out, 0o755); err != nil {
		return nil, fmt.Errorf("experiment %s: create output directory: %w", e.Name, err)
	}
	start := time.Now()
	x := &expRun{opt: opt, small: opt.Size == SizeSmall, res: &ExperimentResult{Name: e.Name, Title: e.Title, Size: opt.Size}}
	if err := e.run(ctx, x); err != nil {
		return x.res, fmt.Errorf("experiment %s: %w", e.Name, err)
	}
	x.res.ElapsedS = time.Since(start).Seconds()
	if err := x.writeFiles(); err != nil {
		return x.res, fmt.Errorf("experiment %s: %w", e.Name, err)
	}
	return x.res, nil
}

// writeFiles writes the points, the result and the tables.
func (x *expRun) writeFiles() error {
	res := x.res
	if len(res.Points) > 0 {
		// The timelines go to experiment.json only: results.csv has no
		// place for them.
		flat := make([]report.Point, len(res.Points))
		for i, p := range res.Points {
			p.Timeline = nil
			flat[i] = p
		}
		for _, name := range []string{"results.json", "results.csv"} {
			if err := report.WriteFile(x.path(name), flat, res.Summaries); err != nil {
				return err
			}
		}
	}
	var tables strings.Builder
	if err := WriteExperimentTables(&tables, res); err != nil {
		return err
	}
	if err := os.WriteFile(x.path("tables.txt"), []byte(tables.String()), 0o644); err != nil {
		return fmt.Errorf("write tables: %w", err)
	}
	f := x.path("experiment.json")
	b, err := json.MarshalIndent(sanitized(res), "", "  ")
	if err != nil {
		return fmt.Errorf("write %s: %w", f, err)
	}
	if err := os.WriteFile(f, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", f, err)
	}
	return nil
}

// sanitized returns res with its points' non-finite numbers (not
// representable in JSON) written as 0, as report.WriteJSON does.
func sanitized(res *ExperimentResult) *ExperimentResult {
	r := *res
	r.Points = slices.Clone(res.Points)
	for i := range r.Points {
		r.Points[i] = report.Finite(r.Points[i])
	}
	return &r
}

// WriteExperimentTables prints the result's tables, then its one-line
// summary.
func WriteExperimentTables(w io.Writer, res *ExperimentResult) error {
	fmt.Fprintf(w, "%s (%s size)\n", res.Title, res.Size)
	for _, t := range res.Tables {
		fmt.Fprintf(w, "\n%s\n", t.Title)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, strings.Join(t.Header, "\t")+"\t")
		for _, r := range t.Rows {
			fmt.Fprintln(tw, strings.Join(r, "\t")+"\t")
		}
		if err := tw.Flush(); err != nil {
			return fmt.Errorf("write table: %w", err)
		}
		if t.Note != "" {
			fmt.Fprintln(w, t.Note)
		}
	}
	_, err := fmt.Fprintf(w, "\nmeasured: %s\n", res.Measured)
	return err
}
