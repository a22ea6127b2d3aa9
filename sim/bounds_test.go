package sim

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/persephone-go/psp/workload"
)

// TestConfigBounds: settings that used to give nonsense (latencies of 0 or
// of centuries) or blame the workload are refused, naming the setting.
func TestConfigBounds(t *testing.T) {
	hb := builtinW(t, "high-bimodal")
	base := Config{Workload: hb, Workers: 4, Policy: "cfcfs", Load: 0.5, Duration: 5 * time.Millisecond}
	cases := []struct {
		name string
		set  func(c *Config)
		want string
	}{
		{"dispatcher rate", func(c *Config) { c.DispatcherRate = 1e-300 }, "dispatcher rate = 1e-300, want at least 1"},
		{"network rtt", func(c *Config) { c.NetworkRTT = 2562047 * time.Hour }, "network round trip = 2562047h0m0s, want 0 to 1s"},
		{"warmup NaN", func(c *Config) { c.Warmup = math.NaN() }, "warmup = NaN"},
		{"quantum", func(c *Config) { c.Policy, c.TS.Quantum = PolicyTS, -time.Second }, "quantum = -1s"},
		{"dilation 1e14", func(c *Config) { c.Dilation = 1e14 }, "dilation = 1e+14, want > 0 and at most 1e+06"},
		{"dilation 1e308", func(c *Config) { c.Dilation = 1e308 }, "dilation = 1e+308"},
		{"dilation NaN", func(c *Config) { c.Dilation = math.NaN() }, "dilation = NaN"},
		{"dilation 1e-300", func(c *Config) { c.Dilation = 1e-300 }, `dilation 1e-300: type "SHORT": 1µs becomes 1e-297 ns`},
		{"dilated lognormal", func(c *Config) {
			c.Workload = workload.Workload{Name: "ln", Types: []workload.TypeSpec{{Name: "A", ID: 1, Share: 1,
				Service: workload.Dist{Kind: workload.Lognormal, Mean: workload.Duration(time.Microsecond), Sigma: 3}}}}
			c.Dilation = 0.01
		}, `dilation 0.01: type "A": lognormal`},
		{"dilated phases", func(c *Config) {
			c.Workload, c.Load, c.Duration = workload.Workload{}, 0.5, 0
			c.Phases = workload.Phases{Name: "p", Phases: []workload.Phase{{Duration: workload.Duration(5 * time.Millisecond), Use: "high-bimodal"}}}
			c.Dilation = 1e-4
		}, `phase "phase 1": dilation 0.0001`},
		{"dilated tenants", func(c *Config) {
			c.Workload, c.Policy = workload.Workload{}, ""
			c.Tenants = []Tenant{{Name: "a", Workload: hb, Load: 0.5}}
			c.Dilation = 1e-4
		}, `tenant "a": dilation 0.0001`},
	}
	for _, tc := range cases {
		c := base
		tc.set(&c)
		err := runOrTimeout(t, c)
		if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want ErrInvalidConfig mentioning %q", tc.name, err, tc.want)
		}
	}
	// The bounds themselves are accepted.
	for _, set := range []func(c *Config){
		func(c *Config) { c.DispatcherRate = MinDispatcherRate; c.Load = 1e-3 },
		func(c *Config) { c.NetworkRTT = MaxNetworkRTT },
		func(c *Config) { c.Dilation = 1000 },
	} {
		c := base
		set(&c)
		if err := runOrTimeout(t, c); err != nil {
			t.Errorf("%+v: %v", c, err)
		}
	}
}
