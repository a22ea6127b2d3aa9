package tests

import (
	"os"
	"strconv"
	"testing"
	"time"
)

func envF(name string, def float64) float64 {
	if v, err := strconv.ParseFloat(os.Getenv(name), 64); err == nil {
		return v
	}
	return def
}

func TestExperimentRatio(t *testing.T) {
	if os.Getenv("PSP_EXP") == "" {
		t.Skip("experiment")
	}
	dil := envF("EXP_DIL", 2000)
	load := envF("EXP_LOAD", 0.8)
	dur := time.Duration(envF("EXP_DUR", 10)) * time.Second
	d := startServer(t, serverOptions{policy: "darc", dilation: dil})
	c := startServer(t, serverOptions{policy: "cfcfs", dilation: dil})
	prewarm(t, d, c)
	for i := 0; i < int(envF("EXP_N", 2)); i++ {
		dr, cr := playBoth(t, d, c, builtin(t, "high-bimodal"), load, dur, uint64(i+1))
		for _, ts := range dr.Types {
			if ts.Name == "SHORT" {
				for _, cs := range cr.Types {
					if cs.Name == "SHORT" {
						t.Logf("dil %v load %v: n=%d darc p99 %.3g p99.9 %.3g | cfcfs p99 %.3g p99.9 %.3g | ratio p99 %.2f p99.9 %.2f", dil, load, ts.Count, ts.P99Slowdown, ts.P999Slowdown, cs.P99Slowdown, cs.P999Slowdown, cs.P99Slowdown/ts.P99Slowdown, cs.P999Slowdown/ts.P999Slowdown)
					}
				}
			}
		}
	}
}
