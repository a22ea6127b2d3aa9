package server

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"net/netip"
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/dustin/go-humanize"
	"go.yaml.in/yaml/v3"

	"github.com/persephone-go/psp/app/emulate"
	"github.com/persephone-go/psp/app/kv"
	"github.com/persephone-go/psp/app/memcached"
	"github.com/persephone-go/psp/app/spin"
	"github.com/persephone-go/psp/darc"
	"github.com/persephone-go/psp/dispatcher"
	"github.com/persephone-go/psp/internal/affinity"
	"github.com/persephone-go/psp/internal/boundedfile"
	"github.com/persephone-go/psp/wasmclass"
	"github.com/persephone-go/psp/wire"
)

// Dataplane names.
const (
	DataplaneUDP    = "udp"
	DataplaneDPDK   = "dpdk"
	DataplaneMemory = "memnic" // in-memory, for tests
)

// Application names.
const (
	AppSpin      = "spin"
	AppEmulate   = "emulate"
	AppKV        = "kv"
	AppTPCC      = "tpcc"
	AppMemcached = "memcached"
)

// Defaults of Config.
const (
	DefaultListen = "127.0.0.1:6789"
	DefaultAdmin  = "127.0.0.1:9090"
	// MinAutoWorkers is the fewest workers Workers' automatic default
	// gives: DARC needs two to keep a short type's worker apart from the
	// long types'.
	MinAutoWorkers   = 2
	DefaultPolicy    = "darc"
	DefaultApp       = AppEmulate
	DefaultBuffers   = 8192
	DefaultBufSize   = 2048
	DefaultTenant    = "default"
	maxWasmFileBytes = 64 << 20
	// maxConfigFile bounds a config file.
	maxConfigFile = 16 << 20
)

// ErrConfig wraps every configuration error.
var ErrConfig = errors.New("server: invalid config")

// Config is the server's whole configuration, loaded from YAML (strict:
// unknown keys are errors) and overridable by flags. Zero values take the
// defaults documented on each field. A zero written out in a file (or a
// flag) is never silently replaced by a default: ExplicitZero either gives
// it its meaning (a negative value, "none") or refuses it.
type Config struct {
	// Listen is the UDP address requests arrive on. Default 127.0.0.1:6789.
	Listen string `yaml:"listen"`
	// Dataplane is udp (default), dpdk (needs a build with -tags dpdk) or
	// memnic (in memory, for tests).
	Dataplane string `yaml:"dataplane"`
	// EAL holds the DPDK EAL arguments (dpdk dataplane only).
	EAL []string `yaml:"eal,omitempty"`
	// Buffers is the dataplane's packet-buffer pool size (udp and memnic;
	// DPDK sizes its mbuf pool from its descriptor rings). Default 8192.
	// What the dataplane can lend to requests (the pool minus its receive
	// path's own: 8160 with the UDP defaults) is split into per-type
	// budgets, so no type can hold the buffers another needs. The
	// classifier lanes (see Tenant.Isolation) get buffers of their own on
	// top: a quarter more, at most 2048 (with DPDK, out of its pool).
	Buffers int `yaml:"buffers"`
	// BufSize is the size of one packet buffer (the largest datagram
	// accepted). Default 2048.
	BufSize int `yaml:"buf_size"`

	// Policy is darc (default), cfcfs, dfcfs, fp or darc-static.
	Policy string `yaml:"policy"`
	// Reserved is the number of workers darc-static reserves for the
	// shortest type.
	Reserved int `yaml:"reserved,omitempty"`
	// Workers is the number of application workers. Default (0, or
	// --workers auto): one per CPU the process may use (its affinity
	// mask), at least MinAutoWorkers; see AutoWorkers.
	Workers int `yaml:"workers"`
	// CPUs pins threads: a CPU list such as "0-14" (first the dispatcher,
	// then the workers; see dispatcher.Spec.CPUs). Empty: no pinning.
	CPUs string `yaml:"cpus,omitempty"`
	// Delta, Spillway, QueueCapacity, MinSamples, MaxWindow, DelayFactor,
	// Hysteresis: DARC's parameters (see darc.Config; zero takes darc's
	// default; max_window 0 given explicitly: no limit, stored as -1).
	// QueueCapacity defaults to each type's budget; an explicit one must fit
	// the pool (capacity x types <= the buffers the dataplane lends).
	Delta         float64 `yaml:"delta,omitempty"`
	Spillway      int     `yaml:"spillway,omitempty"`
	QueueCapacity int     `yaml:"queue_capacity,omitempty"`
	MinSamples    int     `yaml:"min_samples,omitempty"`
	MaxWindow     int     `yaml:"max_window,omitempty"`
	DelayFactor   float64 `yaml:"delay_factor,omitempty"`
	Hysteresis    float64 `yaml:"hysteresis,omitempty"`

	// DeadlineFactor and DeadlineFloor set the automatic queue deadlines: a
	// request that waited longer than its type's deadline is dropped before
	// service (reason expired). A type's deadline is DeadlineFactor times
	// the longest mean service time of the types that can hold up its
	// workers, at least DeadlineFloor. Defaults 10 and 200ms (see
	// RATIONALE.md); a negative factor turns automatic deadlines off.
	DeadlineFactor float64       `yaml:"deadline_factor,omitempty"`
	DeadlineFloor  time.Duration `yaml:"deadline_floor,omitempty"`
	// Types overrides per-type limits, by type name (as in psp status).
	Types map[string]TypeLimits `yaml:"types,omitempty"`

	// Idle is the idle strategy: spin-then-park (default) or busy-poll.
	Idle string `yaml:"idle"`
	// Spin is how long idle threads spin before parking. Default 50µs,
	// except that an undilated application whose threads (workers and
	// the dispatcher) outnumber the usable CPUs parks at once: a spinning
	// thread would take a core from the one it waits for. Negative: park
	// at once.
	Spin time.Duration `yaml:"spin,omitempty"`
	// DispatcherSpin is how long the dispatcher keeps polling for
	// requests after its last work before it parks (see
	// dispatcher.Spec.DispatcherSpin): a request that arrives while it
	// polls skips a thread wake-up. Past Spin, a poll that finds nothing
	// yields the core to any other thread that wants it. Default 20ms;
	// negative: the dispatcher parks after Spin, as the workers do.
	DispatcherSpin time.Duration `yaml:"dispatcher_spin,omitempty"`
	// InPlace is the longest expected service time of a request the
	// dispatcher serves itself, on the chosen worker's behalf, when that
	// worker's thread is parked (waking it costs more than such a request;
	// see dispatcher.Spec.InPlaceLimit). Default 20µs; 0 given explicitly:
	// never (stored as -1), every request is handed to its worker's thread.
	InPlace time.Duration `yaml:"in_place,omitempty"`
	// Burst is the receive burst size. Default 32.
	Burst int `yaml:"burst,omitempty"`
	// DrainTimeout bounds the graceful shutdown. Default 5s; negative: drop
	// the queued requests at once.
	DrainTimeout time.Duration `yaml:"drain_timeout,omitempty"`

	// Classifier is a Wasm classifier file for a single tenant named
	// "default" serving every port: the common case, classified on the
	// dispatcher itself. Exclusive with Tenants. With neither, the native
	// classifier runs (the application's, or the psp-header one).
	Classifier string `yaml:"classifier,omitempty"`
	// Fail is the failure policy of Classifier (see Tenant.Fail).
	Fail string `yaml:"fail,omitempty"`
	// OCI says how classifiers named oci://... are pulled.
	OCI OCI `yaml:"oci,omitempty"`
	// classifierWasm is Classifier pulled from a registry.
	classifierWasm []byte
	// Tenants are tenants selected by UDP destination port (see Tenant).
	// Every server is the set of its tenants: without Tenants it has one,
	// the default, of Classifier (or of the native classifier), owning
	// every port. With policy darc or darc-static each tenant has its
	// share of the workers and of the pool, its own types and DARC
	// reservation, its token, and tenants are added, updated and removed
	// at run time (POST, PATCH, DELETE /tenants; psp tenant), a server
	// started with one classifier included. With the other policies the
	// tenants share one policy, without shares, and the set is fixed at
	// start (see RATIONALE.md).
	Tenants []Tenant `yaml:"tenants,omitempty"`
	// MultiTenant starts the server with no tenant at all, not even the
	// default (tenants are added at run time; until then every packet is
	// dropped, no_tenant). Needs policy darc or darc-static; exclusive
	// with Classifier.
	MultiTenant bool `yaml:"multi_tenant,omitempty"`
	// LendAll lends every idle worker across tenants, those a tenant's
	// DARC keeps for its short types too: fully work-conserving, at the
	// cost of a tenant's short requests waiting for a borrowed worker (see
	// darc.Config.LendAll).
	LendAll bool `yaml:"lend_all,omitempty"`
	// ClassifierOptions are the limits of every Wasm classifier (fuel,
	// memory, module size, time limit, breaker, compilation); a tenant's
	// own override them field by field.
	ClassifierOptions ClassifierOptions `yaml:"classifier_options,omitempty"`

	// App is the application the workers run.
	App App `yaml:"app"`
	// Admin is the admin HTTP endpoint.
	Admin Admin `yaml:"admin"`
}

// Tenant is one tenant: its ports, its classifier and (with policy darc
// or darc-static) its share, limits and credentials.
type Tenant struct {
	// Name identifies the tenant (letters, digits, '.', '_', '-').
	Name string `yaml:"name" json:"name"`
	// Ports are the UDP destination ports routed to this tenant; empty: the
	// default tenant (ports no other tenant claims, the listen port
	// included). Every dataplane receives on them.
	Ports []uint16 `yaml:"ports,omitempty" json:"ports,omitempty"`
	// Classifier is the .wasm file, or a registry reference
	// oci://HOST/REPO[:TAG][@sha256:HEX] pulled at start (see OCI). A
	// tenant without one is classified by the application's native
	// classifier (the psp-header one for the synthetic applications).
	Classifier string `yaml:"classifier,omitempty" json:"classifier,omitempty"`
	// Wasm is the module itself, instead of a file (a program embedding
	// its classifier, or POST /tenants; not in YAML).
	Wasm []byte `yaml:"-" json:"wasm,omitempty"`
	// MaxTypes reserves room in the tenant's type range for later hot
	// swaps with more types; default the module's own type count.
	MaxTypes int `yaml:"max_types,omitempty" json:"max_types,omitempty"`

	// The tenant's share (policy darc or darc-static; see
	// darc.TenantConfig).
	// Workers is the number of workers guaranteed to it; 0: a part of the
	// workers no tenant claims by count, in proportion to Weight (default
	// 1). MaxWorkers caps the workers running its requests at once (0: no
	// ceiling). Buffers is its guaranteed part of the buffer pool (0: a
	// part by weight of half the pool), MaxBuffers the most requests it
	// holds at once (0: its guarantee plus the pool's shared part).
	Workers    int     `yaml:"workers,omitempty" json:"workers,omitempty"`
	Weight     float64 `yaml:"weight,omitempty" json:"weight,omitempty"`
	MaxWorkers int     `yaml:"max_workers,omitempty" json:"max_workers,omitempty"`
	Buffers    int     `yaml:"buffers,omitempty" json:"buffers,omitempty"`
	MaxBuffers int     `yaml:"max_buffers,omitempty" json:"max_buffers,omitempty"`

	// TokenFile holds the tenant's bearer token (a file group and others
	// cannot read), TokenSHA256 its SHA-256 in hex instead: it may swap
	// and roll back this tenant's classifier, nothing else.
	TokenFile   string `yaml:"token_file,omitempty" json:"-"`
	TokenSHA256 string `yaml:"token_sha256,omitempty" json:"token_sha256,omitempty"`

	// ClassifierOptions override Config.ClassifierOptions field by field
	// for this tenant's modules.
	ClassifierOptions ClassifierOptions `yaml:"classifier_options,omitempty" json:"classifier_options,omitempty"`
	// Isolation says where the server runs the tenant's Wasm
	// classifier: "auto" (the default: on the dispatcher, in a call of its
	// own, while it behaves; on a goroutine of the tenant's own from its
	// first fault or slow call, so it can cost the others one call at
	// most, which its fuel and stack limit bound), "lane" (always on its
	// own goroutine: a hand-off per burst, nothing ever shared) or
	// "inline" (always on the dispatcher: for a module the operator
	// trusts). Native classifiers run inline.
	Isolation string `yaml:"isolation,omitempty" json:"isolation,omitempty"`
	// Fail is what becomes of a request the tenant's Wasm classifier fails
	// on (a trap, fuel, a bad answer, its breaker open): "open" (the
	// default) classifies it UNKNOWN, served at the lowest priority;
	// "closed" drops it, counted as classifier_fault, with an "overloaded"
	// reply where the application has one. Either way the breaker reopens
	// on a backoff that doubles with each failed probe.
	Fail string `yaml:"fail,omitempty" json:"fail,omitempty"`
}

// OCI configures the pulling of classifiers from OCI registries.
type OCI struct {
	// CacheDir keeps pulled modules by digest, so that a server restarted
	// while the registry is down starts from it. Default: the user's cache
	// directory (psp/oci under $XDG_CACHE_HOME or ~/.cache); "off": none.
	CacheDir string `yaml:"cache_dir,omitempty"`
	// PlainHTTP speaks plain HTTP to registries off loopback too (those on
	// loopback always are).
	PlainHTTP bool `yaml:"plain_http,omitempty"`
	// DockerConfig is the Docker configuration file registry credentials
	// come from. Default: $DOCKER_CONFIG/config.json or ~/.docker/config.json.
	DockerConfig string `yaml:"docker_config,omitempty"`
}

// failClosed parses a failure policy.
func failClosed(s string) (bool, error) {
	switch s {
	case "", "open":
		return false, nil
	case "closed":
		return true, nil
	}
	return false, fmt.Errorf("fail %q: want open or closed", s)
}

// isolation parses Tenant.Isolation.
func (t Tenant) isolation() (dispatcher.Isolation, error) {
	switch t.Isolation {
	case "", "auto":
		return dispatcher.IsolateAuto, nil
	case "lane":
		return dispatcher.IsolateLane, nil
	case "inline":
		return dispatcher.IsolateInline, nil
	}
	return 0, fmt.Errorf("isolation %q: want auto, lane or inline", t.Isolation)
}

// ClassifierOptions are the limits of Wasm classifiers (see
// wasmclass.Options); zero fields take the defaults (or, for a tenant,
// the server's).
type ClassifierOptions struct {
	// Fuel is the budget of one classifier call (a batch of up to 32
	// packets shares it), in units of the cost model (about a nanosecond
	// of the dearest work each): the most time one call can cost. Default
	// 1,000,000.
	Fuel uint64 `yaml:"fuel,omitempty" json:"fuel,omitempty"`
	// InitFuel is the budget of initialisation (default 100 x Fuel).
	InitFuel uint64 `yaml:"init_fuel,omitempty" json:"init_fuel,omitempty"`
	// MemoryPages caps a module's memory, in 64 KiB pages (default 64).
	MemoryPages uint32 `yaml:"memory_pages,omitempty" json:"memory_pages,omitempty"`
	// MaxModuleSize caps a module's size in bytes (default 8 MiB).
	MaxModuleSize int `yaml:"max_module_size,omitempty" json:"max_module_size,omitempty"`
	// TimeLimit is the wall-clock limit of one call (default 20ms): a call
	// over it disables the module until it is replaced.
	TimeLimit time.Duration `yaml:"time_limit,omitempty" json:"time_limit,omitempty"`
	// StackLimit bounds a call's stack in bytes (default 4 MiB).
	StackLimit uint32 `yaml:"stack_limit,omitempty" json:"stack_limit,omitempty"`
	// BreakerThreshold faulting calls within BreakerWindow open the
	// module's circuit breaker for BreakerBackoff (defaults 8, 1s, 100ms).
	BreakerThreshold int           `yaml:"breaker_threshold,omitempty" json:"breaker_threshold,omitempty"`
	BreakerWindow    time.Duration `yaml:"breaker_window,omitempty" json:"breaker_window,omitempty"`
	BreakerBackoff   time.Duration `yaml:"breaker_backoff,omitempty" json:"breaker_backoff,omitempty"`
	// CompileTimeout and CompileMemory bound an upload's compilation
	// (defaults 30s, 2 GiB).
	CompileTimeout time.Duration `yaml:"compile_timeout,omitempty" json:"compile_timeout,omitempty"`
	CompileMemory  uint64        `yaml:"compile_memory,omitempty" json:"compile_memory,omitempty"`
}

// wasm returns o as wasmclass options over base.
func (o ClassifierOptions) wasm(base wasmclass.Options) wasmclass.Options {
	w := wasmclass.Options{
		Fuel: o.Fuel, InitFuel: o.InitFuel, MemoryLimitPages: o.MemoryPages, MaxModuleSize: o.MaxModuleSize,
		TimeLimit: o.TimeLimit, StackLimit: o.StackLimit, BreakerThreshold: o.BreakerThreshold,
		BreakerWindow: o.BreakerWindow, BreakerBackoff: o.BreakerBackoff,
		CompileTimeout: o.CompileTimeout, CompileMemory: o.CompileMemory,
	}
	if w.BreakerBackoff > 0 && base.BreakerMaxBackoff == 0 && w.BreakerBackoff > wasmclass.DefaultBreakerMaxBackoff {
		w.BreakerMaxBackoff = w.BreakerBackoff
	}
	return w.Merge(base)
}

// validate checks o's values.
func (o ClassifierOptions) validate() error {
	switch {
	case o.MemoryPages > 65536:
		return fmt.Errorf("memory_pages %d: at most 65536 (4 GiB)", o.MemoryPages)
	case o.MaxModuleSize < 0 || o.TimeLimit < 0 || o.BreakerThreshold < 0 || o.BreakerWindow < 0 || o.BreakerBackoff < 0 || o.CompileTimeout < 0:
		return errors.New("negative limit")
	case o.Fuel > 1<<62 || o.InitFuel > 1<<62:
		return errors.New("fuel over 2^62")
	case o.StackLimit > 1<<30:
		return fmt.Errorf("stack_limit %d: at most 1 GiB", o.StackLimit)
	case o.BreakerThreshold > 1<<20 || o.MaxModuleSize > 1<<30 || o.CompileMemory > 1<<40:
		return fmt.Errorf("breaker_threshold %d, max_module_size %d, compile_memory %d: at most 2^20, 1 GiB, 1 TiB", o.BreakerThreshold, o.MaxModuleSize, o.CompileMemory)
	}
	return checkDurations(namedDuration{"time_limit", o.TimeLimit}, namedDuration{"breaker_window", o.BreakerWindow},
		namedDuration{"breaker_backoff", o.BreakerBackoff}, namedDuration{"compile_timeout", o.CompileTimeout})
}

// validTenantName checks a tenant name: it appears in URLs, metrics
// labels, type names ("tenant/type") and logs.
func validTenantName(name string) error {
	if name == "" || len(name) > 64 {
		return fmt.Errorf("name %q: want 1 to 64 characters", name)
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return fmt.Errorf("name %q: want letters, digits, '.', '_' and '-' only", name)
		}
	}
	if strings.Trim(name, ".") == "" {
		// "." and ".." are path segments: /tenants/.. is cleaned to
		// /, and such a tenant could not be updated or removed.
		return fmt.Errorf("name %q: want at least one character other than '.'", name)
	}
	return nil
}

// Bounds on a tenant's settings, checked wherever a tenant is configured
// (YAML, POST /tenants, PATCH /tenants/{name}): every count is at most what
// the server could ever give, so no sum or share the policy computes from
// them overflows (issue 22; the policy checks them again against the
// workers and the pool it has).
const (
	// MaxWorkers is the most workers a server runs (and so the most a
	// tenant can be given).
	MaxWorkers = 1024
	// MaxBuffers is the most packet buffers a dataplane pool may have
	// (and so a tenant's buffers and max_buffers).
	MaxBuffers = 1 << 24
	// MaxTenantPorts is the most UDP ports one tenant may list.
	MaxTenantPorts = 1024
)

// validateShare checks t's share values and ports.
func (t Tenant) validateShare() error {
	switch {
	case t.Workers < 0 || t.MaxWorkers < 0 || t.Buffers < 0 || t.MaxBuffers < 0 || t.MaxTypes < 0:
		return errors.New("workers, max_workers, buffers, max_buffers and max_types must be >= 0")
	case t.Workers > MaxWorkers || t.MaxWorkers > MaxWorkers:
		return fmt.Errorf("workers %d, max_workers %d: at most %d", t.Workers, t.MaxWorkers, MaxWorkers)
	case t.Buffers > MaxBuffers || t.MaxBuffers > MaxBuffers:
		return fmt.Errorf("buffers %d, max_buffers %d: at most %d", t.Buffers, t.MaxBuffers, MaxBuffers)
	case t.MaxTypes > MaxTenantTypes:
		return fmt.Errorf("max_types %d: at most %d", t.MaxTypes, MaxTenantTypes)
	case !(t.Weight >= 0 && t.Weight <= darc.MaxWeight): // NaN too
		return fmt.Errorf("weight %v: want > 0 and at most %g (0: the default 1)", t.Weight, float64(darc.MaxWeight))
	case len(t.Ports) > MaxTenantPorts:
		return fmt.Errorf("%d ports: at most %d", len(t.Ports), MaxTenantPorts)
	case t.MaxWorkers > 0 && t.MaxWorkers < t.Workers:
		return fmt.Errorf("max_workers %d below its %d guaranteed workers", t.MaxWorkers, t.Workers)
	case t.MaxBuffers > 0 && t.MaxBuffers < t.Buffers:
		return fmt.Errorf("max_buffers %d below its guarantee of %d buffers", t.MaxBuffers, t.Buffers)
	}
	seen := make(map[uint16]bool, len(t.Ports))
	for _, p := range t.Ports {
		switch {
		case p == 0:
			return errors.New("port 0")
		case seen[p]:
			return fmt.Errorf("port %d listed twice", p)
		}
		seen[p] = true
	}
	return nil
}

// TypeLimits are one type's overrides.
type TypeLimits struct {
	// Deadline is the longest a request of the type may wait in its queue:
	// a duration ("200ms"), "off" for none, or empty for the automatic one.
	Deadline string `yaml:"deadline,omitempty"`
	// Budget is the most requests of the type held at once, queued or
	// running; 0: its guarantee plus the pool's whole shared part.
	Budget int `yaml:"budget,omitempty"`
	// Guarantee is how many requests of the type are always admitted,
	// whatever the other types hold; 0: an equal part of half the pool.
	Guarantee int `yaml:"guarantee,omitempty"`
}

// deadlineNs parses a TypeLimits.Deadline for darc.Config.Deadlines: 0
// automatic, -1 none, else nanoseconds.
func deadlineNs(s string) (int64, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "auto":
		return 0, nil
	case "off", "none":
		return -1, nil
	}
	d, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil || d <= 0 || d > MaxDuration {
		return 0, fmt.Errorf("deadline %q: want a positive duration (200ms) up to %v, off or auto", s, MaxDuration)
	}
	return int64(d), nil
}

// MaxDuration caps every duration the server is given (configuration,
// flags, the admin API), either sign: one day. Time arithmetic (a
// request's enqueue time plus its deadline, now plus a backoff) then
// cannot overflow for centuries of uptime.
const MaxDuration = 24 * time.Hour

// MaxFactor caps the multipliers deadline_factor and app.dilation.
const MaxFactor = 1e6

// namedDuration is a duration setting and its key, for checkDurations.
type namedDuration struct {
	key string
	d   time.Duration
}

// checkDurations refuses a duration beyond MaxDuration either way.
func checkDurations(ds ...namedDuration) error {
	for _, nd := range ds {
		if nd.d > MaxDuration || nd.d < -MaxDuration {
			return fmt.Errorf("%s %v: at most %v", nd.key, nd.d, MaxDuration)
		}
	}
	return nil
}

// App selects and configures the built-in application (a program serving
// its own gives Options.Application instead).
type App struct {
	// Name is spin, emulate (default), kv, tpcc or memcached.
	Name string `yaml:"name"`
	// Dilation multiplies service times (emulate; tpcc when set: it then
	// sleeps instead of spinning; memcached when set: it adds emulated
	// costs). Default 1000 for emulate.
	Dilation float64 `yaml:"dilation,omitempty"`
	// SpinTail is the least part of each emulated service time spent
	// spinning, on top of the learned timer overshoot. Default 50µs;
	// negative: none.
	SpinTail time.Duration `yaml:"spin_tail,omitempty"`
	// MaxService caps the (nominal, undilated) service time one request may
	// ask for in spin, emulate and tpcc; longer requests are refused and
	// counted (reason service_cap). Default 1ms.
	MaxService time.Duration `yaml:"max_service,omitempty"`
	// KV configures the kv application.
	KV KV `yaml:"kv,omitempty"`
	// Memcached configures the memcached application.
	Memcached Memcached `yaml:"memcached,omitempty"`
}

// KV configures the kv application.
type KV struct {
	// Dir is the Pebble directory; empty: in memory.
	Dir string `yaml:"dir,omitempty"`
	// Keys is the number of keys preloaded. Default 5000.
	Keys int `yaml:"keys,omitempty"`
	// ValueSize is the size of each preloaded value. Default 64.
	ValueSize int `yaml:"value_size,omitempty"`
}

// Admin configures the admin HTTP endpoint.
type Admin struct {
	// Addr is the listen address. Default 127.0.0.1:9090. "off" disables it.
	Addr string `yaml:"addr"`
	// TokenFile holds the operator's bearer token (a file group and
	// others cannot read), TokenSHA256 its SHA-256 in hex instead: it may
	// swap any tenant's classifier and add, update and remove tenants.
	// Without any token (operator's or tenants'), changes over HTTP are
	// refused.
	TokenFile   string `yaml:"token_file,omitempty"`
	TokenSHA256 string `yaml:"token_sha256,omitempty"`
	// AuditLog is the file the audit log is appended to: one JSON line per
	// attempt to swap or roll back a classifier or change the tenants, and
	// per refused credential. Default: the server's log (standard error).
	AuditLog string `yaml:"audit_log,omitempty"`
	// AuditLogMaxBytes bounds the audit log file: past it the file is
	// renamed AuditLog.1 (replacing the last one) and a new one started,
	// so it takes at most twice this much disk. Default 64 MiB.
	AuditLogMaxBytes int64 `yaml:"audit_log_max_bytes,omitempty"`
	// ReadTokenFile (or ReadTokenSHA256) is a read-only token: for a
	// scraper (Prometheus sends it as Authorization: Bearer from its
	// credentials_file). With any token configured, GET /status, /tenants
	// and /metrics need one: the operator's and the read-only token see
	// every tenant, a tenant's token its own tenant only.
	ReadTokenFile   string `yaml:"read_token_file,omitempty"`
	ReadTokenSHA256 string `yaml:"read_token_sha256,omitempty"`
	// TLSCert and TLSKey are PEM files: with both, the admin endpoint
	// serves HTTPS only (for when it listens beyond loopback: tokens
	// travel in headers).
	TLSCert string `yaml:"tls_cert,omitempty"`
	TLSKey  string `yaml:"tls_key,omitempty"`
}

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
	"listen":                         refuse("want IP:PORT"),
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
	"app.memcached.tcp_memory":       refuse("want > 0"),
	"app.memcached.store_memory":     refuse("want at least 134217728 (negative: unbounded)"),
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

// DefaultMaxService is the synthetic applications' default cap on the
// service time a request may ask for (App.MaxService).
const DefaultMaxService = spin.DefaultMaxService

// Defaults of the emulate application.
const (
	// DefaultEmulateMinSamples is DARC's MinSamples for the emulate
	// application (and memcached with emulated costs) when none is
	// configured.
	DefaultEmulateMinSamples = 500
	// DefaultInPlace is Config.InPlace's default (see
	// dispatcher.Spec.InPlaceLimit).
	DefaultInPlace = dispatcher.DefaultInPlaceLimit
	// DefaultDispatcherSpin is Config.DispatcherSpin's default (see
	// dispatcher.Spec.DispatcherSpin).
	DefaultDispatcherSpin = dispatcher.DefaultDispatcherSpin
	// DefaultMemcachedMinSamples is DARC's MinSamples for the memcached
	// application without emulated costs when none is configured: darc's
	// own default (50,000) keeps DARC in its startup phase (any worker
	// takes any request, so single-key gets wait behind multi-gets) for 10
	// seconds at 5,000 requests/s; 5,000 completions profile its few
	// types as well, in a second.
	DefaultMemcachedMinSamples = 5000
	// DefaultEmulateDilation is the emulate application's time dilation when
	// none is configured.
	DefaultEmulateDilation = emulate.DefaultDilation
)

// Buffer defaults of the memcached application: memcached takes UDP
// datagrams of up to 64 KiB (a set of a large value). The pool's memory is
// touched only as far as datagrams fill it.
const (
	DefaultMemcachedBufSize = 65535
	DefaultMemcachedBuffers = 2048
)

// withDefaults returns c with zero fields set to the defaults.
func (c Config) withDefaults() Config {
	if c.Listen == "" {
		c.Listen = DefaultListen
	}
	if c.Dataplane == "" {
		c.Dataplane = DataplaneUDP
	}
	if c.App.Name == "" {
		c.App.Name = DefaultApp
	}
	if c.Buffers == 0 {
		c.Buffers = DefaultBuffers
		if c.App.Name == AppMemcached {
			c.Buffers = DefaultMemcachedBuffers
		}
	}
	if c.BufSize == 0 {
		c.BufSize = DefaultBufSize
		if c.App.Name == AppMemcached {
			c.BufSize = DefaultMemcachedBufSize
		}
	}
	if c.Policy == "" {
		c.Policy = DefaultPolicy
	}
	if c.Workers == 0 {
		c.Workers = AutoWorkers()
	}
	if c.Idle == "" {
		c.Idle = dispatcher.IdleSpinThenPark
	}
	if c.Spin == 0 {
		c.Spin = dispatcher.DefaultSpin
		if c.App.Name != AppEmulate && c.App.Dilation == 0 && c.Workers+1 > AutoWorkers() {
			// Threads outnumber cores: a spinning thread takes a core
			// from the one it waits for (the client's, on a small
			// machine; the worker's). Emulated servers keep spinning:
			// their figures were calibrated with it, and their workers
			// sleep most of the time anyway.
			c.Spin = -1
		}
	}
	if c.DispatcherSpin == 0 {
		c.DispatcherSpin = DefaultDispatcherSpin
	}
	if c.InPlace == 0 {
		c.InPlace = DefaultInPlace
	}
	if c.Burst == 0 {
		c.Burst = dispatcher.DefaultBurst
	}
	if c.DrainTimeout == 0 {
		c.DrainTimeout = dispatcher.DefaultDrainTimeout
	}
	if c.App.Name == AppEmulate && c.App.Dilation == 0 {
		c.App.Dilation = DefaultEmulateDilation
	}
	if c.App.Name == AppEmulate && c.MinSamples == 0 {
		// An emulated server completes only hundreds of requests per
		// second: with darc's default (50,000) DARC would stay in its
		// startup phase for minutes.
		c.MinSamples = DefaultEmulateMinSamples
	}
	if c.App.Name == AppMemcached && c.App.Memcached.MaxItemSize == 0 {
		c.App.Memcached.MaxItemSize = memcached.DefaultMaxItemSize
	}
	if c.App.Name == AppMemcached && c.App.Dilation > 0 && c.MinSamples == 0 {
		// Emulated costs: hundreds of requests per second, as above.
		c.MinSamples = DefaultEmulateMinSamples
	}
	if c.App.Name == AppMemcached && c.MinSamples == 0 {
		c.MinSamples = DefaultMemcachedMinSamples
	}
	if c.App.Name == AppKV {
		if c.App.KV.Keys == 0 {
			c.App.KV.Keys = 5000
		}
		if c.App.KV.ValueSize == 0 {
			c.App.KV.ValueSize = 64
		}
	}
	if c.Admin.Addr == "" {
		c.Admin.Addr = DefaultAdmin
	}
	return c
}

// AutoWorkers is the default worker count: one per CPU this process may
// use (its affinity mask: taskset, cgroup cpusets), at least
// MinAutoWorkers. Threads beyond the cores only wait for them, and the
// dispatcher serves short requests itself (dispatcher.Spec.InPlaceLimit),
// so a worker per core keeps every core busy without oversubscribing.
func AutoWorkers() int {
	n := runtime.NumCPU()
	if cpus, err := affinity.Available(); err == nil && len(cpus) > 0 {
		n = len(cpus)
	}
	return max(n, MinAutoWorkers)
}

// shares reports whether c's policy (with defaults) gives tenants shares,
// so that tenants can be added, changed and removed while the server
// runs: darc and darc-static. Under the others the tenants share one
// policy and are fixed at start.
func (c Config) shares() bool {
	return c.Policy == darc.NameDARC || c.Policy == darc.NameDARCStatic
}

// Validate checks c (after defaults) without touching files or the network,
// except that CPUs are checked against the machine.
func (c Config) Validate() error { return c.validate(false) }

// validate is Validate; with custom set, the application is the caller's
// (Options.Application) and Config.App is not checked.
func (c Config) validate(custom bool) error {
	c = c.withDefaults()
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrConfig}, args...)...)
	}
	if _, err := netip.ParseAddrPort(c.Listen); err != nil {
		return bad("listen address %q: %v (want IP:PORT, e.g. %s)", c.Listen, err, DefaultListen)
	}
	if !slices.Contains([]string{DataplaneUDP, DataplaneDPDK, DataplaneMemory}, c.Dataplane) {
		return bad("dataplane %q, want udp, dpdk or memnic", c.Dataplane)
	}
	if !slices.Contains(darc.PolicyNames(), c.Policy) {
		return bad("policy %q, want one of %s", c.Policy, strings.Join(darc.PolicyNames(), ", "))
	}
	if c.Workers < 1 || c.Workers > MaxWorkers {
		return bad("workers = %d, want 1..%d", c.Workers, MaxWorkers)
	}
	if c.Policy == "darc-static" && (c.Reserved < 0 || c.Reserved > c.Workers) {
		return bad("reserved = %d, want 0..workers (%d)", c.Reserved, c.Workers)
	}
	if c.Buffers < c.Burst || c.Buffers > MaxBuffers {
		return bad("buffers = %d, want at least the burst (%d) and at most %d", c.Buffers, c.Burst, MaxBuffers)
	}
	if c.BufSize > 1<<16 {
		return bad("buf_size = %d, want at most %d (a UDP datagram's largest)", c.BufSize, 1<<16)
	}
	if c.QueueCapacity < 0 || c.QueueCapacity > MaxBuffers || c.Reserved > MaxWorkers || c.Spillway > MaxWorkers {
		return bad("queue_capacity %d, reserved %d, spillway %d: out of range (at most %d buffers, %d workers)", c.QueueCapacity, c.Reserved, c.Spillway, MaxBuffers, MaxWorkers)
	}
	if c.BufSize < wire.HeaderLen {
		return bad("buf_size = %d, want >= %d", c.BufSize, wire.HeaderLen)
	}
	if mem, ok := machineMemory(); ok && c.Dataplane != DataplaneDPDK {
		// The pool is allocated whole at start (and touched only as far as
		// requests are in flight at once): beyond the machine's memory the
		// allocation itself fails, killing the process.
		if pool := uint64(c.Buffers) * uint64(c.BufSize); pool > mem {
			return bad("buffers %d x buf_size %d = %s of packet buffers, more than this machine's memory (%s): use fewer or smaller buffers", c.Buffers, c.BufSize, humanize.IBytes(pool), humanize.IBytes(mem))
		}
	}
	if c.CPUs != "" {
		cpus, err := affinity.ParseList(c.CPUs)
		if err != nil {
			return bad("cpus %q: %v", c.CPUs, err)
		}
		if err := affinity.Validate(cpus); err != nil {
			return bad("cpus %q: %v", c.CPUs, err)
		}
	}
	if err := c.dispatcherSpec(nil, 0).Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if c.Classifier != "" && (len(c.Tenants) > 0 || c.MultiTenant) {
		return bad("classifier and tenants are exclusive: put the file in a tenant")
	}
	if _, err := failClosed(c.Fail); err != nil {
		return bad("%v", err)
	}
	if c.Fail != "" && c.Classifier == "" {
		return bad("fail applies to classifier: give each tenant its own fail")
	}
	if c.MultiTenant && !c.shares() {
		return bad("multi_tenant (start with no tenant, add them later) needs policy darc or darc-static (tenant shares are DARC's), not %s", c.Policy)
	}
	if err := c.ClassifierOptions.validate(); err != nil {
		return bad("classifier_options: %v", err)
	}
	seen := map[string]bool{}
	var routed []dispatcher.Tenant
	for i, t := range c.Tenants {
		if err := validTenantName(t.Name); err != nil {
			return bad("tenant %d: %v", i, err)
		}
		if seen[t.Name] {
			return bad("tenant %q listed twice", t.Name)
		}
		seen[t.Name] = true
		dt := dispatcher.Tenant{Name: t.Name, Ports: t.Ports}
		if err := dispatcher.CheckPorts(dt, routed); err != nil {
			return bad("tenant %q: %v", t.Name, err)
		}
		routed = append(routed, dt)
		if err := t.validateShare(); err != nil {
			return bad("tenant %q: %v", t.Name, err)
		}
		if _, err := t.isolation(); err != nil {
			return bad("tenant %q: %v", t.Name, err)
		}
		if _, err := failClosed(t.Fail); err != nil {
			return bad("tenant %q: %v", t.Name, err)
		}
		if !c.shares() && (t.Workers != 0 || t.Weight != 0 || t.MaxWorkers != 0 || t.Buffers != 0 || t.MaxBuffers != 0) {
			return bad("tenant %q: shares (workers, weight, max_workers, buffers, max_buffers) need policy darc or darc-static, not %s", t.Name, c.Policy)
		}
		if t.TokenFile != "" && t.TokenSHA256 != "" {
			return bad("tenant %q: token_file and token_sha256 are exclusive", t.Name)
		}
		if t.TokenSHA256 != "" {
			if _, err := ParseTokenDigest(t.TokenSHA256); err != nil {
				return bad("tenant %q: %v", t.Name, err)
			}
		}
		if err := t.ClassifierOptions.validate(); err != nil {
			return bad("tenant %q: classifier_options: %v", t.Name, err)
		}
	}
	if c.Admin.TokenFile != "" && c.Admin.TokenSHA256 != "" {
		return bad("admin: token_file and token_sha256 are exclusive")
	}
	if c.Admin.TokenSHA256 != "" {
		if _, err := ParseTokenDigest(c.Admin.TokenSHA256); err != nil {
			return bad("admin: %v", err)
		}
	}
	if c.Admin.ReadTokenFile != "" && c.Admin.ReadTokenSHA256 != "" {
		return bad("admin: read_token_file and read_token_sha256 are exclusive")
	}
	if c.Admin.ReadTokenSHA256 != "" {
		if _, err := ParseTokenDigest(c.Admin.ReadTokenSHA256); err != nil {
			return bad("admin: read token: %v", err)
		}
	}
	if (c.Admin.TLSCert == "") != (c.Admin.TLSKey == "") {
		return bad("admin: tls_cert and tls_key go together")
	}
	if c.Admin.AuditLogMaxBytes < 0 || c.Admin.AuditLogMaxBytes > 1<<40 {
		return bad("admin: audit_log_max_bytes %d: want 0 (default %d) up to 1 TiB", c.Admin.AuditLogMaxBytes, DefaultAuditLogMaxBytes)
	}
	if c.Admin.Addr != "off" {
		if _, err := netip.ParseAddrPort(c.Admin.Addr); err != nil {
			return bad("admin address %q: %v (want IP:PORT or off)", c.Admin.Addr, err)
		}
	}
	if !(c.DeadlineFactor <= MaxFactor) || math.IsInf(c.DeadlineFactor, 0) {
		return bad("deadline_factor %v, want a number up to %g (negative: no automatic deadlines)", c.DeadlineFactor, float64(MaxFactor))
	}
	if err := checkDurations(namedDuration{"deadline_floor", c.DeadlineFloor}, namedDuration{"spin", c.Spin},
		namedDuration{"dispatcher_spin", c.DispatcherSpin}, namedDuration{"in_place", c.InPlace},
		namedDuration{"drain_timeout", c.DrainTimeout}, namedDuration{"app.spin_tail", c.App.SpinTail},
		namedDuration{"app.max_service", c.App.MaxService}, namedDuration{"app.memcached.cost_per_command", c.App.Memcached.CostPerCommand},
		namedDuration{"app.memcached.cost_per_key", c.App.Memcached.CostPerKey}); err != nil {
		return bad("%v", err)
	}
	for name, l := range c.Types {
		if _, err := deadlineNs(l.Deadline); err != nil {
			return bad("types: %s: %v", name, err)
		}
		if l.Budget < 0 || l.Guarantee < 0 {
			return bad("types: %s: budget %d, guarantee %d: want >= 1 (or 0 for the default)", name, l.Budget, l.Guarantee)
		}
	}
	if custom {
		return nil
	}
	if !isBuiltinApp(c.App.Name) {
		return bad("app %q, want one of %s", c.App.Name, strings.Join(AppNames(), ", "))
	}
	return c.validateApp()
}

// validateApp checks the built-in application's settings.
func (c Config) validateApp() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrConfig}, args...)...)
	}
	if !(c.App.Dilation >= 0 && c.App.Dilation <= MaxFactor) {
		return bad("dilation %g, want > 0 and at most %g", c.App.Dilation, float64(MaxFactor))
	}
	if err := spin.Cap(c.App.MaxService).Validate(); err != nil {
		return bad("%v", err)
	}
	if c.App.Name == AppKV && (c.App.KV.Keys < 1 || c.App.KV.ValueSize < 1) {
		return bad("kv keys = %d and value size = %d, want >= 1", c.App.KV.Keys, c.App.KV.ValueSize)
	}
	if c.App.Name == AppKV {
		if err := (kv.Config{Keys: c.App.KV.Keys, ValueSize: c.App.KV.ValueSize}).Validate(); err != nil {
			return bad("%v", err)
		}
	}
	// The policy's own settings, checked as the policy will check them
	// (with one type: the tenants bring theirs).
	pc := c.basePolicyConfig(0)
	pc.NumTypes = 1
	if err := pc.Validate(); err != nil {
		return bad("policy: %v", err)
	}
	if c.App.Name == AppMemcached {
		m := c.App.Memcached
		if err := (memcached.Config{MaxItemSize: m.MaxItemSize, Workers: c.Workers,
			Emulate:       memcached.Emulation{Dilation: c.App.Dilation, CostPerCommand: m.CostPerCommand, CostPerKey: m.CostPerKey},
			UDPReplyRatio: m.UDPReplyRatio, UDPReplyFloor: m.UDPReplyFloor, MaxConns: m.MaxConns, MaxLine: m.MaxLine, IdleTimeout: m.IdleTimeout, TCPMemory: m.TCPMemory,
			StoreMemory: int64(m.StoreMemory),
		}).Validate(); err != nil {
			return bad("%v", err)
		}
		if m.TCP != "" {
			if _, err := netip.ParseAddrPort(m.TCP); err != nil {
				return bad("memcached tcp address %q: %v (want IP:PORT)", m.TCP, err)
			}
		}
		if c.Dataplane != DataplaneDPDK && c.BufSize < memcached.MinBufSize {
			return bad("buf_size = %d is too small for memcached, whose reply datagrams take up to %d bytes", c.BufSize, memcached.MinBufSize)
		}
	}
	if c.App.Name == AppKV && c.Dataplane != DataplaneDPDK && wire.HeaderLen+c.App.KV.ValueSize > c.BufSize {
		// A GET answers the value in the request's buffer: a longer one
		// would be cut short.
		return bad("kv value size = %d does not fit a GET reply in buf_size = %d (header %d bytes): use a value size <= %d or a larger buf_size",
			c.App.KV.ValueSize, c.BufSize, wire.HeaderLen, c.BufSize-wire.HeaderLen)
	}
	return nil
}

// cpuList parses CPUs (already validated).
func (c Config) cpuList() []int {
	if c.CPUs == "" {
		return nil
	}
	cpus, _ := affinity.ParseList(c.CPUs)
	return cpus
}

// dispatcherSpec builds the dispatcher's spec.
func (c Config) dispatcherSpec(typeNames []string, minPayload int) dispatcher.Spec {
	return dispatcher.Spec{
		Workers:        c.Workers,
		CPUs:           c.cpuList(),
		Idle:           c.Idle,
		Spin:           c.Spin,
		DispatcherSpin: c.DispatcherSpin,
		InPlaceLimit:   c.InPlace,
		Burst:          c.Burst,
		MinPayload:     minPayload,
		DrainTimeout:   c.DrainTimeout,
		TypeNames:      typeNames,
	}
}
