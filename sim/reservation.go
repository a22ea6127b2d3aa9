package sim

import (
	"fmt"

	"github.com/persephone-go/psp/darc"
	"github.com/persephone-go/psp/report"
	"github.com/persephone-go/psp/workload"
)

// NominalReservation is the reservation DARC's Algorithm 2 makes from w's
// nominal profile (mean service times and shares) on workers workers, with
// d's Delta and Spillway: what DARC should reach once it has profiled w.
func NominalReservation(w workload.Workload, workers int, d darc.Config) (report.Reservation, error) {
	profiles := nominalProfile(&w)
	groups, err := darc.Reserve(profiles, workers, d.Spillway, d.Delta)
	if err != nil {
		return report.Reservation{}, fmt.Errorf("nominal reservation of %s: %w", w.Name, err)
	}
	var r report.Reservation
	for _, g := range groups {
		rg := report.ReservedGroup{Workers: len(g.Reserved), Spillway: g.Spillway}
		for _, t := range g.Types {
			rg.Types = append(rg.Types, w.Types[t-1].Name)
		}
		r.Groups = append(r.Groups, rg)
	}
	return r, nil
}

// PhaseReservation is how DARC's reservation followed one phase of a
// workload: the reservation the phase's nominal profile calls for, and
// how long after the phase started the reservation in effect first equalled
// it.
type PhaseReservation struct {
	Phase    string             `json:"phase"`
	Expected report.Reservation `json:"expected"`
	// Matched reports that the expected reservation was in effect at some
	// point of the phase; AfterSec is then when, from the phase's start
	// (0 when it already was).
	Matched  bool    `json:"matched"`
	AfterSec float64 `json:"after_s"`
	// End is the reservation in effect when the phase ended (none: nil).
	End *report.Reservation `json:"end,omitempty"`
}

// PhaseReservations follows a run's reservations through its phases: p
// must come from a run of cfg with a Timeline. Phases are those of
// cfg.Phases, or the whole run as one phase.
func PhaseReservations(cfg Config, p *report.Point) ([]PhaseReservation, error) {
	cfg = cfg.withDefaults()
	t := p.Timeline
	if t == nil {
		return nil, fmt.Errorf("phase reservations: the point has no timeline (set Config.Timeline)")
	}
	type span struct {
		name       string
		start, end float64
		mix        workload.Workload
	}
	var spans []span
	if len(cfg.Phases.Phases) == 0 {
		spans = append(spans, span{name: cfg.Workload.Name, start: 0, end: cfg.Duration.Seconds(), mix: cfg.Workload})
	} else {
		at := 0.0
		for i, ph := range cfg.Phases.Phases {
			d := ph.Duration
			spans = append(spans, span{name: ph.Name, start: at, end: at + float64(d)/1e9, mix: cfg.Phases.Mix(i)})
			at += float64(d) / 1e9
		}
	}
	var out []PhaseReservation
	for _, s := range spans {
		exp, err := NominalReservation(s.mix, cfg.Workers, cfg.Darc)
		if err != nil {
			return nil, err
		}
		pr := PhaseReservation{Phase: s.name, Expected: exp}
		if r := t.ReservationAt(s.start); r != nil && r.Equal(&exp) {
			pr.Matched = true
		} else {
			for i := range t.Reservations {
				r := &t.Reservations[i]
				if r.AtSec > s.start && r.AtSec < s.end && r.Equal(&exp) {
					pr.Matched, pr.AfterSec = true, r.AtSec-s.start
					break
				}
			}
		}
		pr.End = t.ReservationAt(s.end)
		out = append(out, pr)
	}
	return out, nil
}
