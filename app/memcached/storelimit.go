package memcached

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble"
)

// storeLimit bounds what the store holds (Config.StoreMemory): Pebble's
// tables and memtables, in memory or on disk (see store.size). Reading
// Pebble's metrics takes its lock, so the size is read again only after
// checkEvery bytes were admitted since the last reading, and, while the
// store is full, at most every refreshFull: up to checkEvery bytes (and
// what writers admitted at once add) may go past the limit, and a new
// memtable (allocated whole when the previous one fills: in memory a 16th
// of the limit, from 4 to 64 MiB, see memTableSize) may take the store
// past it once. What was deleted, flushed or overwritten frees its space
// only once Pebble has compacted it: a full store asks for a compaction of
// the items' key range (in the background, one at a time, at most every
// compactEvery), and expired items count until they are overwritten or
// deleted.
type storeLimit struct {
	limit      int64 // <= 0: unbounded
	checkEvery int64

	full        atomic.Bool
	used        atomic.Int64 // at the last reading
	admitted    atomic.Int64 // bytes admitted since the last reading
	lastCheck   atomic.Int64 // unix ns of the last reading
	refused     atomic.Uint64
	checking    sync.Mutex
	compact     atomic.Bool  // a compaction runs
	lastCompact atomic.Int64 // unix ns when the last one started
}

// refreshFull is how often a full store reads its size again, and
// compactEvery how often at most a store refusing stores (evictions
// disabled) asks for a compaction (one full of live items would otherwise
// be rewritten over and over while a client keeps trying to store).
// A store that evicts keeps its items within half its bound: it asks for
// a compaction as soon as it holds compactAt of it (in eighths) and no
// compaction runs, and a store that holds its bound waits up to
// admitWait for the compaction to free space before it refuses, longer
// (up to admitWaitCompacting) while a compaction runs: on a loaded
// machine one may take seconds, and an evicting store whose items fit
// should not refuse a store because its compaction is slow.
const (
	refreshFull         = 10 * time.Millisecond
	compactEvery        = time.Second
	compactAt           = 7 // eighths of the bound
	admitWait           = time.Second
	admitWaitCompacting = 10 * time.Second
)

func newStoreLimit(limit int64) storeLimit {
	return storeLimit{limit: limit, checkEvery: max(64<<10, min(limit/64, 4<<20))}
}

// limitBytes is the store's bound for memcached's limit_maxbytes and
// maxbytes statistics: 0 when it is unbounded.
func (s *store) limitBytes() uint64 { return uint64(max(s.lim.limit, 0)) }

// admit reports whether n more bytes may be stored.
func (s *store) admit(n int) bool {
	l := &s.lim
	if l.limit <= 0 {
		return true
	}
	pending := l.admitted.Add(int64(n))
	full := l.full.Load()
	if pending >= l.checkEvery || full && time.Now().UnixNano()-l.lastCheck.Load() >= int64(refreshFull) {
		full = s.readSize()
	}
	if full && s.evict {
		// Its items are within half the bound: what holds the rest goes
		// once compacted. Wait for it, a while.
		start := time.Now()
		for full {
			waited := time.Since(start)
			if waited >= admitWaitCompacting || waited >= admitWait && !l.compact.Load() {
				break
			}
			time.Sleep(refreshFull)
			full = s.readSize()
		}
	}
	if full {
		l.admitted.Add(-int64(n))
		l.refused.Add(1)
		return false
	}
	return true
}

// readSize reads the store's size from Pebble's metrics (unless another
// writer does it now) and reports whether the store is full.
func (s *store) readSize() bool {
	l := &s.lim
	if !l.checking.TryLock() {
		return l.full.Load()
	}
	defer l.checking.Unlock()
	l.admitted.Store(0)
	l.lastCheck.Store(time.Now().UnixNano())
	used := s.size(s.db.Metrics())
	l.used.Store(used)
	full := used >= l.limit
	l.full.Store(full)
	now := time.Now().UnixNano()
	compact := full && now-l.lastCompact.Load() >= int64(compactEvery)
	if s.evict {
		compact = used >= l.limit/8*compactAt
	}
	if compact && l.compact.CompareAndSwap(false, true) {
		// Deleted and overwritten items free their space when compacted.
		l.lastCompact.Store(now)
		s.closeMu.Lock()
		defer s.closeMu.Unlock()
		if s.closing {
			return full
		}
		s.compacting.Add(1)
		go func() {
			defer s.compacting.Done()
			defer l.compact.Store(false)
			_ = s.db.Compact([]byte{itemPrefix}, []byte{itemPrefix + 1}, true)
		}()
	}
	return full
}

// size is what the store holds as storeLimit counts it: its tables (live,
// being written by a compaction, obsolete or zombie but not deleted yet),
// its manifest and options files, and its memtables.
//
// Pebble v1.1's DiskSpaceUsage may be wrong: the obsolete tables' size
// (Table.ObsoleteSize) is recounted from the tables waiting to be queued
// for deletion while the deleter takes away what it deletes from the
// queue, and may wrap below zero (cockroachdb/pebble#4811, fixed in later
// releases); a store that flushes often then read as holding less than it
// did and took sets past its bound. On disk the obsolete part counts as
// zero when it went below; in memory the tables count as what tableFS
// holds for them.
func (s *store) size(m *pebble.Metrics) int64 {
	obsolete := int64(m.Table.ObsoleteSize)
	usage := int64(m.DiskSpaceUsage()) - obsolete // in two's complement: the sum without it
	if s.mem != nil {
		usage -= int64(m.WAL.PhysicalSize+m.WAL.ObsoletePhysicalSize) + m.Total().Size +
			int64(m.Table.ZombieSize) + m.Compact.InProgressBytes // the manifest and options files are left
		return usage + s.mem.held.Load() + int64(m.MemTable.Size)
	}
	return usage + max(obsolete, 0) + int64(m.MemTable.Size)
}
