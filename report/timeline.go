package report

import (
	"fmt"
	"math"
	"slices"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

// Timeline is a run's statistics over time: the p99.9 latency and slowdown
// of each type over fixed-width buckets of time (requests are counted in
// the bucket in which they completed), the policy's reservations as they
// changed, and the workload's phases. The paper's Figure 7 draws it.
type Timeline struct {
	BucketSec float64 `json:"bucket_s"`
	// Types names the request types, in the order of Bucket.Types.
	Types []string `json:"types"`
	// Phases are the workload's phases, in order (none for a workload
	// without phases).
	Phases []PhaseMark `json:"phases,omitempty"`
	// Buckets cover the run from time 0, without gaps.
	Buckets []Bucket `json:"buckets"`
	// Reservations are the policy's reservations, each from the time it
	// was adopted until the next (none for policies that reserve nothing).
	Reservations []Reservation `json:"reservations,omitempty"`
	// ReservationsCapped reports that more reservations were adopted than
	// the timeline keeps (MaxReservations): the later ones are missing.
	ReservationsCapped bool `json:"reservations_capped,omitempty"`
}

// PhaseMark is the start of a workload phase.
type PhaseMark struct {
	StartSec float64 `json:"start_s"`
	Name     string  `json:"name"`
}

// Bucket is one bucket of a timeline.
type Bucket struct {
	StartSec float64       `json:"start_s"`
	Types    []BucketStats `json:"types"`
}

// BucketStats are one type's completions in a bucket.
type BucketStats struct {
	Count        uint64  `json:"count"`
	P999Latency  int64   `json:"p999_latency_ns"`
	P999Slowdown float64 `json:"p999_slowdown"`
}

// Reservation is a reservation adopted by the policy at AtSec.
type Reservation struct {
	AtSec  float64         `json:"at_s"`
	Groups []ReservedGroup `json:"groups"`
}

// ReservedGroup is one group of a reservation: its types and how many
// workers are reserved for it.
type ReservedGroup struct {
	Types    []string `json:"types"`
	Workers  int      `json:"workers"`
	Spillway bool     `json:"spillway,omitempty"`
}

// ReservedFor returns the workers reserved for type name by r, 0 when it
// has no group.
func (r *Reservation) ReservedFor(name string) int {
	for _, g := range r.Groups {
		if slices.Contains(g.Types, name) {
			return g.Workers
		}
	}
	return 0
}

// Equal reports whether r and o group the same types and reserve them the
// same numbers of workers. The spillway marks are not compared: a last
// group given every remaining worker holds the spillway worker either way.
func (r *Reservation) Equal(o *Reservation) bool {
	if len(r.Groups) != len(o.Groups) {
		return false
	}
	for i, g := range r.Groups {
		h := o.Groups[i]
		if g.Workers != h.Workers || !slices.Equal(g.Types, h.Types) {
			return false
		}
	}
	return true
}

// String is e.g. "SHORT: 1; LONG: 13+spillway".
func (r *Reservation) String() string {
	s := ""
	for i, g := range r.Groups {
		if i > 0 {
			s += "; "
		}
		for j, t := range g.Types {
			if j > 0 {
				s += ","
			}
			s += t
		}
		s += fmt.Sprintf(": %d", g.Workers)
		if g.Spillway {
			s += "+spillway"
		}
	}
	return s
}

// ReservationAt returns the reservation in effect at sec (nil before the
// first).
func (t *Timeline) ReservationAt(sec float64) *Reservation {
	var r *Reservation
	for i := range t.Reservations {
		if t.Reservations[i].AtSec > sec {
			break
		}
		r = &t.Reservations[i]
	}
	return r
}

// MaxReservations bounds the reservations a timeline keeps: a policy that
// re-reserves on every check could otherwise fill memory.
const MaxReservations = 100_000

// Timeline histograms: latencies from 1 ns to 1000 s, slowdowns in
// thousandths up to 1e9, to 2 significant digits (1% resolution): small
// enough to keep one per type and metric for the current bucket.
const timelineSigFigs = 2

// TimelineRecorder builds a Timeline from completions given in
// non-decreasing time order. Recording allocates nothing but when a bucket
// closes. It is not safe for concurrent use.
type TimelineRecorder struct {
	t        Timeline
	bucketNs int64
	end      int64 // end of the current bucket
	lat, slo []*hdrhistogram.Histogram
	count    []uint64
}

// NewTimelineRecorder returns a recorder for the given types and bucket
// width (ns, > 0).
func NewTimelineRecorder(types []string, bucketNs int64) *TimelineRecorder {
	r := &TimelineRecorder{
		t:        Timeline{BucketSec: float64(bucketNs) / 1e9, Types: slices.Clone(types)},
		bucketNs: bucketNs,
		end:      bucketNs,
		count:    make([]uint64, len(types)),
	}
	for range types {
		r.lat = append(r.lat, hdrhistogram.New(1, maxLatencyNs, timelineSigFigs))
		r.slo = append(r.slo, hdrhistogram.New(1, maxSlowdownMil, timelineSigFigs))
	}
	return r
}

// Phase marks the start of a workload phase at atNs.
func (r *TimelineRecorder) Phase(atNs int64, name string) {
	r.t.Phases = append(r.t.Phases, PhaseMark{StartSec: float64(atNs) / 1e9, Name: name})
}

// Reserve records a reservation adopted at atNs (its groups are copied).
func (r *TimelineRecorder) Reserve(atNs int64, groups []ReservedGroup) {
	if len(r.t.Reservations) >= MaxReservations {
		r.t.ReservationsCapped = true
		return
	}
	gs := make([]ReservedGroup, len(groups))
	for i, g := range groups {
		gs[i] = ReservedGroup{Types: slices.Clone(g.Types), Workers: g.Workers, Spillway: g.Spillway}
	}
	r.t.Reservations = append(r.t.Reservations, Reservation{AtSec: float64(atNs) / 1e9, Groups: gs})
}

// Record adds a completion of type index typ at atNs.
func (r *TimelineRecorder) Record(typ int, atNs, latencyNs, serviceNs int64) {
	r.advance(atNs)
	r.count[typ]++
	_ = r.lat[typ].RecordValue(clamp(latencyNs, 1, maxLatencyNs))
	slow := float64(latencyNs) / float64(max(serviceNs, 1)) * slowdownScale
	_ = r.slo[typ].RecordValue(clamp(int64(math.Min(slow, maxSlowdownMil)+0.5), 1, maxSlowdownMil))
}

// advance closes the buckets that end at or before atNs.
func (r *TimelineRecorder) advance(atNs int64) {
	for atNs >= r.end {
		r.flush()
	}
}

func (r *TimelineRecorder) flush() {
	b := Bucket{StartSec: float64(r.end-r.bucketNs) / 1e9, Types: make([]BucketStats, len(r.count))}
	for i := range r.count {
		if r.count[i] > 0 {
			b.Types[i] = BucketStats{
				Count:        r.count[i],
				P999Latency:  valueAtQuantile(r.lat[i], 99.9),
				P999Slowdown: float64(valueAtQuantile(r.slo[i], 99.9)) / slowdownScale,
			}
			r.lat[i].Reset()
			r.slo[i].Reset()
			r.count[i] = 0
		}
	}
	r.t.Buckets = append(r.t.Buckets, b)
	r.end += r.bucketNs
}

// Finish closes the buckets up to endNs (at least the current one) and
// returns the timeline. The recorder must not be used afterwards.
func (r *TimelineRecorder) Finish(endNs int64) *Timeline {
	r.advance(endNs - 1)
	pending := false
	for _, c := range r.count {
		pending = pending || c > 0
	}
	if pending || len(r.t.Buckets) == 0 {
		r.flush()
	}
	t := r.t
	return &t
}
