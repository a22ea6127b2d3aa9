package workload

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	json "github.com/goccy/go-json"
	"go.yaml.in/yaml/v3"
)

func TestBuiltins(t *testing.T) {
	cases := []struct {
		name   string
		meanNs float64
		ids    []uint32
	}{
		{"high-bimodal", 50.5e3, []uint32{1, 2}},
		{"extreme-bimodal", 0.995*500 + 0.005*500e3, []uint32{1, 2}},
		{"tpcc", 0.44*5700 + 0.04*6000 + 0.44*20000 + 0.04*88000 + 0.04*100000, []uint32{6, 8, 5, 7, 9}},
		{"rocksdb", 0.5*1500 + 0.5*635e3, []uint32{10, 11}},
		{"memcached", 0.9*2000 + 0.05*101000 + 0.05*2000, []uint32{1, 2, 3}},
	}
	if got := strings.Join(Names(), ","); got != "extreme-bimodal,high-bimodal,memcached,rocksdb,tpcc" {
		t.Fatalf("Names() = %s", got)
	}
	for _, c := range cases {
		w, err := Parse(c.name)
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(w.MeanService()-c.meanNs) > 1e-6*c.meanNs {
			t.Errorf("%s: mean %g, want %g", c.name, w.MeanService(), c.meanNs)
		}
		for i, id := range c.ids {
			if w.Types[i].ID != id {
				t.Errorf("%s: type %d id %d, want %d", c.name, i, w.Types[i].ID, id)
			}
		}
	}
	// Builtin returns copies: mutating one does not change the next.
	w, _ := Builtin("high-bimodal")
	w.Types[0].Share = 42
	w2, _ := Builtin("high-bimodal")
	if w2.Types[0].Share != 0.5 {
		t.Fatal("built-in workload was mutated through a copy")
	}
}

func TestRateForLoad(t *testing.T) {
	w, _ := Builtin("high-bimodal")
	r := w.RateForLoad(0.8, 14)
	if want := 0.8 * 14 / 50.5e-6; math.Abs(r-want) > 1e-6*want {
		t.Fatalf("rate %g, want %g", r, want)
	}
	if l := w.LoadForRate(r, 14); math.Abs(l-0.8) > 1e-12 {
		t.Fatalf("load %g", l)
	}
}

func TestLoadFiles(t *testing.T) {
	w, err := Load("testdata/kv-mix.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if w.Name != "kv-mix" || len(w.Types) != 2 || w.Types[1].Service.P99 != Duration(1e6) {
		t.Fatalf("kv-mix: %+v", w)
	}
	j, err := Parse("testdata/high-bimodal.json")
	if err != nil {
		t.Fatal(err)
	}
	hb, _ := Builtin("high-bimodal")
	if j.MeanService() != hb.MeanService() || j.Types[1].ID != 2 {
		t.Fatalf("json workload %v differs from built-in %v", j.String(), hb.String())
	}
	m, err := Load("testdata/mixed-kinds.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, ty := range m.Types {
		if ty.Share != 0.25 {
			t.Fatalf("shares not normalised: %v", m.String())
		}
	}
}

func TestLoadErrors(t *testing.T) {
	dir, write := fileWriter(t)
	cases := []struct {
		path string
		want []string
	}{
		{"testdata/unknown-field.yaml", []string{"unknown-field.yaml", "servce"}},
		{write("u.json", `{"name":"x","types":[{"name":"A","id":1,"share":1,"service":{"kind":"fixed","value":"1us","mean2":"1us"}}]}`), []string{"u.json", "mean2"}},
		{write("k.yaml", "types: [{name: A, id: 1, share: 1, service: {kind: gamma, mean: 1us}}]"), []string{"k.yaml", `unknown kind "gamma"`}},
		{write("d.yaml", "types: [{name: A, id: 1, share: 1, service: {kind: fixed, value: 1 microsecond}}]"), []string{"d.yaml", "bad duration"}},
		{write("z.yaml", "types: [{name: A, id: 0, share: 1, service: {kind: fixed, value: 1us}}]"), []string{"id must be > 0"}},
		{write("dup.yaml", "types: [{name: A, id: 1, share: 1, service: {kind: fixed, value: 1us}}, {name: A, id: 2, share: 1, service: {kind: fixed, value: 1us}}]"), []string{"duplicate name"}},
		{write("s.yaml", "types: [{name: A, id: 1, share: -1, service: {kind: fixed, value: 1us}}]"), []string{"share must be > 0"}},
		{write("l.yaml", "types: [{name: A, id: 1, share: 1, service: {kind: lognormal, mean: 1us}}]"), []string{"exactly one of sigma"}},
		{write("p.yaml", "types: [{name: A, id: 1, share: 1, service: {kind: lognormal, mean: 1us, p99: 1ms}}]"), []string{"p99/mean"}},
		{write("e.yaml", "name: empty"), []string{"no types"}},
		{write("x.toml", ""), []string{"unknown extension"}},
		{filepath.Join(dir, "missing.yaml"), []string{"no such file"}},
	}
	for _, c := range cases {
		_, err := Load(c.path)
		if err == nil {
			t.Errorf("%s: no error", c.path)
			continue
		}
		for _, s := range c.want {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("%s: error %q does not mention %q", c.path, err, s)
			}
		}
	}
	if _, err := Parse("no-such-workload"); !errors.Is(err, ErrUnknownWorkload) || !strings.Contains(err.Error(), "high-bimodal") {
		t.Errorf("Parse(unknown) = %v", err)
	}
}

func TestSamplerMatchesSpec(t *testing.T) {
	w, err := Load("testdata/mixed-kinds.yaml")
	if err != nil {
		t.Fatal(err)
	}
	const n = 200000
	s := w.NewSampler(7)
	counts := make([]int, len(w.Types))
	sums := make([]float64, len(w.Types))
	for range n {
		i, ns := s.Next()
		counts[i]++
		sums[i] += float64(ns)
	}
	for i, ty := range w.Types {
		if share := float64(counts[i]) / n; math.Abs(share-ty.Share) > 0.01 {
			t.Errorf("%s: share %.4f, want %.4f", ty.Name, share, ty.Share)
		}
		mean := sums[i] / float64(counts[i])
		if want := ty.Service.MeanNs(); math.Abs(mean-want) > 0.04*want {
			t.Errorf("%s: mean %.1f ns, want %.1f", ty.Name, mean, want)
		}
	}
	// lognormal given by p99: the empirical p99 matches.
	kv, _ := Load("testdata/kv-mix.yaml")
	ks := kv.NewSampler(3)
	var scans []float64
	for range 100000 {
		if ns := ks.Service(1); ns > 0 {
			scans = append(scans, float64(ns))
		}
	}
	sort.Float64s(scans)
	if p99 := scans[len(scans)*99/100]; math.Abs(p99-1e6) > 0.06e6 {
		t.Errorf("lognormal p99 %.0f ns, want ~1e6", p99)
	}
}

func TestDeterministic(t *testing.T) {
	w, _ := Builtin("tpcc")
	a, b := w.NewSampler(5), w.NewSampler(5)
	pa, pb := NewArrivals(1e6, 5), NewArrivals(1e6, 5)
	for range 1000 {
		ia, sa := a.Next()
		ib, sb := b.Next()
		if ia != ib || sa != sb || pa.Next() != pb.Next() {
			t.Fatal("same seed, different draws")
		}
	}
	c := w.NewSampler(6)
	same := 0
	for range 100 {
		ia, _ := a.Next()
		ic, _ := c.Next()
		if ia == ic {
			same++
		}
	}
	if same == 100 {
		t.Fatal("different seeds gave identical type sequences")
	}
}

func TestArrivalsRate(t *testing.T) {
	p := NewArrivals(2e6, 1)
	var last int64
	const n = 100000
	for range n {
		last = p.Next()
	}
	if rate := n / (float64(last) / 1e9); math.Abs(rate-2e6) > 0.02*2e6 {
		t.Fatalf("rate %.0f, want 2e6", rate)
	}
}

func TestSamplerNoAlloc(t *testing.T) {
	w, _ := Load("testdata/mixed-kinds.yaml")
	s := w.NewSampler(1)
	p := NewArrivals(1e6, 1)
	if n := testing.AllocsPerRun(1000, func() { s.Next(); p.Next() }); n != 0 {
		t.Fatalf("%v allocs per draw", n)
	}
}

func BenchmarkSampler(b *testing.B) {
	w, _ := Builtin("tpcc")
	s := w.NewSampler(1)
	p := NewArrivals(1e6, 1)
	b.ReportAllocs()
	for b.Loop() {
		s.Next()
		p.Next()
	}
}

func TestWriteAndReload(t *testing.T) {
	dir := t.TempDir()
	for _, name := range Names() {
		w, _ := Builtin(name)
		y, err := yaml.Marshal(w)
		if err != nil {
			t.Fatal(err)
		}
		j, err := json.Marshal(w)
		if err != nil {
			t.Fatal(err)
		}
		for ext, data := range map[string][]byte{".yaml": y, ".json": j} {
			p := filepath.Join(dir, name+ext)
			if err := os.WriteFile(p, data, 0o644); err != nil {
				t.Fatal(err)
			}
			back, err := Load(p)
			if err != nil {
				t.Fatalf("%s: %v\n%s", p, err, data)
			}
			if !reflect.DeepEqual(back, w) {
				t.Errorf("%s: reloaded %v, want %v", p, back.String(), w.String())
			}
		}
	}
}

// fileWriter returns a temporary directory and a function that writes a
// file of it, returning its path.
func fileWriter(t *testing.T) (dir string, write func(name, body string) string) {
	t.Helper()
	dir = t.TempDir()
	return dir, func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
}
