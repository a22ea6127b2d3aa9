package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// runWithin runs psp with args, failing the test if it does not return
// within 10 seconds (the runs below used to hang, run for hours or run out
// of memory).
func runWithin(t *testing.T, args ...string) (string, error) {
	t.Helper()
	type result struct {
		out string
		err error
	}
	done := make(chan result, 1)
	go func() {
		out, err := runApp(t, args...)
		done <- result{out, err}
	}()
	select {
	case r := <-done:
		return r.out, r.err
	case <-time.After(10 * time.Second):
		t.Fatalf("psp %v: still running after 10s", args)
		return "", nil
	}
}

// TestRatesThatCannotBeDrawn: every entry point that makes arrivals
// refuses a rate whose gaps do not fit the clock, and psp sim refuses
// runs expecting more requests than psp client would send.
func TestRatesThatCannotBeDrawn(t *testing.T) {
	dir := t.TempDir()
	tenants := filepath.Join(dir, "loadtiny.yaml")
	phases := filepath.Join(dir, "tinyload.yaml")
	for p, body := range map[string]string{
		tenants: "tenants: [{name: a, workload: high-bimodal, load: 1e-20}]",
		phases:  "phases: [{duration: 10ms, use: high-bimodal, load: 1e-300}]",
	} {
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// 127.0.0.1:9 (discard): nothing is sent, the schedule is refused first.
	client := []string{"client", "--server", "127.0.0.1:9", "--duration", "1s"}
	cases := []struct {
		args []string
		want string
	}{
		{append(client, "--rate", "1e-20"), "rate 1e-20 requests/s: mean gap"},
		{append(client, "--load", "1e-20"), "mean gap between arrivals"},
		{append(client, "--load", "0.5", "--dilation", "1e308"), "mean gap between arrivals +Inf"},
		{[]string{"sim", "--workers", "1", "--policies", "cfcfs", "--loads", "1e-20", "--duration", "20ms"}, "mean gap between arrivals"},
		{[]string{"sim", "--tenants", tenants, "--duration", "20ms"}, `tenant "a": rate`},
		{[]string{"sim", "--phases", phases, "--policies", "cfcfs", "--loads", "0.5"}, `phase "phase 1": rate`},
		{[]string{"sim", "--duration", "99999h", "--progress"}, "requests expected"},
		{[]string{"sim", "--duration", "2562047h"}, "more than 134217728"},
	}
	for _, c := range cases {
		out, err := runWithin(t, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("psp %v: error %v, want it to mention %q\n%.500s", c.args, err, c.want, out)
		}
	}
}
