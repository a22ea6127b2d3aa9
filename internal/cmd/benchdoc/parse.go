package main

import (
	"math"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Run is one line of go test -bench output: a benchmark's name (with its
// package, without the GOMAXPROCS suffix) and its metrics by unit.
type Run struct {
	Name    string
	Metrics map[string]float64
	Units   []string // in the order printed
}

// Summary is a benchmark's runs, summed up: per unit, the median and the
// range.
type Summary struct {
	Name  string
	Runs  int
	Units []string
	Med   map[string]float64
	Min   map[string]float64
	Max   map[string]float64
}

var procsSuffix = regexp.MustCompile(`-\d+$`)

// parseBenchOutput reads go test -bench output: the "pkg:" lines name the
// package of the benchmark lines that follow.
func parseBenchOutput(out string) []Run {
	var runs []Run
	pkg := ""
	for _, line := range strings.Split(out, "\n") {
		if p, ok := strings.CutPrefix(line, "pkg: "); ok {
			pkg = path.Base(strings.TrimSpace(p))
			continue
		}
		f := strings.Fields(line)
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		if _, err := strconv.Atoi(f[1]); err != nil {
			continue // not a result line (a benchmark's own log)
		}
		r := Run{Name: procsSuffix.ReplaceAllString(f[0], ""), Metrics: map[string]float64{}}
		if pkg != "" {
			r.Name = pkg + "." + r.Name
		}
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				break
			}
			unit := f[i+1]
			if _, dup := r.Metrics[unit]; !dup {
				r.Units = append(r.Units, unit)
			}
			r.Metrics[unit] = v
		}
		runs = append(runs, r)
	}
	return runs
}

// cpuFromOutput is the processor go test names on its "cpu:" line.
func cpuFromOutput(out string) string {
	for _, line := range strings.Split(out, "\n") {
		if c, ok := strings.CutPrefix(line, "cpu: "); ok {
			return strings.TrimSpace(c)
		}
	}
	return ""
}

// summarize groups runs by benchmark, in the order they first ran.
func summarize(runs []Run) []Summary {
	index := map[string]int{}
	var byBench [][]Run
	for _, r := range runs {
		i, ok := index[r.Name]
		if !ok {
			i = len(byBench)
			index[r.Name] = i
			byBench = append(byBench, nil)
		}
		byBench[i] = append(byBench[i], r)
	}
	var out []Summary
	for _, rs := range byBench {
		s := Summary{Name: rs[0].Name, Runs: len(rs), Units: rs[0].Units,
			Med: map[string]float64{}, Min: map[string]float64{}, Max: map[string]float64{}}
		for _, u := range s.Units {
			var vs []float64
			for _, r := range rs {
				if v, ok := r.Metrics[u]; ok {
					vs = append(vs, v)
				}
			}
			slices.Sort(vs)
			s.Med[u], s.Min[u], s.Max[u] = median(vs), vs[0], vs[len(vs)-1]
		}
		out = append(out, s)
	}
	return out
}

func median(sorted []float64) float64 {
	n := len(sorted)
	if n%2 == 1 {
		return sorted[n/2]
	}
	return (sorted[n/2-1] + sorted[n/2]) / 2
}

// formatValue prints a figure with three significant digits (whole numbers
// from 1000 up).
func formatValue(v float64) string {
	switch a := math.Abs(v); {
	case v == math.Trunc(v) && a < 1e15:
		return strconv.FormatFloat(v, 'f', -1, 64)
	case a >= 1000:
		return strconv.FormatFloat(math.Round(v), 'f', -1, 64)
	default:
		return strconv.FormatFloat(v, 'g', 3, 64)
	}
}
