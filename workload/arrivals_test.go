package workload

import (
	"math"
	"strings"
	"testing"
	"time"
)

// TestArrivalsNeverGoBackwards: at a rate whose gaps do not fit an int64
// clock (or no rate at all) the process stops arriving (math.MaxInt64)
// instead of wrapping around to math.MinInt64, which kept every loop
// "before the end" forever.
func TestArrivalsNeverGoBackwards(t *testing.T) {
	for _, rate := range []float64{1e-20, 1e-300, 5e-324, 0, -1, math.NaN(), 1e-9, 1e-8} {
		a := NewArrivals(rate, 1)
		prev := int64(0)
		for i := range 200 {
			at := a.Next()
			if at < prev {
				t.Fatalf("rate %g: arrival %d at %d, before the previous one at %d", rate, i, at, prev)
			}
			prev = at
		}
		if rate < 1e-8 || !(rate > 0) {
			if prev != math.MaxInt64 {
				t.Errorf("rate %g: after 200 arrivals at %d, want math.MaxInt64 (no more arrivals)", rate, prev)
			}
		}
	}
}

func TestCheckRate(t *testing.T) {
	for _, c := range []struct {
		rate float64
		want string // "" for no error
	}{
		{1e6, ""},
		{1e-9, ""}, // a mean gap of exactly MaxMeanGap
		{1e-20, "rate 1e-20 requests/s: mean gap between arrivals 1e+29 ns, at most 1e+18"},
		{1e-300, "rate 1e-300"},
		{0, "want a finite rate > 0"},
		{-5, "rate -5"},
		{math.NaN(), "rate NaN"},
		{math.Inf(1), "rate +Inf"},
	} {
		err := CheckRate(c.rate)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("rate %g: %v", c.rate, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("rate %g: error %v, want it to mention %q", c.rate, err, c.want)
		}
	}
}

func TestCheckExpected(t *testing.T) {
	for _, c := range []struct {
		rate float64
		d    time.Duration
		want string
	}{
		{1e6, time.Second, ""},
		{MaxExpectedArrivals, time.Second, ""},
		{31680, 99999 * time.Hour, "1.14e+13 requests expected"},
		{31680, 2562047 * time.Hour, "more than 134217728"},
		{math.NaN(), time.Second, "NaN requests expected"},
		{math.Inf(1), time.Second, "+Inf requests expected"},
	} {
		err := CheckExpected(c.rate, c.d)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%g/s for %v: %v", c.rate, c.d, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%g/s for %v: error %v, want it to mention %q", c.rate, c.d, err, c.want)
		}
	}
}

// TestServiceTimesStayInRange: a lognormal's far tail is capped instead of
// converting +Inf or a huge float to a negative int64 (then clamped to 1).
func TestServiceTimesStayInRange(t *testing.T) {
	w := Workload{Name: "tail", Types: []TypeSpec{{Name: "A", ID: 1, Share: 1,
		Service: Dist{Kind: Lognormal, Mean: Duration(24 * time.Hour), Sigma: 6}}}}
	if err := w.Validate(); err != nil {
		t.Fatal(err)
	}
	s := w.NewSampler(1)
	capped := 0
	for range 100000 {
		ns := s.Service(0)
		if ns < 1 || ns > 1<<52 {
			t.Fatalf("service time %d ns", ns)
		}
		if ns == 1<<52 {
			capped++
		}
	}
	if capped == 0 {
		t.Errorf("no draw reached the cap: the test does not exercise it")
	}
}
