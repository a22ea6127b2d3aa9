package memcached

import (
	"bytes"
	"hash/maphash"
	"sync"
	"sync/atomic"
)

// itemIndex is the store's index of its items, kept in memory beside
// Pebble: for each key, what the item holds (its size as memcached sizes
// it, expiry, CAS id, when it was stored) and when it was last used, in
// one list per memcached slab class from the most to the least recently
// used. It counts the items (curr_items) and the bytes they and the index
// take (what eviction keeps within its budget), and names the least
// recently used item of all to evict. Pebble stays the record of the
// items; the index follows every write to it and is rebuilt from it at
// open.
//
// One mutex guards it all: every operation is a few map and list steps.
// Nodes live in pages that never move and hold no pointers (the garbage
// collector does not scan them); keys live in one arena, compacted when
// half of it is dead.
type itemIndex struct {
	mu      sync.Mutex
	seed    maphash.Seed
	byHash  map[uint64]int32 // key hash -> first node with that hash
	pages   [][]indexNode
	free    int32 // free node list (through next); nilNode: none
	keys    []byte
	deadKey int // bytes of keys in the arena no node holds
	classes [numClasses]classList

	// vals holds each node's cached value (readcache.go), a page per
	// page of nodes; cachedBytes their total, within cacheBudget.
	vals        [][][]byte
	cachedBytes int64 // mu
	cacheBudget int64

	clock uint64       // the last use's sequence number (mu)
	items atomic.Int64 // nodes in use (curr_items)
	bytes atomic.Int64 // what the items and their index take (entryBytes)
	epoch int64        // unix seconds of lastUse 0
}

// indexNode is one item of the index.
type indexNode struct {
	hash       uint64
	cas        uint64
	exp        int64  // unix seconds; 0: never
	stored     int64  // unix seconds
	prev, next int32  // in its class's list (next also links the free list)
	chain      int32  // next node with the same hash
	used       uint64 // sequence number of its last use: orders the classes' tails
	keyOff     uint32
	size       uint32 // memcached's item size (itemOverhead + key + value + flags)
	lastUse    uint32 // seconds since epoch
	keyLen     uint8
	class      uint8 // its slab class, or evicting
	home       uint8 // while evicting: its slab class
	fetched    bool
	cached     bool // its value is in vals (readcache.go)
}

const (
	nilNode  = -1
	pageBits = 14
	pageLen  = 1 << pageBits
	// nodeOverhead is what an item costs the index besides its key: its
	// node (72 bytes) and its map entry, at the map's usual load.
	nodeOverhead = 96
)

// entryBytes is what an item of this memcached size and key length takes
// against the store's item budget: its size as Pebble holds it
// (headerLen, the key's prefix byte, key and value, where size counts
// memcached's overhead instead) and its index entry.
func entryBytes(size, keyLen int) int64 {
	return int64(size-itemOverhead+2+headerLen+1) + int64(nodeOverhead+keyLen)
}

// classList is one slab class's items, most recently used first, and its
// counters (stats items).
type classList struct {
	head, tail       int32
	number           int64
	requested        int64 // sum of the items' memcached sizes
	evicted          uint64
	evictedNonzero   uint64
	evictedTime      int64 // seconds since the last evicted item was used
	evictedUnfetched uint64
	expiredUnfetched uint64
	reclaimed        uint64
	outOfMemory      uint64
}

// Slab classes as memcached 1.6 sizes them by default (-n 48, -f 1.25,
// 1 MiB pages, chunks of at most 512 KiB): the class of an item is the
// smallest whose chunk holds it; larger items (memcached chains several
// chunks) count in the last class.
const (
	numClasses    = 64
	slabChunkMax  = 512 << 10
	smallestChunk = 48 + 48
)

// classSizes are the chunk sizes of the classes (index 0 unused), ending
// with slabChunkMax; lastClass is its index.
var classSizes, lastClass = func() ([numClasses]int, int) {
	var sizes [numClasses]int
	size := float64(smallestChunk)
	i := 1
	for ; i < numClasses-1 && size < slabChunkMax/1.25; i++ {
		n := int(size)
		if n%8 != 0 {
			n += 8 - n%8
		}
		sizes[i] = n
		size = float64(uint32(float64(n) * 1.25))
	}
	sizes[i] = slabChunkMax
	return sizes, i
}()

// slabClass is memcached's class of an item of this size.
func slabClass(size int) int {
	for c := 1; c < lastClass; c++ {
		if size <= classSizes[c] {
			return c
		}
	}
	return lastClass
}

// newItemIndex returns an empty index whose times count from epoch (unix
// seconds) and which caches up to cacheBudget bytes of values (0: none).
func newItemIndex(epoch, cacheBudget int64) *itemIndex {
	ix := &itemIndex{seed: maphash.MakeSeed(), byHash: make(map[uint64]int32), free: nilNode, epoch: epoch, cacheBudget: cacheBudget}
	for c := range ix.classes {
		ix.classes[c].head, ix.classes[c].tail = nilNode, nilNode
	}
	return ix
}

func (ix *itemIndex) node(i int32) *indexNode { return &ix.pages[i>>pageBits][i&(pageLen-1)] }

func (ix *itemIndex) key(n *indexNode) []byte {
	return ix.keys[n.keyOff : n.keyOff+uint32(n.keyLen)]
}

func (ix *itemIndex) hash(key []byte) uint64 { return maphash.Bytes(ix.seed, key) }

func (ix *itemIndex) since(now int64) uint32 { return uint32(max(now-ix.epoch, 0)) }

// find returns key's node, or nilNode (mu held).
func (ix *itemIndex) find(key []byte, h uint64) int32 {
	i, ok := ix.byHash[h]
	if !ok {
		return nilNode
	}
	for i != nilNode {
		n := ix.node(i)
		if bytes.Equal(ix.key(n), key) {
			return i
		}
		i = n.chain
	}
	return nilNode
}

// itemMeta is what the index keeps of an item besides its key.
type itemMeta struct {
	size        int // memcached's item size
	cas         uint64
	exp, stored int64
	fetched     bool // a read's write (gat, touch)
}

// put records key's item as stored at time now: a new node at the head of
// its class, or the key's node updated and moved there, with a copy of
// value (nil: none) as its cached value. It returns the change in bytes
// (entryBytes) and whether the key is new.
func (ix *itemIndex) put(key []byte, m itemMeta, value []byte, now int64) (delta int64, added bool) {
	h := ix.hash(key)
	ix.mu.Lock()
	defer ix.mu.Unlock()
	i := ix.find(key, h)
	if i == nilNode {
		i = ix.alloc(key, h)
		added = true
	} else {
		n := ix.node(i)
		delta -= entryBytes(int(n.size), len(key))
		ix.unlink(i)
	}
	n := ix.node(i)
	n.cas, n.exp, n.stored, n.size = m.cas, m.exp, m.stored, uint32(m.size)
	n.lastUse, n.fetched = ix.since(now), m.fetched
	ix.clock++
	n.used = ix.clock
	n.class = uint8(slabClass(m.size))
	ix.link(i)
	ix.setCached(i, value)
	delta += entryBytes(m.size, len(key))
	ix.bytes.Add(delta)
	return delta, added
}

// touch marks key's item used at time now (a read): it moves to the head
// of its class and counts as fetched.
func (ix *itemIndex) touch(key []byte, now int64) {
	h := ix.hash(key)
	ix.mu.Lock()
	defer ix.mu.Unlock()
	i := ix.find(key, h)
	if i == nilNode {
		return
	}
	n := ix.node(i)
	if n.class == evicting {
		return
	}
	n.fetched = true
	n.lastUse = ix.since(now)
	ix.clock++
	n.used = ix.clock
	if c := &ix.classes[n.class]; c.head != i {
		ix.unlink(i)
		ix.link(i)
	}
}

// remove drops key's item and returns whether it was there.
func (ix *itemIndex) remove(key []byte) bool {
	h := ix.hash(key)
	ix.mu.Lock()
	defer ix.mu.Unlock()
	i := ix.find(key, h)
	if i == nilNode {
		return false
	}
	ix.drop(i)
	return true
}

// drop unlinks node i and frees it (mu held).
func (ix *itemIndex) drop(i int32) {
	n := ix.node(i)
	ix.unlink(i)
	ix.bytes.Add(-entryBytes(int(n.size), int(n.keyLen)))
	// Take it off its hash chain.
	head := ix.byHash[n.hash]
	if head == i {
		if n.chain == nilNode {
			delete(ix.byHash, n.hash)
		} else {
			ix.byHash[n.hash] = n.chain
		}
	} else {
		for p := head; p != nilNode; {
			pn := ix.node(p)
			if pn.chain == i {
				pn.chain = n.chain
				break
			}
			p = pn.chain
		}
	}
	ix.deadKey += int(n.keyLen)
	*n = indexNode{next: ix.free} // its cached value's memory stays for the node's next item
	ix.free = i
	ix.items.Add(-1)
}

// alloc takes a free node for key, on its hash chain (mu held).
func (ix *itemIndex) alloc(key []byte, h uint64) int32 {
	if ix.free == nilNode {
		page := make([]indexNode, pageLen)
		base := int32(len(ix.pages)) << pageBits
		for j := range page {
			page[j].next = base + int32(j) + 1
		}
		page[pageLen-1].next = nilNode
		ix.pages = append(ix.pages, page)
		ix.vals = append(ix.vals, make([][]byte, pageLen))
		ix.free = base
	}
	i := ix.free
	n := ix.node(i)
	ix.free = n.next
	if ix.deadKey > 64<<10 && ix.deadKey > len(ix.keys)/2 {
		ix.compactKeys()
	}
	*n = indexNode{hash: h, keyOff: uint32(len(ix.keys)), keyLen: uint8(len(key)), prev: nilNode, next: nilNode, chain: nilNode}
	ix.keys = append(ix.keys, key...)
	if head, ok := ix.byHash[h]; ok {
		n.chain = head
	}
	ix.byHash[h] = i
	ix.items.Add(1)
	return i
}

// compactKeys copies the keys of the nodes in use to a new arena (mu
// held).
func (ix *itemIndex) compactKeys() {
	keys := make([]byte, 0, len(ix.keys)-ix.deadKey+len(ix.keys)/4)
	for c := range ix.classes {
		for i := ix.classes[c].head; i != nilNode; {
			n := ix.node(i)
			off := len(keys)
			keys = append(keys, ix.key(n)...)
			n.keyOff = uint32(off)
			i = n.next
		}
	}
	ix.keys, ix.deadKey = keys, 0
}

// link puts node i at the head of its class (mu held).
func (ix *itemIndex) link(i int32) { ix.linkAt(i, true) }

// linkTail puts node i at the tail of its class (mu held).
func (ix *itemIndex) linkTail(i int32) { ix.linkAt(i, false) }

func (ix *itemIndex) linkAt(i int32, head bool) {
	n := ix.node(i)
	c := &ix.classes[n.class]
	switch {
	case c.head == nilNode:
		n.prev, n.next = nilNode, nilNode
		c.head, c.tail = i, i
	case head:
		n.prev, n.next = nilNode, c.head
		ix.node(c.head).prev = i
		c.head = i
	default:
		n.prev, n.next = c.tail, nilNode
		ix.node(c.tail).next = i
		c.tail = i
	}
	c.number++
	c.requested += int64(n.size)
}

// bytesOfNode returns what node i's item takes (entryBytes).
func (ix *itemIndex) bytesOfNode(i int32) int64 {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	n := ix.node(i)
	return entryBytes(int(n.size), int(n.keyLen))
}

// bytesOf returns what key's item takes (entryBytes), or 0.
func (ix *itemIndex) bytesOf(key []byte) int64 {
	h := ix.hash(key)
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if i := ix.find(key, h); i != nilNode {
		n := ix.node(i)
		return entryBytes(int(n.size), int(n.keyLen))
	}
	return 0
}

// unlink takes node i off its class's list (mu held).
func (ix *itemIndex) unlink(i int32) {
	n := ix.node(i)
	c := &ix.classes[n.class]
	if n.prev != nilNode {
		ix.node(n.prev).next = n.next
	} else {
		c.head = n.next
	}
	if n.next != nilNode {
		ix.node(n.next).prev = n.prev
	} else {
		c.tail = n.prev
	}
	n.prev, n.next = nilNode, nilNode
	c.number--
	c.requested -= int64(n.size)
}

// evicting is the list (class 0, which holds no item size) of the items
// taken off their class to be deleted from the store, until settle.
const evicting = 0

// takeOldest takes the least recently used item of all classes off its
// class, for the caller to delete from the store, and returns its node
// and its key appended to buf. lockable reports whether an item's key can
// be locked now: one that cannot is passed over (up to a few). ok is false
// when the index is empty or no candidate could be locked. The caller
// must settle the node.
func (ix *itemIndex) takeOldest(buf []byte, lockable func(key []byte) bool) (key []byte, node int32, ok bool) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	best := int32(nilNode)
	for c := 1; c < len(ix.classes); c++ {
		if t := ix.classes[c].tail; t != nilNode && (best == nilNode || ix.node(t).used < ix.node(best).used) {
			best = t
		}
	}
	for tries := 0; best != nilNode && tries < 8; tries++ {
		n := ix.node(best)
		if lockable(ix.key(n)) {
			break
		}
		best = n.prev // passed over: the next oldest of its class
	}
	if best == nilNode {
		return buf, nilNode, false
	}
	n := ix.node(best)
	key = append(buf, ix.key(n)...)
	ix.unlink(best)
	n.home, n.class = n.class, evicting
	ix.link(best)
	return key, best, true
}

// reclaimTries is how many items at the tail of a class an allocation
// looks at for expired or flushed ones (memcached's lru_pull_tail).
const reclaimTries = 5

// takeDead takes the expired or flushed items at the tail of class off
// it, as takeOldest does, up to reclaimTries and stopping at the first
// live item: their nodes are appended to nodes, their keys to keys. An
// item whose key cannot be locked now (lockable) is passed over. The
// caller must settle the nodes.
func (ix *itemIndex) takeDead(nodes []int32, keys []byte, class int, now int64, fv flushView, lockable func(key []byte) bool) ([]int32, []byte) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	i := ix.classes[class].tail
	for tries := 0; i != nilNode && tries < reclaimTries; tries++ {
		n := ix.node(i)
		prev := n.prev
		// memcached's tail test: expired strictly before now.
		dead := n.exp != 0 && n.exp < now || fv.state(0, n.stored, n.cas, now) == itemFlushed
		if !dead {
			break
		}
		if lockable(ix.key(n)) {
			keys = append(keys, ix.key(n)...)
			nodes = append(nodes, i)
			ix.unlink(i)
			n.home, n.class = n.class, evicting
			ix.link(i)
		}
		i = prev
	}
	return nodes, keys
}

// keyLenOf is the length of node i's key.
func (ix *itemIndex) keyLenOf(i int32) int {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	return int(ix.node(i).keyLen)
}

// settle ends the eviction of the nodes takeOldest took: deleted from the
// store (applied), they leave the index and are counted, evicted or, when
// dead (expired or flushed), reclaimed; otherwise they go back to the
// tail of their class.
func (ix *itemIndex) settle(nodes []int32, applied bool, now int64, fv flushView) {
	if len(nodes) == 0 {
		return
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	for _, i := range nodes {
		n := ix.node(i)
		ix.unlink(i)
		n.class = n.home
		if !applied {
			ix.linkTail(i)
			continue
		}
		c := &ix.classes[n.class]
		if fv.state(n.exp, n.stored, n.cas, now) != itemLive {
			c.reclaimed++
			if !n.fetched {
				c.expiredUnfetched++
			}
		} else {
			c.evicted++
			if n.exp != 0 {
				c.evictedNonzero++
			}
			if !n.fetched {
				c.evictedUnfetched++
			}
			c.evictedTime = int64(ix.since(now)) - int64(n.lastUse)
		}
		ix.link(i) // counted in its class until dropped
		ix.drop(i)
	}
}

// refused counts a store refused for want of memory (-M) in the class of
// an item of this size.
func (ix *itemIndex) refused(size int) {
	ix.mu.Lock()
	ix.classes[slabClass(size)].outOfMemory++
	ix.mu.Unlock()
}

// classStats is a copy of one class's counters, and the age of its least
// recently used item.
type classStats struct {
	class int
	classList
	age int64
}

// eachClass calls fn with the counters of every class that has held an
// item, in class order.
func (ix *itemIndex) eachClass(now int64, fn func(classStats)) {
	var out [numClasses]classStats
	n := 0
	ix.mu.Lock()
	for c := 1; c < len(ix.classes); c++ {
		l := ix.classes[c]
		if l.number == 0 && l.evicted == 0 && l.reclaimed == 0 && l.outOfMemory == 0 {
			continue
		}
		cs := classStats{class: c, classList: l}
		if l.tail != nilNode {
			cs.age = int64(ix.since(now)) - int64(ix.node(l.tail).lastUse)
		}
		out[n] = cs
		n++
	}
	ix.mu.Unlock()
	for _, cs := range out[:n] {
		fn(cs)
	}
}

// requested is the sum of the items' memcached sizes (memcached's bytes).
func (ix *itemIndex) requested() int64 {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	var n int64
	for c := 1; c < len(ix.classes); c++ {
		n += ix.classes[c].requested
	}
	return n
}

// totals are the counters of all classes.
type indexTotals struct {
	evicted, evictedUnfetched, expiredUnfetched, reclaimed uint64
}

func (ix *itemIndex) totals() indexTotals {
	var t indexTotals
	ix.mu.Lock()
	defer ix.mu.Unlock()
	for c := range ix.classes {
		l := &ix.classes[c]
		t.evicted += l.evicted
		t.evictedUnfetched += l.evictedUnfetched
		t.expiredUnfetched += l.expiredUnfetched
		t.reclaimed += l.reclaimed
	}
	return t
}

// resetStats clears the counters stats reset clears.
func (ix *itemIndex) resetStats() {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	for c := range ix.classes {
		l := &ix.classes[c]
		l.evicted, l.evictedNonzero, l.evictedTime, l.evictedUnfetched = 0, 0, 0, 0
		l.expiredUnfetched, l.reclaimed, l.outOfMemory = 0, 0, 0
	}
}
