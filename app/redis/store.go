package redis

import (
	"hash/maphash"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"
)

// The keyspace is split into shards by the top bits of each key's 64-bit
// hash. A command locks the shards of its keys (in shard order, so two
// commands never wait on each other in a cycle), read-locked for reads,
// and runs with them held: it is atomic against every other command on
// those keys, as a Redis command is. Commands that walk the keyspace
// (SCAN, KEYS, RANDOMKEY, DBSIZE) hold one shard at a time.
//
// Within a shard, keys are kept in a map for lookups and in a slice sorted
// by hash for SCAN: the cursor is the hash to resume from, so a key
// present for a whole scan is returned exactly once however the keyspace
// changes in between, and a cursor never issued is a place in the hash
// order like any other.
const (
	shardBits = 10
	numShards = 1 << shardBits
)

// kind is the type of a value.
type kind uint8

const (
	kindString kind = iota
	kindList
	kindHash
	kindSet
	kindZSet
	kindStream
)

// typeName is the name TYPE answers.
func (k kind) typeName() string {
	switch k {
	case kindString:
		return "string"
	case kindList:
		return "list"
	case kindHash:
		return "hash"
	case kindSet:
		return "set"
	case kindZSet:
		return "zset"
	case kindStream:
		return "stream"
	}
	return "none"
}

// entry is one key and its value.
type entry struct {
	key    string
	hash   uint64
	expire int64 // unix ms; 0: none
	kind   kind
	str    []byte // kindString
	obj    any    // *list, *hashObj, *setObj, *zsetObj, *streamObj
	size   int64  // bytes accounted for the entry
}

// Memory accounting. The store estimates what each key and value holds
// (their bytes plus the Go structures that carry them); used is the sum,
// compared with maxmemory before commands that may grow the dataset.
const (
	entryOverhead = 184 // entry struct, map slot, order slot (hash, name, entry), key header
	elemOverhead  = 48  // one element of a collection (slice header, index slot)
)

// store is the keyspace.
type store struct {
	seed     maphash.Seed
	shards   [numShards]shard
	used     atomic.Int64 // estimated bytes
	keys     atomic.Int64
	keyBytes atomic.Int64 // the keys' own bytes
}

type shard struct {
	mu sync.RWMutex
	m  map[string]*entry
	// watched: the connections watching keys of the shard (watch.go),
	// next to the lock a write takes, which reads it.
	watched  map[string][]*watch
	order    []slot // by (hash, key)
	volatile int    // entries with an expire
	_        [56]byte
}

func newStore() *store {
	s := &store{seed: maphash.MakeSeed()}
	for i := range s.shards {
		s.shards[i].m = make(map[string]*entry)
	}
	return s
}

func (s *store) hash(key []byte) uint64 { return maphash.Bytes(s.seed, key) }

func shardIndex(h uint64) int { return int(h >> (64 - shardBits)) }

// shardOf returns the shard of key and the key's hash.
func (s *store) shardOf(key []byte) (*shard, uint64) {
	h := s.hash(key)
	return &s.shards[shardIndex(h)], h
}

// live reports whether e has not expired at clk's time (read only when e
// has an expiry).
func (e *entry) live(clk *cmdClock) bool { return e.expire == 0 || e.expire > clk.now() }

// lookup returns key's entry in sh (held for reading or writing) if it
// exists and has not expired at c's time. An expired entry is noted: the
// command deletes it once done (reapExpired).
func (c *ctx) lookup(sh *shard, key []byte) *entry {
	e := sh.m[string(key)]
	if e == nil {
		return nil
	}
	if !e.live(&c.clk) {
		c.reap = true
		return nil
	}
	return e
}

// reapExpired deletes the keys of c's command that it found expired
// while it held their shards for reading only, as redis-server's
// lookupKey deletes an expired key that a command reads: the key no
// longer counts in DBSIZE. Each shard is write-locked alone; a key set
// again meanwhile is live and stays.
func (s *Server) reapExpired(c *ctx) {
	cmd := c.cmd
	last := cmd.lastKey
	if last < 0 {
		last += len(c.argv)
	}
	for i := cmd.firstKey; i > 0 && i <= last && i < len(c.argv); i += max(cmd.step, 1) {
		sh, _ := s.db.shardOf(c.argv[i])
		sh.mu.Lock()
		s.db.lookupWrite(sh, c.argv[i], &c.clk)
		sh.mu.Unlock()
	}
}

// reapRange deletes the expired keys of sh whose hashes are in [from,
// to) (to 0: up to the shard's end) and that match pat: those a SCAN met.
func (s *store) reapRange(sh *shard, from, to uint64, pat glob, clk *cmdClock) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	i, _ := slices.BinarySearchFunc(sh.order, from, func(o slot, h uint64) int {
		return cmpUint64(o.hash, h)
	})
	for i < len(sh.order) && (to == 0 || sh.order[i].hash < to) {
		if e := sh.order[i].e; !e.live(clk) && pat.match(stringBytes(e.key)) {
			s.expire(sh, e) // sh.order[i] is the next key now
			continue
		}
		i++
	}
}

// lookupWrite is lookup for a caller holding sh for writing: an expired
// entry is deleted.
func (s *store) lookupWrite(sh *shard, key []byte, clk *cmdClock) *entry {
	e := sh.m[string(key)]
	if e == nil {
		return nil
	}
	if !e.live(clk) {
		s.expire(sh, e)
		return nil
	}
	return e
}

// add inserts a new entry for key (absent from sh, which the caller holds
// for writing) and returns it.
func (s *store) add(sh *shard, key []byte, h uint64, k kind) *entry {
	e := &entry{key: string(key), hash: h, kind: k}
	e.size = entryOverhead + int64(len(key))
	sh.m[e.key] = e
	o := slot{hash: h, key: e.key, e: e}
	i, _ := slices.BinarySearchFunc(sh.order, o, compareSlots)
	sh.order = slices.Insert(sh.order, i, o)
	s.used.Add(e.size)
	s.keys.Add(1)
	s.keyBytes.Add(int64(len(e.key)))
	return e
}

// remove deletes e from sh (held for writing).
func (s *store) remove(sh *shard, e *entry) {
	delete(sh.m, e.key)
	if i, found := slices.BinarySearchFunc(sh.order, slot{hash: e.hash, key: e.key}, compareSlots); found {
		sh.order = slices.Delete(sh.order, i, i+1)
	}
	if e.expire != 0 {
		sh.volatile--
	}
	s.used.Add(-e.size)
	s.keys.Add(-1)
	s.keyBytes.Add(-int64(len(e.key)))
}

// resize sets e's accounted size to size.
func (s *store) resize(e *entry, size int64) {
	s.used.Add(size - e.size)
	e.size = size
}

// shrink takes by bytes off e's accounted size, or, when the value is now
// empty, removes e from sh (held for writing): Redis deletes a key whose
// list, set or sorted set lost its last element.
func (s *store) shrink(sh *shard, e *entry, empty bool, by int64) {
	if empty {
		s.remove(sh, e)
		return
	}
	s.resize(e, e.size-by)
}

// setExpire sets e's expire time (0: none).
func (sh *shard) setExpire(e *entry, at int64) {
	switch {
	case e.expire == 0 && at != 0:
		sh.volatile++
	case e.expire != 0 && at == 0:
		sh.volatile--
	}
	e.expire = at
}

// slot is an entry's place in its shard's walk order, with what a walk
// reads of every entry (hash, name) at hand: a walk of a shard without
// expiring keys does not load the entries themselves.
type slot struct {
	hash uint64
	key  string
	e    *entry
}

func compareSlots(a, b slot) int {
	switch {
	case a.hash < b.hash:
		return -1
	case a.hash > b.hash:
		return 1
	}
	return strings.Compare(a.key, b.key)
}

// shardSet is the set of shards a multi-key command locks, in shard order.
type shardSet struct {
	idx []int
}

// collect sets the shards of keys.
func (ss *shardSet) collect(s *store, keys [][]byte) {
	ss.idx = ss.idx[:0]
	for _, k := range keys {
		ss.idx = append(ss.idx, shardIndex(s.hash(k)))
	}
	slices.Sort(ss.idx)
	ss.idx = slices.Compact(ss.idx)
}

func (ss *shardSet) lock(s *store) {
	for _, i := range ss.idx {
		s.shards[i].mu.Lock()
	}
}

func (ss *shardSet) unlock(s *store) {
	for _, i := range ss.idx {
		s.shards[i].mu.Unlock()
	}
}

func (ss *shardSet) rlock(s *store) {
	for _, i := range ss.idx {
		s.shards[i].mu.RLock()
	}
}

func (ss *shardSet) runlock(s *store) {
	for _, i := range ss.idx {
		s.shards[i].mu.RUnlock()
	}
}

// lockAll write-locks every shard (FLUSHALL), in order.
func (s *store) lockAll() {
	for i := range s.shards {
		s.shards[i].mu.Lock()
	}
}

func (s *store) unlockAll() {
	for i := range s.shards {
		s.shards[i].mu.Unlock()
	}
}

// flush empties the store; the caller holds every shard.
func (s *store) flush() {
	for i := range s.shards {
		sh := &s.shards[i]
		sh.flushWatched()
		for _, o := range sh.order {
			s.used.Add(-o.e.size)
			s.keyBytes.Add(-int64(len(o.key)))
		}
		s.keys.Add(-int64(len(sh.order)))
		sh.m = make(map[string]*entry)
		sh.order = nil
		sh.volatile = 0
	}
}

// volatileKeys counts the keys with an expire (INFO keyspace).
func (s *store) volatileKeys() int64 {
	var n int64
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.RLock()
		n += int64(sh.volatile)
		sh.mu.RUnlock()
	}
	return n
}

// expireSome deletes the expired keys of shards [from, from+n) and
// returns how many it deleted.
func (s *store) expireSome(from, n int, clk *cmdClock) int {
	deleted := 0
	for i := from; i < from+n && i < numShards; i++ {
		sh := &s.shards[i]
		sh.mu.RLock()
		v := sh.volatile
		sh.mu.RUnlock()
		if v == 0 {
			continue
		}
		sh.mu.Lock()
		for j := 0; j < len(sh.order); {
			if e := sh.order[j].e; !e.live(clk) {
				s.expire(sh, e)
				deleted++
				continue
			}
			j++
		}
		sh.mu.Unlock()
	}
	return deleted
}

// bytesString views b as a string without copying; b must not change
// while the string is in use.
func bytesString(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// stringBytes views s as bytes without copying; they must not be
// modified.
func stringBytes(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }
