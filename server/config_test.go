package server

import (
	"errors"
	"testing"
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
