package sim

import (
	"errors"
	"testing"
	"time"

	"github.com/persephone-go/psp/darc"
	"github.com/persephone-go/psp/workload"
)

// runInPlace runs the non-preemptive engine directly, to read how many
// requests it served in place.
func runInPlace(t *testing.T, c Config) (p99 int64, served uint64) {
	t.Helper()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	c = c.withDefaults()
	dcfg, _ := c.darcConfig()
	pol, err := darc.New(c.Policy, dcfg)
	if err != nil {
		t.Fatal(err)
	}
	e := newNonPreemptive(c, pol)
	e.loop()
	p := e.point()
	return p.Types[0].P99Latency, e.inPlaceServed
}

func TestInPlaceModel(t *testing.T) {
	base := Config{Workers: 4, Policy: darc.NameCFCFS, Duration: 200 * time.Millisecond, Seed: 1}
	// Short requests (2µs) at 0.9 of one core: spread over 4 workers they
	// hardly queue; served in place they all run on the one dispatcher,
	// which is then 90% busy, and queue.
	short := base
	short.Workload = single(workload.Fixed, 2*time.Microsecond)
	short.Rate = 0.9 / 2e-6
	offP99, offServed := runInPlace(t, short)
	short.InPlaceLimit = 20 * time.Microsecond
	onP99, onServed := runInPlace(t, short)
	if offServed != 0 {
		t.Errorf("off: %d served in place", offServed)
	}
	if onServed < 90_000*9/10 {
		t.Errorf("2µs requests under a 20µs limit: %d served in place of about 90,000", onServed)
	}
	if onP99 <= 2*offP99 {
		t.Errorf("p99 %v in place vs %v on 4 workers: the dispatcher's queue is not modelled", time.Duration(onP99), time.Duration(offP99))
	}
	// Long requests (500µs) are never served in place: same results.
	long := base
	long.Workload = single(workload.Fixed, 500*time.Microsecond)
	long.Rate = 0.5 * 4 / 500e-6
	offP99, _ = runInPlace(t, long)
	long.InPlaceLimit = 20 * time.Microsecond
	onP99, onServed = runInPlace(t, long)
	if onServed != 0 || onP99 != offP99 {
		t.Errorf("500µs requests under a 20µs limit: %d in place, p99 %v vs %v off", onServed, time.Duration(onP99), time.Duration(offP99))
	}
}

func TestInPlaceModelRefusesPreemptive(t *testing.T) {
	c := Config{Workload: single(workload.Fixed, time.Microsecond), Workers: 2, Policy: "ts", Rate: 1000, InPlaceLimit: time.Microsecond}
	if _, err := Run(c); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("in place with ts: %v, want ErrInvalidConfig", err)
	}
	c.Policy, c.InPlaceLimit = darc.NameDARC, -time.Microsecond
	if _, err := Run(c); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("negative in-place limit: %v, want ErrInvalidConfig", err)
	}
}
