package server

import (
	"context"
	"math"
	"os"
	"runtime/debug"
	"testing"
	"time"

	"github.com/persephone-go/psp/wasmclass"
)

// TestMemoryLimit: serve's soft memory limit counts the memcached store's
// tables in memory and its read cache, the packet pool when it is in the Go heap and the TCP
// values when the store serves TCP; it sets none for other applications,
// stores on disk or unbounded, nor over a limit the user chose.
func TestMemoryLimit(t *testing.T) {
	const mib = 1 << 20
	memcached := func(edit func(*Config)) Config {
		c := Config{App: App{Name: AppMemcached}}
		c.App.Memcached.StoreMemory = 128 * mib
		if edit != nil {
			edit(&c)
		}
		return c.withDefaults()
	}
	// The memcached defaults: 2048 buffers and 512 for the classifier
	// lanes, of 65535 bytes each.
	pool := int64(2048+512) * 65535
	for _, c := range []struct {
		name string
		cfg  Config
		want int64 // 0: none
	}{
		{"memcached 128 MiB", memcached(nil), (256+16)*mib + pool + memoryLimitMargin},
		{"memcached default bound", memcached(func(c *Config) { c.App.Memcached.StoreMemory = 0 }), (2048+128)*mib + pool + memoryLimitMargin},
		{"memcached with TCP", memcached(func(c *Config) { c.App.Memcached.TCP = "127.0.0.1:0" }), (256+16)*mib + pool + 64*mib + memoryLimitMargin},
		{"memcached with TCP memory", memcached(func(c *Config) {
			c.App.Memcached.TCP = "127.0.0.1:0"
			c.App.Memcached.TCPMemory = 8 * mib
		}), (256+16)*mib + pool + 8*mib + memoryLimitMargin},
		{"memcached smaller pool", memcached(func(c *Config) { c.Buffers, c.BufSize = 1024, 9000 }), (256+16)*mib + (1024+256)*9000 + memoryLimitMargin},
		{"memcached on dpdk", memcached(func(c *Config) { c.Dataplane = DataplaneDPDK }), (256+16)*mib + memoryLimitMargin},
		{"memcached unbounded", memcached(func(c *Config) { c.App.Memcached.StoreMemory = -1 }), 0},
		{"memcached on disk", memcached(func(c *Config) { c.App.Memcached.Dir = t.TempDir() }), 0},
		{"kv", Config{App: App{Name: AppKV}}.withDefaults(), 0},
	} {
		got, ok := memoryLimitFor(c.cfg, "", math.MaxInt64)
		if ok != (c.want != 0) || got != c.want {
			t.Errorf("%s: limit %d, %v; want %d", c.name, got, ok, c.want)
		}
	}
	cfg := memcached(nil)
	for _, env := range []string{"1GiB", "off"} {
		if got, ok := memoryLimitFor(cfg, env, math.MaxInt64); ok {
			t.Errorf("GOMEMLIMIT=%s: limit %d set over it", env, got)
		}
	}
	if got, ok := memoryLimitFor(cfg, "", 3<<30); ok {
		t.Errorf("a limit in force: %d set over it", got)
	}
}

// TestServeSetsMemoryLimit: a server of the memcached application with its
// store in memory sets the limit while it runs and puts back the previous
// one when it stops.
func TestServeSetsMemoryLimit(t *testing.T) {
	if os.Getenv("GOMEMLIMIT") != "" || debug.SetMemoryLimit(-1) != math.MaxInt64 {
		t.Skip("a memory limit is set for the tests")
	}
	cfg := memConfig()
	cfg.Workers = 2
	cfg.Buffers = 256
	cfg.App = App{Name: AppMemcached}
	cfg.App.Memcached.StoreMemory = 128 << 20
	want, ok := memoryLimit(cfg.withDefaults())
	if !ok {
		t.Fatal("no limit for the memcached application in memory")
	}
	r := start(t, cfg)
	for deadline := time.Now().Add(10 * time.Second); debug.SetMemoryLimit(-1) != want; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("memory limit %d while serving, want %d", debug.SetMemoryLimit(-1), want)
		}
	}
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Errorf("memory limit %d after the server stopped, want none", got)
	}
}

// TestMemoryLimitFollowsClassifiers: the soft memory limit serve sets
// counts the tenants' Wasm classifiers (two linear memories at their limit
// each) as tenants come and go, and a swap does not leave it raised.
func TestMemoryLimitFollowsClassifiers(t *testing.T) {
	if os.Getenv("GOMEMLIMIT") != "" || debug.SetMemoryLimit(-1) != math.MaxInt64 {
		t.Skip("a memory limit is set for the tests")
	}
	cfg := tenantConfig(t)
	cfg.Workers = 4
	cfg.App = App{Name: AppMemcached}
	cfg.App.Memcached.StoreMemory = 128 << 20
	cfg.Tenants[0].Workers = 1
	base, ok := memoryLimit(cfg.withDefaults())
	if !ok {
		t.Fatal("no limit for the memcached application in memory")
	}
	// Tenant b runs pspheader.wasm at the default memory limit.
	withB := base + classifierHeap(wasmclass.DefaultMemoryLimitPages)
	r := start(t, cfg)
	waitLimit := func(what string, want int64) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); debug.SetMemoryLimit(-1) != want; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: memory limit %d, want %d", what, debug.SetMemoryLimit(-1), want)
			}
		}
	}
	waitLimit("at start", withB)
	wasm, err := os.ReadFile(exampleWasm(t, "pspheader.wasm"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	big := Tenant{Name: "c", Ports: []uint16{7003}, Wasm: wasm, Workers: 1, ClassifierOptions: ClassifierOptions{MemoryPages: 1024}}
	if err := r.srv.AddTenant(ctx, big); err != nil {
		t.Fatal(err)
	}
	withC := withB + classifierHeap(1024)
	if classifierHeap(1024) < 128<<20 {
		t.Fatalf("a 1,024-page classifier counted %d bytes, less than its two 64 MiB memories", classifierHeap(1024))
	}
	waitLimit("tenant c added", withC)
	if _, err := r.srv.Swap(ctx, "c", wasm); err != nil {
		t.Fatal(err)
	}
	waitLimit("c swapped", withC)
	if err := r.srv.AddTenant(ctx, Tenant{Name: "c", Ports: []uint16{7004}, Wasm: wasm}); err == nil {
		t.Fatal("a second tenant c was added")
	}
	waitLimit("a refused add", withC)
	if err := r.srv.RemoveTenant(ctx, "c"); err != nil {
		t.Fatal(err)
	}
	waitLimit("c removed", withB)
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Errorf("memory limit %d after the server stopped, want none", got)
	}
}
