package memcached

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// checkIndex verifies the index's invariants: every node in use is on
// exactly one class list and its hash chain, the counts and bytes add up.
func checkIndex(t *testing.T, ix *itemIndex) {
	t.Helper()
	ix.mu.Lock()
	defer ix.mu.Unlock()
	seen := map[int32]bool{}
	var items, bytes int64
	for c := range ix.classes {
		l := &ix.classes[c]
		var n, req int64
		prev := int32(nilNode)
		for i := l.head; i != nilNode; i = ix.node(i).next {
			nd := ix.node(i)
			if seen[i] {
				t.Fatalf("node %d twice on the lists", i)
			}
			seen[i] = true
			if nd.prev != prev || int(nd.class) != c {
				t.Fatalf("node %d: prev %d (want %d), class %d (want %d)", i, nd.prev, prev, nd.class, c)
			}
			if c != evicting && slabClass(int(nd.size)) != c {
				t.Fatalf("node %d of size %d in class %d", i, nd.size, c)
			}
			if found := ix.find(ix.key(nd), nd.hash); found != i {
				t.Fatalf("node %d (%q) found as %d", i, ix.key(nd), found)
			}
			prev = i
			n++
			req += int64(nd.size)
			bytes += entryBytes(int(nd.size), int(nd.keyLen))
		}
		if prev != l.tail || n != l.number || req != l.requested {
			t.Fatalf("class %d: tail %d (want %d), number %d (counted %d), requested %d (summed %d)", c, l.tail, prev, l.number, n, l.requested, req)
		}
		items += n
	}
	if items != ix.items.Load() || bytes != ix.bytes.Load() {
		t.Fatalf("%d items and %d bytes on the lists, counted %d and %d", items, bytes, ix.items.Load(), ix.bytes.Load())
	}
	chained := 0
	for _, head := range ix.byHash {
		for i := head; i != nilNode; i = ix.node(i).chain {
			chained++
		}
	}
	if int64(chained) != items {
		t.Fatalf("%d nodes on hash chains, %d on lists", chained, items)
	}
}

// TestItemIndex: random puts, touches, removes and evictions against a
// map, with the invariants checked along the way; evictions take the
// least recently used item.
func TestItemIndex(t *testing.T) {
	ix := newItemIndex(1000, 0)
	want := map[string]itemMeta{}
	lastUse := map[string]int{}
	rng := rand.New(rand.NewPCG(7, 8))
	now := int64(1000)
	for step := range 20000 {
		if step%50 == 0 {
			now++
		}
		key := fmt.Sprintf("key%d", rng.IntN(500))
		switch op := rng.IntN(10); {
		case op < 5:
			m := itemMeta{size: itemOverhead + len(key) + rng.IntN(3000), cas: uint64(step), stored: now}
			_, added := ix.put([]byte(key), m, nil, now)
			if _, had := want[key]; had == added {
				t.Fatalf("step %d: put %q added %v, was there %v", step, key, added, had)
			}
			want[key], lastUse[key] = m, step
		case op < 7:
			ix.touch([]byte(key), now)
			if _, ok := want[key]; ok {
				lastUse[key] = step
			}
		case op < 9:
			if _, had := want[key]; ix.remove([]byte(key)) != had {
				t.Fatalf("step %d: remove %q: %v", step, key, !had)
			}
			delete(want, key)
		default:
			k, node, ok := ix.takeOldest(nil, func([]byte) bool { return true })
			if ok != (len(want) > 0) {
				t.Fatalf("step %d: takeOldest ok %v with %d items", step, ok, len(want))
			}
			if !ok {
				continue
			}
			for other, use := range lastUse {
				if _, live := want[other]; live && use < lastUse[string(k)] {
					t.Fatalf("step %d: evicted %q used at %d, but %q was used at %d", step, k, lastUse[string(k)], other, use)
				}
			}
			applied := rng.IntN(4) != 0
			ix.settle([]int32{node}, applied, now, flushView{})
			if applied {
				delete(want, string(k))
			}
		}
		if step%500 == 0 {
			checkIndex(t, ix)
		}
	}
	checkIndex(t, ix)
	if int(ix.items.Load()) != len(want) {
		t.Fatalf("%d items, want %d", ix.items.Load(), len(want))
	}
}

// TestItemIndexHashCollision: keys with the same hash are told apart.
func TestItemIndexHashCollision(t *testing.T) {
	ix := newItemIndex(0, 0)
	ix.mu.Lock()
	a := ix.alloc([]byte("a"), 42)
	b := ix.alloc([]byte("b"), 42)
	for _, i := range []int32{a, b} {
		ix.node(i).size = 100
		ix.node(i).class = uint8(slabClass(100))
		ix.link(i)
		ix.bytes.Add(entryBytes(100, 1))
	}
	if ix.find([]byte("a"), 42) != a || ix.find([]byte("b"), 42) != b || ix.find([]byte("c"), 42) != nilNode {
		t.Error("keys of one hash are not told apart")
	}
	ix.drop(b)
	if ix.find([]byte("a"), 42) != a || ix.find([]byte("b"), 42) != nilNode {
		t.Error("dropping one key of a hash lost the other")
	}
	ix.mu.Unlock()
	checkIndex(t, ix)
}

// TestItemIndexCompactsKeys: the key arena is compacted once most of it
// is dead, and keys stay right.
func TestItemIndexCompactsKeys(t *testing.T) {
	ix := newItemIndex(0, 0)
	for i := range 20000 {
		key := fmt.Sprintf("%0200d", i)
		ix.put([]byte(key), itemMeta{size: 300}, nil, 0)
		if i >= 100 {
			ix.remove([]byte(fmt.Sprintf("%0200d", i-100)))
		}
	}
	if len(ix.keys) > 1<<20 {
		t.Errorf("key arena of %d bytes for 100 keys of 200 bytes", len(ix.keys))
	}
	checkIndex(t, ix)
}

// TestSlabClasses: memcached 1.6.18's default classes, as memcached -vv
// prints them.
func TestSlabClasses(t *testing.T) {
	want := []int{96, 120, 152, 192, 240, 304, 384, 480, 600, 752, 944, 1184, 1480, 1856, 2320, 2904, 3632, 4544, 5680,
		7104, 8880, 11104, 13880, 17352, 21696, 27120, 33904, 42384, 52984, 66232, 82792, 103496, 129376, 161720,
		202152, 252696, 315872, 394840, 524288}
	if got := classSizes[1 : lastClass+1]; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("classes %v,\nwant %v", got, want)
	}
	for _, c := range []struct{ size, class int }{{1, 1}, {63, 1}, {96, 1}, {97, 2}, {120, 2}, {121, 3}, {152, 3}, {360, 7}, {1 << 20, lastClass}} {
		if got := slabClass(c.size); got != c.class {
			t.Errorf("slabClass(%d) = %d, want %d", c.size, got, c.class)
		}
	}
}
