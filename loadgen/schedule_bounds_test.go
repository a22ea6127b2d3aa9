package loadgen

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/persephone-go/psp/internal/testenv"
)

// TestScheduleRefusesRatesItCannotDraw: a rate whose mean gap is not
// finite or longer than workload.MaxMeanGap used to draw arrivals at
// math.MinInt64, every one "before the end", until memory ran out.
func TestScheduleRefusesRatesItCannotDraw(t *testing.T) {
	w := highBimodal(t)
	for _, c := range []struct {
		rate float64
		d    time.Duration
		want string
	}{
		{1e-20, time.Second, "rate 1e-20 requests/s: mean gap"},
		{2.77e-15, time.Second, "rate 2.77e-15"},                    // --load 1e-20 on 14 workers
		{1.386e-303, time.Second, "mean gap between arrivals +Inf"}, // --load 0.5 --dilation 1e308
		{math.NaN(), time.Second, "rate NaN"},
		{1e6, 1000 * time.Second, "1e+09 requests expected"},
	} {
		done := make(chan error, 1)
		go func() {
			_, err := NewSchedule(w, c.rate, c.d, 1)
			done <- err
		}()
		err := testenv.Await(t, done, 5*time.Second, fmt.Sprintf("NewSchedule at rate %g for %v", c.rate, c.d))
		if !errors.Is(err, ErrBadSpec) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("rate %g for %v: error %v, want ErrBadSpec mentioning %q", c.rate, c.d, err, c.want)
		}
	}
	// The slowest rate allowed draws a schedule (most likely empty).
	if s, err := NewSchedule(w, 1e-9, time.Second, 1); err != nil || len(s.Requests) > 1 {
		t.Errorf("rate 1e-9: %v, %v", s, err)
	}
}
