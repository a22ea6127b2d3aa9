package sim

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/persephone-go/psp/internal/testenv"
	"github.com/persephone-go/psp/workload"
)

// runOrTimeout runs c, failing the test if the run does not return within
// 10 seconds (the bugs below hung or ran for hours).
func runOrTimeout(t *testing.T, c Config) error {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		_, err := Run(c)
		done <- err
	}()
	return testenv.Await(t, done, 10*time.Second, fmt.Sprintf("a run of load %g, rate %g, duration %v", c.Load, c.Rate, c.Duration))
}

// TestConfigRefusesRunsThatCannotEnd: an arrival rate whose gaps do not
// fit the clock (any entry point: a load, a phase's load, a tenant's) and
// runs expected to draw more requests than psp client would send are
// refused before the run; they used to hang or run for hours.
func TestConfigRefusesRunsThatCannotEnd(t *testing.T) {
	hb := builtinW(t, "high-bimodal")
	tiny := workload.Phases{Name: "tinyload", Phases: []workload.Phase{{Duration: workload.Duration(10 * time.Millisecond), Use: "high-bimodal", Load: 1e-300}}}
	cases := []struct {
		name string
		c    Config
		want string
	}{
		{"load", Config{Workload: hb, Workers: 1, Policy: "cfcfs", Load: 1e-20, Duration: 20 * time.Millisecond}, "mean gap between arrivals"},
		{"rate", Config{Workload: hb, Workers: 1, Policy: "cfcfs", Rate: 1e-20, Duration: 20 * time.Millisecond}, "rate 1e-20"},
		{"phase load", Config{Phases: tiny, Workers: 4, Policy: "cfcfs", Load: 0.5}, `phase "phase 1": rate 7.921e-296 requests/s: mean gap`},
		{"tenant load", Config{Workers: 16, Tenants: []Tenant{{Name: "a", Workload: hb, Load: 1e-20}}}, `tenant "a": rate`},
		{"duration", Config{Workload: hb, Workers: 16, Policy: "cfcfs", Load: 0.1, Duration: 99999 * time.Hour}, "requests expected"},
		{"longest duration", Config{Workload: hb, Workers: 16, Policy: "cfcfs", Load: 0.1, Duration: math.MaxInt64}, "more than 134217728"},
	}
	for _, c := range cases {
		err := runOrTimeout(t, c.c)
		if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want ErrInvalidConfig mentioning %q", c.name, err, c.want)
		}
	}
}
