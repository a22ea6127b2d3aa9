package memcached

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble"

	"github.com/persephone-go/psp/internal/testenv"
)

// randomValue is n random bytes, as a string: the store compresses its
// tables, and a compaction of repeated bytes would take the store far
// below its bound at once.
func randomValue(n int, seed uint64) string {
	raw := make([]byte, n)
	rng := rand.New(rand.NewPCG(seed, 2))
	for i := range raw {
		raw[i] = byte(rng.Uint32())
	}
	return string(raw)
}

// TestStoreEvicts: sets of distinct keys twice past the store's
// bound are all stored, the least recently used keys are evicted (a key
// read meanwhile stays), the items stay within the item budget, the store
// within its bound and a little slack, and stats count the evictions.
func TestStoreEvicts(t *testing.T) {
	srv := openServer(t, Config{StoreMemory: MinStoreMemory})
	value := randomValue(512<<10, 1)
	set := func(key string) string {
		return text(exchange(srv, 0, fmt.Sprintf("set %s 0 0 %d\r\n%s\r\n", key, len(value), value)))
	}
	const n = 512 // 256 MiB: twice the bound
	for i := range n {
		if got := set(fmt.Sprintf("k%d", i)); got != "STORED\r\n" {
			t.Fatalf("set %d: %.80q", i, got)
		}
		if i%16 == 0 {
			// k0 is read often: it stays.
			if got := text(exchange(srv, 0, "get k0\r\n")); !strings.HasPrefix(got, "VALUE k0 ") {
				t.Fatalf("after %d sets, k0 (read every 16) is gone: %.80q", i, got)
			}
		}
	}
	if got := text(exchange(srv, 0, "get k1\r\n")); got != "END\r\n" {
		t.Errorf("k1, least recently used, still there: %.80q", got)
	}
	if got := text(exchange(srv, 0, fmt.Sprintf("get k%d\r\n", n-1))); !strings.HasPrefix(got, fmt.Sprintf("VALUE k%d ", n-1)) {
		t.Errorf("the last key set is gone: %.80q", got)
	}
	st := srv.st
	if used := st.ix.bytes.Load(); used > st.itemBudget {
		t.Errorf("items take %d bytes, budget %d", used, st.itemBudget)
	}
	items, evicted := st.ix.items.Load(), st.ix.totals().evicted
	if items+int64(evicted) != n || evicted < n/2 {
		t.Errorf("%d items and %d evictions after %d sets", items, evicted, n)
	}
	stats := text(exchange(srv, 0, "stats\r\n"))
	for _, want := range []string{fmt.Sprintf("STAT evictions %d\r\n", evicted), fmt.Sprintf("STAT curr_items %d\r\n", items),
		fmt.Sprintf("STAT total_items %d\r\n", n), "STAT store_no_memory 0\r\n"} {
		if !strings.Contains(stats, want) {
			t.Errorf("stats lack %q", want)
		}
	}
	used := st.lim.used.Load()
	// A memtable (allocated whole when the previous one fills) may take
	// the store past its bound once, and so may what writers admit and
	// compactions write between two readings of its size.
	if slack := int64(memTableSize(MinStoreMemory)) + 16<<20; used > MinStoreMemory+slack {
		t.Errorf("store holds %d bytes, bound %d", used, MinStoreMemory)
	}
	t.Logf("%d sets of 512 KiB: %d items, %d evicted, items %d bytes, store %d bytes, %d refusals",
		n, items, evicted, st.ix.bytes.Load(), used, st.lim.refused.Load())
}

// TestStoreMemoryBound: with evictions disabled (memcached -M), distinct
// keys are stored until the items fill their budget, then a set is
// refused with memcached's out-of-memory line (and deletes the key's old
// value, as memcached does), an add or an append too, while gets, deletes
// and touch still run; once items are deleted, sets are taken again.
func TestStoreMemoryBound(t *testing.T) {
	srv := openServer(t, Config{StoreMemory: MinStoreMemory, DisableEvictions: true, MaxItemSize: 4 << 20})
	value := randomValue(512<<10, 1)
	set := func(cmd, key string) string {
		return text(exchange(srv, 0, fmt.Sprintf("%s %s 0 0 %d\r\n%s\r\n", cmd, key, len(value), value)))
	}
	stored := 0
	for ; stored < 1024; stored++ {
		if got := set("set", fmt.Sprintf("k%d", stored)); got != "STORED\r\n" {
			if got != "SERVER_ERROR out of memory storing object\r\n" {
				t.Fatalf("set %d: %.80q", stored, got)
			}
			break
		}
	}
	if stored == 1024 || stored < 64 {
		t.Fatalf("%d sets of 512 KiB stored under a %d-byte bound", stored, MinStoreMemory)
	}
	refused := "SERVER_ERROR out of memory storing object\r\n"
	for _, cmd := range []string{"set", "add"} {
		if got := set(cmd, "fresh"); got != refused {
			t.Errorf("%s of a new key on a full store: %.80q", cmd, got)
		}
	}
	// Growing k0 past what is left is refused; a set refused deletes the
	// key's old value, as memcached's does.
	more := value[:srv.st.itemBudget-srv.st.ix.bytes.Load()+1]
	if got := text(exchange(srv, 0, fmt.Sprintf("append k0 0 0 %d\r\n%s\r\n", len(more), more))); got != refused {
		t.Errorf("an append of %d bytes, one more than is left: %.80q", len(more), got)
	}
	if got := text(exchange(srv, 0, fmt.Sprintf("set k0 0 0 %d\r\n%s\r\n", len(value)+len(more), value+more))); got != refused {
		t.Errorf("a set growing k0 by %d bytes: %.80q", len(more), got)
	}
	expect(t, srv, "get k0\r\n", "END\r\n")
	if got := text(exchange(srv, 0, "get k2\r\n")); !strings.HasPrefix(got, "VALUE k2 0 524288\r\n") {
		t.Errorf("get k2 on a full store: %.80q", got)
	}
	expect(t, srv, "touch k2 100\r\n", "TOUCHED\r\n")
	stats := text(exchange(srv, 0, "stats\r\n"))
	if !strings.Contains(stats, "STAT store_no_memory 5\r\n") || !strings.Contains(stats, "STAT evictions 0\r\n") {
		t.Errorf("stats: want store_no_memory 5 and no evictions:\n%s", stats)
	}
	expect(t, srv, "delete k1\r\ndelete k2\r\n", "DELETED\r\nDELETED\r\n")
	if got := set("set", "after"); got != "STORED\r\n" {
		t.Errorf("a set after deletes: %.80q", got)
	}
}

// TestStoreMemoryBounds: the bound's configuration is checked.
func TestStoreMemoryBounds(t *testing.T) {
	for _, n := range []int64{1, MinStoreMemory - 1, maxStoreMemory + 1} {
		if err := (Config{StoreMemory: n}).Validate(); err == nil {
			t.Errorf("store memory %d accepted", n)
		}
	}
	for _, n := range []int64{-1, 0, MinStoreMemory, DefaultStoreMemory} {
		if err := (Config{StoreMemory: n}).Validate(); err != nil {
			t.Errorf("store memory %d: %v", n, err)
		}
	}
}

// TestMemTableSize: a store in memory sizes its memtables from its bound.
func TestMemTableSize(t *testing.T) {
	for _, c := range []struct {
		limit int64
		want  uint64
	}{
		{-1, 64 << 20}, // unbounded
		{0, 64 << 20},
		{MinStoreMemory, 8 << 20},
		{256 << 20, 16 << 20},
		{DefaultStoreMemory, 64 << 20},
		{16 << 30, 64 << 20},
		{32 << 20, 4 << 20}, // below the least bound: the floor
	} {
		if got := memTableSize(c.limit); got != c.want {
			t.Errorf("memTableSize(%d) = %d, want %d", c.limit, got, c.want)
		}
	}
}

// TestHeapBound: the Go heap a store holds is bounded only in memory and
// under a bound: twice the bound, and its read cache (an eighth of the
// bound unless set).
func TestHeapBound(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		want int64
		ok   bool
	}{
		{Config{StoreMemory: MinStoreMemory}, 256<<20 + 16<<20, true},
		{Config{}, DefaultStoreMemory*2 + DefaultStoreMemory/8, true},
		{Config{StoreMemory: MinStoreMemory, ReadCache: -1}, 256 << 20, true},
		{Config{StoreMemory: MinStoreMemory, ReadCache: 1 << 20}, 257 << 20, true},
		{Config{StoreMemory: -1}, 0, false},
		{Config{Dir: t.TempDir(), StoreMemory: MinStoreMemory}, 0, false},
	} {
		if got, ok := c.cfg.HeapBound(); got != c.want || ok != c.ok {
			t.Errorf("%+v: HeapBound() = %d, %v, want %d, %v", c.cfg, got, ok, c.want, c.ok)
		}
	}
}

// TestStoreSizeObsoleteWrapped: Pebble v1.1's obsolete tables' size may
// wrap below zero (cockroachdb/pebble#4811); the store's size does not
// take it for a huge number or subtract it.
func TestStoreSizeObsoleteWrapped(t *testing.T) {
	m := &pebble.Metrics{}
	m.Levels[6].Size = 100 << 20
	wrapped := int64(-30 << 20)
	m.Table.ObsoleteSize = uint64(wrapped)
	m.MemTable.Size = 8 << 20
	disk := &store{}
	if got, want := disk.size(m), int64(108<<20); got != want {
		t.Errorf("on disk: size %d, want %d", got, want)
	}
	mem := &store{mem: newTableFS()}
	mem.mem.held.Store(110 << 20) // live and obsolete tables, as held
	if got, want := mem.size(m), int64(118<<20); got != want {
		t.Errorf("in memory: size %d, want %d", got, want)
	}
}

// TestItemSizeAboveHalfTheStore: an item size limit above half the store
// memory is refused, as memcached refuses -I above half of -m (exit 64,
// "Cannot set item size limit higher than 1/2 of memory max."), and one
// of exactly half is taken by both; an unbounded store takes any limit up
// to 1 GiB.
func TestItemSizeAboveHalfTheStore(t *testing.T) {
	const store = 256 << 20
	for _, c := range []struct {
		item int
		ok   bool
	}{{store / 2, true}, {store/2 + 1, false}, {store/2 + 1<<20, false}, {store / 4, true}} {
		err := Config{StoreMemory: store, MaxItemSize: c.item}.Validate()
		if (err == nil) != c.ok {
			t.Errorf("store %d, item size %d: %v, want ok %v", store, c.item, err, c.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "more than half the store memory") {
			t.Errorf("item size %d: %v does not say why", c.item, err)
		}
	}
	if err := (Config{StoreMemory: -1, MaxItemSize: maxItemSize}).Validate(); err != nil {
		t.Errorf("unbounded store, 1 GiB items: %v", err)
	}
	if err := (Config{MaxItemSize: DefaultStoreMemory/2 + 1}).Validate(); err == nil {
		t.Errorf("default store, items of half of it and a byte: accepted")
	}

	bin := testenv.RequireTool(t, "memcached")
	for _, c := range []struct {
		item string
		ok   bool
	}{{"128m", true}, {"129m", false}} {
		args := []string{"-m", "256", "-I", c.item, "-p", "0", "-U", "0", "-l", "127.0.0.1"}
		if os.Geteuid() == 0 {
			args = append(args, "-u", "nobody")
		}
		cmd := exec.Command(bin, args...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			var ee *exec.ExitError
			if c.ok || !errors.As(err, &ee) || ee.ExitCode() != 64 || !strings.Contains(stderr.String(), "higher than 1/2 of memory max") {
				t.Errorf("memcached -m 256 -I %s: exited %v, %q; want it refused", c.item, err, stderr.String())
			}
		case <-time.After(500 * time.Millisecond):
			cmd.Process.Kill()
			<-done
			if !c.ok {
				t.Errorf("memcached -m 256 -I %s runs; want it refused", c.item)
			}
		}
	}
}
