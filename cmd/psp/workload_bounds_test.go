package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSimRefusesBadWorkloadFiles: workload and phase files with NaN or
// infinite floats, overflowing shares, unusable names or phases too long
// are refused when read, before any simulation (they used to hang, give 1
// ns service times, or fail after the run while writing a chart).
func TestSimRefusesBadWorkloadFiles(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write("phigh_nan.yaml", "types: [{name: A, id: 1, share: 1, service: {kind: bimodal, low: 1us, high: 100us, p_high: .nan}}]")
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--workload", filepath.Join(dir, "phigh_nan.yaml")}, "p_high = NaN"},
		{[]string{"--phases", write("nanpH.yaml", "phases: [{duration: 10ms, use: phigh_nan.yaml}]")}, "p_high = NaN"},
		{[]string{"--workload", write("sigma_inf.yaml", "types: [{name: A, id: 1, share: 1, service: {kind: lognormal, mean: 10us, sigma: .inf}}]")}, "sigma = +Inf"},
		{[]string{"--workload", write("sigma_big.yaml", "types: [{name: A, id: 1, share: 1, service: {kind: lognormal, mean: 10us, sigma: 50}}]")}, "sigma = 50"},
		{[]string{"--workload", write("share_huge.yaml", "types: [{name: A, id: 1, share: 1e308, service: {kind: fixed, value: 1us}}, {name: B, id: 2, share: 1e308, service: {kind: fixed, value: 2us}}]")}, "shares sum to +Inf"},
		{[]string{"--workload", write("share_mix.yaml", "types: [{name: A, id: 1, share: 1e-300, service: {kind: fixed, value: 1us}}, {name: B, id: 2, share: 1e300, service: {kind: fixed, value: 2us}}]")}, "share 1e-300 is 0"},
		{[]string{"--workload", write("tname300.yaml", "types: [{name: "+strings.Repeat("N", 300)+", id: 1, share: 1, service: {kind: fixed, value: 1us}}]"), "--out", filepath.Join(dir, "out")}, "name of 300 bytes, at most 64"},
		{[]string{"--workload", write("name_ctrl.yaml", `types: [{name: "A\x1b[31mRED\n\u0000x", id: 1, share: 1, service: {kind: fixed, value: 1us}}]`)}, "control or non-printable"},
		{[]string{"--phases", write("overflow.yaml", "phases: [{duration: 2562047h, use: high-bimodal}, {duration: 2562047h, use: high-bimodal}]")}, "at most 24h0m0s"},
	}
	for _, c := range cases {
		args := append([]string{"--workers", "4", "--policies", "cfcfs", "--loads", "0.5"}, c.args...)
		if !strings.HasPrefix(c.args[0], "--phases") {
			args = append(args, "--duration", "20ms")
		}
		out, stderr, err := runSimApp(t, args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("psp sim %v: error %v, want it to mention %q\n%s%s", c.args, err, c.want, out, stderr)
		}
		if strings.ContainsAny(out+stderr, "\x1b\x00") {
			t.Errorf("psp sim %v: control characters reach the terminal", c.args)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "out")); err == nil {
		t.Errorf("tname300.yaml: the simulation ran and wrote results")
	}
}
