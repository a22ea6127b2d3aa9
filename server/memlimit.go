package server

import (
	"cmp"
	"fmt"
	"math"
	"os"
	"runtime/debug"
	"sync"

	"github.com/dustin/go-humanize"

	"github.com/persephone-go/psp/app/memcached"
	"github.com/persephone-go/psp/nic/tcp"
)

// memoryLimitMargin is what the soft memory limit allows the Go heap
// beyond the parts memoryLimit counts: the dispatcher, the runtime,
// Pebble's own structures, replies being built, and room for garbage
// between two collections.
const memoryLimitMargin = 64 << 20

// memoryLimit returns the soft limit of the Go runtime's memory
// (runtime/debug.SetMemoryLimit) that serve sets for cfg, with defaults
// applied, and false when it sets none. Without one the Go heap grows to
// twice what it held after the last collection (GOGC=100) before the next,
// so a memcached server's store bound did not bound its resident memory
// under a flood of sets (RATIONALE.md). What the heap may
// hold is known only there: the store's tables in memory and read cache
// (memcached.Config.HeapBound), the packet pool of the udp and memnic
// dataplanes (allocated whole in the heap; DPDK's is not), the values TCP
// connections are reading when the store serves TCP, and
// memoryLimitMargin.
func memoryLimit(cfg Config) (int64, bool) {
	if cfg.App.Name == AppRedis {
		return redisMemoryLimit(cfg)
	}
	if cfg.App.Name != AppMemcached {
		return 0, false
	}
	m := cfg.App.Memcached
	store, ok := memcached.Config{Dir: m.Dir, StoreMemory: int64(m.StoreMemory), ReadCache: int64(m.ReadCache)}.HeapBound()
	if !ok {
		return 0, false
	}
	limit := store + memoryLimitMargin
	if cfg.Dataplane != DataplaneDPDK {
		limit += int64(cfg.Buffers+laneBuffers(cfg)) * int64(cfg.BufSize)
	}
	if m.TCP != "" {
		limit += int64(cmp.Or(m.TCPMemory, DefaultMemcachedTCPMemory))
	}
	return limit, true
}

// memoryLimitFor decides the soft memory limit for cfg given the
// GOMEMLIMIT environment variable (env) and the limit in force (current,
// math.MaxInt64 for none): a limit the user chose, in the environment
// (even "off") or already in force, is left alone.
func memoryLimitFor(cfg Config, env string, current int64) (int64, bool) {
	if env != "" || current != math.MaxInt64 {
		return 0, false
	}
	return memoryLimit(cfg)
}

// wasmPageSize is a WebAssembly memory page.
const wasmPageSize = 64 << 10

// classifierOverhead is what a tenant's Wasm classifier holds in the Go
// heap beside its linear memories, with room for a Go-compiled guest (the
// largest of the example classifiers' by far).
const classifierOverhead = 8 << 20

// classifierHeap is what a tenant's Wasm classifier of memory limit pages
// holds in the Go heap at most: the runtime reserves each linear memory's
// limit when it instantiates, and a tenant holds two, plus
// classifierOverhead. 0 pages: no Wasm classifier.
func classifierHeap(pages uint32) int64 {
	if pages == 0 {
		return 0
	}
	return 2*int64(pages)*wasmPageSize + classifierOverhead
}

// memoryBudget is the soft memory limit serve set and what it is made of:
// the limit follows the tenants' classifiers, which a server adds and
// removes while it runs: a limit fixed at start, below what large tenants'
// classifiers hold, had the collector run without end.
type memoryBudget struct {
	mu       sync.Mutex
	base     int64 // memoryLimit's; 0: serve set no limit
	set      int64 // the limit last set
	inFlight int64 // classifiers being compiled or swapped in
}

// sizeMemory sets the Go runtime's soft memory limit (see memoryLimit,
// plus classifierHeap for each tenant's classifier) unless the user chose
// one, and returns a function restoring the previous limit (nil when it
// left it alone). The limit is the process's: with two servers in one
// process, the first sets it.
func (s *Server) sizeMemory() (restore func()) {
	base, ok := memoryLimitFor(s.cfg, os.Getenv("GOMEMLIMIT"), debug.SetMemoryLimit(-1))
	if !ok {
		return nil
	}
	b := &s.memory
	b.mu.Lock()
	prev := debug.SetMemoryLimit(-1)
	b.base = base
	b.set = base + s.tenants.classifierHeap()
	debug.SetMemoryLimit(b.set)
	fmt.Fprintf(s.log, "psp serve: Go memory limit %s: the store's tables, the packet buffers, the classifiers and room for the rest (GOMEMLIMIT chooses another, or off)\n", humanize.IBytes(uint64(b.set)))
	b.mu.Unlock()
	return func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		if debug.SetMemoryLimit(-1) == b.set {
			debug.SetMemoryLimit(prev)
		}
		b.base = 0
	}
}

// fitMemory sets the soft memory limit again after the tenants' classifiers
// changed, extra being added to what classifiers will hold for a while
// (negative: given back). Nothing happens when serve set no limit or
// something else changed it since.
func (s *Server) fitMemory(extra int64) {
	b := &s.memory
	b.mu.Lock()
	defer b.mu.Unlock()
	b.inFlight += extra
	if b.base == 0 || debug.SetMemoryLimit(-1) != b.set {
		return
	}
	b.set = b.base + s.tenants.classifierHeap() + b.inFlight
	debug.SetMemoryLimit(b.set)
}

// withClassifier runs op, which compiles a classifier of memory limit pages
// while the tenants' others stay live (an added tenant, a swap), with the
// memory limit raised for it; the limit follows the tenants afterwards.
func (s *Server) withClassifier(pages uint32, op func() error) error {
	extra := classifierHeap(pages)
	s.fitMemory(extra)
	defer s.fitMemory(-extra)
	return op()
}

// redisMemoryLimit is memoryLimit for the redis application with a
// maxmemory: the dataset (its estimate with a tenth more, the estimate's
// error on the data types measured), a command's worth of data per worker
// beyond it (the bound is checked before each command), the TCP
// dataplane's buffers and memory bound, and memoryLimitMargin.
func redisMemoryLimit(cfg Config) (int64, bool) {
	mm := int64(cfg.App.Redis.MaxMemory)
	if mm <= 0 {
		return 0, false
	}
	maxRequest := int64(cmp.Or(cfg.TCP.MaxRequest, tcp.DefaultMaxRequest))
	buffers := int64(cfg.Buffers+laneBuffers(cfg)) * int64(max(cfg.BufSize, tcp.DefaultBufSize))
	return mm + mm/10 + int64(cfg.Workers)*maxRequest + buffers + int64(cmp.Or(cfg.TCP.Memory, tcp.DefaultMemory)) + memoryLimitMargin, true
}
