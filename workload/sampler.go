package workload

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"
)

// Sampler draws request types and service times from a workload. It is
// deterministic for a seed, allocates nothing per draw and is not safe for
// concurrent use.
type Sampler struct {
	rng   *rand.Rand
	cum   []float64 // cumulative shares; the last is 1
	dists []compiledDist
}

type compiledDist struct {
	kind      Kind
	a, b, p   float64 // fixed: a; exponential: a = mean; lognormal: a = mu, b = sigma; bimodal: a = low, b = high, p
	meanNs    float64
	minResult int64
}

// NewSampler returns a sampler seeded with seed. The workload must be valid
// (Validate, Load, Parse and Builtin ensure it).
func (w *Workload) NewSampler(seed uint64) *Sampler {
	s := &Sampler{
		rng:   rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		cum:   make([]float64, len(w.Types)),
		dists: make([]compiledDist, len(w.Types)),
	}
	total := 0.0
	for _, t := range w.Types {
		total += t.Share
	}
	acc := 0.0
	for i, t := range w.Types {
		acc += t.Share / total
		s.cum[i] = acc
		d := t.Service
		c := compiledDist{kind: d.Kind, meanNs: d.MeanNs()}
		switch d.Kind {
		case Fixed:
			c.a = float64(d.Value)
		case Exponential:
			c.a = float64(d.Mean)
		case Lognormal:
			c.a, c.b = d.lognormalParams()
		case Bimodal:
			c.a, c.b, c.p = float64(d.Low), float64(d.High), d.PHigh
		}
		s.dists[i] = c
	}
	s.cum[len(s.cum)-1] = 1
	return s
}

// Next draws a request: the index of its type in Workload.Types and its
// service time in nanoseconds (at least 1).
func (s *Sampler) Next() (typeIndex int, serviceNs int64) {
	i := 0
	if len(s.cum) > 1 {
		u := s.rng.Float64()
		for i < len(s.cum)-1 && u >= s.cum[i] {
			i++
		}
	}
	return i, s.Service(i)
}

// Service draws a service time (ns, at least 1, at most 2^52) for type
// index i.
func (s *Sampler) Service(i int) int64 {
	d := &s.dists[i]
	var v float64
	switch d.kind {
	case Fixed:
		v = d.a
	case Exponential:
		v = s.rng.ExpFloat64() * d.a
	case Lognormal:
		v = math.Exp(d.a + d.b*s.rng.NormFloat64())
	case Bimodal:
		v = d.a
		if s.rng.Float64() < d.p {
			v = d.b
		}
	}
	if !(v < maxService) { // a lognormal's far tail, or +Inf
		v = maxService
	}
	ns := int64(math.Round(v))
	if ns < 1 {
		ns = 1
	}
	return ns
}

// maxService caps a drawn service time (about 52 days) so that it converts
// to int64 and leaves room for the clocks it is added to.
const maxService = float64(1 << 52)

// Arrivals is an open-loop Poisson arrival process: exponential gaps at a
// fixed rate. It is deterministic for a seed, allocates nothing per draw and
// is not safe for concurrent use.
type Arrivals struct {
	rng    *rand.Rand
	meanNs float64
	now    float64
}

// MaxMeanGap bounds the mean gap between arrivals (about 31.7 years, at
// least 1e-9 requests/s): a longer one, or one that is not finite, cannot
// be drawn on an int64 nanosecond clock.
const MaxMeanGap = 1e18 // ns

// CheckRate reports why ratePerSec arrivals per second cannot be drawn:
// it must be > 0 and finite, with a mean gap 1e9/ratePerSec of at most
// MaxMeanGap ns.
func CheckRate(ratePerSec float64) error {
	if !(ratePerSec > 0) || math.IsInf(ratePerSec, 0) {
		return fmt.Errorf("rate %.4g requests/s, want a finite rate > 0", ratePerSec)
	}
	if gap := 1e9 / ratePerSec; !(gap <= MaxMeanGap) {
		return fmt.Errorf("rate %.4g requests/s: mean gap between arrivals %.3g ns, at most %g (raise the rate or the load)", ratePerSec, gap, float64(MaxMeanGap))
	}
	return nil
}

// MaxExpectedArrivals bounds the arrivals a run is expected to draw (rate
// x duration), for psp client's schedules and psp sim's runs alike.
const MaxExpectedArrivals = 1 << 27

// CheckExpected reports why ratePerSec arrivals per second for d are too
// many to draw: more than MaxExpectedArrivals expected.
func CheckExpected(ratePerSec float64, d time.Duration) error {
	if n := ratePerSec * d.Seconds(); !(n <= MaxExpectedArrivals) {
		return fmt.Errorf("%.4g requests expected (%.4g requests/s for %v), more than %d (lower the rate, the load or the duration)", n, ratePerSec, d, MaxExpectedArrivals)
	}
	return nil
}

// NewArrivals returns a Poisson process of ratePerSec arrivals per second
// starting at time 0. ratePerSec should pass CheckRate; a process at any
// other rate never arrives (Next returns math.MaxInt64).
func NewArrivals(ratePerSec float64, seed uint64) *Arrivals {
	return &Arrivals{
		rng:    rand.New(rand.NewPCG(seed^0xda942042e4dd58b5, seed+1)),
		meanNs: 1e9 / ratePerSec,
	}
}

// maxArrival is the float64 bound below which arrival times convert to
// int64 exactly enough; 2^63 itself does not fit.
const maxArrival = float64(1 << 62)

// Next returns the time (ns since the start) of the next arrival. Times are
// accumulated in float64 so that rounding does not bias the rate. Times
// never decrease: past 2^62 ns (or with a rate that is not finite or
// positive) Next returns math.MaxInt64.
func (a *Arrivals) Next() int64 {
	a.now += a.rng.ExpFloat64() * a.meanNs
	if !(a.now >= 0 && a.now < maxArrival) {
		a.now = math.Inf(1)
		return math.MaxInt64
	}
	return int64(a.now)
}
