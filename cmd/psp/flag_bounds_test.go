package main

import (
	"strings"
	"testing"
)

// TestSimFlagBounds: psp sim's testbed flags that gave nonsense results
// (latencies of 0 or of centuries, negative costs taken as zero) or errors
// blaming something else are refused, naming the flag's value.
func TestSimFlagBounds(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--dispatcher-rate", "1e-300"}, "dispatcher rate = 1e-300, want at least 1"},
		{[]string{"--network-rtt", "2562047h"}, "network round trip = 2562047h0m0s, want 0 to 1s"},
		{[]string{"--warmup", "NaN"}, "--warmup NaN: want a fraction in [0, 1)"},
		{[]string{"--warmup", "-1"}, "--warmup -1: want a fraction in [0, 1)"},
		{[]string{"--preempt-cost", "-1us"}, "--preempt-cost -1µs: want >= 0"},
		{[]string{"--preempt-delay", "-1s"}, "--preempt-delay -1s: want >= 0"},
		{[]string{"--quantum", "-1s", "--policies", "ts"}, "quantum = -1s, want > 0"},
		{[]string{"--conns", "-1"}, "connections = -1, want 0 to"},
		{[]string{"--conns", "2000000"}, "connections = 2000000, want 0 to"},
		{[]string{"--dilation", "1e14"}, "dilation = 1e+14, want > 0 and at most 1e+06"},
		{[]string{"--dilation", "1e308"}, "dilation = 1e+308"},
		{[]string{"--dilation", "1e-300"}, "dilation 1e-300: type"},
		{[]string{"--loads", "0.1:0.9:1e-300"}, `--loads "0.1:0.9:1e-300": 8e+299 points, at most`},
	}
	for _, c := range cases {
		args := append([]string{"--workers", "4", "--policies", "cfcfs", "--loads", "0.5", "--duration", "5ms"}, c.args...)
		out, stderr, err := runSimApp(t, args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("psp sim %v: error %v, want it to mention %q\n%s%s", c.args, err, c.want, out, stderr)
		}
		if err != nil && len(err.Error()) > 300 {
			t.Errorf("psp sim %v: error of %d bytes", c.args, len(err.Error()))
		}
	}
	out, err := runApp(t, "client", "--server", "127.0.0.1:9", "--rate", "10", "--warmup", "NaN")
	if err == nil || !strings.Contains(err.Error(), "--warmup NaN") {
		t.Errorf("psp client --warmup NaN: %v\n%s", err, out)
	}
}
