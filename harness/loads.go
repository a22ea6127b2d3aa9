package harness

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// MaxLoad is the highest offered load ParseLoads accepts: ten times the
// workers' capacity, for overload studies (psp sim predicting what a
// server sheds at five times its capacity, say).
const MaxLoad = 10

// maxLoadPoints bounds the number of loads a range may expand to.
const maxLoadPoints = 1000

// ParseLoads parses offered loads, as fractions of the workers' capacity: a
// range START:END:STEP (END included when the steps reach it, up to
// rounding) or a comma-separated list such as 0.5,0.8,0.9. Every load must
// be in (0, MaxLoad].
func ParseLoads(s string) ([]float64, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, errors.New("loads: empty (want START:END:STEP or a list such as 0.5,0.8)")
	}
	num := func(v string) (float64, error) {
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return 0, fmt.Errorf("loads %q: %q is not a number", s, strings.TrimSpace(v))
		}
		return f, nil
	}
	var loads []float64
	if strings.Contains(s, ":") {
		parts := strings.Split(s, ":")
		if len(parts) != 3 {
			return nil, fmt.Errorf("loads %q: want START:END:STEP (e.g. 0.1:0.9:0.1) or a list such as 0.5,0.8", s)
		}
		var v [3]float64
		for i, p := range parts {
			f, err := num(p)
			if err != nil {
				return nil, err
			}
			v[i] = f
		}
		start, end, step := v[0], v[1], v[2]
		switch {
		case !(step > 0):
			return nil, fmt.Errorf("loads %q: step %v, want > 0", s, step)
		case end < start:
			return nil, fmt.Errorf("loads %q: end %v is below start %v", s, end, start)
		}
		n := math.Floor((end-start)/step+1e-6) + 1
		if n > maxLoadPoints {
			return nil, fmt.Errorf("loads %q: %.3g points, at most %d", s, n, maxLoadPoints)
		}
		for i := 0; i < int(n); i++ {
			// Rounded to 1e-9 so that 0.1+2*0.1 is 0.3.
			loads = append(loads, math.Round((start+float64(i)*step)*1e9)/1e9)
		}
	} else {
		for _, p := range strings.Split(s, ",") {
			f, err := num(p)
			if err != nil {
				return nil, err
			}
			loads = append(loads, f)
		}
	}
	for _, l := range loads {
		if !(l > 0) || l > MaxLoad {
			return nil, fmt.Errorf("loads %q: load %v out of (0, %d]", s, l, MaxLoad)
		}
	}
	return loads, nil
}

// ParsePolicies parses a comma-separated list of policy names, each of
// which must be in valid (empty entries are skipped; duplicates refused).
func ParsePolicies(s string, valid []string) ([]string, error) {
	var out []string
	for _, p := range strings.Split(s, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		if !slices.Contains(valid, p) {
			return nil, fmt.Errorf("policies: unknown policy %q (valid: %s)", p, strings.Join(valid, ", "))
		}
		if slices.Contains(out, p) {
			return nil, fmt.Errorf("policies: %q listed twice", p)
		}
		out = append(out, p)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("policies: none given (valid: %s)", strings.Join(valid, ", "))
	}
	return out, nil
}
