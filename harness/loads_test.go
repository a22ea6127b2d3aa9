package harness

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseLoads(t *testing.T) {
	cases := map[string][]float64{
		"0.1:0.9:0.1":  {0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9},
		"0.2:0.9:0.1":  {0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9},
		"0.5:0.5:0.1":  {0.5},
		"0.2:0.7:0.25": {0.2, 0.45, 0.7},
		"0.8, 0.5":     {0.8, 0.5},
		" 0.5 ":        {0.5},
		"0.3, 0.5,0.8": {0.3, 0.5, 0.8},
		"2":            {2},
	}
	for in, want := range cases {
		got, err := ParseLoads(in)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("ParseLoads(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "a", "0", "-1", "-0.1", "11", "NaN", "Inf", "0.1:0.2", "0.1:0.2:0", "0.5:0.1:0.1",
		"1:2:3:4", "0.1:1e9:1e-6", "0:1:0", "0.5,", "0.5,,0.6", "0.1:0.9:-0.1", "0.1:10.5:0.5"} {
		if got, err := ParseLoads(bad); err == nil {
			t.Errorf("ParseLoads(%q) = %v, accepted", bad, got)
		} else if !strings.HasPrefix(err.Error(), "loads") {
			t.Errorf("ParseLoads(%q): error %q does not name the setting", bad, err)
		}
	}
}

func TestParsePolicies(t *testing.T) {
	valid := []string{"darc", "cfcfs"}
	if got, err := ParsePolicies(" darc, cfcfs ,", valid); err != nil || !reflect.DeepEqual(got, []string{"darc", "cfcfs"}) {
		t.Errorf("got %v, %v", got, err)
	}
	for _, bad := range []string{"", ",", "lifo", "darc,darc"} {
		if _, err := ParsePolicies(bad, valid); err == nil {
			t.Errorf("ParsePolicies(%q) accepted", bad)
		}
	}
}
