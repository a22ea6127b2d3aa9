package workload

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"sort"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	json "github.com/goccy/go-json"
	"go.yaml.in/yaml/v3"

	"github.com/persephone-go/psp/internal/boundedfile"
	"github.com/persephone-go/psp/wire"
)

// Errors returned by Load, Parse, Builtin and Validate.
var (
	ErrUnknownWorkload = errors.New("unknown workload")
	ErrInvalid         = errors.New("invalid workload")
)

// Kind is a service-time distribution kind.
type Kind string

// Distribution kinds.
const (
	Fixed       Kind = "fixed"
	Exponential Kind = "exponential"
	Lognormal   Kind = "lognormal"
	Bimodal     Kind = "bimodal"
)

// Duration is a time.Duration written as a Go duration string ("1us") in
// YAML and JSON.
type Duration time.Duration

// String formats d like time.Duration.
func (d Duration) String() string { return time.Duration(d).String() }

// MarshalJSON writes d as a duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

// UnmarshalJSON reads a duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration must be a string like \"1us\": %w", err)
	}
	return d.parse(s)
}

// MarshalYAML writes d as a duration string.
func (d Duration) MarshalYAML() (any, error) { return d.String(), nil }

// UnmarshalYAML reads a duration string.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: duration must be a string like \"1us\"", n.Line)
	}
	if err := d.parse(n.Value); err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	return nil
}

func (d *Duration) parse(s string) error {
	v, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil {
		return fmt.Errorf("bad duration %q (want e.g. \"500ns\", \"1.5us\", \"2ms\"): %w", s, err)
	}
	*d = Duration(v)
	return nil
}

// Dist is a service-time distribution. Which fields apply depends on Kind;
// see the package documentation.
type Dist struct {
	Kind  Kind     `json:"kind" yaml:"kind"`
	Value Duration `json:"value,omitempty" yaml:"value,omitempty"` // fixed
	Mean  Duration `json:"mean,omitempty" yaml:"mean,omitempty"`   // exponential, lognormal
	Sigma float64  `json:"sigma,omitempty" yaml:"sigma,omitempty"` // lognormal shape
	P99   Duration `json:"p99,omitempty" yaml:"p99,omitempty"`     // lognormal, instead of sigma
	Low   Duration `json:"low,omitempty" yaml:"low,omitempty"`     // bimodal
	High  Duration `json:"high,omitempty" yaml:"high,omitempty"`   // bimodal
	PHigh float64  `json:"p_high,omitempty" yaml:"p_high,omitempty"`
}

// z99 is the 99th percentile of the standard normal distribution.
const z99 = 2.3263478740408408

// MaxSigma bounds a lognormal's shape: beyond it nearly every sample is far
// below the mean (the mean is carried by rare huge ones).
const MaxSigma = 10

// Validate checks that the fields needed by the kind are set and sensible.
// Float bounds are written !(lo <= x && x <= hi) so that NaN fails them.
func (d Dist) Validate() error {
	switch d.Kind {
	case Fixed:
		if d.Value <= 0 {
			return fmt.Errorf("fixed: value must be > 0 (e.g. value: 1us)")
		}
	case Exponential:
		if d.Mean <= 0 {
			return fmt.Errorf("exponential: mean must be > 0 (e.g. mean: 10us)")
		}
	case Lognormal:
		if d.Mean <= 0 {
			return fmt.Errorf("lognormal: mean must be > 0")
		}
		if !(d.Sigma >= 0 && d.Sigma <= MaxSigma) {
			return fmt.Errorf("lognormal: sigma = %g must be in (0, %d] (or leave it out and give p99)", d.Sigma, MaxSigma)
		}
		if (d.Sigma > 0) == (d.P99 > 0) {
			return fmt.Errorf("lognormal: give exactly one of sigma (> 0) or p99")
		}
		if d.P99 > 0 {
			r := float64(d.P99) / float64(d.Mean)
			if !(r > 1 && math.Log(r) < z99*z99/2) {
				return fmt.Errorf("lognormal: p99/mean = %.3g must be in (1, %.3g)", r, math.Exp(z99*z99/2))
			}
		}
		if mu, sigma := d.lognormalParams(); !(math.Exp(mu) >= 1) {
			return fmt.Errorf("lognormal: mean %v with sigma %.3g has a median of %.3g ns: most samples would be 1 ns (lower sigma or raise the mean)", d.Mean, sigma, math.Exp(mu))
		}
	case Bimodal:
		if d.Low <= 0 || d.High <= 0 {
			return fmt.Errorf("bimodal: low and high must be > 0")
		}
		if !(d.PHigh >= 0 && d.PHigh <= 1) {
			return fmt.Errorf("bimodal: p_high = %g must be in [0, 1]", d.PHigh)
		}
	case "":
		return fmt.Errorf("missing kind (fixed, exponential, lognormal or bimodal)")
	default:
		return fmt.Errorf("unknown kind %q (want fixed, exponential, lognormal or bimodal)", d.Kind)
	}
	if m := d.MeanNs(); !(m > 0) || math.IsInf(m, 0) {
		return fmt.Errorf("%s: mean %g ns, want a finite mean > 0", d.Kind, m)
	}
	return nil
}

// MeanNs is the distribution's mean in nanoseconds.
func (d Dist) MeanNs() float64 {
	switch d.Kind {
	case Fixed:
		return float64(d.Value)
	case Exponential, Lognormal:
		return float64(d.Mean)
	case Bimodal:
		return (1-d.PHigh)*float64(d.Low) + d.PHigh*float64(d.High)
	}
	return 0
}

// lognormalParams returns mu and sigma of the underlying normal.
func (d Dist) lognormalParams() (mu, sigma float64) {
	sigma = d.Sigma
	if d.P99 > 0 {
		// ln(p99/mean) = z*sigma - sigma^2/2: take the smaller root.
		l := math.Log(float64(d.P99) / float64(d.Mean))
		sigma = z99 - math.Sqrt(z99*z99-2*l)
	}
	mu = math.Log(float64(d.Mean)) - sigma*sigma/2
	return mu, sigma
}

// String describes the distribution briefly, e.g. "fixed 1µs".
func (d Dist) String() string {
	switch d.Kind {
	case Fixed:
		return fmt.Sprintf("fixed %v", d.Value)
	case Exponential:
		return fmt.Sprintf("exp mean %v", d.Mean)
	case Lognormal:
		_, s := d.lognormalParams()
		return fmt.Sprintf("lognormal mean %v sigma %.3g", d.Mean, s)
	case Bimodal:
		return fmt.Sprintf("bimodal %v/%v p_high %g", d.Low, d.High, d.PHigh)
	}
	return string(d.Kind)
}

// TypeSpec is one request type of a workload.
type TypeSpec struct {
	Name string `json:"name" yaml:"name"`
	// ID is the wire type id (the psp header's type field); 0 is UNKNOWN and
	// not allowed here.
	ID      uint32  `json:"id" yaml:"id"`
	Share   float64 `json:"share" yaml:"share"`
	Service Dist    `json:"service" yaml:"service"`
}

// Workload is a named mix of request types. Validate (called by Load,
// Parse and Builtin) normalises the shares.
type Workload struct {
	Name  string     `json:"name" yaml:"name"`
	Types []TypeSpec `json:"types" yaml:"types"`
}

// MaxNameLen bounds the length in bytes of a workload's, a type's or a
// phase's name: names label reports and charts and name chart files.
const MaxNameLen = 64

// CheckName reports why name cannot name a workload, a type or a phase:
// longer than MaxNameLen bytes, or holding a control character or a rune
// that does not print (names reach terminals, reports and file names).
func CheckName(name string) error {
	if len(name) > MaxNameLen {
		return fmt.Errorf("name of %d bytes, at most %d", len(name), MaxNameLen)
	}
	for i, r := range name {
		if r == utf8.RuneError || !unicode.IsPrint(r) {
			return fmt.Errorf("name %q has a control or non-printable character (%U at byte %d)", name, r, i)
		}
	}
	return nil
}

// defaultName is the name a workload or phase list read from path takes
// when it gives none: the file's base name without extension, cut to
// MaxNameLen bytes.
func defaultName(path string) string {
	n := strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	for len(n) > MaxNameLen {
		_, size := utf8.DecodeLastRuneInString(n)
		n = n[:len(n)-size]
	}
	return n
}

// Validate checks the workload and normalises its shares to sum to 1.
func (w *Workload) Validate() error {
	if err := CheckName(w.Name); err != nil {
		return fmt.Errorf("%w: workload %w", ErrInvalid, err)
	}
	if len(w.Types) == 0 {
		return fmt.Errorf("%w %q: no types", ErrInvalid, w.Name)
	}
	names := map[string]bool{}
	ids := map[uint32]bool{}
	sum := 0.0
	for i, t := range w.Types {
		bad := func(format string, args ...any) error {
			return fmt.Errorf("%w %q: type %d (%q): %s", ErrInvalid, w.Name, i, t.Name, fmt.Sprintf(format, args...))
		}
		if err := CheckName(t.Name); err != nil {
			return fmt.Errorf("%w %q: type %d: %w", ErrInvalid, w.Name, i, err)
		}
		switch {
		case t.Name == "":
			return bad("missing name")
		case names[t.Name]:
			return bad("duplicate name")
		case t.ID == wire.TypeUnknown:
			return bad("id must be > 0 (0 is UNKNOWN)")
		case ids[t.ID]:
			return bad("duplicate id %d", t.ID)
		case !(t.Share > 0) || math.IsInf(t.Share, 0):
			return bad("share must be > 0, got %g", t.Share)
		}
		if err := t.Service.Validate(); err != nil {
			return bad("service: %v", err)
		}
		names[t.Name], ids[t.ID] = true, true
		sum += t.Share
	}
	if math.IsInf(sum, 0) {
		return fmt.Errorf("%w %q: shares sum to %g (write them as fractions or small ratios)", ErrInvalid, w.Name, sum)
	}
	for i, t := range w.Types {
		if !(t.Share/sum > 0) {
			return fmt.Errorf("%w %q: type %d (%q): share %g is 0 beside the sum of the shares %g (write them as fractions or small ratios)", ErrInvalid, w.Name, i, t.Name, t.Share, sum)
		}
	}
	if math.Abs(sum-1) > 1e-6 {
		for i := range w.Types {
			w.Types[i].Share /= sum
		}
	}
	return nil
}

// MeanService is the mean service time over the mix, in nanoseconds.
func (w *Workload) MeanService() float64 {
	m := 0.0
	for _, t := range w.Types {
		m += t.Share * t.Service.MeanNs()
	}
	return m
}

// RateForLoad is the arrival rate (requests per second) that offers load
// (0..1) to workers workers: load x workers / MeanService.
func (w *Workload) RateForLoad(load float64, workers int) float64 {
	return load * float64(workers) * 1e9 / w.MeanService()
}

// LoadForRate is the inverse of RateForLoad.
func (w *Workload) LoadForRate(rate float64, workers int) float64 {
	return rate * w.MeanService() / 1e9 / float64(workers)
}

// Dilated returns a copy of w whose service times are multiplied by f (> 0):
// the workload as an emulated server with dilation f runs it. Slowdowns
// are unchanged; latencies, rates and deadlines move to the dilated scale.
func (w *Workload) Dilated(f float64) Workload {
	d := Workload{Name: w.Name, Types: make([]TypeSpec, len(w.Types))}
	scale := func(v Duration) Duration { return Duration(math.Round(float64(v) * f)) }
	for i, t := range w.Types {
		s := t.Service
		s.Value, s.Mean, s.P99, s.Low, s.High = scale(s.Value), scale(s.Mean), scale(s.P99), scale(s.Low), scale(s.High)
		t.Service = s
		d.Types[i] = t
	}
	return d
}

// CheckDilation reports why w cannot be dilated by f (see Dilated): f must
// be finite and > 0, and every dilated service time at least 1 ns, at most
// 2^52 ns (about 52 days) and valid. w must be valid.
func (w *Workload) CheckDilation(f float64) error {
	if !(f > 0) || math.IsInf(f, 0) {
		return fmt.Errorf("dilation %g, want a finite factor > 0", f)
	}
	for _, t := range w.Types {
		s := t.Service
		for _, v := range []Duration{s.Value, s.Mean, s.P99, s.Low, s.High} {
			if v == 0 {
				continue
			}
			if d := float64(v) * f; !(d >= 0.5 && d <= maxService) {
				return fmt.Errorf("dilation %g: type %q: %v becomes %.3g ns, want 1 ns to %.3g ns (about 52 days)", f, t.Name, v, d, maxService)
			}
		}
	}
	d := w.Dilated(f)
	for _, t := range d.Types {
		if err := t.Service.Validate(); err != nil {
			return fmt.Errorf("dilation %g: type %q: %w", f, t.Name, err)
		}
	}
	return nil
}

// TypeNames lists the type names in order.
func (w *Workload) TypeNames() []string {
	out := make([]string, len(w.Types))
	for i, t := range w.Types {
		out[i] = t.Name
	}
	return out
}

// TypeIndex returns the index of the type with wire id id, or -1.
func (w *Workload) TypeIndex(id uint32) int {
	for i, t := range w.Types {
		if t.ID == id {
			return i
		}
	}
	return -1
}

// String lists the mix, e.g. "high-bimodal: SHORT 50% fixed 1µs, LONG 50% fixed 100µs".
func (w *Workload) String() string {
	var b strings.Builder
	b.WriteString(w.Name)
	b.WriteString(":")
	for i, t := range w.Types {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, " %s %.4g%% %v", t.Name, t.Share*100, t.Service)
	}
	return b.String()
}

func fixed(d time.Duration) Dist { return Dist{Kind: Fixed, Value: Duration(d)} }

// builtins returns fresh copies of the built-in workloads.
func builtins() map[string]Workload {
	const us = time.Microsecond
	return map[string]Workload{
		"high-bimodal": {Name: "high-bimodal", Types: []TypeSpec{
			{Name: "SHORT", ID: wire.TypeShort, Share: 0.5, Service: fixed(1 * us)},
			{Name: "LONG", ID: wire.TypeLong, Share: 0.5, Service: fixed(100 * us)},
		}},
		"extreme-bimodal": {Name: "extreme-bimodal", Types: []TypeSpec{
			{Name: "SHORT", ID: wire.TypeShort, Share: 0.995, Service: fixed(500 * time.Nanosecond)},
			{Name: "LONG", ID: wire.TypeLong, Share: 0.005, Service: fixed(500 * us)},
		}},
		"tpcc": {Name: "tpcc", Types: []TypeSpec{
			{Name: "Payment", ID: wire.TypePayment, Share: 0.44, Service: fixed(5700 * time.Nanosecond)},
			{Name: "OrderStatus", ID: wire.TypeOrderStatus, Share: 0.04, Service: fixed(6 * us)},
			{Name: "NewOrder", ID: wire.TypeNewOrder, Share: 0.44, Service: fixed(20 * us)},
			{Name: "Delivery", ID: wire.TypeDelivery, Share: 0.04, Service: fixed(88 * us)},
			{Name: "StockLevel", ID: wire.TypeStockLevel, Share: 0.04, Service: fixed(100 * us)},
		}},
		"rocksdb": {Name: "rocksdb", Types: []TypeSpec{
			{Name: "GET", ID: wire.TypeGet, Share: 0.5, Service: fixed(1500 * time.Nanosecond)},
			{Name: "SCAN", ID: wire.TypeScan, Share: 0.5, Service: fixed(635 * us)},
		}},
		// memcached: single-key gets, multi-gets of 100 keys and sets, with
		// the nominal costs of the memcached application's emulation (1us
		// per command and per key); ids are its classifier's types.
		"memcached": {Name: "memcached", Types: []TypeSpec{
			{Name: "GET", ID: 1, Share: 0.9, Service: fixed(2 * us)},
			{Name: "MULTIGET", ID: 2, Share: 0.05, Service: fixed(101 * us)},
			{Name: "SET", ID: 3, Share: 0.05, Service: fixed(2 * us)},
		}},
	}
}

// Names lists the built-in workloads, sorted.
func Names() []string {
	b := builtins()
	out := make([]string, 0, len(b))
	for n := range b {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Builtin returns a fresh copy of the named built-in workload.
func Builtin(name string) (Workload, error) {
	w, ok := builtins()[name]
	if !ok {
		return Workload{}, fmt.Errorf("workload %q: %w (built-ins: %s; or give a .yaml/.json file)",
			name, ErrUnknownWorkload, strings.Join(Names(), ", "))
	}
	if err := w.Validate(); err != nil {
		return Workload{}, err
	}
	return w, nil
}

// Parse returns the built-in workload called nameOrPath, or loads the file
// at that path.
func Parse(nameOrPath string) (Workload, error) {
	if _, ok := builtins()[nameOrPath]; ok {
		return Builtin(nameOrPath)
	}
	if strings.ContainsAny(nameOrPath, "/\\") || filepath.Ext(nameOrPath) != "" {
		return Load(nameOrPath)
	}
	return Builtin(nameOrPath)
}

// maxSpecFile bounds a workload or phases file.
const maxSpecFile = 16 << 20

// decodeSpecFile reads path, at most maxSpecFile bytes of YAML (.yaml,
// .yml) or JSON (.json) whose unknown fields are errors, into v; what
// names what it holds in the errors ("workload", "phases").
func decodeSpecFile(what, path string, v any) error {
	data, err := boundedfile.Read(path, maxSpecFile)
	if err != nil {
		return fmt.Errorf("load %s: %w", what, err)
	}
	switch ext := strings.ToLower(filepath.Ext(path)); ext {
	case ".yaml", ".yml":
		dec := yaml.NewDecoder(bytes.NewReader(data))
		dec.KnownFields(true)
		err = dec.Decode(v)
	case ".json":
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.DisallowUnknownFields()
		err = dec.Decode(v)
	default:
		return fmt.Errorf("load %s %s: unknown extension %q (want .yaml, .yml or .json)", what, path, ext)
	}
	if err != nil {
		return fmt.Errorf("load %s %s: %w", what, path, err)
	}
	return nil
}

// Load reads a workload from a YAML (.yaml, .yml) or JSON (.json) file.
// Unknown fields are errors. The workload name defaults to the file's base
// name without extension.
func Load(path string) (Workload, error) {
	var w Workload
	if err := decodeSpecFile("workload", path, &w); err != nil {
		return Workload{}, err
	}
	if w.Name == "" {
		w.Name = defaultName(path)
	}
	if err := w.Validate(); err != nil {
		return Workload{}, fmt.Errorf("load workload %s: %w", path, err)
	}
	return w, nil
}
