package server

import (
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/persephone-go/psp/app"
	"github.com/persephone-go/psp/app/emulate"
	"github.com/persephone-go/psp/app/kv"
	"github.com/persephone-go/psp/app/memcached"
	"github.com/persephone-go/psp/app/redis"
	"github.com/persephone-go/psp/app/spin"
	"github.com/persephone-go/psp/app/tpcc"
	"github.com/persephone-go/psp/nic"
	"github.com/persephone-go/psp/wire"
)

// Application is a service served behind psp: what the workers run and
// what the server must know about it. Give your own in Options.Application;
// the built-in applications (Config.App.Name: emulate, spin, tpcc, kv,
// memcached) are Applications too, built from the configuration.
//
// Requests reach the handler classified (by the Wasm classifier of
// Config.Classifier or Config.Tenants, else by the application's native
// Classifier, else by the psp-header classifier) and scheduled by the
// configured policy (DARC by default).
type Application struct {
	// Name is shown in the status and the startup line (default "custom").
	Name string
	// Handler is what each worker runs for each request (required): it
	// reads the request in the buffer and writes its reply in place. A
	// app.MultiHandler may answer with several datagrams. It is
	// called by all workers at once, each with its own worker index.
	Handler app.Handler
	// Stream is the application's byte-stream protocol: with it the
	// application can be served on a tcp:// listen address (its framer
	// cuts each connection's bytes into requests). Nil: datagrams only.
	Stream nic.Protocol
	// Classifier is the native classifier used when the configuration
	// names no Wasm classifier; nil: the psp-header classifier.
	Classifier app.Classifier
	// TypeNames names Classifier's types, index = type id (required with
	// Classifier; type 0 is UNKNOWN).
	TypeNames []string
	// MinPayload is the shortest request the handler accepts; shorter
	// datagrams are dropped before classification, counted as runts.
	// Default 1.
	MinPayload int
	// Close, when set, is called once the workers have stopped.
	Close func() error
	// Counters, when set, returns the application's own figures, always
	// the same names in the same order: exported in /metrics (psp_ and
	// the name) and in the status (AppCounters).
	Counters func() []AppCounter
}

// AppCounter is one of an application's own figures.
type AppCounter struct {
	// Name is a Prometheus metric name, without psp_.
	Name string `json:"name"`
	Help string `json:"-"`
	// Gauge: the value goes up and down; otherwise it only grows.
	Gauge bool    `json:"gauge,omitempty"`
	Value float64 `json:"value"`
}

// validate checks what New needs.
func (a *Application) validate() error {
	switch {
	case a.Handler == nil:
		return fmt.Errorf("%w: application %q has no handler", ErrConfig, a.Name)
	case a.Classifier != nil && len(a.TypeNames) < 2:
		return fmt.Errorf("%w: application %q: a native classifier needs its type names (at least UNKNOWN and one type)", ErrConfig, a.Name)
	case a.MinPayload < 0:
		return fmt.Errorf("%w: application %q: min payload %d", ErrConfig, a.Name, a.MinPayload)
	}
	return nil
}

// builtinApps builds the built-in applications by name.
var builtinApps = map[string]func(Config) (*Application, error){
	AppSpin:      openSpin,
	AppEmulate:   openEmulate,
	AppTPCC:      openTPCC,
	AppKV:        openKV,
	AppMemcached: openMemcached,
	AppRedis:     openRedis,
}

// AppNames returns the names of the built-in applications.
func AppNames() []string {
	names := make([]string, 0, len(builtinApps))
	for n := range builtinApps {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func isBuiltinApp(name string) bool { return slices.Contains(AppNames(), name) }

// openApp builds the configured built-in application.
func openApp(cfg Config) (*Application, error) {
	open, ok := builtinApps[cfg.App.Name]
	if !ok {
		return nil, fmt.Errorf("%w: unknown app %q", ErrConfig, cfg.App.Name)
	}
	a, err := open(cfg)
	if err != nil {
		return nil, fmt.Errorf("server: app: %w", err)
	}
	return a, nil
}

func openSpin(cfg Config) (*Application, error) {
	return &Application{Name: AppSpin, Handler: spin.Handler{MaxService: spin.Cap(cfg.App.MaxService)}, MinPayload: wire.HeaderLen, Stream: spin.Stream{}}, nil
}

func openEmulate(cfg Config) (*Application, error) {
	h, err := emulate.New(emulate.Config{Dilation: cfg.App.Dilation, SpinTail: cfg.App.SpinTail, MaxService: spin.Cap(cfg.App.MaxService)})
	if err != nil {
		return nil, err
	}
	return &Application{Name: AppEmulate, Handler: h, MinPayload: wire.HeaderLen, Stream: spin.Stream{}}, nil
}

func openTPCC(cfg Config) (*Application, error) {
	h, err := tpcc.New(tpcc.Config{Dilation: cfg.App.Dilation, SpinTail: cfg.App.SpinTail, MaxService: spin.Cap(cfg.App.MaxService)})
	if err != nil {
		return nil, err
	}
	return &Application{Name: AppTPCC, Handler: h, MinPayload: wire.HeaderLen, Stream: spin.Stream{}}, nil
}

func openKV(cfg Config) (*Application, error) {
	s, err := kv.Open(kv.Config{Dir: cfg.App.KV.Dir, MaxOpenFiles: openFiles(cfg).store, Keys: cfg.App.KV.Keys, ValueSize: cfg.App.KV.ValueSize})
	if err != nil {
		return nil, err
	}
	// Stricter than the header classifier: malformed kv requests are
	// UNKNOWN. Same type space.
	return &Application{Name: AppKV, Handler: s, Classifier: kv.Classifier{}, TypeNames: headerTypes(),
		MinPayload: wire.HeaderLen, Close: s.Close, Stream: spin.Stream{}}, nil
}

// memcachedConfig is the memcached application's configuration in cfg.
func memcachedConfig(cfg Config) memcached.Config {
	m := cfg.App.Memcached
	return memcached.Config{
		Dir:              m.Dir,
		MaxOpenFiles:     openFiles(cfg).store,
		Sync:             m.Sync,
		WriteTimeout:     m.WriteTimeout,
		MaxItemSize:      m.MaxItemSize,
		Workers:          cfg.Workers,
		UDPReplyRatio:    m.UDPReplyRatio,
		UDPReplyFloor:    m.UDPReplyFloor,
		MaxConns:         m.MaxConns,
		MaxLine:          m.MaxLine,
		IdleTimeout:      m.IdleTimeout,
		TCPMemory:        m.TCPMemory,
		StoreMemory:      int64(m.StoreMemory),
		ReadCache:        int64(m.ReadCache),
		DisableEvictions: m.DisableEvictions,
		Emulate: memcached.Emulation{Dilation: cfg.App.Dilation, CostPerCommand: m.CostPerCommand,
			CostPerKey: m.CostPerKey, SpinTail: cfg.App.SpinTail},
	}
}

func openMemcached(cfg Config) (*Application, error) {
	s, err := memcached.Open(memcachedConfig(cfg))
	if err != nil {
		return nil, err
	}
	return &Application{Name: AppMemcached, Handler: s, Stream: s.Protocol(), Classifier: memcached.Classifier{},
		TypeNames: memcached.TypeNames(), MinPayload: memcached.UDPHeaderLen + 1, Close: s.Close,
		Counters: appCounters(s.Counters)}, nil
}

// appCounters turns an application package's counters, each of
// AppCounter's shape, into the server's.
func appCounters[C ~struct {
	Name, Help string
	Gauge      bool
	Value      float64
}](counters func() []C) func() []AppCounter {
	return func() []AppCounter {
		cs := counters()
		out := make([]AppCounter, len(cs))
		for i, c := range cs {
			out[i] = AppCounter(c)
		}
		return out
	}
}

func openRedis(cfg Config) (*Application, error) {
	port := 0
	if e, ok := cfg.transport(TransportTCP); ok {
		port = int(e.Addr.Port())
	}
	s, err := redis.Open(redis.Config{Workers: cfg.Workers, MaxMemory: int64(cfg.App.Redis.MaxMemory), Port: port,
		NoBatch: cfg.App.Redis.NoBatch})
	if err != nil {
		return nil, err
	}
	return &Application{Name: AppRedis, Handler: s, Stream: s, Classifier: redis.Classifier{},
		TypeNames: redis.TypeNames(), Close: s.Close,
		Counters: appCounters(s.Counters)}, nil
}

// DefaultMemcachedMaxItemSize is the memcached application's item size
// limit when none is configured (memcached's -I default).
const DefaultMemcachedMaxItemSize = memcached.DefaultMaxItemSize

// Defaults of the memcached application's bounds (see Memcached).
const (
	DefaultMemcachedUDPReplyRatio = memcached.DefaultUDPReplyRatio
	DefaultMemcachedUDPReplyFloor = memcached.DefaultUDPReplyFloor
	DefaultMemcachedMaxConns      = memcached.DefaultMaxConns
	DefaultMemcachedMaxLine       = memcached.DefaultMaxLine
	DefaultMemcachedIdleTimeout   = memcached.DefaultIdleTimeout
	DefaultMemcachedTCPMemory     = memcached.DefaultTCPMemory
	DefaultMemcachedStoreMemory   = memcached.DefaultStoreMemory
	DefaultMemcachedWriteTimeout  = memcached.DefaultWriteTimeout
)

// Memcached configures the memcached application.
type Memcached struct {
	// Dir is the Pebble directory; empty: in memory. What is stored in a
	// directory is there after a restart.
	Dir string `yaml:"dir,omitempty"`
	// Sync syncs each write to disk (with Dir) before answering it, one
	// sync for the writes of all workers waiting at once: an answered
	// write survives a kill -9 and a power loss. Without it, the log is
	// synced every 100 ms while writes come: an answered write survives a
	// graceful stop, and a kill -9 or a power loss loses those answered
	// since the last sync.
	Sync bool `yaml:"sync,omitempty"`
	// WriteTimeout bounds a write's wait for its turn and, with Sync, its
	// sync: past it the write is answered "SERVER_ERROR out of memory
	// storing object", and while a write runs longer, or the disk is full,
	// or the store's files cannot be written, writes are answered so at
	// once (reads go on). Default 1s.
	WriteTimeout time.Duration `yaml:"write_timeout,omitempty"`
	// MaxItemSize is memcached's item size limit (-I). Default 1 MiB.
	MaxItemSize int `yaml:"max_item_size,omitempty"`
	// TCP, when set, is a TCP address where memcached's protocol is served
	// too, its requests scheduled with the UDP ones: the same as adding
	// tcp://TCP to Listen.
	TCP string `yaml:"tcp,omitempty"`
	// CostPerCommand and CostPerKey are the nominal costs slept (times
	// App.Dilation) when App.Dilation is set: emulated service times for
	// experiments with more workers than cores. Defaults 1µs each.
	CostPerCommand time.Duration `yaml:"cost_per_command,omitempty"`
	CostPerKey     time.Duration `yaml:"cost_per_key,omitempty"`

	// UDPReplyRatio and UDPReplyFloor bound the bytes one UDP request may
	// cause to be sent to UDPReplyRatio times its own bytes, or
	// UDPReplyFloor bytes when that is more; a reply cut there ends with
	// "SERVER_ERROR reply too large for UDP". Defaults 100 and 16 KiB; a
	// negative ratio: unbounded, as memcached (an amplifier for
	// reflection attacks).
	UDPReplyRatio int `yaml:"udp_reply_ratio,omitempty"`
	UDPReplyFloor int `yaml:"udp_reply_floor,omitempty"`
	// MaxConns is the most TCP connections served at once. Default 1024
	// (memcached's -c).
	MaxConns int `yaml:"max_conns,omitempty"`
	// MaxLine bounds a TCP get line (other lines: 2048 bytes, as
	// memcached). Default 64 KiB.
	MaxLine int `yaml:"max_line,omitempty"`
	// IdleTimeout closes a TCP connection that completes no command (or
	// takes no reply) within it. Default 5m.
	IdleTimeout time.Duration `yaml:"idle_timeout,omitempty"`
	// TCPMemory bounds the bytes of values being read by all TCP
	// connections at once. Default 64 MiB.
	TCPMemory int `yaml:"tcp_memory,omitempty"`
	// StoreMemory bounds the bytes the store holds (in memory, or on disk
	// with Dir): its items take at most half, past which the least
	// recently used are evicted, as memcached evicts within -m. Default 1
	// GiB, at least 128 MiB; negative: unbounded.
	StoreMemory int `yaml:"store_memory,omitempty"`
	// ReadCache bounds the bytes of values kept in memory beside the
	// store, so that a get of one skips the store's lookup; memory on top
	// of StoreMemory. Default an eighth of StoreMemory; negative: none.
	ReadCache int `yaml:"read_cache,omitempty"`
	// DisableEvictions answers a store past the items' half of
	// StoreMemory "SERVER_ERROR out of memory storing object" instead of
	// evicting, as memcached -M.
	DisableEvictions bool `yaml:"disable_evictions,omitempty"`
}
