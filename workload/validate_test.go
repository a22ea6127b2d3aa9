package workload

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestValidateRefusesNonFiniteAndAbsurd: float fields that are NaN or
// infinite, lognormals whose samples are all 1 ns, shares whose sum
// overflows or that normalise to 0, and names too long for a chart file or
// holding control characters are refused when the workload is read, with
// an error naming the field and its value.
func TestValidateRefusesNonFiniteAndAbsurd(t *testing.T) {
	dir := t.TempDir()
	one := func(name, service string) string {
		return "types: [{name: " + name + ", id: 1, share: 1, service: " + service + "}]"
	}
	cases := []struct {
		name, body, want string
	}{
		{"phigh_nan", one("A", "{kind: bimodal, low: 1us, high: 100us, p_high: .nan}"), "p_high = NaN must be in [0, 1]"},
		{"phigh_inf", one("A", "{kind: bimodal, low: 1us, high: 100us, p_high: .inf}"), "p_high = +Inf"},
		{"phigh_neg", one("A", "{kind: bimodal, low: 1us, high: 100us, p_high: -0.5}"), "p_high = -0.5"},
		{"sigma_inf", one("A", "{kind: lognormal, mean: 10us, sigma: .inf}"), "sigma = +Inf must be in (0, 10]"},
		{"sigma_big", one("A", "{kind: lognormal, mean: 10us, sigma: 50}"), "sigma = 50 must be in (0, 10]"},
		{"sigma_nan", one("A", "{kind: lognormal, mean: 10us, sigma: .nan, p99: 20us}"), "sigma = NaN"},
		{"sigma_median", one("A", "{kind: lognormal, mean: 100ns, sigma: 4}"), "most samples would be 1 ns"},
		{"share_huge", "types: [{name: A, id: 1, share: 1e308, service: {kind: fixed, value: 1us}}, {name: B, id: 2, share: 1e308, service: {kind: fixed, value: 2us}}]", "shares sum to +Inf"},
		{"share_mix", "types: [{name: A, id: 1, share: 1e-300, service: {kind: fixed, value: 1us}}, {name: B, id: 2, share: 1e300, service: {kind: fixed, value: 2us}}]", `type 0 ("A"): share 1e-300 is 0 beside the sum of the shares 1e+300`},
		{"valid", one("A", "{kind: fixed, value: 1us}"), ""}, // the control: no error
		{"tname300", one(strings.Repeat("N", 300), "{kind: fixed, value: 1us}"), "type 0: name of 300 bytes, at most 64"},
		{"longname", one(strings.Repeat("N", 1<<20), "{kind: fixed, value: 1us}"), "name of 1048576 bytes"},
		{"wname", "name: " + strings.Repeat("N", 50000) + "\n" + one("A", "{kind: fixed, value: 1us}"), "workload name of 50000 bytes, at most 64"},
		{"name_ctrl", one(`"A\x1b[31mRED\n\u0000x"`, "{kind: fixed, value: 1us}"), "control or non-printable character (U+001B"},
		{"name_nul", one(`"A\u0000"`, "{kind: fixed, value: 1us}"), "U+0000"},
		{"name_newline", "name: \"w\\nx\"\n" + one("A", "{kind: fixed, value: 1us}"), "workload name"},
	}
	for _, c := range cases {
		p := filepath.Join(dir, c.name+".yaml")
		if err := os.WriteFile(p, []byte(c.body), 0o644); err != nil {
			t.Fatal(err)
		}
		w, err := Load(p)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want == "":
		case err == nil:
			t.Errorf("%s: loaded %.200s, want an error mentioning %q", c.name, w.String(), c.want)
		case !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want):
			t.Errorf("%s: error %.300q, want ErrInvalid mentioning %q", c.name, err, c.want)
		case len(err.Error()) > 500:
			t.Errorf("%s: error of %d bytes (the name is repeated in it)", c.name, len(err.Error()))
		}
	}
}

// TestValidateAcceptsTheEdges: what the bounds leave in is still read.
func TestValidateAcceptsTheEdges(t *testing.T) {
	for _, w := range []Workload{
		{Name: strings.Repeat("w", MaxNameLen), Types: []TypeSpec{{Name: strings.Repeat("N", MaxNameLen), ID: 1, Share: 1, Service: fixed(time.Microsecond)}}},
		{Name: "größe µs", Types: []TypeSpec{{Name: "GET/ключ", ID: 1, Share: 1, Service: fixed(time.Microsecond)}}},
		{Name: "tiny", Types: []TypeSpec{{Name: "A", ID: 1, Share: 5e-324, Service: fixed(time.Microsecond)}}},
		{Name: "ratios", Types: []TypeSpec{
			{Name: "A", ID: 1, Share: 1e-10, Service: fixed(time.Microsecond)},
			{Name: "B", ID: 2, Share: 1e10, Service: Dist{Kind: Lognormal, Mean: Duration(10 * time.Microsecond), Sigma: 3}},
			{Name: "C", ID: 3, Share: 1, Service: Dist{Kind: Bimodal, Low: 1, High: 2, PHigh: 1}},
		}},
	} {
		if err := w.Validate(); err != nil {
			t.Errorf("%.40s: %v", w.Name, err)
			continue
		}
		sum := 0.0
		for _, ty := range w.Types {
			if !(ty.Share > 0) {
				t.Errorf("%s: type %s: share %g after normalising", w.Name, ty.Name, ty.Share)
			}
			sum += ty.Share
		}
		if sum < 1-1e-9 || sum > 1+1e-9 {
			t.Errorf("%s: shares sum to %g", w.Name, sum)
		}
	}
	// A file without a name is named after the file, cut to MaxNameLen.
	p := filepath.Join(t.TempDir(), strings.Repeat("f", 100)+".yaml")
	if err := os.WriteFile(p, []byte("types: [{name: A, id: 1, share: 1, service: {kind: fixed, value: 1us}}]"), 0o644); err != nil {
		t.Fatal(err)
	}
	if w, err := Load(p); err != nil || w.Name != strings.Repeat("f", MaxNameLen) {
		t.Errorf("Load(long file name) = %q, %v", w.Name, err)
	}
}

// TestPhasesBounds: phase durations are capped (their sum used to wrap
// around to a negative duration), and phase names and the phases' own
// floats are checked as a workload's are.
func TestPhasesBounds(t *testing.T) {
	_, write := fileWriter(t)
	write("phigh_nan.yaml", "types: [{name: A, id: 1, share: 1, service: {kind: bimodal, low: 1us, high: 100us, p_high: .nan}}]")
	cases := []struct{ name, body, want string }{
		{"overflow", "phases: [{duration: 2562047h, use: high-bimodal}, {duration: 2562047h, use: high-bimodal}]", "duration 2562047h0m0s, want > 0 and at most 24h0m0s"},
		{"total", "phases: [{duration: 13h, use: high-bimodal}, {duration: 13h, use: high-bimodal}]", "the phases up to it last 26h0m0s, at most 24h0m0s in all"},
		{"nanpH", "phases: [{duration: 10ms, use: phigh_nan.yaml}]", "p_high = NaN"},
		{"nan_inline", "phases: [{duration: 10ms, types: [{name: A, id: 1, share: 1, service: {kind: bimodal, low: 1us, high: 2us, p_high: .nan}}]}]", "p_high = NaN"},
		{"load_nan", "phases: [{duration: 10ms, use: high-bimodal, load: .nan}]", "load NaN"},
		{"load_inf", "phases: [{duration: 10ms, use: high-bimodal, load: .inf}]", "load +Inf"},
		{"name_ctrl", "phases: [{name: \"a\\x1b[2J\", duration: 10ms, use: high-bimodal}]", "phase 1: name"},
		{"name_long", "name: " + strings.Repeat("p", 65) + "\nphases: [{duration: 10ms, use: high-bimodal}]", "phases name of 65 bytes"},
	}
	for _, c := range cases {
		p, err := ParsePhases(write(c.name+".yaml", c.body))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: phases lasting %v, error %v; want it to mention %q", c.name, p.Total(), err, c.want)
		}
	}
	ok, err := ParsePhases(write("ok.yaml", "phases: [{duration: 12h, use: high-bimodal}, {duration: 12h, use: high-bimodal}]"))
	if err != nil || ok.Total() != 24*time.Hour {
		t.Fatalf("24h of phases: %v, %v", ok.Total(), err)
	}
	// Scaling saturates instead of wrapping around; Validate refuses it.
	s := ok.Scaled(1e300)
	if s.Phases[0].Duration <= 0 {
		t.Errorf("scaled by 1e300: duration %v", s.Phases[0].Duration)
	}
	if err := s.Validate(""); err == nil || !strings.Contains(err.Error(), "at most 24h0m0s") {
		t.Errorf("scaled by 1e300: %v", err)
	}
}
