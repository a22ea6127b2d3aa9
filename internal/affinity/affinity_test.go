package affinity

import (
	"errors"
	"slices"
	"testing"
)

func TestParseList(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []int
	}{
		{"", []int{}},
		{" ", []int{}},
		{"0", []int{0}},
		{"0-3,8", []int{0, 1, 2, 3, 8}},
		{"8, 0-1 ,1", []int{0, 1, 8}},
		{"3-3", []int{3}},
	} {
		got, err := ParseList(tc.in)
		if err != nil {
			t.Errorf("ParseList(%q): %v", tc.in, err)
			continue
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("ParseList(%q) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

func TestParseListErrors(t *testing.T) {
	for _, in := range []string{"a", "1-", "-1", "3-1", "1,,2", "0-99999999", "1.5"} {
		_, err := ParseList(in)
		if !errors.Is(err, ErrBadList) {
			t.Errorf("ParseList(%q) error = %v, want one wrapping ErrBadList", in, err)
		}
	}
}

func TestFormatListRoundTrip(t *testing.T) {
	for _, s := range []string{"0", "0-3,8", "0-1,3-5,7", "2,4,6"} {
		cpus, err := ParseList(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := FormatList(cpus); got != s {
			t.Errorf("FormatList(ParseList(%q)) = %q", s, got)
		}
	}
}

func TestValidateAgainst(t *testing.T) {
	avail := []int{0, 1}
	if err := validateAgainst([]int{1, 0}, avail); err != nil {
		t.Fatalf("valid cpus refused: %v", err)
	}
	err := validateAgainst([]int{0, 7}, avail)
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("error %v does not wrap ErrUnavailable", err)
	}
	const want = "affinity: cpu 7 not available (this process may use 0-1)"
	if err.Error() != want {
		t.Fatalf("error = %q, want %q", err, want)
	}
}
