package memcached

import (
	"errors"
	"io"
	"math/bits"

	"github.com/cockroachdb/pebble"
)

// A session reads and writes the store through these methods, which keep
// the item index (itemIndex) in step with Pebble: a read of an expired or
// flushed item removes it, as memcached's does; a write records the item
// and, past the store's item budget, first deletes the least recently
// used items (or refuses, with evictions disabled).

// errNoMemory: the store holds its item budget and evictions are
// disabled (memcached -M).
var errNoMemory = errors.New("memcached: out of memory (evictions disabled)")

// lookup reads key's item if it is live, from the index's cache when it
// is there (a copy that stays the session's until its next lookup), else
// from Pebble. The caller must close the closer when ok; it.value is
// valid until then and until the session's next lookup. An item found
// expired or flushed is counted (get_expired, get_flushed) and removed,
// now when the caller holds the key's stripe lock (locked) or its lock is
// free, later otherwise (by eviction).
func (s *session) lookup(key []byte, locked bool) (it item, closer io.Closer, ok bool) {
	var c io.Closer = noClose{}
	v, cached := s.st.ix.cachedValue(key, s.cached[:0])
	var err error
	if cached {
		s.cached = v
	} else {
		v, c, err = s.st.db.Get(s.itemKey(key))
	}
	if err != nil {
		if !errors.Is(err, pebble.ErrNotFound) {
			s.stats.storeErrors.Add(1)
		}
		return item{}, nil, false
	}
	it, ok = decodeItem(v)
	if !ok {
		c.Close()
		return item{}, nil, false
	}
	switch s.st.state(&it, s.now) {
	case itemLive:
		return it, c, true
	case itemFlushed:
		s.stats.getFlushed.Add(1)
	case itemExpired:
		s.stats.getExpired.Add(1)
	}
	c.Close()
	s.reap(key, locked)
	return item{}, nil, false
}

// reap removes key's dead item (expired or flushed).
func (s *session) reap(key []byte, locked bool) {
	if !s.st.health.ok.Load() {
		return // the store takes no writes now: eviction reclaims it later
	}
	if locked {
		s.remove(key)
		return
	}
	m := s.st.stripe(key)
	if !m.TryLock() {
		return // a writer has it: eviction reclaims it later
	}
	defer m.Unlock()
	// Still dead? A writer may have stored it since it was read.
	v, c, err := s.st.db.Get(s.itemKey(key))
	if err != nil {
		return
	}
	it, ok := decodeItem(v)
	dead := ok && s.st.state(&it, s.now) != itemLive
	c.Close()
	if dead {
		s.remove(key)
	}
}

// write stores key's item with the given value (the caller holds the key's
// stripe lock), first making room for it within the store's item budget:
// with evictions on, the least recently used items are deleted in the same
// batch; with them off, errNoMemory is returned and nothing is written. A
// write that makes a new item (alloc: memcached allocates one) also
// reclaims the expired or flushed items at the tail of its slab class, as
// memcached does at every allocation.
func (s *session) write(key []byte, it *item, alloc bool, value ...[]byte) error {
	n := headerLen
	for _, v := range value {
		n += len(v)
	}
	size := itemSize(len(key), it.flags, n-headerLen)
	b := s.batch
	b.Reset()
	applied := false
	defer func() { s.unlockVictims(applied) }()
	if alloc {
		s.reclaimTail(key, size)
	}
	if err := s.makeRoom(key, size); err != nil {
		return err
	}
	k := s.itemKey(key)
	op := b.SetDeferred(len(k), n)
	copy(op.Key, k)
	putHeader(op.Value, it)
	off := headerLen
	for _, v := range value {
		off += copy(op.Value[off:], v)
	}
	cached := op.Value // still the batch's after apply, until its next reset
	if err := op.Finish(); err != nil {
		return err
	}
	if err := s.st.apply(s.w, b); err != nil {
		s.stats.storeErrors.Add(1)
		return err
	}
	applied = true
	s.st.ix.put(key, itemMeta{size: size, cas: it.cas, exp: it.exp, stored: it.stored, fetched: it.fetched}, cached, s.now)
	return nil
}

// noClose is the closer of a value read from the index's cache.
type noClose struct{}

func (noClose) Close() error { return nil }

// itemSize is memcached's size of an item (ITEM_ntotal): its header, key,
// value and line end, CAS, and flags when not 0.
func itemSize(keyLen int, flags uint32, valueLen int) int {
	n := itemOverhead + keyLen + valueLen
	if flags != 0 {
		n += 4
	}
	return n
}

// makeRoom adds to the session's batch the deletion of the least recently
// used items until the store's items and an item of this size for key fit
// its item budget, holding the stripe locks of the items it deletes until
// unlockVictims, which settles them.
func (s *session) makeRoom(key []byte, size int) error {
	st := s.st
	if st.itemBudget <= 0 {
		return nil
	}
	need := entryBytes(size, len(key)) - st.ix.bytesOf(key) // what key holds is freed by the write
	own := st.stripeIndex(key)
	lockable := func(k []byte) bool { return s.lockVictim(own, k) }
	freed := int64(0)
	for st.ix.bytes.Load()-freed+need > st.itemBudget {
		if !st.evict {
			st.ix.refused(size)
			s.stats.storeNoMemory.Add(1)
			return errNoMemory
		}
		start := len(s.victimKeys)
		var node int32
		var ok bool
		s.victimKeys, node, ok = st.ix.takeOldest(s.victimKeys, lockable)
		if !ok {
			break // nothing left to evict that can be locked now
		}
		s.victims = append(s.victims, node)
		victim := s.victimKeys[start:]
		freed += st.ix.bytesOfNode(node)
		if err := s.batch.Delete(s.itemKey(victim), nil); err != nil {
			return err
		}
	}
	return nil
}

func trailingZeros(x uint64) int { return bits.TrailingZeros64(x) }

// reclaimTail adds to the session's batch the deletion of the expired or
// flushed items at the tail of the slab class of an item of this size
// (up to reclaimTries, stopping at the first live one), as memcached's
// lru_pull_tail at an allocation.
func (s *session) reclaimTail(key []byte, size int) {
	st := s.st
	own := st.stripeIndex(key)
	start, off := len(s.victims), len(s.victimKeys)
	s.victims, s.victimKeys = st.ix.takeDead(s.victims, s.victimKeys, slabClass(size), s.now, st.flushes(),
		func(k []byte) bool { return s.lockVictim(own, k) })
	for i := start; i < len(s.victims); i++ {
		n := st.ix.keyLenOf(s.victims[i])
		s.batch.Delete(s.itemKey(s.victimKeys[off:off+n]), nil)
		off += n
	}
}

// lockVictim reports whether key's stripe is held by this session, or
// can be locked now (then it is held until unlockVictims). own is the
// stripe the command holds.
func (s *session) lockVictim(own int, key []byte) bool {
	i := s.st.stripeIndex(key)
	if i == own || s.held[i/64]&(1<<(i%64)) != 0 {
		return true
	}
	if !s.st.locks[i].TryLock() {
		return false
	}
	s.held[i/64] |= 1 << (i % 64)
	return true
}

// unlockVictims settles the items makeRoom took (deleted from the store
// when applied) and unlocks the stripes lockVictim locked.
func (s *session) unlockVictims(applied bool) {
	s.st.ix.settle(s.victims, applied, s.now, s.st.flushes())
	s.victims, s.victimKeys = s.victims[:0], s.victimKeys[:0]
	for w := range s.held {
		for s.held[w] != 0 {
			bit := s.held[w] & -s.held[w]
			i := w*64 + trailingZeros(bit)
			s.st.locks[i].Unlock()
			s.held[w] &^= bit
		}
	}
}

// remove deletes key's item (the caller holds the key's stripe lock).
func (s *session) remove(key []byte) error {
	b := s.batch
	b.Reset()
	if err := b.Delete(s.itemKey(key), nil); err != nil {
		return err
	}
	if err := s.st.apply(s.w, b); err != nil {
		s.stats.storeErrors.Add(1)
		return err
	}
	s.st.ix.remove(key)
	return nil
}

// removeLocked deletes key's item under its stripe lock.
func (s *session) removeLocked(key []byte) {
	m := s.st.lock(key)
	if m == nil {
		return // the store takes no writes: eviction reclaims it later
	}
	defer m.Unlock()
	s.remove(key)
}
