package memcached

// The item index keeps, beside each node, a copy of the item's value as
// the store holds it (header and data, what decodeItem reads), within a
// byte budget (Config.ReadCache) and for values of at most
// maxCachedValue bytes: a get of a cached item is a map lookup and a copy
// instead of a walk down Pebble's memtable skiplist and tables. Pebble
// stays the record. The cache is written through: every write of an item
// to the store replaces its cached copy (or drops it, past the budget)
// and every deletion drops it, under the index's lock, after Pebble
// applied the write and before the command's reply is sent, so a read
// never sees a value older than one whose write was answered. Readers
// copy the value out under the lock, so a write reuses the copy's memory
// in place (a node freed and taken again keeps it too): in the steady
// state neither reads nor writes allocate. Items loaded from disk at open
// are not cached until they are written again.

// maxCachedValue is the longest value (with its header) the index
// caches: a longer one is read from the store, whose lookup costs little
// beside copying it, and is not copied under the index's lock.
const maxCachedValue = 64 << 10

// cachedValue appends key's cached value (header and data) to dst and
// returns it, or returns ok false when key has none.
func (ix *itemIndex) cachedValue(key, dst []byte) (v []byte, ok bool) {
	if ix.cacheBudget <= 0 {
		return dst, false
	}
	h := ix.hash(key)
	ix.mu.Lock()
	defer ix.mu.Unlock()
	i := ix.find(key, h)
	if i == nilNode || !ix.node(i).cached {
		return dst, false
	}
	return append(dst, ix.vals[i>>pageBits][i&(pageLen-1)]...), true
}

// setCached makes a copy of v node i's cached value, or drops the one it
// has when v is nil, too long or past the budget (mu held).
func (ix *itemIndex) setCached(i int32, v []byte) {
	n, slot := ix.node(i), &ix.vals[i>>pageBits][i&(pageLen-1)]
	n.cached = false
	if v == nil || len(v) > maxCachedValue || ix.cacheBudget <= 0 {
		ix.freeCached(slot)
		return
	}
	if cap(*slot) < len(v) {
		if ix.cachedBytes+int64(len(v)-cap(*slot)) > ix.cacheBudget {
			ix.freeCached(slot)
			return
		}
		ix.cachedBytes += int64(len(v) - cap(*slot))
		*slot = make([]byte, len(v))
	}
	*slot = append((*slot)[:0], v...)
	n.cached = true
}

// freeCached releases a node's cached value's memory (mu held).
func (ix *itemIndex) freeCached(slot *[]byte) {
	ix.cachedBytes -= int64(cap(*slot))
	*slot = nil
}
