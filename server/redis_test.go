package server

import (
	"errors"
	"testing"
)

// TestRedisConfig: the redis app listens on Redis's port over TCP by
// default, refuses UDP and a negative maxmemory, and with a maxmemory
// sets a Go memory limit above it.
func TestRedisConfig(t *testing.T) {
	cfg := Config{App: App{Name: AppRedis}}.withDefaults()
	if cfg.Listen != DefaultRedisListen {
		t.Errorf("default listen %q, want %q", cfg.Listen, DefaultRedisListen)
	}
	if err := (Config{App: App{Name: AppRedis}}).Validate(); err != nil {
		t.Errorf("default redis config: %v", err)
	}
	for _, bad := range []Config{
		{App: App{Name: AppRedis}, Listen: "127.0.0.1:6379"},
		{App: App{Name: AppRedis}, Listen: "udp://127.0.0.1:6379,tcp://127.0.0.1:6379"},
		{App: App{Name: AppRedis, Redis: Redis{MaxMemory: -1}}},
	} {
		if err := bad.Validate(); !errors.Is(err, ErrConfig) {
			t.Errorf("%+v: %v, want ErrConfig", bad.App, err)
		}
	}
	if _, ok := memoryLimit(Config{App: App{Name: AppRedis}}.withDefaults()); ok {
		t.Error("a memory limit without maxmemory")
	}
	const mm = 1 << 30
	limit, ok := memoryLimit(Config{App: App{Name: AppRedis, Redis: Redis{MaxMemory: mm}}}.withDefaults())
	if !ok || limit < mm+mm/10 {
		t.Errorf("memory limit %d (%v) with maxmemory %d", limit, ok, mm)
	}
}
