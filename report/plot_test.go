package report

import (
	"reflect"
	"testing"
)

func TestTickLabelsOneNotation(t *testing.T) {
	var got []string
	for _, tk := range (logTicks{}).Ticks(0.5, 2e6) {
		if tk.Label != "" {
			got = append(got, tk.Label)
		}
	}
	want := []string{"1", "10", "100", "1000", "10k", "100k", "1M"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("log tick labels %v, want %v", got, want)
	}
	var loads []string
	for _, tk := range (loadTicks{}).Ticks(0.1, 0.9) {
		loads = append(loads, tk.Label)
	}
	if want := []string{"0.1", "0.2", "0.3", "0.4", "0.5", "0.6", "0.7", "0.8", "0.9"}; !reflect.DeepEqual(loads, want) {
		t.Errorf("load tick labels %v, want %v", loads, want)
	}
	if got := formatSeconds(0.27); got != "270 ms" {
		t.Errorf("formatSeconds(0.27) = %q", got)
	}
	if got := formatSeconds(6.3); got != "6.3 s" {
		t.Errorf("formatSeconds(6.3) = %q", got)
	}
	for ns, want := range map[int64]string{5e5: "µs", 2e8: "ms", 3e10: "s"} {
		if u, _ := latencyUnit(ns, 0); u != want {
			t.Errorf("latencyUnit(%d) = %s, want %s", ns, u, want)
		}
	}
	if s := subtitle([]Point{{Workers: 14, DurationSec: 4.5}, {Workers: 14, DurationSec: 4.5}}); s != "14 workers, 4.5 s measured per point" {
		t.Errorf("subtitle %q", s)
	}
}
