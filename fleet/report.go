package fleet

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// WritePlan prints what a rollout would do: the module, each server's
// running module, the waves, the bake and the bounds.
func WritePlan(w io.Writer, p Plan, mod Module, before []ServerState) {
	b := p.Bounds.WithDefaults()
	fmt.Fprintf(w, "roll out %s (sha256 %s, %d bytes) to tenant %s\n", mod.Reference, mod.SHA256, len(mod.Wasm), p.Tenant)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  SERVER\tVERSION\tRUNNING SHA256\tWAVE")
	waves := p.Waves()
	wave := map[string]int{}
	for i, ws := range waves {
		for _, s := range ws {
			wave[s] = i + 1
		}
	}
	for _, s := range before {
		run := fmt.Sprintf("%.12s", s.SHA256)
		ver := fmt.Sprint(s.Version)
		switch {
		case s.Err != nil:
			run, ver = "error: "+s.Err.Error(), "-"
		case s.SHA256 == mod.SHA256:
			run += " (already the module)"
		}
		if !s.Provisional.IsZero() {
			run += fmt.Sprintf(" (provisional until %s)", s.Provisional.Local().Format("15:04:05"))
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%d\n", s.Server, ver, run, wave[s.Server])
	}
	tw.Flush()
	for i, ws := range waves {
		kind := p.kind(i, waves)
		note := ""
		if kind == "control" {
			note = " (kept on the old module as the baseline of every wave before; judged against its own last window on it)"
		}
		fmt.Fprintf(w, "wave %d (%s): %s, then bake %v%s\n", i+1, kind, strings.Join(ws, ", "), p.Bake, note)
	}
	if len(waves) == 1 {
		fmt.Fprintf(w, "first: observe every server on its running module for %v (no server stays on it to compare with)\n", p.Bake)
	}
	fmt.Fprintf(w, "bounds: faults +%s, UNKNOWN +%s, errors +%s over the baseline, type mix within %.3g (plus sampling); p99.9 <= %.3gx baseline + %v (types with >= %d answers on both sides); >= %d requests per server; a wave whose faults or UNKNOWN cross their bound before its bake ends is judged at once\n",
		pct(b.FaultRate), pct(b.UnknownShare), pct(b.ErrorRate), b.MixDivergence, b.LatencyRatio, b.LatencySlack, b.MinLatencySamples, b.MinRequests)
	src := "each server's GET /status and GET /metrics"
	if p.Prometheus != "" {
		src = "Prometheus at " + p.Prometheus
	}
	fmt.Fprintf(w, "analysis from %s; swaps provisional (a server reverts by itself %v after the rollout last renewed it), confirmed once every wave passed\n",
		src, p.confirmDeadline())
}

// Write prints the report: a table per wave with the verdict and why,
// then the rollbacks, then a summary that counts what the tables show.
func (r *Report) Write(w io.Writer) {
	for _, wv := range r.Waves {
		fmt.Fprintf(w, "\nwave %d (%s): %s; baked %v; baseline: %s\n", wv.Number, or(wv.Kind, "wave"), strings.Join(wv.Servers, ", "), wv.Bake, or(wv.Baseline, "-"))
		if wv.Aborted != "" {
			fmt.Fprintf(w, "  stopped before the end of the bake: %s\n", wv.Aborted)
		}
		if len(wv.Judgements) > 0 {
			tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "  SERVER\tREQUESTS\tFAULTS (BASE)\tUNKNOWN (BASE)\tERRORS (BASE)\tTYPE MIX (ALLOWED)\tWORST P99.9 (BASE)\tVERDICT")
			for _, j := range wv.Judgements {
				lat := "-"
				if j.Worst != "" {
					lat = fmt.Sprintf("%s %s (%s)", j.Worst, secs(j.P999), secs(j.BaseP999))
				}
				v := "pass"
				if !j.Pass {
					v = "FAIL"
				}
				fmt.Fprintf(tw, "  %s\t%d\t%s (%s)\t%s (%s)\t%s (%s)\t%.3f (%.3f)\t%s\t%s\n", j.Server, j.Requests,
					pct(j.FaultRate), pct(j.BaseFaultRate), pct(j.UnknownShare), pct(j.BaseUnknownShare),
					pct(j.ErrorRate), pct(j.BaseErrorRate), j.MixDivergence, j.MixAllowed, lat, v)
			}
			tw.Flush()
			for _, j := range wv.Judgements {
				for _, why := range j.Reasons {
					fmt.Fprintf(w, "  %s: %s\n", j.Server, why)
				}
			}
		}
		switch {
		case wv.Err != nil:
			fmt.Fprintf(w, "verdict: FAIL: %v\n", wv.Err)
		case wv.Pass:
			fmt.Fprintln(w, "verdict: pass")
		default:
			fmt.Fprintln(w, "verdict: FAIL")
		}
	}
	rolledBack, failed := 0, 0
	if len(r.Rollbacks) > 0 {
		fmt.Fprintln(w, "\nrollback (each only if it still ran the new module):")
		for _, rb := range r.Rollbacks {
			if rb.Err != nil {
				failed++
				fmt.Fprintf(w, "  %s: FAILED: %v\n", rb.Server, rb.Err)
			} else {
				rolledBack++
				fmt.Fprintf(w, "  %s: version %d, sha256 %.12s (as before the rollout)\n", rb.Server, rb.Version, rb.SHA256)
			}
		}
	}
	for _, u := range r.Unconfirmed {
		fmt.Fprintf(w, "  %s: NOT CONFIRMED: %v (it reverts to its old module at the deadline)\n", u.Server, u.Err)
	}
	swapped, adopted := 0, 0
	for _, wv := range r.Waves {
		swapped += len(wv.Swapped)
		adopted += len(wv.Adopted)
	}
	untouched := len(r.Before) - swapped
	if adopted > 0 {
		fmt.Fprintf(w, "\n%d server(s) ran the module provisionally when the rollout started (an interrupted rollout's swaps): adopted, counted as swapped\n", adopted)
	}
	switch {
	case r.Completed:
		fmt.Fprintf(w, "\nrolled out: %d server(s) run %.12s (%d swapped, confirmed)\n", len(r.Before), r.Module.SHA256, swapped)
	case len(r.Unconfirmed) > 0:
		fmt.Fprintf(w, "\npassed, not confirmed: %d of %d swapped server(s) could not be confirmed and revert at their deadline\n", len(r.Unconfirmed), swapped)
	case failed > 0:
		fmt.Fprintf(w, "\nstopped: %d server(s) swapped: %d rolled back, %d rollback(s) FAILED (see above); %d untouched\n", swapped, rolledBack, failed, untouched)
	default:
		fmt.Fprintf(w, "\nstopped: %d server(s) swapped and rolled back, %d untouched\n", swapped, untouched)
	}
}

func or(s, dflt string) string {
	if s == "" {
		return dflt
	}
	return s
}
