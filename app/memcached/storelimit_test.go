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

// TestStoreMemoryBound: distinct keys are stored until the store holds
// Config.StoreMemory, then a set is refused with memcached's out-of-memory
// line (and deletes the key's old value, as memcached does), an add or an
// append too, while gets, deletes and touch still run; the store grew no
// further than the bound and a little slack, and once deleted items were
// compacted away sets are taken again.
func TestStoreMemoryBound(t *testing.T) {
	srv := openServer(t, Config{StoreMemory: MinStoreMemory})
	// Random bytes: the store compresses its tables, and a compaction of
	// repeated bytes would take the store far below its bound at once.
	raw := make([]byte, 512<<10)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range raw {
		raw[i] = byte(rng.Uint32())
	}
	value := string(raw)
	set := func(cmd, key string) string {
		return text(exchange(srv, 0, fmt.Sprintf("%s %s 0 0 %d\r\n%s\r\n", cmd, key, len(value), value)))
	}
	stored := 0
	for ; stored < 1024; stored++ { // 512 MiB: four times the bound
		if got := set("set", fmt.Sprintf("k%d", stored)); got != "STORED\r\n" {
			if got != "SERVER_ERROR out of memory storing object\r\n" {
				t.Fatalf("set %d: %q", stored, got)
			}
			break
		}
	}
	if stored == 1024 || stored < 64 {
		t.Fatalf("%d sets of 512 KiB stored under a %d-byte bound", stored, MinStoreMemory)
	}
	used := srv.st.lim.used.Load()
	// A memtable (allocated whole when the previous one fills) may take
	// the store past its bound once, and so may what writers admit and
	// compactions write between two readings of its size. The memtables
	// follow the bound: 64 MiB ones held the store 63 MB past it here.
	mt := int64(memTableSize(MinStoreMemory))
	if slack := mt + 16<<20; used > MinStoreMemory+slack {
		t.Errorf("store holds %d bytes, bound %d", used, MinStoreMemory)
	}
	if got := int64(srv.st.db.Metrics().MemTable.Size); got > 3*mt {
		t.Errorf("memtables of %d bytes under a bound of %d, want at most 3 x %d", got, MinStoreMemory, mt)
	}
	expect(t, srv, "set k0 0 0 1\r\nx\r\nget k0\r\n", "SERVER_ERROR out of memory storing object\r\nEND\r\n")
	if got := set("add", "fresh"); got != "SERVER_ERROR out of memory storing object\r\n" {
		t.Errorf("add on a full store: %q", got)
	}
	if got := text(exchange(srv, 0, "append k1 0 0 2\r\nxx\r\n")); got != "SERVER_ERROR out of memory storing object\r\n" {
		t.Errorf("append on a full store: %q", got)
	}
	expect(t, srv, "get k2\r\n", "VALUE k2 0 "+fmt.Sprint(len(value))+"\r\n"+value+"\r\nEND\r\n")
	expect(t, srv, "touch k2 100\r\n", "TOUCHED\r\n")
	if n := srv.st.lim.refused.Load(); n < 4 {
		t.Errorf("%d refusals counted, want at least 4", n)
	}

	var del strings.Builder
	for i := 1; i < stored; i++ {
		fmt.Fprintf(&del, "delete k%d noreply\r\n", i)
	}
	exchange(srv, 0, del.String())
	t.Logf("%d sets of 512 KiB stored, store %d bytes, %d refusals", stored, used, srv.st.lim.refused.Load())
	start := time.Now()
	deadline := start.Add(30 * time.Second)
	for set("set", "after") != "STORED\r\n" {
		if time.Now().After(deadline) {
			t.Fatalf("sets still refused 30s after deleting every item (store holds %d bytes)", srv.st.lim.used.Load())
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("sets taken again %v after the deletes", time.Since(start))
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
// under a bound.
func TestHeapBound(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		want int64
		ok   bool
	}{
		{Config{StoreMemory: MinStoreMemory}, 192 << 20, true},
		{Config{}, DefaultStoreMemory * 3 / 2, true},
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
