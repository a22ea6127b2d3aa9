package server

import (
	"cmp"
	"fmt"
	"math"
	"os"
	"runtime/debug"

	"github.com/dustin/go-humanize"

	"github.com/persephone-go/psp/app/memcached"
)

// memoryLimitMargin is what the soft memory limit allows the Go heap
// beyond the parts memoryLimit counts: the dispatcher, the runtime,
// Pebble's own structures, replies being built, and room for garbage
// between two collections.
const memoryLimitMargin = 64 << 20

// memoryLimit returns the soft limit of the Go runtime's memory
// (runtime/debug.SetMemoryLimit) that serve sets for cfg, with defaults
// applied, and false when it sets none. Without one the Go heap grows to
// twice what it held after the last collection (GOGC=100) before the next:
// the memcached application with its store in memory and bounded at 128
// MiB held about 330 MiB in its heap (its tables and the packet pool) and
// grew to 750-784 MB resident under a flood of sets. What the heap may
// hold is known only there: the store's tables in memory
// (memcached.Config.HeapBound), the packet pool of the udp and memnic
// dataplanes (allocated whole in the heap; DPDK's is not), the values TCP
// connections are reading when the store serves TCP, and
// memoryLimitMargin.
func memoryLimit(cfg Config) (int64, bool) {
	if cfg.App.Name != AppMemcached {
		return 0, false
	}
	m := cfg.App.Memcached
	store, ok := memcached.Config{Dir: m.Dir, StoreMemory: int64(m.StoreMemory)}.HeapBound()
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

// sizeMemory sets the Go runtime's soft memory limit (see memoryLimit)
// unless the user chose one, and returns a function restoring the previous
// limit (nil when it left it alone). The limit is the process's: with two
// servers in one process, the first sets it.
func (s *Server) sizeMemory() (restore func()) {
	limit, ok := memoryLimitFor(s.cfg, os.Getenv("GOMEMLIMIT"), debug.SetMemoryLimit(-1))
	if !ok {
		return nil
	}
	prev := debug.SetMemoryLimit(limit)
	fmt.Fprintf(s.log, "psp serve: Go memory limit %s: the store's tables, the packet buffers and room for the rest (GOMEMLIMIT chooses another, or off)\n", humanize.IBytes(uint64(limit)))
	return func() {
		if debug.SetMemoryLimit(-1) == limit {
			debug.SetMemoryLimit(prev)
		}
	}
}
