// Reading a configuration file: strict YAML, units on durations, and the
// zeros a file writes out, which mean "this, not the default".

package server

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"

	"github.com/persephone-go/psp/darc"
	"github.com/persephone-go/psp/internal/boundedfile"
)

// LoadConfig reads a YAML config file. Unknown keys are errors.
func LoadConfig(path string) (Config, error) {
	data, err := boundedfile.Read(path, maxConfigFile)
	if err != nil {
		return Config{}, fmt.Errorf("server: read config: %w", err)
	}
	cfg, err := ParseConfig(data)
	if err != nil {
		return Config{}, fmt.Errorf("%s: %w", path, err)
	}
	return cfg, nil
}

// ParseConfig decodes YAML strictly (unknown keys are errors).
func ParseConfig(data []byte) (Config, error) {
	// The tree serves the bare-zero rewrite and, after the strict decode,
	// the explicit zeros (a bare 0 rewritten as 0s is a zero either way).
	var doc yaml.Node
	treeErr := yaml.Unmarshal(data, &doc)
	if treeErr == nil {
		var err error
		if data, err = unitlessDurations(data, &doc); err != nil {
			return Config{}, err
		}
	}
	var cfg Config
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&cfg); err != nil {
		if errors.Is(err, io.EOF) { // empty file: all defaults
			return cfg, nil
		}
		return Config{}, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	// A second document would be silently ignored: refuse it.
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return Config{}, fmt.Errorf("%w: more than one YAML document (a line \"---\" starts a second one; put everything in one)", ErrConfig)
	}
	// Zeros written out take their meaning or are refused, as on the
	// command line.
	if treeErr != nil {
		return Config{}, fmt.Errorf("%w: %w", ErrConfig, treeErr)
	}
	for _, key := range zeroKeys(&doc, "") {
		if err := cfg.ExplicitZero(key); err != nil {
			return Config{}, err
		}
	}
	return cfg, nil
}

// unitlessDurations returns data with every duration setting written as a
// bare 0 ("spin: 0") turned into "0s": YAML decodes a duration from a
// string only, and 0 needs no unit (time.ParseDuration takes "0" too). Any
// other bare number for a duration is refused by key: it has no unit.
// The edit is made in place, so the decoder's line numbers stay the
// user's. doc is data's YAML tree.
func unitlessDurations(data []byte, doc *yaml.Node) ([]byte, error) {
	if len(doc.Content) == 0 {
		return data, nil
	}
	var zeros []*yaml.Node
	if err := findDurations(doc.Content[0], reflect.TypeFor[Config](), "", &zeros); err != nil {
		return nil, err
	}
	if len(zeros) == 0 {
		return data, nil
	}
	out := slices.Clone(data)
	for i := len(zeros) - 1; i >= 0; i-- { // last first: earlier offsets hold
		n := zeros[i]
		off, ok := offsetOf(out, n.Line, n.Column)
		if !ok || !bytes.HasPrefix(out[off:], []byte(n.Value)) {
			return data, nil // not where the parser saw it: let the decoder say
		}
		out = slices.Concat(out[:off], []byte("0s"), out[off+len(n.Value):])
	}
	return out, nil
}

// offsetOf returns the byte offset of 1-based line and column (in
// characters) in data.
func offsetOf(data []byte, line, column int) (int, bool) {
	off := 0
	for l := 1; l < line; l++ {
		i := bytes.IndexByte(data[off:], '\n')
		if i < 0 {
			return 0, false
		}
		off += i + 1
	}
	for c := 1; c < column; c++ {
		if off >= len(data) || data[off] == '\n' {
			return 0, false
		}
		_, size := utf8.DecodeRune(data[off:])
		off += size
	}
	return off, true
}

// findDurations walks n, the YAML for a value of type t at key path, and
// collects the bare zeros given for durations in zeros (see
// unitlessDurations); it also refuses a fraction given for an integer
// setting, which the decoder would truncate.
func findDurations(n *yaml.Node, t reflect.Type, path string, zeros *[]*yaml.Node) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch n.Kind {
	case yaml.MappingNode:
		if t.Kind() == reflect.Map {
			for i := 0; i+1 < len(n.Content); i += 2 {
				sub := n.Content[i].Value
				if path != "" {
					sub = path + "." + sub
				}
				if err := findDurations(n.Content[i+1], t.Elem(), sub, zeros); err != nil {
					return err
				}
			}
			return nil
		}
		if t.Kind() != reflect.Struct {
			return nil
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			key := n.Content[i].Value
			f, ok := yamlField(t, key)
			if !ok {
				continue // the strict decoder names unknown keys
			}
			sub := key
			if path != "" {
				sub = path + "." + key
			}
			if err := findDurations(n.Content[i+1], f.Type, sub, zeros); err != nil {
				return err
			}
		}
	case yaml.SequenceNode:
		if t.Kind() != reflect.Slice && t.Kind() != reflect.Array {
			return nil
		}
		for i, e := range n.Content {
			if err := findDurations(e, t.Elem(), fmt.Sprintf("%s[%d]", path, i), zeros); err != nil {
				return err
			}
		}
	case yaml.ScalarNode:
		if t != reflect.TypeFor[time.Duration]() {
			if isInteger(t.Kind()) && n.ShortTag() == "!!float" {
				// The decoder would cut 0.5 to 0 and 3.9 to 3.
				if v, err := strconv.ParseFloat(strings.ReplaceAll(n.Value, "_", ""), 64); err != nil || v != math.Trunc(v) {
					return fmt.Errorf("%w: %s: %s is not a whole number", ErrConfig, path, n.Value)
				}
			}
			return nil
		}
		if tag := n.ShortTag(); tag != "!!int" && tag != "!!float" {
			return nil
		}
		if !isZeroNumber(n) {
			return fmt.Errorf("%w: %s: %s has no unit: write a duration such as %[3]sms or %[3]ss (units ns, us, ms, s, m, h)", ErrConfig, path, n.Value)
		}
		*zeros = append(*zeros, n)
	}
	return nil
}

// isInteger reports whether k is an integer kind.
func isInteger(k reflect.Kind) bool {
	switch k {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return true
	}
	return false
}

// yamlField returns the field of struct type t that YAML key names.
func yamlField(t reflect.Type, key string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		if name == key {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

// zeroKeys lists the dotted keys of n's mappings whose value is a zero
// scalar (0, 0.0, 0s, "", or nothing), outside lists.
func zeroKeys(n *yaml.Node, prefix string) []string {
	if n.Kind == yaml.DocumentNode && len(n.Content) == 1 {
		return zeroKeys(n.Content[0], prefix)
	}
	if n.Kind != yaml.MappingNode {
		return nil
	}
	var keys []string
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i].Value, n.Content[i+1]
		if prefix != "" {
			k = prefix + "." + k
		}
		if v.Kind == yaml.MappingNode {
			keys = append(keys, zeroKeys(v, k)...)
		} else if v.Kind == yaml.ScalarNode && isZeroScalar(v) {
			keys = append(keys, k)
		}
	}
	return keys
}

func isZeroScalar(v *yaml.Node) bool {
	switch v.ShortTag() {
	case "!!null":
		return true
	case "!!int", "!!float":
		return isZeroNumber(v)
	case "!!str":
		if v.Value == "" {
			return true
		}
		d, err := time.ParseDuration(v.Value)
		return err == nil && d == 0
	}
	return false
}

// isZeroNumber reports whether v, a YAML !!int or !!float, is zero.
func isZeroNumber(v *yaml.Node) bool {
	f, err := strconv.ParseFloat(strings.ReplaceAll(v.Value, "_", ""), 64)
	return err == nil && f == 0
}

// zeroRule gives an explicit zero its meaning in c, or refuses it.
type zeroRule func(c *Config) error

// refuse is the rule of settings for which zero means nothing.
func refuse(want string) zeroRule {
	return func(*Config) error { return errors.New(want) }
}

// zeroRules holds every setting whose zero value stands for a default, by
// YAML key (flags use the same rules). Settings not listed take a zero as
// it is.
var zeroRules = map[string]zeroRule{
	"listen":                         refuse("want [udp://|tcp://]IP:PORT"),
	"tcp.max_conns":                  refuse("want >= 1"),
	"tcp.max_pipeline":               refuse("want 1..65536"),
	"tcp.max_request":                refuse("want > 0"),
	"tcp.max_output":                 refuse("want > 0"),
	"tcp.memory":                     refuse("want > 0"),
	"tcp.idle_timeout":               func(c *Config) error { c.TCP.IdleTimeout = -1; return nil },    // never
	"tcp.partial_timeout":            func(c *Config) error { c.TCP.PartialTimeout = -1; return nil }, // never
	"dataplane":                      refuse("want udp, dpdk or memnic"),
	"buffers":                        refuse("want at least the burst size"),
	"buf_size":                       refuse("want at least the 16-byte header"),
	"policy":                         refuse("want " + strings.Join(darc.PolicyNames(), ", ")),
	"workers":                        refuse("want 1..1024"),
	"delta":                          refuse("want > 0"),
	"spillway":                       refuse("want 1..workers"),
	"queue_capacity":                 refuse("want >= 1"),
	"min_samples":                    refuse("want >= 1"),
	"delay_factor":                   refuse("want > 0"),
	"max_window":                     func(c *Config) error { c.MaxWindow = -1; return nil },  // no limit: checks on queuing delay only
	"hysteresis":                     func(c *Config) error { c.Hysteresis = -1; return nil }, // a band of exactly ±0.5: plain rounding
	"idle":                           refuse("want spin-then-park or busy-poll"),
	"spin":                           func(c *Config) error { c.Spin = -1; return nil },           // park at once
	"dispatcher_spin":                func(c *Config) error { c.DispatcherSpin = -1; return nil }, // park after spin
	"in_place":                       func(c *Config) error { c.InPlace = -1; return nil },        // never serve in place
	"burst":                          refuse("want 1..4096"),
	"drain_timeout":                  func(c *Config) error { c.DrainTimeout = -1; return nil },   // drop what is queued at once
	"deadline_factor":                func(c *Config) error { c.DeadlineFactor = -1; return nil }, // no automatic deadlines
	"deadline_floor":                 func(c *Config) error { c.DeadlineFloor = -1; return nil },  // no floor
	"app.max_service":                refuse("want > 0, up to 4.29s"),
	"app.name":                       refuse("want spin, emulate, kv, tpcc or memcached"),
	"app.dilation":                   zeroDilation,
	"app.spin_tail":                  func(c *Config) error { c.App.SpinTail = -1; return nil }, // no spinning tail
	"app.kv.keys":                    refuse("want >= 1"),
	"app.kv.value_size":              refuse("want >= 1"),
	"app.memcached.max_item_size":    refuse("want 1024..1073741824"),
	"app.memcached.cost_per_command": refuse("want > 0 (leave out the dilation for no emulated cost)"),
	"app.memcached.cost_per_key":     refuse("want > 0 (leave out the dilation for no emulated cost)"),
	"app.memcached.udp_reply_ratio":  refuse("want >= 1 (negative: unbounded, as memcached)"),
	"app.memcached.udp_reply_floor":  refuse("want 1400..67108864"),
	"app.memcached.max_conns":        refuse("want >= 1"),
	"app.memcached.max_line":         refuse("want 2048..1073741824"),
	"app.memcached.idle_timeout":     refuse("want 100ms..24h"),
	"app.memcached.write_timeout":    refuse("want 10ms..1m"),
	"app.memcached.tcp_memory":       refuse("want > 0"),
	"app.memcached.store_memory":     refuse("want at least 134217728 (negative: unbounded)"),
	"app.memcached.read_cache":       func(c *Config) error { c.App.Memcached.ReadCache = -1; return nil }, // no read cache
	"admin.addr":                     refuse("want IP:PORT or off"),
}

func init() {
	// Classifier limits: zero is no limit anyone wants.
	for _, k := range []string{"fuel", "init_fuel", "memory_pages", "max_module_size", "time_limit", "stack_limit",
		"breaker_threshold", "breaker_window", "breaker_backoff", "compile_timeout", "compile_memory"} {
		zeroRules["classifier_options."+k] = refuse("want > 0")
	}
}

// zeroDilation: tpcc without dilation spins its service times, memcached
// adds no emulated cost; emulate cannot sleep zero.
func zeroDilation(c *Config) error {
	if c.App.Name == "" || c.App.Name == AppEmulate {
		return errors.New("the emulate application needs a dilation > 0 (tpcc spins with 0)")
	}
	c.App.Dilation = 0
	return nil
}

// ExplicitZero applies a zero given explicitly (in a file or a flag) for
// the setting key, its YAML path such as "workers" or "app.spin_tail". For
// most settings whose zero value means "the default", an explicit zero
// means nothing and is refused with an error wrapping ErrConfig; for some
// it means "none" (spin: park at once; drain_timeout: do not wait;
// app.spin_tail: no spinning tail; hysteresis: plain rounding), stored as
// -1. Settings whose zero is an ordinary value are left alone.
func (c *Config) ExplicitZero(key string) error {
	rule, ok := zeroRules[key]
	if !ok {
		return nil
	}
	if err := rule(c); err != nil {
		return fmt.Errorf("%w: %s: 0 is not a value (%v; leave the setting out for the default)", ErrConfig, key, err)
	}
	return nil
}

// YAML renders the effective config (defaults filled in) as YAML.
func (c Config) YAML() ([]byte, error) {
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(c.withDefaults()); err != nil {
		return nil, fmt.Errorf("server: encode config: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("server: encode config: %w", err)
	}
	return b.Bytes(), nil
}
