package server

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestParseConfigRefusesSecondDocument(t *testing.T) {
	if _, err := ParseConfig([]byte("workers: 3\n---\nworkers: 5\n")); !errors.Is(err, ErrConfig) {
		t.Errorf("two YAML documents: %v, want ErrConfig (the second would be ignored)", err)
	}
	for _, ok := range []string{"", "workers: 3\n", "---\nworkers: 3\n", "workers: 3\n...\n"} {
		if _, err := ParseConfig([]byte(ok)); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
}

func TestKVValueMustFitReplyBuffer(t *testing.T) {
	cfg := memConfig()
	cfg.App = App{Name: AppKV, KV: KV{ValueSize: 4096}} // buf_size default 2048
	if err := cfg.Validate(); !errors.Is(err, ErrConfig) {
		t.Errorf("kv value size 4096 with 2048-byte buffers: Validate = %v, want ErrConfig (GET replies would be cut short)", err)
	}
	cfg.App.KV.ValueSize = DefaultBufSize - 16
	if err := cfg.Validate(); err != nil {
		t.Errorf("kv value size filling the buffer exactly: %v", err)
	}
}

func TestOverloadConfig(t *testing.T) {
	cfg, err := ParseConfig([]byte(`
deadline_factor: 5
deadline_floor: 20ms
types:
  LONG: {deadline: 300ms, budget: 500, guarantee: 100}
  SHORT: {deadline: "off"}
app: {name: emulate, max_service: 2ms}
`))
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	d, err := cfg.withDefaults().policyConfig(headerTypes(), 8160)
	if err != nil {
		t.Fatal(err)
	}
	if d.DeadlineFactor != 5 || d.DeadlineFloor != int64(20*time.Millisecond) || d.Pool != 8160 ||
		d.Deadlines[2] != int64(300*time.Millisecond) || d.Deadlines[1] != -1 || d.Budgets[2] != 500 || d.Guarantees[2] != 100 {
		t.Errorf("policy config %+v", d)
	}
	if err := d.Validate(); err != nil {
		t.Errorf("policy config refused: %v", err)
	}
	cfg.Types["NOPE"] = TypeLimits{Budget: 3}
	if _, err := cfg.withDefaults().policyConfig(headerTypes(), 8160); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), `"NOPE"`) {
		t.Errorf("unknown type name: %v", err)
	}
	for _, bad := range []string{
		"types: {LONG: {deadline: soon}}",
		"types: {LONG: {deadline: -3s}}",
		"types: {LONG: {budget: -1}}",
		"app: {max_service: -1ms}",
	} {
		c, err := ParseConfig([]byte(bad))
		if err == nil {
			err = c.Validate()
		}
		if !errors.Is(err, ErrConfig) {
			t.Errorf("%q: %v, want ErrConfig", bad, err)
		}
	}
}

// Queue capacities that cannot fit the pool are refused with a clear error.
func TestQueueCapacityMustFitThePool(t *testing.T) {
	cfg := memConfig()
	cfg.QueueCapacity = 4096 // 12 types x 4096 on a pool of 1536
	_, err := New(context.Background(), cfg, Options{})
	if err == nil || !strings.Contains(err.Error(), "more than the pool's 1536 buffers") {
		t.Fatalf("New = %v, want a refusal naming the pool", err)
	}
	cfg.QueueCapacity = 100
	srv, err := New(context.Background(), cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	srv.Close()
}
