package darc

import (
	"math"
	"slices"
	"testing"
)

func ids(lo, hi int) []int {
	var s []int
	for i := lo; i < hi; i++ {
		s = append(s, i)
	}
	return s
}

type wantGroup struct {
	types     []Type
	demand    float64
	reserved  []int
	stealable []int
	spillway  bool
}

func checkGroups(t *testing.T, got []Group, want []wantGroup) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d groups, want %d: %+v", len(got), len(want), got)
	}
	for i, w := range want {
		g := got[i]
		if !slices.Equal(g.Types, w.types) || math.Abs(g.Demand-w.demand) > 0.005 ||
			!slices.Equal(g.Reserved, w.reserved) || !slices.Equal(g.Stealable, w.stealable) || g.Spillway != w.spillway {
			t.Errorf("group %d = %+v, want %+v", i, g, w)
		}
	}
}

// The worked examples of the reference: 14 workers, nominal means.
func TestReserveWorkedExamples(t *testing.T) {
	const (
		short, long                                       = 1, 2
		newOrder, payment, delivery, orderStatus, stockLv = 5, 6, 7, 8, 9
		get, scan                                         = 10, 11
	)
	tests := []struct {
		name     string
		profiles []TypeProfile
		want     []wantGroup
	}{{
		name:     "high bimodal",
		profiles: []TypeProfile{{short, 1000, 0.5}, {long, 100000, 0.5}},
		want: []wantGroup{
			{[]Type{short}, 0.14, []int{0}, ids(1, 14), false},
			{[]Type{long}, 13.86, ids(1, 14), nil, true},
		},
	}, {
		name:     "extreme bimodal",
		profiles: []TypeProfile{{short, 500, 0.995}, {long, 500000, 0.005}},
		want: []wantGroup{
			{[]Type{short}, 2.32, []int{0, 1}, ids(2, 14), false},
			{[]Type{long}, 11.68, ids(2, 14), nil, false},
		},
	}, {
		name: "tpc-c",
		profiles: []TypeProfile{
			{newOrder, 20000, 0.44}, {payment, 5700, 0.44}, {delivery, 88000, 0.04},
			{orderStatus, 6000, 0.04}, {stockLv, 100000, 0.04},
		},
		want: []wantGroup{
			{[]Type{payment, orderStatus}, 2.02, []int{0, 1}, ids(2, 14), false},
			{[]Type{newOrder}, 6.46, ids(2, 8), ids(8, 14), false},
			{[]Type{delivery, stockLv}, 5.52, ids(8, 14), nil, false},
		},
	}, {
		name:     "rocksdb",
		profiles: []TypeProfile{{get, 1500, 0.5}, {scan, 635000, 0.5}},
		want: []wantGroup{
			{[]Type{get}, 0.03, []int{0}, ids(1, 14), false},
			{[]Type{scan}, 13.97, ids(1, 14), nil, true},
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Reserve(tt.profiles, 14, 1, 0.2)
			if err != nil {
				t.Fatal(err)
			}
			checkGroups(t, got, tt.want)
		})
	}
}

func TestReserveCases(t *testing.T) {
	tests := []struct {
		name     string
		profiles []TypeProfile
		workers  int
		spillway int
		delta    float64
		want     []wantGroup
	}{{
		// Demands 1.5 and 2.5 exactly: both round down; worker 3 is left
		// unreserved and every group may steal it.
		name:     "rounding at .5 and an unreserved worker",
		profiles: []TypeProfile{{1, 3000, 0.5}, {2, 5000, 0.5}},
		workers:  4,
		want: []wantGroup{
			{[]Type{1}, 1.5, []int{0}, []int{1, 2, 3}, false},
			{[]Type{2}, 2.5, []int{1, 2}, []int{3}, false},
		},
	}, {
		// Demands 2*600/2200 = 0.545 -> 1 and 2*1600/2200 = 1.455 -> 1.
		name:     "demand below 1, fraction under .5",
		profiles: []TypeProfile{{1, 1000, 0.6}, {2, 4000, 0.4}},
		workers:  2,
		want: []wantGroup{
			{[]Type{1}, 0.545, []int{0}, []int{1}, false},
			{[]Type{2}, 1.455, []int{1}, nil, false},
		},
	}, {
		// Demands 4*3/5 = 2.4 -> 2 and 4*2/5 = 1.6 -> 2.
		name:     "fraction above .5 rounds up",
		profiles: []TypeProfile{{1, 1000, 0.6}, {2, 2000, 0.2}},
		workers:  4,
		want: []wantGroup{
			{[]Type{1}, 2.4, []int{0, 1}, []int{2, 3}, false},
			{[]Type{2}, 1.6, []int{2, 3}, nil, false},
		},
	}, {
		// Five groups, three workers: the last two find nothing left and
		// share the spillway worker with the third.
		name:     "more types than workers",
		profiles: []TypeProfile{{1, 1, 1}, {2, 10, 1}, {3, 100, 1}, {4, 1000, 1}, {5, 10000, 1}},
		workers:  3,
		want: []wantGroup{
			{[]Type{1}, 0.0003, []int{0}, []int{1, 2}, false},
			{[]Type{2}, 0.003, []int{1}, []int{2}, false},
			{[]Type{3}, 0.027, []int{2}, nil, false},
			{[]Type{4}, 0.27, []int{2}, nil, true},
			{[]Type{5}, 2.70, []int{2}, nil, true},
		},
	}, {
		// Grouping: 1000 and 1190 are within 20% of 1000, 1200 is not; the
		// group is anchored on its first type, not chained.
		name:     "grouping by delta",
		profiles: []TypeProfile{{1, 1000, 1}, {2, 1190, 1}, {3, 1200, 1}, {4, 1400, 1}, {5, 1450, 1}},
		workers:  6,
		want: []wantGroup{
			{[]Type{1, 2}, 6 * 2190.0 / 6240, []int{0, 1}, ids(2, 6), false},
			{[]Type{3, 4}, 6 * 2600.0 / 6240, []int{2, 3}, []int{4, 5}, false},
			{[]Type{5}, 6 * 1450.0 / 6240, []int{4}, []int{5}, false},
		},
	}, {
		// A type with a zero ratio is absent: no group.
		name:     "absent type",
		profiles: []TypeProfile{{1, 1000, 0}, {2, 100000, 1}},
		workers:  4,
		want:     []wantGroup{{[]Type{2}, 4, ids(0, 4), nil, false}},
	}, {
		// Two spillway workers (1, 2) join the long group left short, which
		// so shares worker 1 with the middle group.
		name:     "two spillway workers",
		profiles: []TypeProfile{{1, 1000, 0.5}, {2, 2000, 0.25}, {3, 100000, 0.25}},
		workers:  3,
		spillway: 2,
		want: []wantGroup{
			{[]Type{1}, 3 * 500 / 26000.0, []int{0}, []int{1, 2}, false},
			{[]Type{2}, 3 * 500 / 26000.0, []int{1}, []int{2}, false},
			{[]Type{3}, 3 * 25000 / 26000.0, []int{1, 2}, nil, true},
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Reserve(tt.profiles, tt.workers, tt.spillway, tt.delta)
			if err != nil {
				t.Fatal(err)
			}
			checkGroups(t, got, tt.want)
		})
	}
}

func TestRoundDemand(t *testing.T) {
	for _, tt := range []struct {
		d    float64
		want int
	}{{0, 1}, {0.14, 1}, {0.5, 1}, {0.99, 1}, {1, 1}, {1.5, 1}, {1.5000001, 2}, {2.32, 2}, {2.5, 2}, {2.51, 3}, {13.86, 14}} {
		if got := roundDemand(tt.d); got != tt.want {
			t.Errorf("roundDemand(%v) = %d, want %d", tt.d, got, tt.want)
		}
	}
}

func TestReserveErrors(t *testing.T) {
	for _, tt := range []struct {
		name     string
		profiles []TypeProfile
		workers  int
		spillway int
	}{
		{"no workers", []TypeProfile{{1, 1, 1}}, 0, 1},
		{"spillway > workers", []TypeProfile{{1, 1, 1}}, 2, 3},
		{"unknown type", []TypeProfile{{0, 1, 1}}, 2, 1},
		{"zero mean", []TypeProfile{{1, 0, 1}}, 2, 1},
		{"duplicate", []TypeProfile{{1, 1, 1}, {1, 2, 1}}, 2, 1},
		{"all ratios zero", []TypeProfile{{1, 1, 0}}, 2, 1},
	} {
		if _, err := Reserve(tt.profiles, tt.workers, tt.spillway, 0); err == nil {
			t.Errorf("%s: no error", tt.name)
		}
	}
}
