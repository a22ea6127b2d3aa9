package workload

import (
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Phase is one phase of a workload that changes over time: a mix played for
// a duration, optionally at a load of its own.
type Phase struct {
	// Name labels the phase in reports; default "phase N".
	Name string `json:"name,omitempty" yaml:"name,omitempty"`
	// Duration is how long the phase lasts (> 0).
	Duration Duration `json:"duration" yaml:"duration"`
	// Load, when > 0, is the phase's offered load (a fraction of the
	// workers' capacity for this phase's mix); 0 takes the run's load.
	Load float64 `json:"load,omitempty" yaml:"load,omitempty"`
	// Use names the phase's mix: a built-in workload or a workload file.
	// Types gives it inline instead; exactly one of them is set.
	Use   string     `json:"use,omitempty" yaml:"use,omitempty"`
	Types []TypeSpec `json:"types,omitempty" yaml:"types,omitempty"`
}

// Phases is a workload that changes over time: its phases are played one
// after the other. A type keeps its name and wire id across phases (the
// same name must have the same id), and may be absent from some.
type Phases struct {
	Name   string  `json:"name" yaml:"name"`
	Phases []Phase `json:"phases" yaml:"phases"`

	mixes []Workload // resolved mix of each phase
}

// maxPhases bounds a phase list.
const maxPhases = 1000

// MaxPhasesDuration bounds a phase's duration and the phases' total (as
// psp serve's MaxDuration bounds its durations): longer ones would not be
// simulated or played in any reasonable time, and their sum could overflow.
const MaxPhasesDuration = 24 * time.Hour

// Validate resolves every phase's mix (reading the workload files named
// by Use relative to dir, "" for the working directory), names unnamed
// phases and checks that types agree across phases.
func (p *Phases) Validate(dir string) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w %q: %s", ErrInvalid, p.Name, fmt.Sprintf(format, args...))
	}
	if err := CheckName(p.Name); err != nil {
		return fmt.Errorf("%w: phases %w", ErrInvalid, err)
	}
	switch {
	case len(p.Phases) == 0:
		return bad("no phases")
	case len(p.Phases) > maxPhases:
		return bad("%d phases, at most %d", len(p.Phases), maxPhases)
	}
	p.Phases = slices.Clone(p.Phases) // names are filled in on a copy: p may be shared
	p.mixes = make([]Workload, len(p.Phases))
	ids := map[string]uint32{}
	names := map[uint32]string{}
	var total time.Duration
	for i := range p.Phases {
		ph := &p.Phases[i]
		if ph.Name == "" {
			ph.Name = fmt.Sprintf("phase %d", i+1)
		}
		if err := CheckName(ph.Name); err != nil {
			return bad("phase %d: %v", i+1, err)
		}
		switch {
		case ph.Duration <= 0 || time.Duration(ph.Duration) > MaxPhasesDuration:
			return bad("phase %q: duration %v, want > 0 and at most %v", ph.Name, ph.Duration, MaxPhasesDuration)
		case total+time.Duration(ph.Duration) > MaxPhasesDuration:
			return bad("phase %q: the phases up to it last %v, at most %v in all", ph.Name, total+time.Duration(ph.Duration), MaxPhasesDuration)
		case !(ph.Load >= 0 && ph.Load <= 2):
			return bad("phase %q: load %v, want 0 (the run's) or a fraction in (0, 2]", ph.Name, ph.Load)
		case (ph.Use == "") == (len(ph.Types) == 0):
			return bad("phase %q: give its mix by name (use: high-bimodal, or a file) or inline (types: ...), one of them", ph.Name)
		}
		var w Workload
		if ph.Use != "" {
			use := ph.Use
			if _, builtin := builtins()[use]; !builtin && dir != "" && !filepath.IsAbs(use) {
				use = filepath.Join(dir, use)
			}
			var err error
			if w, err = Parse(use); err != nil {
				return fmt.Errorf("phase %q: %w", ph.Name, err)
			}
		} else {
			w = Workload{Name: ph.Name, Types: append([]TypeSpec(nil), ph.Types...)}
			if err := w.Validate(); err != nil {
				return fmt.Errorf("phase %q: %w", ph.Name, err)
			}
		}
		for _, t := range w.Types {
			if id, ok := ids[t.Name]; ok && id != t.ID {
				return bad("phase %q: type %s has id %d, %d in an earlier phase", ph.Name, t.Name, t.ID, id)
			}
			if name, ok := names[t.ID]; ok && name != t.Name {
				return bad("phase %q: id %d is %s, %s in an earlier phase", ph.Name, t.ID, t.Name, name)
			}
			ids[t.Name], names[t.ID] = t.ID, t.Name
		}
		p.mixes[i] = w
		total += time.Duration(ph.Duration)
	}
	return nil
}

// Mix returns phase i's workload. Validate must have succeeded.
func (p *Phases) Mix(i int) Workload { return p.mixes[i] }

// Total is the sum of the phases' durations.
func (p *Phases) Total() time.Duration {
	var d time.Duration
	for _, ph := range p.Phases {
		d += time.Duration(ph.Duration)
	}
	return d
}

// Union returns a workload holding every type of every phase once, in
// order of first appearance, each with its first phase's service time and
// share (shares then normalised). Validate must have succeeded.
func (p *Phases) Union() Workload {
	u := Workload{Name: p.Name}
	seen := map[string]bool{}
	for _, w := range p.mixes {
		for _, t := range w.Types {
			if !seen[t.Name] {
				seen[t.Name] = true
				u.Types = append(u.Types, t)
			}
		}
	}
	_ = u.Validate() // normalises the shares; the types were validated
	return u
}

// Indexes returns, for phase i, the index in Union's types of each of the
// phase's types.
func (p *Phases) Indexes(i int) []int {
	u := p.Union()
	w := p.mixes[i]
	out := make([]int, len(w.Types))
	for j, t := range w.Types {
		out[j] = -1
		for k, ut := range u.Types {
			if ut.Name == t.Name {
				out[j] = k
				break
			}
		}
	}
	return out
}

// builtinPhases returns fresh copies of the built-in phase lists.
func builtinPhases() map[string]Phases {
	const us = time.Microsecond
	sec5 := Duration(5 * time.Second)
	return map[string]Phases{
		// The paper's phase experiment on High Bimodal: the two types swap
		// their service times, then their shares change to 99.5/0.5, then
		// only one type is left.
		"phase-change": {Name: "phase-change", Phases: []Phase{
			{Name: "high-bimodal", Duration: sec5, Use: "high-bimodal"},
			{Name: "swapped", Duration: sec5, Types: []TypeSpec{
				{Name: "SHORT", ID: 1, Share: 0.5, Service: fixed(100 * us)},
				{Name: "LONG", ID: 2, Share: 0.5, Service: fixed(1 * us)},
			}},
			{Name: "99.5/0.5", Duration: sec5, Types: []TypeSpec{
				{Name: "SHORT", ID: 1, Share: 0.995, Service: fixed(100 * us)},
				{Name: "LONG", ID: 2, Share: 0.005, Service: fixed(1 * us)},
			}},
			{Name: "one type", Duration: sec5, Types: []TypeSpec{
				{Name: "SHORT", ID: 1, Share: 1, Service: fixed(100 * us)},
			}},
		}},
	}
}

// PhaseNames lists the built-in phase lists.
func PhaseNames() []string { return []string{"phase-change"} }

// ParsePhases returns the built-in phase list called nameOrPath, or reads
// a YAML (.yaml, .yml) or JSON (.json) file of the form
//
//	name: swap
//	phases:
//	  - {name: before, duration: 2s, use: high-bimodal}
//	  - name: after
//	    duration: 2s
//	    load: 0.7
//	    types:
//	      - {name: SHORT, id: 1, share: 0.5, service: {kind: fixed, value: 100us}}
//	      - {name: LONG, id: 2, share: 0.5, service: {kind: fixed, value: 1us}}
//
// Workload files named by use: are read relative to the file's directory.
func ParsePhases(nameOrPath string) (Phases, error) {
	if p, ok := builtinPhases()[nameOrPath]; ok {
		if err := p.Validate(""); err != nil {
			return Phases{}, err
		}
		return p, nil
	}
	if !strings.ContainsAny(nameOrPath, "/\\") && filepath.Ext(nameOrPath) == "" {
		return Phases{}, fmt.Errorf("phases %q: %w (built-in: %s; or give a .yaml/.json file)",
			nameOrPath, ErrUnknownWorkload, strings.Join(PhaseNames(), ", "))
	}
	var p Phases
	if err := decodeSpecFile("phases", nameOrPath, &p); err != nil {
		return Phases{}, err
	}
	if p.Name == "" {
		p.Name = defaultName(nameOrPath)
	}
	if err := p.Validate(filepath.Dir(nameOrPath)); err != nil {
		return Phases{}, fmt.Errorf("load phases %s: %w", nameOrPath, err)
	}
	return p, nil
}

// Scaled returns a copy of p whose phases last f times as long (f > 0).
func (p Phases) Scaled(f float64) Phases {
	q := p
	q.Phases = append([]Phase(nil), p.Phases...)
	for i := range q.Phases {
		// Clamped below 2^63 ns: a longer phase is refused by Validate
		// rather than wrapped around to a negative duration.
		q.Phases[i].Duration = Duration(math.Min(math.Max(1, math.Round(float64(q.Phases[i].Duration)*f)), math.MaxInt64/2))
	}
	return q
}

// Dilated returns a copy of p whose service times are multiplied by f
// (> 0), as Workload.Dilated does; durations and loads are unchanged.
// Validate must have succeeded; the copy gives every phase's mix inline.
func (p Phases) Dilated(f float64) Phases {
	q := Phases{Name: p.Name, Phases: slices.Clone(p.Phases), mixes: make([]Workload, len(p.mixes))}
	for i := range q.mixes {
		m := p.mixes[i].Dilated(f)
		q.mixes[i] = m
		q.Phases[i].Use, q.Phases[i].Types = "", m.Types
	}
	return q
}
