package loadgen

import (
	"fmt"
	"math"
	"time"

	"github.com/persephone-go/psp/workload"
)

// Type describes one request type of a schedule.
type Type struct {
	// Name is the type's name in reports ("SHORT", "GET", ...).
	Name string
	// WireID is the value of the psp header's type field.
	WireID uint32
	// MeanServiceNs is the type's nominal mean service time in nanoseconds,
	// before dilation.
	MeanServiceNs float64
}

// Request is one scheduled request. Its id is its index in Schedule.Requests.
type Request struct {
	// At is the intended send time in nanoseconds after the run's start.
	At int64
	// ServiceNs is the nominal service time carried in the header.
	ServiceNs uint32
	// Type is the index of the request's type in Schedule.Types.
	Type uint16
}

// Schedule is a precomputed open-loop arrival schedule. It is read-only once
// built and safe to share between runs.
type Schedule struct {
	Types    []Type
	Requests []Request
	// Rate is the offered rate the schedule was drawn at, in requests/s.
	Rate float64
	// Duration is the length of the schedule: every At is below it.
	Duration time.Duration
}

// MaxRequests bounds the size of a schedule (ids are 32-bit on the wire and
// the reply table is preallocated); NewSchedule refuses to expect more than
// workload.MaxExpectedArrivals, half of it.
const MaxRequests = 2 * workload.MaxExpectedArrivals

// NewSchedule draws a Poisson schedule of rate requests/s lasting duration
// from workload w: arrival times from workload.NewArrivals, types and service
// times from w.NewSampler, both seeded with seed (the simulator draws the
// same way). Service times are clamped to the 32-bit header field (about
// 4.29 s). w must be valid (workload.Parse and Builtin ensure it).
func NewSchedule(w *workload.Workload, rate float64, duration time.Duration, seed uint64) (*Schedule, error) {
	if w == nil || len(w.Types) == 0 || len(w.Types) > math.MaxUint16 {
		return nil, fmt.Errorf("loadgen: schedule: workload without types (or more than %d): %w", math.MaxUint16, ErrBadSpec)
	}
	if err := workload.CheckRate(rate); err != nil {
		return nil, fmt.Errorf("loadgen: schedule: %w: %w", err, ErrBadSpec)
	}
	if duration <= 0 {
		return nil, fmt.Errorf("loadgen: schedule: duration %v: %w (want > 0)", duration, ErrBadSpec)
	}
	if err := workload.CheckExpected(rate, duration); err != nil {
		return nil, fmt.Errorf("loadgen: schedule: %w: %w", err, ErrBadSpec)
	}
	expected := rate * duration.Seconds()
	types := make([]Type, len(w.Types))
	for i, t := range w.Types {
		types[i] = Type{Name: t.Name, WireID: t.ID, MeanServiceNs: t.Service.MeanNs()}
	}
	sampler := w.NewSampler(seed)
	arrivals := workload.NewArrivals(rate, seed)
	reqs := make([]Request, 0, int(expected+6*math.Sqrt(expected)+16))
	end := duration.Nanoseconds()
	for at := arrivals.Next(); at < end && len(reqs) < MaxRequests; at = arrivals.Next() {
		ti, svc := sampler.Next()
		reqs = append(reqs, Request{At: at, ServiceNs: clampService(svc), Type: uint16(ti)})
	}
	return &Schedule{Types: types, Requests: reqs, Rate: rate, Duration: duration}, nil
}

func clampService(ns int64) uint32 {
	switch {
	case ns < 0:
		return 0
	case ns > math.MaxUint32:
		return math.MaxUint32
	}
	return uint32(ns)
}

// Then returns a schedule that plays s and then next, next's send times
// shifted by s.Duration: the phases of a phase-change experiment. Types are
// matched by name and wire id; next's types missing from s are appended.
// Neither schedule is modified.
func (s *Schedule) Then(next *Schedule) *Schedule {
	types := append([]Type(nil), s.Types...)
	remap := make([]uint16, len(next.Types))
	for i, nt := range next.Types {
		found := -1
		for j, t := range types {
			if t.Name == nt.Name && t.WireID == nt.WireID {
				found = j
				break
			}
		}
		if found < 0 {
			types = append(types, nt)
			found = len(types) - 1
		}
		remap[i] = uint16(found)
	}
	reqs := make([]Request, 0, len(s.Requests)+len(next.Requests))
	reqs = append(reqs, s.Requests...)
	shift := s.Duration.Nanoseconds()
	for _, r := range next.Requests {
		r.At += shift
		r.Type = remap[r.Type]
		reqs = append(reqs, r)
	}
	total := s.Duration + next.Duration
	return &Schedule{
		Types:    types,
		Requests: reqs,
		Rate:     float64(len(reqs)) / total.Seconds(),
		Duration: total,
	}
}

// RateForLoad returns the request rate (requests/s) that keeps workers
// servers busy a fraction load of the time with workload w emulated at the
// given dilation (<= 0 means 1): w.RateForLoad(load, workers) / dilation.
func RateForLoad(w *workload.Workload, load float64, workers int, dilation float64) float64 {
	if dilation <= 0 {
		dilation = 1
	}
	return w.RateForLoad(load, workers) / dilation
}
