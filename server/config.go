package server

import (
	"errors"
	"time"
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
	AppRedis     = "redis"
)

// Defaults of Config.
const (
	DefaultListen = "127.0.0.1:6789"
	// DefaultRedisListen is the redis application's listen address:
	// Redis's port, over TCP.
	DefaultRedisListen = "tcp://127.0.0.1:6379"
	DefaultAdmin       = "127.0.0.1:9090"
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
	// Listen is the address requests arrive on: IP:PORT or udp://IP:PORT
	// for UDP datagrams, tcp://IP:PORT for TCP connections (the
	// application's framer cuts their streams into requests), or one of
	// each, separated by a comma. Default 127.0.0.1:6789 (UDP).
	Listen string `yaml:"listen"`
	// TCP bounds the TCP connections of a tcp:// listen address.
	TCP TCP `yaml:"tcp,omitempty"`
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
	// yields the core to any other thread that wants it. Default 20ms,
	// except where Spin's default parks at once (threads outnumber the
	// CPUs), where the dispatcher parks at once too; negative: the
	// dispatcher parks after Spin, as the workers do.
	DispatcherSpin time.Duration `yaml:"dispatcher_spin,omitempty"`
	// InPlace is the longest expected service time of a request the
	// dispatcher serves itself, on the chosen worker's behalf, when that
	// worker's thread is parked (waking it costs more than such a request;
	// see dispatcher.Spec.InPlaceLimit). Default 20µs, 60µs where Spin's
	// default parks at once (threads outnumber the CPUs: a woken worker
	// waits for a core as well); 0 given explicitly:
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
	// StateFile is where the server records the module each tenant whose
	// classifier is a registry reference runs, and resumes it from after a
	// restart (see state.go). Default: state/LISTEN.json in the OCI cache
	// directory, for a server with a cache and a listen port of its own;
	// "off": none.
	StateFile string `yaml:"state_file,omitempty"`
	// classifierWasm is Classifier pulled from a registry, and
	// classifierMaxTypes the type range of its tenant while it is pending.
	classifierWasm     []byte
	classifierMaxTypes int
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
	// Fail is the tenant's failure policy, Istio's failStrategy: what
	// becomes of a request its Wasm classifier fails on (a trap, fuel, a
	// bad answer, its breaker open), and of its requests while a module
	// named by registry reference cannot be fetched at start.
	//   - "open" (the default): classified UNKNOWN, served at the lowest
	//     priority; a module that keeps faulting is shut out by its breaker
	//     (reopened on a backoff that doubles with each failed probe).
	//   - "closed": dropped, counted as classifier_fault, with an
	//     "overloaded" reply where the application has one; the breaker as
	//     with open.
	//   - "reload": dropped as with closed, and the next call runs on a
	//     fresh instance: the module is shut out only when it crash-loops
	//     (a fresh instance faults before answering), for a backoff of a
	//     second doubling up to ten (Envoy's FAIL_RELOAD).
	// A module that cannot be fetched at start (registry and cache both
	// failing) leaves the tenant pending: open classifies its requests
	// UNKNOWN, closed and reload drop them, until a pull retried in the
	// background succeeds; /readyz answers 503 meanwhile. A swap never
	// replaces the running module with one it could not load.
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
	// StartTimeout bounds the pulls at start, all of them together: a
	// tenant whose module has not arrived by then starts pending (its
	// pull retried in the background). Default 10s.
	StartTimeout time.Duration `yaml:"start_timeout,omitempty"`
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

// App selects and configures the built-in application (a program serving
// its own gives Options.Application instead).
type App struct {
	// Name is spin, emulate (default), kv, tpcc, memcached or redis.
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
	// Redis configures the redis application.
	Redis Redis `yaml:"redis,omitempty"`
}

// Redis configures the redis application (Redis's protocol over TCP).
type Redis struct {
	// MaxMemory bounds the dataset's estimated size in bytes (Redis's
	// maxmemory, with its noeviction policy: past it, commands that may
	// grow the dataset are refused); 0: no bound.
	MaxMemory int `yaml:"max_memory,omitempty"`
	// NoBatch schedules every command as a request of its own. By
	// default a pipelined run of one short command read together is one
	// request, typed by its first command (see docs/redis.md): a
	// classifier that types commands by their keys or values sees only
	// the first of a run.
	NoBatch bool `yaml:"no_batch,omitempty"`
}

// TCP bounds the TCP dataplane's connections; zero fields take the
// defaults of package nic/tcp (the memcached application's max_conns and
// idle_timeout stand for max_conns and idle_timeout when these are not
// set).
type TCP struct {
	// MaxConns is the most connections open at once (memcached's -c);
	// more are refused and counted. Lowered to fit the file descriptor
	// limit. Default 1024.
	MaxConns int `yaml:"max_conns,omitempty"`
	// MaxPipeline is the most requests of one connection received and
	// not yet answered; past it the connection is not read until its
	// replies catch up. Default 256.
	MaxPipeline int `yaml:"max_pipeline,omitempty"`
	// MaxRequest is the longest request accepted, in bytes. Default 4
	// MiB (memcached: at least its item size limit and its longest line).
	MaxRequest int `yaml:"max_request,omitempty"`
	// MaxOutput is the most reply bytes held for a connection that does
	// not read them; past it the connection is closed. Default 64 MiB.
	MaxOutput int `yaml:"max_output,omitempty"`
	// Memory bounds the bytes held for all connections (input not yet
	// framed, long requests, replies not yet taken); past it no
	// connection is read until memory comes back. Default 512 MiB.
	Memory int `yaml:"memory,omitempty"`
	// IdleTimeout closes a connection that sends no byte and takes no
	// reply for this long. Default 5m; negative: never.
	IdleTimeout time.Duration `yaml:"idle_timeout,omitempty"`
	// PartialTimeout closes a connection holding an incomplete request
	// for this long (slowloris). Default 30s; negative: never.
	PartialTimeout time.Duration `yaml:"partial_timeout,omitempty"`
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
	// AuditLog is the file the audit log's changes are appended to: one
	// JSON line per classifier swapped or rolled back and per tenant
	// added, changed or removed. What is refused goes to AuditLog.refused:
	// a refused credential once per source and kind every 10 s (the others
	// counted), any other refusal one line each, so that refusals never
	// push a change out. Default: both to the server's log (standard
	// error).
	AuditLog string `yaml:"audit_log,omitempty"`
	// AuditLogMaxBytes bounds each audit log file: past it the file is
	// renamed with .1 appended (replacing the last one) and a new one
	// started, so each takes at most twice this much disk. Default 64 MiB.
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
