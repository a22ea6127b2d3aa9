package report

import (
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"

	json "github.com/goccy/go-json"

	"github.com/persephone-go/psp/internal/boundedfile"
)

// ErrFormat is returned by the readers for malformed input.
var ErrFormat = errors.New("malformed results")

// FormatNs formats a duration in nanoseconds compactly: "850ns", "12.3us",
// "4.56ms", "1.2s".
func FormatNs(ns float64) string {
	switch {
	case ns < 1e3:
		return strconv.FormatFloat(ns, 'f', 0, 64) + "ns"
	case ns < 1e6:
		return strconv.FormatFloat(ns/1e3, 'g', 3, 64) + "us"
	case ns < 1e9:
		return strconv.FormatFloat(ns/1e6, 'g', 3, 64) + "ms"
	}
	return strconv.FormatFloat(ns/1e9, 'g', 3, 64) + "s"
}

func formatRate(r float64) string {
	switch {
	case r >= 1e6:
		return strconv.FormatFloat(r/1e6, 'f', 3, 64) + "M"
	case r >= 1e3:
		return strconv.FormatFloat(r/1e3, 'f', 1, 64) + "k"
	}
	return strconv.FormatFloat(r, 'f', 0, 64)
}

func formatSlowdown(s float64) string { return strconv.FormatFloat(s, 'g', 4, 64) }

// WriteTable prints points as aligned text tables, one per offered load (in
// order of first appearance), one block of rows per policy: all requests,
// then each type. The drop/lost column adds the requests the server
// dropped and those never answered (measured runs).
func WriteTable(w io.Writer, points []Point) error {
	var loads []float64
	byLoad := map[float64][]int{}
	for i, p := range points {
		if _, ok := byLoad[p.Load]; !ok {
			loads = append(loads, p.Load)
		}
		byLoad[p.Load] = append(byLoad[p.Load], i)
	}
	withSource := len(sources(points)) > 1
	for n, load := range loads {
		idx := byLoad[load]
		first := &points[idx[0]]
		if n > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "load %.3g: %s req/s offered, %s, %d workers\n", load, formatRate(first.OfferedRate), first.Workload, first.Workers)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "policy\ttype\trequests\tachieved\tdrop/lost\tidle\twaste\tp50\tp99\tp99.9\tslow p50\tslow p99\tslow p99.9\t")
		for _, i := range idx {
			p := &points[i]
			name := p.Label(withSource)
			if !p.Sustained {
				name += " !"
			}
			row := func(policy, typ string, s Stats, achieved, idle, waste string) {
				q := [6]string{"-", "-", "-", "-", "-", "-"} // no samples: no quantiles (not 0ns)
				if s.Count > 0 {
					q = [6]string{FormatNs(float64(s.P50Latency)), FormatNs(float64(s.P99Latency)), FormatNs(float64(s.P999Latency)),
						formatSlowdown(s.P50Slowdown), formatSlowdown(s.P99Slowdown), formatSlowdown(s.P999Slowdown)}
				}
				fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n",
					policy, typ, s.Count, achieved, s.Dropped+s.Lost, idle, waste, q[0], q[1], q[2], q[3], q[4], q[5])
			}
			workers := func(v float64) string {
				if math.IsNaN(v) {
					return "-" // unknown (a client without the server's admin address)
				}
				return strconv.FormatFloat(v, 'f', 2, 64)
			}
			row(name, "all", p.Overall, formatRate(p.AchievedRate), workers(p.MeanIdleWorkers), workers(p.WastedWorkers))
			for _, t := range p.Types {
				typ := t.Name
				if t.NotSustained != "" {
					typ += " !"
				}
				row("", typ, t.Stats, "", "", "")
			}
			for _, tp := range p.Tenants {
				tname := "tenant " + tp.Tenant
				if !tp.Sustained {
					tname += " !"
				}
				row("", tname, tp.Overall, formatRate(tp.AchievedRate), "", "")
			}
		}
		if err := tw.Flush(); err != nil {
			return fmt.Errorf("write table: %w", err)
		}
	}
	if len(points) > 0 {
		_, err := fmt.Fprintln(w, "(! = not sustained: achieved < 99.9% of offered, drops, a type's backlog growing, or the client behind its schedule;\n"+
			" drop/lost = dropped by the server or never answered; latencies from arrival (the intended send time) to completion;\n"+
			" idle = mean idle workers; waste = mean workers idle while requests waited; - when unknown)")
		return err
	}
	return nil
}

// WriteSummary prints one line per summary; lines name the source only
// when the summaries come from more than one.
func WriteSummary(w io.Writer, sums []Summary) error {
	withSource := false
	for _, s := range sums {
		withSource = withSource || s.Source != sums[0].Source
	}
	for _, s := range sums {
		if _, err := fmt.Fprintln(w, s.line(withSource)); err != nil {
			return fmt.Errorf("write summary: %w", err)
		}
	}
	return nil
}

// File is the JSON document written by WriteJSON.
type File struct {
	Points    []Point   `json:"points"`
	Summaries []Summary `json:"summaries,omitempty"`
}

// WriteJSON writes points (and optional summaries) as an indented JSON
// document {"points": [...], "summaries": [...]}.
func WriteJSON(w io.Writer, points []Point, sums []Summary) error {
	f := File{Points: make([]Point, len(points)), Summaries: sums}
	for i, p := range points {
		p.sanitize()
		f.Points[i] = p
	}
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return fmt.Errorf("write json: %w", err)
	}
	b = append(b, '\n')
	if _, err := w.Write(b); err != nil {
		return fmt.Errorf("write json: %w", err)
	}
	return nil
}

func (p *Point) sanitize() {
	p.Load, p.OfferedRate, p.AchievedRate = finite(p.Load), finite(p.OfferedRate), finite(p.AchievedRate)
	p.MeanIdleWorkers, p.WastedWorkers, p.DurationSec = finite(p.MeanIdleWorkers), finite(p.WastedWorkers), finite(p.DurationSec)
	types := make([]TypeStats, len(p.Types))
	copy(types, p.Types)
	p.Types = types
	p.Overall.sanitize()
	for i := range p.Types {
		p.Types[i].sanitize()
	}
	tenants := make([]Point, len(p.Tenants))
	for i, tp := range p.Tenants {
		tp.sanitize()
		tenants[i] = tp
	}
	if len(tenants) > 0 {
		p.Tenants = tenants
	}
}

func (s *Stats) sanitize() {
	s.MeanLatency, s.MeanSlowdown = finite(s.MeanLatency), finite(s.MeanSlowdown)
	s.P50Slowdown, s.P99Slowdown, s.P999Slowdown = finite(s.P50Slowdown), finite(s.P99Slowdown), finite(s.P999Slowdown)
}

// ReadJSON reads points written by WriteJSON; a bare JSON array of points
// is accepted too.
func ReadJSON(r io.Reader) ([]Point, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("read json: %w", err)
	}
	data = bytes.TrimSpace(data)
	if len(data) > 0 && data[0] == '[' {
		var pts []Point
		if err := json.Unmarshal(data, &pts); err != nil {
			return nil, fmt.Errorf("read json: %w: %w", ErrFormat, err)
		}
		return pts, nil
	}
	var f File
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("read json: %w: %w", ErrFormat, err)
	}
	return f.Points, nil
}

// csvHeader are the CSV columns: one row per point and type, the type
// "all" standing for all requests; point columns repeat on every row.
var csvHeader = []string{
	"source", "policy", "workload", "workers", "load", "offered_rps", "achieved_rps", "sustained",
	"mean_idle_workers", "duration_s", "type", "type_id", "count", "dropped", "lost",
	"mean_latency_ns", "p50_latency_ns", "p99_latency_ns", "p999_latency_ns", "max_latency_ns",
	"mean_slowdown", "p50_slowdown", "p99_slowdown", "p999_slowdown",
}

// csvOptional are CSV columns added later: written always, read when
// present.
var csvOptional = []string{"wasted_workers", "seed", "not_sustained"}

// AllTypes is the type name of the rows standing for all requests in CSV
// output.
const AllTypes = "all"

func fstr(v float64) string { return strconv.FormatFloat(finite(v), 'g', -1, 64) }

// WriteCSV writes points as CSV with a header row: one row for all requests
// ("all") and one per type for every point.
func WriteCSV(w io.Writer, points []Point) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(append(csvHeader[:len(csvHeader):len(csvHeader)], csvOptional...)); err != nil {
		return fmt.Errorf("write csv: %w", err)
	}
	for _, p := range points {
		head := []string{p.Source, p.Policy, p.Workload, strconv.Itoa(p.Workers), fstr(p.Load),
			fstr(p.OfferedRate), fstr(p.AchievedRate), strconv.FormatBool(p.Sustained),
			fstr(p.MeanIdleWorkers), fstr(p.DurationSec)}
		row := func(name string, id uint32, s Stats, notSustained string) error {
			rec := append(head[:len(head):len(head)], name, strconv.FormatUint(uint64(id), 10),
				strconv.FormatUint(s.Count, 10), strconv.FormatUint(s.Dropped, 10), strconv.FormatUint(s.Lost, 10),
				fstr(s.MeanLatency), strconv.FormatInt(s.P50Latency, 10), strconv.FormatInt(s.P99Latency, 10),
				strconv.FormatInt(s.P999Latency, 10), strconv.FormatInt(s.MaxLatency, 10),
				fstr(s.MeanSlowdown), fstr(s.P50Slowdown), fstr(s.P99Slowdown), fstr(s.P999Slowdown),
				fstr(p.WastedWorkers), strconv.FormatUint(p.Seed, 10), notSustained)
			return cw.Write(rec)
		}
		if err := row(AllTypes, 0, p.Overall, ""); err != nil {
			return fmt.Errorf("write csv: %w", err)
		}
		for _, t := range p.Types {
			if err := row(t.Name, t.ID, t.Stats, t.NotSustained); err != nil {
				return fmt.Errorf("write csv: %w", err)
			}
		}
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return fmt.Errorf("write csv: %w", err)
	}
	return nil
}

// ReadCSV reads points written by WriteCSV. Each "all" row starts a new
// point; the type rows after it belong to it. Columns are found by name, so
// extra columns are ignored.
func ReadCSV(r io.Reader) ([]Point, error) {
	cr := csv.NewReader(r)
	header, err := cr.Read()
	if err != nil {
		return nil, fmt.Errorf("read csv header: %w: %w", ErrFormat, err)
	}
	col := map[string]int{}
	for i, h := range header {
		col[strings.TrimSpace(h)] = i
	}
	for _, h := range csvHeader {
		if _, ok := col[h]; !ok {
			return nil, fmt.Errorf("read csv: %w: missing column %q", ErrFormat, h)
		}
	}
	var pts []Point
	for line := 2; ; line++ {
		rec, err := cr.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("read csv: %w: %w", ErrFormat, err)
		}
		p := csvRow{rec: rec, col: col}
		var s Stats
		s.Count, s.Dropped, s.Lost = p.u64("count"), p.u64("dropped"), p.u64("lost")
		s.MeanLatency = p.f64("mean_latency_ns")
		s.P50Latency, s.P99Latency = p.i64("p50_latency_ns"), p.i64("p99_latency_ns")
		s.P999Latency, s.MaxLatency = p.i64("p999_latency_ns"), p.i64("max_latency_ns")
		s.MeanSlowdown, s.P50Slowdown = p.f64("mean_slowdown"), p.f64("p50_slowdown")
		s.P99Slowdown, s.P999Slowdown = p.f64("p99_slowdown"), p.f64("p999_slowdown")
		typ := p.str("type")
		if typ == AllTypes {
			pt := Point{
				Source: p.str("source"), Policy: p.str("policy"), Workload: p.str("workload"),
				Workers: int(p.i64("workers")), Load: p.f64("load"), OfferedRate: p.f64("offered_rps"),
				AchievedRate: p.f64("achieved_rps"), Sustained: p.str("sustained") == "true",
				MeanIdleWorkers: p.f64("mean_idle_workers"), DurationSec: p.f64("duration_s"), Overall: s,
			}
			if p.has("wasted_workers") {
				pt.WastedWorkers = p.f64("wasted_workers")
			}
			if p.has("seed") {
				pt.Seed = p.u64("seed")
			}
			pts = append(pts, pt)
		} else {
			if len(pts) == 0 {
				return nil, fmt.Errorf("read csv line %d: %w: type row %q before any %q row", line, ErrFormat, shorten(typ, maxLabelRunes), AllTypes)
			}
			last := &pts[len(pts)-1]
			last.Types = append(last.Types, TypeStats{Name: typ, ID: uint32(p.u64("type_id")), NotSustained: p.str("not_sustained"), Stats: s})
		}
		if p.err != nil {
			return nil, fmt.Errorf("read csv line %d: %w: %w", line, ErrFormat, p.err)
		}
	}
	return pts, nil
}

type csvRow struct {
	rec []string
	col map[string]int
	err error
}

func (c *csvRow) str(name string) string {
	i, ok := c.col[name]
	if !ok || i >= len(c.rec) {
		return ""
	}
	return c.rec[i]
}

// has reports whether the optional column name is present and not empty.
func (c *csvRow) has(name string) bool { return c.str(name) != "" }

func (c *csvRow) f64(name string) float64 {
	v, err := strconv.ParseFloat(c.str(name), 64)
	if err != nil && c.err == nil {
		c.err = fmt.Errorf("column %s: %w", name, err)
	}
	return v
}

func (c *csvRow) i64(name string) int64 {
	v, err := strconv.ParseInt(c.str(name), 10, 64)
	if err != nil && c.err == nil {
		c.err = fmt.Errorf("column %s: %w", name, err)
	}
	return v
}

func (c *csvRow) u64(name string) uint64 {
	v, err := strconv.ParseUint(c.str(name), 10, 64)
	if err != nil && c.err == nil {
		c.err = fmt.Errorf("column %s: %w", name, err)
	}
	return v
}

// maxResultsFile bounds a results file ReadFile reads.
const maxResultsFile = 256 << 20

// ReadFile reads points from a .json or .csv file.
func ReadFile(path string) ([]Point, error) {
	f, err := boundedfile.Open(path, maxResultsFile)
	if err != nil {
		return nil, fmt.Errorf("read results: %w", err)
	}
	defer f.Close()
	var pts []Point
	switch ext := strings.ToLower(filepath.Ext(path)); ext {
	case ".json":
		pts, err = ReadJSON(f)
	case ".csv":
		pts, err = ReadCSV(f)
	default:
		return nil, fmt.Errorf("read results %s: unknown extension %q (want .json or .csv)", path, ext)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return pts, nil
}

// WriteFile writes points to a .json or .csv file, by extension.
func WriteFile(path string, points []Point, sums []Summary) error {
	ext := strings.ToLower(filepath.Ext(path))
	if ext != ".json" && ext != ".csv" {
		return fmt.Errorf("write results %s: unknown extension %q (want .json or .csv)", path, ext)
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("write results: %w", err)
	}
	if ext == ".json" {
		err = WriteJSON(f, points, sums)
	} else {
		err = WriteCSV(f, points)
	}
	if cerr := f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("write results %s: %w", path, cerr)
	}
	return err
}

// Finite returns p with its non-finite numbers (NaN for unknown idle
// workers, for instance) replaced by 0, as WriteJSON writes them.
func Finite(p Point) Point {
	p.sanitize()
	return p
}
