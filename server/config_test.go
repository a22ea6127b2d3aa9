package server

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/dustin/go-humanize"
	"go.yaml.in/yaml/v3"

	"github.com/persephone-go/psp/darc"
	"github.com/persephone-go/psp/dispatcher"
	"github.com/persephone-go/psp/wasmclass"
)

func TestParseConfigRefusesSecondDocument(t *testing.T) {
	if _, err := ParseConfig([]byte("workers: 3\n---\nworkers: 5\n")); !errors.Is(err, ErrConfig) {
		t.Errorf("two YAML documents: %v, want ErrConfig (the second would be ignored)", err)
	}
	for _, ok := range []string{"", "workers: 3\n", "---\nworkers: 3\n", "workers: 3\n...\n"} {
		if _, err := ParseConfig([]byte(ok)); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
}

func TestKVValueMustFitReplyBuffer(t *testing.T) {
	cfg := memConfig()
	cfg.App = App{Name: AppKV, KV: KV{ValueSize: 4096}} // buf_size default 2048
	if err := cfg.Validate(); !errors.Is(err, ErrConfig) {
		t.Errorf("kv value size 4096 with 2048-byte buffers: Validate = %v, want ErrConfig (GET replies would be cut short)", err)
	}
	cfg.App.KV.ValueSize = DefaultBufSize - 16
	if err := cfg.Validate(); err != nil {
		t.Errorf("kv value size filling the buffer exactly: %v", err)
	}
}

func TestOverloadConfig(t *testing.T) {
	cfg, err := ParseConfig([]byte(`
deadline_factor: 5
deadline_floor: 20ms
types:
  LONG: {deadline: 300ms, budget: 500, guarantee: 100}
  SHORT: {deadline: "off"}
app: {name: emulate, max_service: 2ms}
`))
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	// The default tenant of the native classifier: the types by their
	// plain names.
	native := &loadedTenant{cfg: Tenant{Name: DefaultTenant}, typeNames: headerTypes(), numTypes: len(headerTypes()), implicit: true}
	d := cfg.withDefaults().basePolicyConfig(8160)
	tc, err := native.share(cfg.withDefaults(), true)
	if err != nil {
		t.Fatal(err)
	}
	if d.DeadlineFactor != 5 || d.DeadlineFloor != int64(20*time.Millisecond) || d.Pool != 8160 ||
		tc.Deadlines[2] != int64(300*time.Millisecond) || tc.Deadlines[1] != -1 || tc.Budgets[2] != 500 || tc.Guarantees[2] != 100 {
		t.Errorf("policy config %+v, tenant %+v", d, tc)
	}
	d.Tenants = []darc.TenantConfig{tc}
	if err := d.Validate(); err != nil {
		t.Errorf("policy config refused: %v", err)
	}
	cfg.Types["NOPE"] = TypeLimits{Budget: 3}
	ts := &tenantRegistry{live: map[string]*loadedTenant{DefaultTenant: native}}
	if err := checkTypeOverrides(cfg.withDefaults(), ts); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), `"NOPE"`) {
		t.Errorf("unknown type name: %v", err)
	}
	for _, bad := range []string{
		"types: {LONG: {deadline: soon}}",
		"types: {LONG: {deadline: -3s}}",
		"types: {LONG: {budget: -1}}",
		"app: {max_service: -1ms}",
	} {
		c, err := ParseConfig([]byte(bad))
		if err == nil {
			err = c.Validate()
		}
		if !errors.Is(err, ErrConfig) {
			t.Errorf("%q: %v, want ErrConfig", bad, err)
		}
	}
}

// Queue capacities that cannot fit the pool are refused with a clear error.
func TestQueueCapacityMustFitThePool(t *testing.T) {
	cfg := memConfig()
	cfg.QueueCapacity = 4096 // 12 types x 4096 on a pool of 1536
	_, err := New(context.Background(), cfg, Options{})
	if err == nil || !strings.Contains(err.Error(), "more than the pool's 1536 buffers") {
		t.Fatalf("New = %v, want a refusal naming the pool", err)
	}
	cfg.QueueCapacity = 100
	srv, err := New(context.Background(), cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	srv.Close()
}

// TestMultiTenantConfig: the tenant keys of examples/serve.yaml parse and
// validate; zeros and bad values are refused.
func TestMultiTenantConfig(t *testing.T) {
	cfg, err := ParseConfig([]byte(`
policy: darc
classifier_options: {fuel: 500000, stack_limit: 262144, time_limit: 5ms}
tenants:
  - name: shop
    ports: [7001]
    workers: 8
    max_workers: 12
    buffers: 2000
    token_sha256: 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08
    isolation: lane
    classifier_options: {fuel: 100000}
  - name: batch
    ports: [7002, 7003]
    weight: 2
types:
  shop/SHORT: {deadline: 100ms}
`))
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if !cfg.withDefaults().shares() || cfg.Tenants[0].ClassifierOptions.Fuel != 100000 || cfg.ClassifierOptions.TimeLimit != 5*time.Millisecond {
		t.Fatalf("parsed %+v", cfg)
	}
	w := cfg.Tenants[0].ClassifierOptions.wasm(cfg.ClassifierOptions.wasm(wasmclass.Options{}))
	if w.Fuel != 100000 || w.StackLimit != 262144 || w.TimeLimit != 5*time.Millisecond {
		t.Fatalf("shop's classifier options %+v", w)
	}
	for _, bad := range []string{
		"classifier_options: {fuel: 0}",
		"tenants: [{name: a, isolation: sometimes}]",
		"tenants: [{name: 'a b'}]",
		"tenants: [{name: a, workers: 3, max_workers: 2}]",
		"tenants: [{name: a, token_sha256: nothex}]",
		"tenants: [{name: a, ports: [1]}, {name: b, ports: [1]}]",
		"policy: cfcfs\ntenants: [{name: a, classifier: a.wasm, workers: 2}]",
		"policy: cfcfs\nmulti_tenant: true",
		"classifier: a.wasm\nmulti_tenant: true",
	} {
		c, err := ParseConfig([]byte(bad))
		if err == nil {
			err = c.Validate()
		}
		if !errors.Is(err, ErrConfig) {
			t.Errorf("%q: %v, want ErrConfig", bad, err)
		}
	}
}

// TestConfigBareZeroDurations: a duration written as a bare 0 means what
// "0s" means (YAML decodes durations from strings only, and zero needs no
// unit); any other bare number is refused by key, as having no unit; the
// decoder's line numbers stay those of the file.
func TestConfigBareZeroDurations(t *testing.T) {
	for _, c := range []struct{ bare, unit string }{
		{"spin: 0", "spin: 0s"},
		{"spin: 0 # never spin", "spin: 0s"},
		{"drain_timeout: 0.0", "drain_timeout: 0s"},
		{"{spin: 0, drain_timeout: 0}", "{spin: 0s, drain_timeout: 0s}"},
		{"listen: 127.0.0.1:9\nspin: 0\nin_place: 0\n", "listen: 127.0.0.1:9\nspin: 0s\nin_place: 0s\n"},
		{"tenants:\n  - name: a\n    classifier: x.wasm\n    classifier_options: {breaker_window: 0}\n",
			"tenants:\n  - name: a\n    classifier: x.wasm\n    classifier_options: {breaker_window: 0s}\n"},
	} {
		got, err := ParseConfig([]byte(c.bare))
		if err != nil {
			t.Errorf("%q: %v", c.bare, err)
			continue
		}
		want, err := ParseConfig([]byte(c.unit))
		if err != nil {
			t.Fatalf("%q: %v", c.unit, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%q decoded as %+v, want what %q gives: %+v", c.bare, got, c.unit, want)
		}
	}
	for _, c := range []struct{ yaml, want string }{
		{"spin: 50", "spin: 50 has no unit"},
		{"dispatcher_spin: 1_000", "dispatcher_spin: 1_000 has no unit"},
		{"drain_timeout: 1.5", "drain_timeout: 1.5 has no unit"},
		{"classifier_options:\n  time_limit: 3\n", "classifier_options.time_limit: 3 has no unit"},
		{"tenants:\n  - name: a\n  - name: b\n    classifier_options: {breaker_backoff: 7}\n", "tenants[1].classifier_options.breaker_backoff: 7 has no unit"},
		{"spin: 0\n\nbogus: 1\n", "line 3: field bogus not found"},
	} {
		_, err := ParseConfig([]byte(c.yaml))
		if err == nil || !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want ErrConfig saying %q", c.yaml, err, c.want)
		}
	}
	// Numbers elsewhere are left alone.
	if cfg, err := ParseConfig([]byte("buffers: 4096\nspin: 0")); err != nil || cfg.Buffers != 4096 {
		t.Errorf("buffers: 4096 beside a bare zero: %+v, %v", cfg.Buffers, err)
	}
}

// FuzzParseConfig: any bytes either decode or give an error, never a
// panic, and a config that decodes decodes the same from its bare-zero
// rewrite.
func FuzzParseConfig(f *testing.F) {
	for _, s := range []string{"spin: 0", "{spin: 0, drain_timeout: 0.0}", "spin: 50", "tenants:\n  - name: a\n    classifier_options: {breaker_window: 0}\n", "workers: 3\n---\n", "spin: 0 # x\r\nbuffers: 1\r\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := ParseConfig(data)
		if err != nil {
			return
		}
		var doc yaml.Node
		if err := yaml.Unmarshal(data, &doc); err != nil {
			t.Fatalf("ParseConfig accepted %q, which is not YAML: %v", data, err)
		}
		fixed, err := unitlessDurations(data, &doc)
		if err != nil {
			t.Fatalf("ParseConfig accepted %q but unitlessDurations refused it: %v", data, err)
		}
		again, err := ParseConfig(fixed)
		if err != nil || !reflect.DeepEqual(cfg, again) {
			t.Fatalf("%q and its rewrite %q decode differently: %v", data, fixed, err)
		}
	})
}

// TestPoolMustFitMemory: a pool larger than the machine's memory is refused
// by Validate, naming both sizes, instead of the allocation killing the
// process at start.
func TestPoolMustFitMemory(t *testing.T) {
	mem, ok := machineMemory()
	if !ok {
		t.Skip("the machine's memory is unknown here")
	}
	cfg := memConfig()
	cfg.Buffers, cfg.BufSize = MaxBuffers, 1<<16
	if uint64(cfg.Buffers)*uint64(cfg.BufSize) <= mem {
		t.Skipf("this machine has %s: a pool of at most %d buffers of 64 KiB fits", humanize.IBytes(mem), MaxBuffers)
	}
	err := cfg.Validate()
	if err == nil || !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "more than this machine's memory") {
		t.Fatalf("Validate = %v, want ErrConfig refusing the pool's size", err)
	}
	cfg.Buffers = 2048
	if err := cfg.Validate(); err != nil {
		t.Fatalf("a 128 MiB pool: %v", err)
	}
}

// TestConfigFractionsForIntegers: a fraction given for a whole-number
// setting is refused by its key path (the decoder would cut 0.5 to 0, which
// then meant the default, and 3.9 to 3); a whole number written as a float
// is taken.
func TestConfigFractionsForIntegers(t *testing.T) {
	for _, c := range []struct{ yaml, want string }{
		{"workers: 0.5", "workers: 0.5 is not a whole number"},
		{"workers: 3.9", "workers: 3.9 is not a whole number"},
		{"buffers: 2048.5", "buffers: 2048.5 is not a whole number"},
		{"burst: .nan", "burst: .nan is not a whole number"},
		{"types:\n  LONG:\n    budget: 2.5\n", "types.LONG.budget: 2.5 is not a whole number"},
		{"tenants:\n  - name: a\n    workers: 1.25\n", "tenants[0].workers: 1.25 is not a whole number"},
	} {
		_, err := ParseConfig([]byte(c.yaml))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.yaml, err, c.want)
		}
	}
	for yml, want := range map[string]int{"workers: 4.0": 4, "workers: 1e1": 10, "workers: 3": 3} {
		cfg, err := ParseConfig([]byte(yml))
		if err != nil || cfg.Workers != want {
			t.Errorf("%q: workers %d, %v; want %d", yml, cfg.Workers, err, want)
		}
	}
}

// TestValidateChecksPolicyAndApp: Validate (which psp serve --print-config
// runs) refuses what the policy and the application would refuse at
// start, so a config it passes does not fail later for these.
func TestValidateChecksPolicyAndApp(t *testing.T) {
	for _, c := range []struct{ yaml, want string }{
		{"delta: .nan", "delta = NaN"},
		{"hysteresis: .inf", "hysteresis = +Inf"},
		{"delay_factor: -1", "delay factor = -1"},
		{"min_samples: -1", "min samples = -1"},
		{"app:\n  name: kv\n  kv:\n    keys: 1000000000000000000\n", "keys 1000000000000000000"},
	} {
		cfg, err := ParseConfig([]byte(c.yaml))
		if err != nil {
			t.Fatalf("%q: %v", c.yaml, err)
		}
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: Validate() = %v, want %q", c.yaml, err, c.want)
		}
	}
}

// TestIdleDefaultsWhenCrowded: an undilated application whose threads
// (workers and the dispatcher) outnumber the usable CPUs parks its idle
// workers and its dispatcher at once; one with a CPU to spare, an emulated
// one, and settings the user chose keep theirs.
func TestIdleDefaultsWhenCrowded(t *testing.T) {
	cpus := AutoWorkers()
	for _, c := range []struct {
		name          string
		cfg           Config
		spin, polling time.Duration
	}{
		{"crowded memcached", Config{Workers: cpus, App: App{Name: AppMemcached}}, -1, -1},
		{"memcached with a CPU to spare", Config{Workers: cpus - 1, App: App{Name: AppMemcached}}, dispatcher.DefaultSpin, DefaultDispatcherSpin},
		{"crowded emulate", Config{Workers: cpus, App: App{Name: AppEmulate}}, dispatcher.DefaultSpin, DefaultDispatcherSpin},
		{"crowded, chosen", Config{Workers: cpus, App: App{Name: AppMemcached}, Spin: time.Microsecond, DispatcherSpin: time.Millisecond}, time.Microsecond, time.Millisecond},
	} {
		got := c.cfg.withDefaults()
		if got.Spin != c.spin || got.DispatcherSpin != c.polling {
			t.Errorf("%s: spin %v, dispatcher spin %v; want %v, %v", c.name, got.Spin, got.DispatcherSpin, c.spin, c.polling)
		}
	}
}
