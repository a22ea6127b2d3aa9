// Defaults and validation of a Config.

package server

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/dustin/go-humanize"

	"github.com/persephone-go/psp/app/emulate"
	"github.com/persephone-go/psp/app/kv"
	"github.com/persephone-go/psp/app/memcached"
	"github.com/persephone-go/psp/app/spin"
	"github.com/persephone-go/psp/darc"
	"github.com/persephone-go/psp/dispatcher"
	"github.com/persephone-go/psp/internal/affinity"
	"github.com/persephone-go/psp/wasmclass"
	"github.com/persephone-go/psp/wire"
)

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
	// CrowdedInPlace is Config.InPlace's default where threads outnumber
	// the CPUs (see withDefaults): a worker woken there waits for a core
	// as well, so waking it costs more than a longer request.
	CrowdedInPlace = 3 * DefaultInPlace
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
	defaultListen := DefaultListen
	if c.App.Name == AppRedis {
		defaultListen = DefaultRedisListen
	}
	c.Listen = cmp.Or(c.Listen, defaultListen)
	c.Dataplane = cmp.Or(c.Dataplane, DataplaneUDP)
	c.App.Name = cmp.Or(c.App.Name, DefaultApp)
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
	c.Policy = cmp.Or(c.Policy, DefaultPolicy)
	if c.Workers == 0 { // a system call: only when needed
		c.Workers = AutoWorkers()
	}
	c.Idle = cmp.Or(c.Idle, dispatcher.IdleSpinThenPark)
	// Threads outnumber cores: a spinning or polling thread takes a core
	// from the one it waits for (the client's, on a small machine; the
	// worker's), so idle threads park at once, and a parked worker woken
	// for a request may wait for a core too, so the dispatcher serves
	// longer requests in place. Emulated servers keep spinning: their
	// figures were calibrated with it, and their workers sleep most of
	// the time anyway.
	crowded := c.App.Name != AppEmulate && c.App.Dilation == 0 && c.Workers+1 > AutoWorkers()
	if c.Spin == 0 {
		c.Spin = dispatcher.DefaultSpin
		if crowded {
			c.Spin = -1
		}
	}
	if c.DispatcherSpin == 0 {
		c.DispatcherSpin = DefaultDispatcherSpin
		if crowded {
			c.DispatcherSpin = -1
		}
	}
	if c.InPlace == 0 {
		c.InPlace = DefaultInPlace
		if crowded {
			c.InPlace = CrowdedInPlace
		}
	}
	c.Burst = cmp.Or(c.Burst, dispatcher.DefaultBurst)
	c.DrainTimeout = cmp.Or(c.DrainTimeout, dispatcher.DefaultDrainTimeout)
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
	if (c.App.Name == AppMemcached || c.App.Name == AppRedis) && c.MinSamples == 0 {
		c.MinSamples = DefaultMemcachedMinSamples
	}
	if c.App.Name == AppKV {
		c.App.KV.Keys = cmp.Or(c.App.KV.Keys, 5000)
		c.App.KV.ValueSize = cmp.Or(c.App.KV.ValueSize, 64)
	}
	c.Admin.Addr = cmp.Or(c.Admin.Addr, DefaultAdmin)
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
	eps, err := ParseListen(c.Listen)
	if err != nil {
		return bad("%v", err)
	}
	if err := c.validateTCP(eps, custom); err != nil {
		return err
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
	if _, err := failPolicy(c.Fail); err != nil {
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
	var routed []dispatcher.TenantSpec
	for i, t := range c.Tenants {
		if err := validTenantName(t.Name); err != nil {
			return bad("tenant %d: %v", i, err)
		}
		if seen[t.Name] {
			return bad("tenant %q listed twice", t.Name)
		}
		seen[t.Name] = true
		dt := dispatcher.TenantSpec{Name: t.Name, Ports: t.Ports}
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
		if _, err := failPolicy(t.Fail); err != nil {
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
		namedDuration{"app.memcached.cost_per_key", c.App.Memcached.CostPerKey}, namedDuration{"oci.start_timeout", c.OCI.StartTimeout}); err != nil {
		return bad("%v", err)
	}
	if c.OCI.StartTimeout < 0 {
		return bad("oci: start_timeout %v: want > 0 (or 0 for the default, %v)", c.OCI.StartTimeout, startPullTimeout)
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
	if c.App.Name == AppRedis && c.App.Redis.MaxMemory < 0 {
		return bad("redis max_memory %d: negative (0: no bound)", c.App.Redis.MaxMemory)
	}
	if c.App.Name == AppMemcached {
		m := c.App.Memcached
		if err := memcachedConfig(c).Validate(); err != nil {
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

// failPolicy parses a failure policy ("": open).
func failPolicy(s string) (wasmclass.FailPolicy, error) {
	switch s {
	case "", "open":
		return wasmclass.FailOpen, nil
	case "closed":
		return wasmclass.FailClosed, nil
	case "reload":
		return wasmclass.FailReload, nil
	}
	return 0, fmt.Errorf("fail %q: want open, closed or reload", s)
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
// them overflows (the policy checks them again against the
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

// validateTCP checks the transports against the dataplane and the TCP
// bounds.
func (c Config) validateTCP(eps []Endpoint, custom bool) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrConfig}, args...)...)
	}
	tcp := false
	for _, e := range eps {
		tcp = tcp || e.Transport == TransportTCP
		if e.Transport == TransportUDP && c.App.Name == AppRedis && !custom {
			return bad("the redis app speaks Redis's protocol over TCP only: listen on tcp://IP:PORT (default %s), not %s", DefaultRedisListen, e)
		}
	}
	if m := c.App.Memcached; c.App.Name == AppMemcached && m.TCP != "" {
		if tcp {
			return bad("memcached tcp %q and a tcp:// listen address: give one (app.memcached.tcp is the same as adding tcp://ADDR to listen)", m.TCP)
		}
		if _, err := netip.ParseAddrPort(m.TCP); err != nil {
			return bad("memcached tcp address %q: %v (want IP:PORT)", m.TCP, err)
		}
		tcp = true
	}
	if !tcp {
		return nil
	}
	switch c.Dataplane {
	case DataplaneDPDK:
		return bad("the dpdk dataplane serves UDP only (psp runs no user-space TCP stack): listen on udp://, or use the default dataplane for tcp://")
	case DataplaneMemory:
		return bad("the memnic dataplane carries datagrams only: listen on udp:// with it")
	}
	if !custom && !slices.Contains([]string{AppSpin, AppEmulate, AppTPCC, AppKV, AppMemcached, AppRedis}, c.App.Name) {
		return bad("app %q has no framer for TCP", c.App.Name)
	}
	t := c.TCP
	switch {
	case t.MaxConns < 0, t.MaxRequest < 0, t.MaxOutput < 0, t.Memory < 0:
		return bad("tcp: a negative bound (max_conns %d, max_request %d, max_output %d, memory %d)", t.MaxConns, t.MaxRequest, t.MaxOutput, t.Memory)
	case t.MaxPipeline < 0 || t.MaxPipeline > 1<<16:
		return bad("tcp: max_pipeline %d, want 1..65536", t.MaxPipeline)
	}
	if err := checkDurations(namedDuration{"tcp.idle_timeout", t.IdleTimeout}, namedDuration{"tcp.partial_timeout", t.PartialTimeout}); err != nil {
		return err
	}
	return nil
}
