package memcached

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble"
	"github.com/persephone-go/psp/internal/dirlock"
)

// Keys in Pebble: an item's key is itemPrefix followed by the memcached
// key; the store's own records use metaPrefix.
const (
	itemPrefix = 'i'
	metaPrefix = 'm'
)

// Meta records.
var (
	metaCasLimit = []byte{metaPrefix, 'c'} // u64: every CAS id ever handed out is below it
	metaFlush    = []byte{metaPrefix, 'f'} // u64 flush CAS, i64 flush time (see flushState)
)

// casBlock is how many CAS ids an on-disk store reserves at a time: the
// reservation is written (synced) before any id of the block is used, so a
// restarted store never reuses one.
const casBlock = 1 << 20

// Item header layout (little-endian), followed by the value:
//
//	0  u32 client flags
//	4  i64 expiry, unix seconds (0: never)
//	12 u64 CAS id
//	20 i64 when it was stored, unix seconds (for delayed flush_all)
const (
	offFlags  = 0
	offExp    = 4
	offCas    = 12
	offStored = 20
	headerLen = 28
)

// item is a decoded item header and a view of its value.
type item struct {
	flags  uint32
	exp    int64
	cas    uint64
	stored int64
	value  []byte
	// fetched (not stored): a write of it is a read's (gat, touch), which
	// counts as a fetch in the index.
	fetched bool
}

func decodeItem(v []byte) (item, bool) {
	if len(v) < headerLen {
		return item{}, false
	}
	return item{
		flags:  binary.LittleEndian.Uint32(v[offFlags:]),
		exp:    int64(binary.LittleEndian.Uint64(v[offExp:])),
		cas:    binary.LittleEndian.Uint64(v[offCas:]),
		stored: int64(binary.LittleEndian.Uint64(v[offStored:])),
		value:  v[headerLen:],
	}, true
}

func putHeader(b []byte, it *item) {
	binary.LittleEndian.PutUint32(b[offFlags:], it.flags)
	binary.LittleEndian.PutUint64(b[offExp:], uint64(it.exp))
	binary.LittleEndian.PutUint64(b[offCas:], it.cas)
	binary.LittleEndian.PutUint64(b[offStored:], uint64(it.stored))
}

// numStripes is the number of key locks serialising writes to a key.
const numStripes = 256

// store is the Pebble database behind the protocol. Reads take no lock;
// every write to a key holds that key's stripe lock for its whole
// read-modify-write, so concurrent workers never interleave on one key.
type store struct {
	db   *pebble.DB
	disk bool
	// syncWrites: a write is answered after a sync of the log that
	// follows it (Config.Sync); without it, on disk, the log is synced
	// every logSyncInterval while writes come.
	syncWrites bool
	seed       maphash.Seed
	locks      [numStripes]sync.Mutex

	cas      atomic.Uint64 // last CAS id handed out
	casMu    sync.Mutex
	casLimit atomic.Uint64 // ids below it are reserved (on disk)

	// flush_all state: items with a CAS id below flushCas are gone; items
	// stored at or before flushLive are gone once flushLive has passed.
	flushCas  atomic.Uint64
	flushLive atomic.Int64
	flushMu   sync.Mutex

	// ix indexes the items; their bytes (with the index's) are kept
	// within itemBudget (<= 0: unbounded) by evicting the least recently
	// used (evict) or refusing stores.
	ix         *itemIndex
	itemBudget int64
	evict      bool

	// The write path (commit.go, health.go): whether the store takes
	// writes, the turns to write, the group sync (Config.Sync), the
	// watchdog and the writers it watches.
	health       writeHealth
	slots        chan struct{}
	writeTimeout time.Duration
	syncer       *groupSync
	watchStop    chan struct{}
	watchDone    chan struct{}
	writersMu    sync.Mutex
	writers      []*writer
	meta         *writer    // the store's own records' writes
	metaMu       sync.Mutex // meta's timer is used by one at a time

	mem        *tableFS // in memory: its tables; nil on disk
	lim        storeLimit
	compacting sync.WaitGroup // storeLimit's background compaction
	closeMu    sync.Mutex     // guards closing and compacting.Add
	closing    bool
}

// openStore opens the Pebble database in cfg.Dir (in memory when empty),
// holding at most cfg.StoreMemory bytes (<= 0: unbounded; see storeLimit)
// and items within half of it (evicting unless cfg.DisableEvictions), and
// indexes its items.
func openStore(cfg Config) (*store, error) {
	dir, limit := cfg.Dir, cfg.StoreMemory
	s := &store{disk: dir != "", syncWrites: cfg.Sync, seed: maphash.MakeSeed(), lim: newStoreLimit(limit),
		ix: newItemIndex(time.Now().Unix(), max(cfg.ReadCache, 0)), itemBudget: itemBudget(limit), evict: !cfg.DisableEvictions,
		slots: make(chan struct{}, writeSlots(cfg.Workers)), writeTimeout: cfg.WriteTimeout,
		watchStop: make(chan struct{}), watchDone: make(chan struct{}), meta: newWriter()}
	s.health.ok.Store(true)
	opts := &pebble.Options{Logger: quietLogger{}, EventListener: s.health.eventListener()}
	var mem *tableFS
	if dir == "" {
		// In memory nothing survives the process: a write-ahead log would
		// only grow a file in memory on every write.
		mem = newTableFS()
		opts.FS = mem
		opts.DisableWAL = true
		opts.MemTableSize = memTableSize(limit)
	} else {
		opts.FS = diskFS{FS: cfg.fs, h: &s.health}
		if cfg.MaxOpenFiles > 0 {
			opts.MaxOpenFiles = cfg.MaxOpenFiles
		}
	}
	db, err := pebble.Open(dir, opts)
	if err != nil {
		return nil, fmt.Errorf("memcached: open store %q: %w", dir, dirlock.Check(dir, err))
	}
	s.db, s.mem = db, mem
	if s.disk {
		every := logSyncInterval
		if cfg.Sync {
			every = 0 // each write asks for its sync
		}
		s.syncer = newGroupSync(db, every)
	}
	if err := s.loadMeta(); err == nil {
		err = s.loadIndex()
	}
	if err != nil {
		if s.syncer != nil {
			s.syncer.close()
		}
		db.Close()
		return nil, err
	}
	s.addWriter(s.meta)
	go s.watch(dir, s.watched)
	return s, nil
}

// addWriter has the watchdog watch w's writes.
func (s *store) addWriter(w *writer) {
	s.writersMu.Lock()
	s.writers = append(s.writers, w)
	s.writersMu.Unlock()
}

func (s *store) watched() []*writer {
	s.writersMu.Lock()
	defer s.writersMu.Unlock()
	return s.writers
}

// itemBudget is the bytes the items of a store bounded at limit bytes
// (<= 0: unbounded) may take with their index entries: half of it. The
// other half is for what Pebble holds besides the live items: overwritten,
// deleted and evicted items until a compaction drops them, memtables, and
// the tables a compaction writes before it deletes those it rewrote.
func itemBudget(limit int64) int64 {
	if limit <= 0 {
		return 0
	}
	return limit / 2
}

// loadIndex indexes the items the store holds (at open: on disk, those of
// the last run), least recently stored first.
func (s *store) loadIndex() error {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{itemPrefix}, UpperBound: []byte{itemPrefix + 1}})
	if err != nil {
		return fmt.Errorf("memcached: index the store: %w", err)
	}
	type entry struct {
		key  []byte
		meta itemMeta
	}
	var entries []entry
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()[1:]
		v, ok := decodeItem(it.Value())
		if !ok || len(k) > KeyMaxLength {
			continue
		}
		entries = append(entries, entry{key: bytes.Clone(k), meta: itemMeta{size: itemSize(len(k), v.flags, len(v.value)), cas: v.cas, exp: v.exp, stored: v.stored}})
	}
	if err := it.Close(); err != nil {
		return fmt.Errorf("memcached: index the store: %w", err)
	}
	slices.SortStableFunc(entries, func(a, b entry) int { return cmp.Compare(a.meta.stored, b.meta.stored) })
	for _, e := range entries {
		s.ix.put(e.key, e.meta, nil, e.meta.stored)
	}
	return nil
}

// Memtable sizes of a store in memory. Larger memtables flush less often,
// but each is allocated whole outside the Go heap and is resident once
// written through: Pebble holds the one being written, those waiting to be
// flushed, and a flushed one it keeps for reuse, so a store bounded at 128
// MiB with 64 MiB memtables held 128 MiB of memtables besides its tables
// (192 MiB while one was flushed).
const (
	minMemTable = 4 << 20
	maxMemTable = 64 << 20
)

// memTableSize is the memtable size of a store in memory bounded by limit
// bytes (<= 0: unbounded): a 16th of the bound, at least minMemTable and
// at most maxMemTable (which the default bound of 1 GiB and an unbounded
// store get).
func memTableSize(limit int64) uint64 {
	if limit <= 0 {
		return maxMemTable
	}
	return uint64(min(max(limit/16, minMemTable), maxMemTable))
}

// quietLogger drops Pebble's informational messages (WAL replay, ...) and
// keeps its fatal ones.
type quietLogger struct{}

func (quietLogger) Infof(string, ...any) {}

func (quietLogger) Fatalf(format string, args ...any) { pebble.DefaultLogger.Fatalf(format, args...) }

// loadMeta restores the CAS reservation and the flush state.
func (s *store) loadMeta() error {
	if v, closer, err := s.db.Get(metaCasLimit); err == nil {
		if len(v) == 8 {
			limit := binary.LittleEndian.Uint64(v)
			s.cas.Store(limit - 1)
			s.casLimit.Store(limit)
		}
		closer.Close()
	} else if !errors.Is(err, pebble.ErrNotFound) {
		return fmt.Errorf("memcached: read cas reservation: %w", err)
	}
	if v, closer, err := s.db.Get(metaFlush); err == nil {
		if len(v) == 16 {
			s.flushCas.Store(binary.LittleEndian.Uint64(v))
			s.flushLive.Store(int64(binary.LittleEndian.Uint64(v[8:])))
		}
		closer.Close()
	} else if !errors.Is(err, pebble.ErrNotFound) {
		return fmt.Errorf("memcached: read flush state: %w", err)
	}
	return nil
}

func (s *store) close() error {
	if s.db == nil {
		return errors.New("memcached: store closed")
	}
	s.closeMu.Lock()
	s.closing = true
	s.closeMu.Unlock()
	s.compacting.Wait()
	close(s.watchStop)
	<-s.watchDone
	// A write of the log or manifest being retried has the write timeout
	// to go through; then it gives up, and what it held is lost.
	s.health.settle(s.writeTimeout)
	s.health.closing.Store(true)
	if s.syncer != nil {
		s.syncer.close()
	}
	err := s.db.Close()
	s.db = nil
	return err
}

// lock locks key's stripe for a write and returns it, or nil when the
// stripe is held and the store stops taking writes while this waits: its
// holder may be held in Pebble by a failing disk, and this worker must
// not wait with it.
func (s *store) lock(key []byte) *sync.Mutex {
	m := s.stripe(key)
	if m.TryLock() {
		return m
	}
	for range 8 { // most holders finish within a few scheduling turns
		runtime.Gosched()
		if m.TryLock() {
			return m
		}
	}
	for pause := 20 * time.Microsecond; ; pause = min(2*pause, time.Millisecond) {
		if !s.health.ok.Load() {
			return nil
		}
		time.Sleep(pause)
		if m.TryLock() {
			return m
		}
	}
}

// stripe returns key's stripe lock.
func (s *store) stripe(key []byte) *sync.Mutex { return &s.locks[s.stripeIndex(key)] }

func (s *store) stripeIndex(key []byte) int { return int(maphash.Bytes(s.seed, key) % numStripes) }

// nextCas hands out the next CAS id. An on-disk store first reserves a
// block of ids durably, so a restart never reuses one.
func (s *store) nextCas() (uint64, error) {
	id := s.cas.Add(1)
	if !s.disk || id < s.casLimit.Load() {
		return id, nil
	}
	s.casMu.Lock()
	defer s.casMu.Unlock()
	if id < s.casLimit.Load() {
		return id, nil
	}
	limit := id + casBlock
	var v [8]byte
	binary.LittleEndian.PutUint64(v[:], limit)
	if err := s.setMeta(metaCasLimit, v[:], true); err != nil {
		return 0, fmt.Errorf("memcached: reserve cas ids: %w", err)
	}
	s.casLimit.Store(limit)
	return id, nil
}

// What an item read from the store is at a given time (store.state).
const (
	itemLive = iota
	itemExpired
	itemFlushed
)

// flushView is the flush_all state at one moment.
type flushView struct {
	cas  uint64 // items with a CAS id below it are flushed
	live int64  // items stored at or before it are flushed once it has passed
}

func (s *store) flushes() flushView {
	return flushView{cas: s.flushCas.Load(), live: s.flushLive.Load()}
}

// state tells whether an item of this expiry, store time and CAS id is
// live at time now (unix seconds), flushed (tested first, as memcached
// does) or expired.
func (f flushView) state(exp, stored int64, cas uint64, now int64) int {
	if f.cas != 0 && cas < f.cas || f.live != 0 && f.live <= now && stored <= f.live {
		return itemFlushed
	}
	if exp != 0 && exp <= now {
		return itemExpired
	}
	return itemLive
}

// state tells what it is at time now: live, flushed or expired.
func (s *store) state(it *item, now int64) int {
	return s.flushes().state(it.exp, it.stored, it.cas, now)
}

// flush records a flush_all: immediate (at <= now: every item stored so far
// is gone; memcached spends a CAS id on it) or delayed to time at.
func (s *store) flush(at, now int64) error {
	s.flushMu.Lock()
	defer s.flushMu.Unlock()
	live := at - 1 // memcached's oldest_live = new_oldest - 1
	if live <= now {
		id, err := s.nextCas()
		if err != nil {
			return err
		}
		s.flushCas.Store(id)
	}
	s.flushLive.Store(live)
	return s.saveFlush()
}

// flushNone records a flush_all that flushes nothing, as memcached's with a
// time before its start: it cancels a delayed flush not yet due and spends
// a CAS id. What earlier flushes hid stays hidden (memcached shows again
// those of its items that were not read since).
func (s *store) flushNone(now int64) error {
	s.flushMu.Lock()
	defer s.flushMu.Unlock()
	if _, err := s.nextCas(); err != nil {
		return err
	}
	if s.flushLive.Load() > now {
		s.flushLive.Store(0)
	}
	return s.saveFlush()
}

// setMeta writes one of the store's own records through the write path,
// synced when sync is set or the store syncs its writes.
func (s *store) setMeta(key, value []byte, sync bool) error {
	b := s.db.NewBatch()
	defer b.Close()
	if err := b.Set(key, value, nil); err != nil {
		return err
	}
	s.metaMu.Lock()
	defer s.metaMu.Unlock()
	if err := s.apply(s.meta, b); err != nil {
		return err
	}
	if sync && !s.syncWrites {
		return syncLog(s.db)
	}
	return nil
}

// saveFlush records the flush state in the store (flushMu held).
func (s *store) saveFlush() error {
	var v [16]byte
	binary.LittleEndian.PutUint64(v[:], s.flushCas.Load())
	binary.LittleEndian.PutUint64(v[8:], uint64(s.flushLive.Load()))
	if err := s.setMeta(metaFlush, v[:], false); err != nil {
		return fmt.Errorf("memcached: record flush: %w", err)
	}
	return nil
}
