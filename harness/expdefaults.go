package harness

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/persephone-go/psp/darc"
	"github.com/persephone-go/psp/report"
	"github.com/persephone-go/psp/sim"
	"github.com/persephone-go/psp/workload"
)

// updateSettings is a candidate for DARC's update defaults.
type updateSettings struct {
	label       string
	delayFactor float64
	hysteresis  float64 // negative: none
	maxWindow   int     // times MinSamples; negative: no limit
}

func (u updateSettings) apply(d darc.Config) darc.Config {
	d.DelayFactor, d.Hysteresis = u.delayFactor, u.hysteresis
	switch {
	case u.maxWindow < 0:
		d.MaxWindow = -1
	case d.MinSamples > 0:
		d.MaxWindow = u.maxWindow * d.MinSamples
	}
	return d
}

// defaultsCandidates are the settings the defaults experiment compares:
// the paper's, the prototype's, the previous default and the current one.
func defaultsCandidates() []updateSettings {
	return []updateSettings{
		{"paper: factor 10", 10, -1, -1},
		{"prototype: factor 1", 1, -1, -1},
		{"factor 1, hysteresis", 1, 0.25, -1},
		{"factor 10, hysteresis", 10, 0.25, -1},
		{"factor 1, hysteresis, window 4x", 1, 0.25, 4},
		{"factor 1, hysteresis, window 2x", 1, 0.25, 2},
		{"factor 10, hysteresis, window 2x", 10, 0.25, 2},
		{"window 1x, no hysteresis", 1, -1, 1},
		{"hysteresis, window 1x", 1, 0.25, 1},
	}
}

func expDefaults() Experiment {
	return Experiment{
		Name:  "darc-defaults",
		Title: "DARC's update settings (delay factor, hysteresis, profiling window) at the paper's scale and at the demo's, simulated",
		Setup: "paper scale: Extreme Bimodal on 16 workers at loads 0.85-0.95 (3 seeds of 1 s) and High Bimodal's service times swapping (14 workers, 50,000-sample profiles); demo scale: the swap at ~110 requests/s of a 2000x dilated server with 50- and 200-sample profiles (8 seeds)",
		run:   runDefaults,
	}
}

func runDefaults(ctx context.Context, x *expRun) error {
	cands := defaultsCandidates()
	eb := builtin("extreme-bimodal")
	// Paper scale, Extreme Bimodal: the highest load meeting the per-type
	// SLO, and how often DARC re-reserves (reservations per second).
	ebLoads := pick(x, []float64{0.85, 0.9, 0.95}, []float64{0.9})
	ebSeeds := x.seeds(3, 1)
	ebDur := x.duration(time.Second, 30*time.Millisecond)
	paperSamples := darc.DefaultMinSamples
	if x.small {
		paperSamples = 5000
	}
	var vs []variant
	for _, c := range cands {
		vs = append(vs, variant{label: c.label, cfg: sim.Config{Workload: eb, Workers: 16, Policy: darc.NameDARC, Timeline: ebDur,
			Darc: c.apply(darc.Config{MinSamples: paperSamples})}})
	}
	ebPts, err := x.simGrid(ctx, vs, ebLoads, ebSeeds, ebDur)
	if err != nil {
		return err
	}
	slo := report.SLO{Slowdown: 10, PerType: true}
	ml := maxLoads(ebPts, slo)
	rate := map[string][]float64{}
	for _, p := range ebPts {
		if p.Load == ebLoads[len(ebLoads)/2] && p.Timeline != nil {
			rate[p.Policy] = append(rate[p.Policy], float64(len(p.Timeline.Reservations))/ebDur.Seconds())
		}
	}
	// The swap of service times, at both scales.
	phases, err := workload.ParsePhases("phase-change")
	if err != nil {
		return err
	}
	phases.Phases = phases.Phases[:2]
	swap := func(phase time.Duration, minSamples int, seeds []uint64, timeScale float64) (map[string]spread, map[string]int, error) {
		ph := phases.Scaled(float64(phase) / float64(time.Duration(phases.Phases[0].Duration)))
		var vs []variant
		for _, c := range cands {
			vs = append(vs, variant{label: c.label, cfg: sim.Config{Phases: ph, Workers: 14, Policy: darc.NameDARC, Warmup: -1,
				Timeline: phase / 50, Darc: c.apply(darc.Config{MinSamples: minSamples})}})
		}
		pts, err := x.simGrid(ctx, vs, []float64{0.8}, seeds, 0)
		if err != nil {
			return nil, nil, err
		}
		after, unmet := map[string][]float64{}, map[string]int{}
		for i := range pts {
			p := &pts[i]
			c := vs[i/len(seeds)].cfg
			prs, err := sim.PhaseReservations(c, p)
			if err != nil {
				return nil, nil, err
			}
			if prs[1].Matched {
				after[p.Policy] = append(after[p.Policy], prs[1].AfterSec*timeScale)
			} else {
				unmet[p.Policy]++
			}
		}
		out := map[string]spread{}
		for k, v := range after {
			out[k] = loadSpread(v)
		}
		return out, unmet, nil
	}
	paperSwap, paperUnmet, err := swap(pick(x, 2*time.Second, 300*time.Millisecond), paperSamples, x.seeds(3, 1), 1)
	if err != nil {
		return err
	}
	const dilation = LiveDilation
	demoPhase := time.Duration(float64(8*time.Second) / dilation) // 8 s of a live server: ~880 requests
	demoSeeds := x.seeds(8, 2)
	demo50, unmet50, err := swap(demoPhase, 50, demoSeeds, dilation)
	if err != nil {
		return err
	}
	demo200, unmet200, err := swap(demoPhase, 200, demoSeeds, dilation)
	if err != nil {
		return err
	}
	secs := func(s spread, unmet, n int) string {
		out := "-"
		if s.n > 0 {
			out = s.cell(func(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) })
		}
		if unmet > 0 {
			out += fmt.Sprintf(" (%d/%d never)", unmet, n)
		}
		return out
	}
	t := Table{Title: "DARC's update settings at both scales",
		Header: []string{"settings", "EB highest load", "EB reservations/s", "swap (s)", "demo swap, 50 samples (s)", "demo swap, 200 samples (s)"},
		Note: fmt.Sprintf("(EB: Extreme Bimodal on 16 workers, %s, loads %v, %d seeds of %v, %d-sample profiles; reservations per second at load %g. "+
			"swap: High Bimodal's two service times swap at load 0.8 on 14 workers; seconds until DARC's reservation is the swapped workload's nominal one: "+
			"paper scale with %d-sample profiles, demo scale at ~110 requests/s of a %dx dilated server (seconds of the live server, %d seeds; never: not within the 8 s phase). "+
			"factor: the delay factor; hysteresis: 0.25; window Nx: a check every N x MinSamples completions at the latest (with 1x every window is checked when it has MinSamples, so the delay factor never fires first); median [min-max])",
			slo, ebLoads, len(ebSeeds), ebDur, paperSamples, ebLoads[len(ebLoads)/2], paperSamples, dilation, len(demoSeeds))}
	for _, c := range cands {
		r := loadSpread(rate[c.label])
		t.Rows = append(t.Rows, []string{c.label, loadSpread(ml[c.label]).cell(func(v float64) string {
			if v == 0 {
				return "<" + strconv.FormatFloat(ebLoads[0], 'g', 3, 64)
			}
			return fmtLoad(v)
		}), r.cell(func(v float64) string { return strconv.FormatFloat(math.Round(v), 'f', 0, 64) }),
			secs(paperSwap[c.label], paperUnmet[c.label], len(x.seeds(3, 1))),
			secs(demo50[c.label], unmet50[c.label], len(demoSeeds)), secs(demo200[c.label], unmet200[c.label], len(demoSeeds))})
	}
	x.table(t)
	def := "none of the rows"
	for _, c := range cands {
		if (c.delayFactor == darc.DefaultDelayFactor || c.maxWindow == 1) && c.hysteresis == darc.DefaultHysteresis && c.maxWindow == darc.DefaultMaxWindowFactor {
			def = "the row " + strconv.Quote(c.label)
		}
	}
	x.res.Measured = fmt.Sprintf("each candidate's Extreme Bimodal capacity and reservation rate at the paper's scale, and its re-reservation time after a swap at both scales; psp's defaults are %s", def)
	return nil
}
