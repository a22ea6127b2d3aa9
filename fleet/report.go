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
	wave := map[string]int{}
	for i, ws := range p.Waves() {
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
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%d\n", s.Server, ver, run, wave[s.Server])
	}
	tw.Flush()
	waves := p.Waves()
	for i, ws := range waves {
		kind := "canary"
		if i > 0 {
			kind = "wave"
		}
		fmt.Fprintf(w, "wave %d (%s): %s, then bake %v\n", i+1, kind, strings.Join(ws, ", "), p.Bake)
	}
	if len(waves) == 1 {
		fmt.Fprintf(w, "first: observe every server on its running module for %v (no server stays on it to compare with)\n", p.Bake)
	}
	fmt.Fprintf(w, "bounds: faults +%s, UNKNOWN +%s, errors +%s over the baseline; p99.9 <= %.3gx baseline + %v (types with >= %d answers on both sides); >= %d requests per server\n",
		pct(b.FaultRate), pct(b.UnknownShare), pct(b.ErrorRate), b.LatencyRatio, b.LatencySlack, b.MinLatencySamples, b.MinRequests)
}

// Write prints the report: a table per wave with the verdict and why,
// then the rollbacks.
func (r *Report) Write(w io.Writer) {
	for _, wv := range r.Waves {
		kind := "canary"
		if wv.Number > 1 {
			kind = "wave"
		}
		fmt.Fprintf(w, "\nwave %d (%s): %s; baked %v; baseline: %s\n", wv.Number, kind, strings.Join(wv.Servers, ", "), wv.Bake, or(wv.Baseline, "-"))
		if len(wv.Judgements) > 0 {
			tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "  SERVER\tREQUESTS\tFAULTS (BASE)\tUNKNOWN (BASE)\tERRORS (BASE)\tWORST P99.9 (BASE)\tVERDICT")
			for _, j := range wv.Judgements {
				lat := "-"
				if j.Worst != "" {
					lat = fmt.Sprintf("%s %s (%s)", j.Worst, secs(j.P999), secs(j.BaseP999))
				}
				v := "pass"
				if !j.Pass {
					v = "FAIL"
				}
				fmt.Fprintf(tw, "  %s\t%d\t%s (%s)\t%s (%s)\t%s (%s)\t%s\t%s\n", j.Server, j.Requests,
					pct(j.FaultRate), pct(j.BaseFaultRate), pct(j.UnknownShare), pct(j.BaseUnknownShare),
					pct(j.ErrorRate), pct(j.BaseErrorRate), lat, v)
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
	if len(r.Rollbacks) > 0 {
		fmt.Fprintln(w, "\nrollback (each only if it still ran the new module):")
		for _, rb := range r.Rollbacks {
			if rb.Err != nil {
				fmt.Fprintf(w, "  %s: FAILED: %v\n", rb.Server, rb.Err)
			} else {
				fmt.Fprintf(w, "  %s: version %d, sha256 %.12s (as before the rollout)\n", rb.Server, rb.Version, rb.SHA256)
			}
		}
	}
	swapped := 0
	for _, wv := range r.Waves {
		swapped += len(wv.Swapped)
	}
	switch {
	case r.Completed:
		fmt.Fprintf(w, "\nrolled out: %d server(s) run %.12s (%d swapped)\n", len(r.Before), r.Module.SHA256, swapped)
	default:
		untouched := len(r.Before) - swapped
		fmt.Fprintf(w, "\nstopped: %d server(s) swapped and rolled back, %d untouched\n", swapped, untouched)
	}
}

func or(s, dflt string) string {
	if s == "" {
		return dflt
	}
	return s
}
