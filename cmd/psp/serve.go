package main

import (
	"fmt"
	"math"
	"math/big"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/urfave/cli/v2"

	"github.com/persephone-go/psp/darc"
	"github.com/persephone-go/psp/server"
	"github.com/persephone-go/psp/wasmclass"
)

// serveSetting ties a psp serve flag to its config key (its YAML path) and
// to the config field it sets.
type serveSetting struct {
	flag cli.Flag
	key  string
	set  func(c *cli.Context, name string, cfg *server.Config)
}

func str(dst func(*server.Config) *string) func(*cli.Context, string, *server.Config) {
	return func(c *cli.Context, n string, cfg *server.Config) { *dst(cfg) = c.String(n) }
}

func num(dst func(*server.Config) *int) func(*cli.Context, string, *server.Config) {
	return func(c *cli.Context, n string, cfg *server.Config) { *dst(cfg) = c.Int(n) }
}

// size sets an int setting from a byteSize flag.
func size(dst func(*server.Config) *int) func(*cli.Context, string, *server.Config) {
	return func(c *cli.Context, n string, cfg *server.Config) {
		if v, ok := c.Value(n).(int); ok {
			*dst(cfg) = v
		}
	}
}

// byteSize is a flag's value in bytes: a whole number (134217728) or a
// number with a unit (128MiB, 1.5GiB, 64KB, 2 MB: binary and decimal units,
// as go-humanize parses them) that makes a whole number of bytes ("1.5" is
// refused); a leading minus is kept, for settings where a negative value
// means something (unbounded).
type byteSize int64

// Set implements cli.Generic.
func (b *byteSize) Set(s string) error {
	t := strings.TrimSpace(s)
	neg := strings.HasPrefix(t, "-")
	n, err := humanize.ParseBytes(strings.TrimPrefix(t, "-"))
	if err != nil {
		return fmt.Errorf("%q: want bytes, as a number or with a unit (128MiB, 1GiB, 64KB)", s)
	}
	if n > math.MaxInt64 {
		return fmt.Errorf("%q: too large", s)
	}
	if !wholeBytes(strings.TrimPrefix(t, "-")) {
		return fmt.Errorf("%q: not a whole number of bytes (go-humanize would drop the fraction: %d)", s, n)
	}
	*b = byteSize(n)
	if neg {
		*b = -*b
	}
	return nil
}

// wholeBytes reports whether a size humanize.ParseBytes reads ("1.5",
// "1.5KiB", "2 MB") is a whole number of bytes: ParseBytes truncates, so
// "1.5" would be 1 byte and "1.0001KB" 1000.
func wholeBytes(t string) bool {
	i := strings.IndexFunc(t, func(r rune) bool { return (r < '0' || r > '9') && r != '.' && r != ',' })
	if i < 0 {
		i = len(t)
	}
	num, ok := new(big.Rat).SetString(strings.ReplaceAll(t[:i], ",", ""))
	if !ok {
		return false
	}
	unit, err := humanize.ParseBytes("1" + t[i:])
	if err != nil {
		return false
	}
	return num.Mul(num, new(big.Rat).SetUint64(unit)).IsInt()
}

// String implements cli.Generic.
func (b *byteSize) String() string { return strconv.FormatInt(int64(*b), 10) }

// Get implements flag.Getter: the value as an int.
func (b *byteSize) Get() any { return int(*b) }

func flt(dst func(*server.Config) *float64) func(*cli.Context, string, *server.Config) {
	return func(c *cli.Context, n string, cfg *server.Config) { *dst(cfg) = c.Float64(n) }
}

// serveSettings are psp serve's config flags, in help order.
func serveSettings() []serveSetting {
	return []serveSetting{
		{&cli.StringFlag{Name: "listen", Usage: "`ADDR` requests arrive on: IP:PORT or udp://IP:PORT (datagrams), tcp://IP:PORT (connections, cut into requests by the app's framer), or one of each, comma-separated", DefaultText: server.DefaultListen},
			"listen", str(func(c *server.Config) *string { return &c.Listen })},
		{&cli.IntFlag{Name: "tcp-max-conns", Usage: "most TCP `CONNECTIONS` open at once (fitted under the file descriptor limit); more are refused and counted", DefaultText: fmt.Sprint(server.DefaultTCPMaxConns)},
			"tcp.max_conns", num(func(c *server.Config) *int { return &c.TCP.MaxConns })},
		{&cli.IntFlag{Name: "tcp-max-pipeline", Usage: "most `REQUESTS` of one TCP connection received and not yet answered; past it that connection is not read until its replies catch up", DefaultText: fmt.Sprint(server.DefaultTCPMaxPipeline)},
			"tcp.max_pipeline", num(func(c *server.Config) *int { return &c.TCP.MaxPipeline })},
		{&cli.GenericFlag{Name: "tcp-max-request", Value: new(byteSize), Usage: "longest request over TCP in `BYTES`; the app's framer refuses longer ones in its protocol", DefaultText: fmt.Sprint(server.DefaultTCPMaxRequest)},
			"tcp.max_request", size(func(c *server.Config) *int { return &c.TCP.MaxRequest })},
		{&cli.GenericFlag{Name: "tcp-max-output", Value: new(byteSize), Usage: "most reply `BYTES` held for a TCP client that does not read them; past it the connection is closed and counted", DefaultText: fmt.Sprint(server.DefaultTCPMaxOutput)},
			"tcp.max_output", size(func(c *server.Config) *int { return &c.TCP.MaxOutput })},
		{&cli.GenericFlag{Name: "tcp-memory", Value: new(byteSize), Usage: "`BYTES` held for all TCP connections at once (input not yet framed, long requests, replies not yet taken); past it no connection is read until memory comes back", DefaultText: fmt.Sprint(server.DefaultTCPMemory)},
			"tcp.memory", size(func(c *server.Config) *int { return &c.TCP.Memory })},
		{&cli.DurationFlag{Name: "tcp-idle-timeout", Usage: "close a TCP connection that sends nothing and takes no reply for this long (0: never)", DefaultText: server.DefaultTCPIdleTimeout.String()},
			"tcp.idle_timeout", func(c *cli.Context, n string, cfg *server.Config) { cfg.TCP.IdleTimeout = c.Duration(n) }},
		{&cli.DurationFlag{Name: "tcp-partial-timeout", Usage: "close a TCP connection that holds an incomplete request this long (slowloris; 0: never)", DefaultText: server.DefaultTCPPartialTimeout.String()},
			"tcp.partial_timeout", func(c *cli.Context, n string, cfg *server.Config) { cfg.TCP.PartialTimeout = c.Duration(n) }},
		{&cli.StringFlag{Name: "dataplane", Usage: "`NAME`: udp, dpdk (build with -tags dpdk) or memnic (in memory, no network)", DefaultText: server.DataplaneUDP},
			"dataplane", str(func(c *server.Config) *string { return &c.Dataplane })},
		{&cli.StringFlag{Name: "eal", Usage: "DPDK EAL `ARGS`, space-separated (dpdk dataplane only)"},
			"eal", func(c *cli.Context, n string, cfg *server.Config) { cfg.EAL = strings.Fields(c.String(n)) }},
		{&cli.IntFlag{Name: "buffers", Usage: "packet buffer pool `SIZE`", DefaultText: fmt.Sprintf("%d; %d with --app memcached", server.DefaultBuffers, server.DefaultMemcachedBuffers)},
			"buffers", num(func(c *server.Config) *int { return &c.Buffers })},
		{&cli.GenericFlag{Name: "buf-size", Value: new(byteSize), Usage: "packet buffer size in `BYTES`: the longest datagram accepted", DefaultText: fmt.Sprintf("%d; %d with --app memcached", server.DefaultBufSize, server.DefaultMemcachedBufSize)},
			"buf_size", size(func(c *server.Config) *int { return &c.BufSize })},
		{&cli.StringFlag{Name: "policy", Usage: "scheduling `POLICY`: " + strings.Join(darc.PolicyNames(), ", "), DefaultText: server.DefaultPolicy},
			"policy", str(func(c *server.Config) *string { return &c.Policy })},
		{&cli.IntFlag{Name: "reserved", Usage: "workers darc-static reserves for the shortest type (`N`)", DefaultText: "0"},
			"reserved", num(func(c *server.Config) *int { return &c.Reserved })},
		{&cli.StringFlag{Name: "workers", Usage: "number of application workers `N`, or auto: one per CPU this process may use, at least 2", DefaultText: fmt.Sprintf("auto (%d here)", server.AutoWorkers())},
			"workers", func(c *cli.Context, n string, cfg *server.Config) { cfg.Workers, _ = parseWorkers(c.String(n)) }},
		{&cli.StringFlag{Name: "cpus", Usage: "pin threads to a CPU `LIST` like 0-14: the dispatcher first, then the workers (default: no pinning)"},
			"cpus", str(func(c *server.Config) *string { return &c.CPUs })},
		{&cli.Float64Flag{Name: "delta", Usage: "DARC grouping factor", DefaultText: fmt.Sprint(darc.DefaultDelta)},
			"delta", flt(func(c *server.Config) *float64 { return &c.Delta })},
		{&cli.IntFlag{Name: "spillway", Usage: "spillway workers", DefaultText: fmt.Sprint(darc.DefaultSpillway)},
			"spillway", num(func(c *server.Config) *int { return &c.Spillway })},
		{&cli.IntFlag{Name: "queue-capacity", Usage: "capacity of each typed queue", DefaultText: fmt.Sprint(darc.DefaultQueueCapacity)},
			"queue_capacity", num(func(c *server.Config) *int { return &c.QueueCapacity })},
		{&cli.IntFlag{Name: "min-samples", Usage: "completions DARC profiles before reserving, and per profiling window",
			DefaultText: fmt.Sprintf("%d; %d with --app emulate or memcached with --dilation, %d with --app memcached", darc.DefaultMinSamples, server.DefaultEmulateMinSamples, server.DefaultMemcachedMinSamples)},
			"min_samples", num(func(c *server.Config) *int { return &c.MinSamples })},
		{&cli.IntFlag{Name: "max-window", Usage: "completions after which a profiling window is checked even without a backlog (0: no limit, checks on queuing delay only)",
			DefaultText: fmt.Sprintf("%d x --min-samples", darc.DefaultMaxWindowFactor)},
			"max_window", num(func(c *server.Config) *int { return &c.MaxWindow })},
		{&cli.Float64Flag{Name: "delay-factor", Usage: "queuing delay, in multiples of a type's mean, that triggers a reservation check before the window is full (the paper uses 10)", DefaultText: fmt.Sprint(darc.DefaultDelayFactor)},
			"delay_factor", flt(func(c *server.Config) *float64 { return &c.DelayFactor })},
		{&cli.Float64Flag{Name: "hysteresis", Usage: "a re-reservation keeps a group's worker count while its demand stays within count ± (0.5 + this); 0 or negative: the paper's plain rounding", DefaultText: fmt.Sprint(darc.DefaultHysteresis)},
			"hysteresis", flt(func(c *server.Config) *float64 { return &c.Hysteresis })},
		{&cli.StringFlag{Name: "idle", Usage: "idle `STRATEGY`: spin-then-park (shares cores) or busy-poll (the paper's; one core per thread)", DefaultText: "spin-then-park"},
			"idle", str(func(c *server.Config) *string { return &c.Idle })},
		{&cli.DurationFlag{Name: "spin", Usage: "how long idle workers spin before parking, and the dispatcher before it polls yielding its core (0: at once)", DefaultText: "50µs; 0 for an undilated app whose threads outnumber the CPUs"},
			"spin", func(c *cli.Context, n string, cfg *server.Config) { cfg.Spin = c.Duration(n) }},
		{&cli.DurationFlag{Name: "dispatcher-spin", Usage: "how long the dispatcher keeps polling for requests after its last work before it parks: a request that arrives meanwhile skips a thread wake-up; past --spin, a poll that finds nothing yields the core to any thread that wants it (0: the dispatcher parks after --spin, as the workers do)", DefaultText: server.DefaultDispatcherSpin.String() + "; 0 for an undilated app whose threads outnumber the CPUs"},
			"dispatcher_spin", func(c *cli.Context, n string, cfg *server.Config) { cfg.DispatcherSpin = c.Duration(n) }},
		{&cli.DurationFlag{Name: "in-place", Usage: "the dispatcher serves a request itself, on its worker's behalf, when that worker's thread is parked and the request's type is profiled shorter than this: waking a thread costs more (0: never, every request goes to its worker's thread; psp status shows which were served in place and why the others were not)", DefaultText: server.DefaultInPlace.String() + "; " + server.CrowdedInPlace.String() + " for an undilated app whose threads outnumber the CPUs"},
			"in_place", func(c *cli.Context, n string, cfg *server.Config) { cfg.InPlace = c.Duration(n) }},
		{&cli.IntFlag{Name: "burst", Usage: "receive burst size", DefaultText: "32"},
			"burst", num(func(c *server.Config) *int { return &c.Burst })},
		{&cli.DurationFlag{Name: "drain-timeout", Usage: "bound on the graceful shutdown: the process exits within it (plus a fraction of a second) whatever the handlers do, what is left dropped as shutdown (0: drop queued requests at once)", DefaultText: "5s"},
			"drain_timeout", func(c *cli.Context, n string, cfg *server.Config) { cfg.DrainTimeout = c.Duration(n) }},
		{&cli.Float64Flag{Name: "deadline-factor", Usage: "automatic queue deadlines: a request waiting longer than this x the longest mean service time that can hold up its workers (at least --deadline-floor) is dropped unserved, as expired (0: no automatic deadlines)", DefaultText: fmt.Sprint(darc.DefaultDeadlineFactor)},
			"deadline_factor", flt(func(c *server.Config) *float64 { return &c.DeadlineFactor })},
		{&cli.DurationFlag{Name: "deadline-floor", Usage: "least automatic queue deadline (0: none)", DefaultText: time.Duration(darc.DefaultDeadlineFloor).String()},
			"deadline_floor", func(c *cli.Context, n string, cfg *server.Config) { cfg.DeadlineFloor = c.Duration(n) }},
		{&cli.StringFlag{Name: "classifier", Usage: "Wasm classifier for every port: a `FILE`, or oci://HOST/REPO[:TAG][@sha256:...] pulled at start (default: the native psp-header classifier)"},
			"classifier", func(c *cli.Context, n string, cfg *server.Config) { cfg.Classifier, cfg.Tenants = c.String(n), nil }},
		{&cli.StringFlag{Name: "fail", Usage: "failure `POLICY` of --classifier (Istio's failStrategy): open (a request it faults on is classified UNKNOWN), closed (dropped as classifier_fault, answered overloaded where the app can) or reload (dropped, and the next call runs on a fresh instance: shut out only when it crash-loops); also what its requests get while an oci:// module cannot be fetched at start", DefaultText: "open"},
			"fail", str(func(c *server.Config) *string { return &c.Fail })},
		{&cli.StringFlag{Name: "oci-cache", Usage: "`DIR` keeping classifiers pulled from registries by digest, so a restart with the registry down starts from it; off: none", DefaultText: "psp/oci in the user's cache directory"},
			"oci.cache_dir", str(func(c *server.Config) *string { return &c.OCI.CacheDir })},
		{&cli.BoolFlag{Name: "oci-plain-http", Usage: "pull over plain HTTP from registries off loopback too (those on loopback always are)"},
			"oci.plain_http", func(c *cli.Context, n string, cfg *server.Config) { cfg.OCI.PlainHTTP = c.Bool(n) }},
		{&cli.StringFlag{Name: "oci-docker-config", Usage: "Docker config `FILE` with the registries' credentials (its auths and the credential helpers it names)", DefaultText: "$DOCKER_CONFIG/config.json, else ~/.docker/config.json"},
			"oci.docker_config", str(func(c *server.Config) *string { return &c.OCI.DockerConfig })},
		{&cli.DurationFlag{Name: "oci-start-timeout", Usage: "how long the pulls of oci:// classifiers at start may take, all together; a tenant whose module has not arrived by then starts pending, its pull retried in the background", DefaultText: "10s"},
			"oci.start_timeout", func(c *cli.Context, n string, cfg *server.Config) { cfg.OCI.StartTimeout = c.Duration(n) }},
		{&cli.StringFlag{Name: "app", Usage: "application `NAME`: emulate, spin, tpcc, kv, memcached (memcached's protocol over UDP and TCP) or redis (Redis's protocol over TCP, listening on " + server.DefaultRedisListen + " by default)", DefaultText: server.DefaultApp},
			"app.name", str(func(c *server.Config) *string { return &c.App.Name })},
		{&cli.Float64Flag{Name: "dilation", Usage: "time dilation `FACTOR` of emulate (1000: 1µs becomes 1ms), of tpcc (sleeps when set; 0 spins) and of memcached's emulated costs (1µs per command and per key, slept when set)", DefaultText: fmt.Sprintf("%d for emulate, 0 for tpcc and memcached", server.DefaultEmulateDilation)},
			"app.dilation", flt(func(c *server.Config) *float64 { return &c.App.Dilation })},
		{&cli.DurationFlag{Name: "spin-tail", Usage: "end of each emulated service time spent spinning, on top of the learned timer overshoot (0: none)", DefaultText: "50µs"},
			"app.spin_tail", func(c *cli.Context, n string, cfg *server.Config) { cfg.App.SpinTail = c.Duration(n) }},
		{&cli.DurationFlag{Name: "max-service", Usage: "spin, emulate, tpcc: the longest (nominal, undilated) service time a request may ask for; longer ones are refused and counted (service_cap)", DefaultText: server.DefaultMaxService.String()},
			"app.max_service", func(c *cli.Context, n string, cfg *server.Config) { cfg.App.MaxService = c.Duration(n) }},
		{&cli.StringFlag{Name: "kv-dir", Usage: "Pebble `DIR` for the kv app (default: in memory)"},
			"app.kv.dir", str(func(c *server.Config) *string { return &c.App.KV.Dir })},
		{&cli.IntFlag{Name: "kv-keys", Usage: "keys preloaded by the kv app", DefaultText: "5000"},
			"app.kv.keys", num(func(c *server.Config) *int { return &c.App.KV.Keys })},
		{&cli.StringFlag{Name: "memcached-dir", Usage: "Pebble `DIR` for the memcached app: what is set there survives a restart (default: in memory)"},
			"app.memcached.dir", str(func(c *server.Config) *string { return &c.App.Memcached.Dir })},
		{&cli.StringFlag{Name: "memcached-tcp", Usage: "also serve memcached's protocol over TCP on `ADDR`, scheduled with the UDP requests (the same as adding tcp://ADDR to --listen)"},
			"app.memcached.tcp", str(func(c *server.Config) *string { return &c.App.Memcached.TCP })},
		{&cli.GenericFlag{Name: "memcached-max-item-size", Value: new(byteSize), Usage: "memcached's item size limit (-I) in `BYTES`: at most half of --memcached-store-memory, as memcached refuses -I above half of -m", DefaultText: fmt.Sprint(server.DefaultMemcachedMaxItemSize)},
			"app.memcached.max_item_size", size(func(c *server.Config) *int { return &c.App.Memcached.MaxItemSize })},
		{&cli.IntFlag{Name: "memcached-udp-reply-ratio", Usage: "bound on the bytes one UDP request may cause to be sent, in `TIMES` its own bytes (or --memcached-udp-reply-floor); a reply cut there ends with SERVER_ERROR reply too large for UDP (negative: unbounded, as memcached, an amplifier for reflection attacks)", DefaultText: fmt.Sprint(server.DefaultMemcachedUDPReplyRatio)},
			"app.memcached.udp_reply_ratio", num(func(c *server.Config) *int { return &c.App.Memcached.UDPReplyRatio })},
		{&cli.GenericFlag{Name: "memcached-udp-reply-floor", Value: new(byteSize), Usage: "the bytes any UDP request may cause to be sent, in `BYTES`, whatever its size (see --memcached-udp-reply-ratio)", DefaultText: fmt.Sprint(server.DefaultMemcachedUDPReplyFloor)},
			"app.memcached.udp_reply_floor", size(func(c *server.Config) *int { return &c.App.Memcached.UDPReplyFloor })},
		{&cli.IntFlag{Name: "memcached-max-conns", Usage: "most TCP `CONNECTIONS` served at once (memcached's -c; --tcp-max-conns wins)", DefaultText: fmt.Sprint(server.DefaultMemcachedMaxConns)},
			"app.memcached.max_conns", num(func(c *server.Config) *int { return &c.App.Memcached.MaxConns })},
		{&cli.GenericFlag{Name: "memcached-max-line", Value: new(byteSize), Usage: "longest TCP get line in `BYTES` (other lines: 2048, as memcached)", DefaultText: fmt.Sprint(server.DefaultMemcachedMaxLine)},
			"app.memcached.max_line", size(func(c *server.Config) *int { return &c.App.Memcached.MaxLine })},
		{&cli.DurationFlag{Name: "memcached-idle-timeout", Usage: "close a TCP connection that sends nothing and takes no reply within this time (--tcp-idle-timeout wins)", DefaultText: server.DefaultMemcachedIdleTimeout.String()},
			"app.memcached.idle_timeout", func(c *cli.Context, n string, cfg *server.Config) { cfg.App.Memcached.IdleTimeout = c.Duration(n) }},
		{&cli.GenericFlag{Name: "memcached-tcp-memory", Value: new(byteSize), Usage: "`BYTES` of values all TCP connections may be reading at once; past it a set is answered SERVER_ERROR out of memory storing object", DefaultText: fmt.Sprint(server.DefaultMemcachedTCPMemory)},
			"app.memcached.tcp_memory", size(func(c *server.Config) *int { return &c.App.Memcached.TCPMemory })},
		{&cli.GenericFlag{Name: "memcached-store-memory", Value: new(byteSize), Usage: "`BYTES` the store may hold (in memory, or on disk with --memcached-dir; at least 128 MiB): its items take at most half, past which the least recently used are evicted, as memcached evicts within -m; negative: unbounded", DefaultText: fmt.Sprint(server.DefaultMemcachedStoreMemory)},
			"app.memcached.store_memory", size(func(c *server.Config) *int { return &c.App.Memcached.StoreMemory })},
		{&cli.GenericFlag{Name: "memcached-read-cache", Value: new(byteSize), Usage: "`BYTES` of values kept in memory beside the store, on top of --memcached-store-memory, so that a get of one skips the store's lookup (0 or negative: none)", DefaultText: "an eighth of --memcached-store-memory"},
			"app.memcached.read_cache", size(func(c *server.Config) *int { return &c.App.Memcached.ReadCache })},
		{&cli.BoolFlag{Name: "memcached-disable-evictions", Usage: "answer a store past the items' half of --memcached-store-memory SERVER_ERROR out of memory storing object instead of evicting the least recently used items (memcached's -M)"},
			"app.memcached.disable_evictions", func(c *cli.Context, n string, cfg *server.Config) { cfg.App.Memcached.DisableEvictions = c.Bool(n) }},
		{&cli.BoolFlag{Name: "memcached-sync", Usage: "with --memcached-dir: sync each write to disk before answering it (one sync for the writes of all workers waiting at once), so an answered write survives a kill -9 and a power loss; without it the log is synced every 100 ms while writes come, and a kill -9 or a power loss loses the writes answered since"},
			"app.memcached.sync", func(c *cli.Context, n string, cfg *server.Config) { cfg.App.Memcached.Sync = c.Bool(n) }},
		{&cli.DurationFlag{Name: "memcached-write-timeout", Usage: "with --memcached-dir: answer a write SERVER_ERROR out of memory storing object once it has waited this long for its turn or its sync; while a write runs longer, the disk is full or the store's files cannot be written, writes are answered so at once and reads go on", DefaultText: server.DefaultMemcachedWriteTimeout.String()},
			"app.memcached.write_timeout", func(c *cli.Context, n string, cfg *server.Config) { cfg.App.Memcached.WriteTimeout = c.Duration(n) }},
		{&cli.GenericFlag{Name: "redis-maxmemory", Value: new(byteSize), Usage: "`BYTES` the redis app's dataset may hold (Redis's maxmemory, noeviction: past it, commands that may grow the dataset are refused with Redis's OOM error); 0: no bound", DefaultText: "0"},
			"app.redis.max_memory", size(func(c *server.Config) *int { return &c.App.Redis.MaxMemory })},
		{&cli.BoolFlag{Name: "redis-no-batch", Usage: "schedule every command of the redis app as a request of its own: by default a pipelined run of one short command (16 at most) is one request, typed by its first command, which a classifier typing commands by their keys or values should not get"},
			"app.redis.no_batch", func(c *cli.Context, n string, cfg *server.Config) { cfg.App.Redis.NoBatch = c.Bool(n) }},
		{&cli.StringFlag{Name: "admin", Usage: "admin HTTP `ADDR` for /status, /metrics and hot swaps, or off", DefaultText: server.DefaultAdmin},
			"admin.addr", str(func(c *server.Config) *string { return &c.Admin.Addr })},
		{&cli.StringFlag{Name: "token-file", Usage: "`FILE` holding the operator's bearer token (mode 600): hot swaps, rollbacks and tenant changes over the admin API"},
			"admin.token_file", str(func(c *server.Config) *string { return &c.Admin.TokenFile })},
		{&cli.StringFlag{Name: "token-sha256", Usage: "the operator's token as its SHA-256 (64 hex digits; psp tenant token prints it), instead of --token-file"},
			"admin.token_sha256", str(func(c *server.Config) *string { return &c.Admin.TokenSHA256 })},
		{&cli.StringFlag{Name: "audit-log", Usage: "`FILE` the audit log is appended to: one JSON line per classifier swap, rollback and tenant change; refusals go to FILE.refused, refused credentials counted per source every 10 s (default: standard error)"},
			"admin.audit_log", str(func(c *server.Config) *string { return &c.Admin.AuditLog })},
		{&cli.BoolFlag{Name: "multi-tenant", Usage: "start with no tenant at all, not even the default one of --classifier (add them with psp tenant add; policy darc or darc-static)"},
			"multi_tenant", func(c *cli.Context, n string, cfg *server.Config) { cfg.MultiTenant = c.Bool(n) }},
	}
}

// serveCommand is `psp serve`: run the live server.
func serveCommand() *cli.Command {
	flags := []cli.Flag{
		&cli.StringFlag{Name: "config", Usage: "YAML config `FILE` (see examples/serve.yaml)"},
		&cli.BoolFlag{Name: "print-config", Usage: "print the effective config as YAML and exit"},
	}
	for _, s := range serveSettings() {
		flags = append(flags, s.flag)
	}
	flags = append(flags,
		&cli.StringSliceFlag{Name: "deadline", Usage: "per-type queue deadline `NAME=DURATION` (or NAME=off), repeatable: overrides the automatic one (config: types.NAME.deadline)"},
		&cli.StringSliceFlag{Name: "budget", Usage: "per-type budget `NAME=N`, repeatable: the most requests of the type held at once, queued or running (config: types.NAME.budget)"},
		&cli.StringSliceFlag{Name: "guarantee", Usage: "per-type guarantee `NAME=N`, repeatable: requests of the type always admitted, whatever the others hold (config: types.NAME.guarantee)"},
	)
	return &cli.Command{
		Name:  "serve",
		Usage: "run the request dispatcher: receive requests over UDP, classify, schedule with DARC, answer",
		Description: "psp serve runs the live server: a net worker and dispatcher loop feeding\n" +
			"application workers. Settings come from --config FILE (YAML; unknown keys are\n" +
			"errors) and are overridden by flags. A zero, in the file or a flag, is used where\n" +
			"it means something (--spin 0: park at once) and refused elsewhere (--workers 0).\n" +
			"A flag in BYTES takes a number or a size with a unit (128MiB, 1GiB, 64KB); the\n" +
			"file's keys take numbers.\n" +
			"SIGINT/SIGTERM stop it gracefully: queued requests are answered for at most\n" +
			"--drain-timeout, then the process exits; a second signal quits at once.\n" +
			"--print-config shows the effective config.\n\n" +
			"Overload: each request type has a budget of the dataplane's buffers (a guaranteed\n" +
			"part plus what it borrows from a shared part) and a queue deadline; requests over\n" +
			"the budget or past the deadline are dropped and counted by reason (psp status,\n" +
			"/metrics), answered \"overloaded\" where the protocol allows (kv).\n\n" +
			"Example (emulated High Bimodal server on loopback, DARC after 500 samples):\n" +
			"  psp serve --app emulate --dilation 1000 --policy darc --workers 14 --min-samples 500",
		Flags:  flags,
		Action: runServe,
	}
}

// serveConfig loads --config and applies the flags that were set.
func serveConfig(c *cli.Context) (server.Config, error) {
	var cfg server.Config
	if path := c.String("config"); path != "" {
		var err error
		if cfg, err = server.LoadConfig(path); err != nil {
			return cfg, err
		}
	} else if c.IsSet("config") {
		return cfg, fmt.Errorf("--config: empty file name")
	}
	if c.IsSet("workers") {
		if _, err := parseWorkers(c.String("workers")); err != nil {
			return cfg, err
		}
	}
	var zeros []string
	for _, s := range serveSettings() {
		name := s.flag.Names()[0]
		if !c.IsSet(name) {
			continue
		}
		s.set(c, name, &cfg)
		if isZero(c.Value(name)) {
			zeros = append(zeros, s.key)
		}
	}
	// After every flag: whether a zero means something may depend on
	// another setting (a zero dilation: tpcc spins, emulate cannot).
	for _, key := range zeros {
		if err := cfg.ExplicitZero(key); err != nil {
			return cfg, fmt.Errorf("%w (flag --%s)", err, flagOfKey(key))
		}
	}
	if err := typeLimitFlags(c, &cfg); err != nil {
		return cfg, err
	}
	return cfg, cfg.Validate()
}

// parseWorkers parses --workers: a count, or auto (0: the server's
// automatic default).
func parseWorkers(v string) (int, error) {
	if strings.TrimSpace(v) == "auto" {
		return 0, nil
	}
	n, err := strconv.Atoi(strings.TrimSpace(v))
	switch {
	case err != nil:
		return 0, fmt.Errorf("--workers %q: want a count or auto", v)
	case n == 0:
		return 0, fmt.Errorf("--workers 0: zero is not a value (want a count >= 1, or auto)")
	case n < 0:
		return 0, fmt.Errorf("--workers %d: want a count >= 1, or auto", n)
	}
	return n, nil
}

// typeLimitFlags merges --deadline, --budget and --guarantee NAME=VALUE
// into cfg.Types.
func typeLimitFlags(c *cli.Context, cfg *server.Config) error {
	for _, flag := range []string{"deadline", "budget", "guarantee"} {
		for _, kv := range c.StringSlice(flag) {
			name, value, ok := strings.Cut(kv, "=")
			name, value = strings.TrimSpace(name), strings.TrimSpace(value)
			if !ok || name == "" || value == "" {
				return fmt.Errorf("--%s %q: want NAME=VALUE, e.g. --%s LONG=%s", flag, kv, flag, map[string]string{"deadline": "500ms", "budget": "2000", "guarantee": "500"}[flag])
			}
			if cfg.Types == nil {
				cfg.Types = map[string]server.TypeLimits{}
			}
			l := cfg.Types[name]
			if flag == "deadline" {
				l.Deadline = value
			} else {
				n, err := strconv.Atoi(value)
				if err != nil || n < 1 {
					return fmt.Errorf("--%s %q: want a count >= 1", flag, kv)
				}
				if flag == "budget" {
					l.Budget = n
				} else {
					l.Guarantee = n
				}
			}
			cfg.Types[name] = l
		}
	}
	return nil
}

// flagOfKey returns the psp serve flag of a config key.
func flagOfKey(key string) string {
	for _, s := range serveSettings() {
		if s.key == key {
			return s.flag.Names()[0]
		}
	}
	return key
}

func isZero(v any) bool {
	switch v := v.(type) {
	case int:
		return v == 0
	case uint:
		return v == 0
	case uint64:
		return v == 0
	case float64:
		return v == 0
	case string:
		return v == ""
	case interface{ Nanoseconds() int64 }:
		return v.Nanoseconds() == 0
	}
	return false
}

func runServe(c *cli.Context) error {
	if c.NArg() > 0 {
		return fmt.Errorf("serve: unexpected argument %q (settings are flags or --config FILE)", c.Args().First())
	}
	cfg, err := serveConfig(c)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	if c.Bool("print-config") {
		out, err := cfg.YAML()
		if err != nil {
			return err
		}
		_, err = c.App.Writer.Write(out)
		return err
	}
	ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		// The first signal starts the graceful shutdown; restore the
		// default action so that a second one ends the process at once
		// instead of being swallowed while the drain runs.
		<-ctx.Done()
		stop()
	}()
	srv, err := server.New(ctx, cfg, server.Options{Log: c.App.ErrWriter, Classifiers: wasmclass.Options{CompileInChild: true}})
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	return srv.Run(ctx)
}
