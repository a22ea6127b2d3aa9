package workload

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestBuiltinPhases(t *testing.T) {
	p, err := ParsePhases("phase-change")
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Phases) != 4 || p.Total() != 20*time.Second {
		t.Fatalf("%d phases, %v", len(p.Phases), p.Total())
	}
	u := p.Union()
	if len(u.Types) != 2 || u.Types[0].Name != "SHORT" || u.Types[1].Name != "LONG" {
		t.Errorf("union %v", u.String())
	}
	if got := p.Mix(1); got.Types[0].Service.MeanNs() != 100e3 || got.Types[1].Service.MeanNs() != 1e3 {
		t.Errorf("phase 2 is not swapped: %v", got.String())
	}
	if idx := p.Indexes(3); len(idx) != 1 || idx[0] != 0 {
		t.Errorf("phase 4 indexes %v", idx)
	}
	s := p.Scaled(0.1)
	if s.Total() != 2*time.Second || p.Total() != 20*time.Second {
		t.Errorf("scaled %v, original %v", s.Total(), p.Total())
	}
	if _, err := ParsePhases("nope"); !errors.Is(err, ErrUnknownWorkload) {
		t.Errorf("unknown name: %v", err)
	}
}

func TestPhasesFile(t *testing.T) {
	_, write := fileWriter(t)
	write("mix.yaml", "types:\n  - {name: A, id: 1, share: 1, service: {kind: fixed, value: 2us}}\n")
	good := write("p.yaml", `phases:
  - {duration: 1s, use: mix.yaml}
  - name: both
    duration: 500ms
    load: 0.5
    types:
      - {name: A, id: 1, share: 1, service: {kind: fixed, value: 3us}}
      - {name: B, id: 2, share: 1, service: {kind: exponential, mean: 30us}}
`)
	p, err := ParsePhases(good)
	if err != nil {
		t.Fatal(err)
	}
	if p.Name != "p" || p.Phases[0].Name != "phase 1" || p.Phases[1].Load != 0.5 || len(p.Union().Types) != 2 {
		t.Errorf("%+v", p)
	}
	for body, want := range map[string]string{
		"phases: []\n":                                              "no phases",
		"phases:\n  - {duration: 1s}\n":                             "one of them",
		"phases:\n  - {duration: 0s, use: high-bimodal}\n":          "duration",
		"phases:\n  - {duration: 1s, use: high-bimodal, load: 3}\n": "load",
		"phases:\n  - {duration: 1s, use: high-bimodal}\n  - {duration: 1s, types: [{name: SHORT, id: 9, share: 1, service: {kind: fixed, value: 1us}}]}\n": "id 9",
		"phases:\n  - {duration: 1s, use: high-bimodal, extra: 1}\n":                                                                                        "extra",
		"phases:\n  - {duration: 1s, use: missing.yaml}\n":                                                                                                  "missing.yaml",
	} {
		_, err := ParsePhases(write("bad.yaml", body))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want it to mention %q", body, err, want)
		}
	}
}
