package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestFileArgumentsRefuseDevices: every command that reads a file the user
// names refuses an endless device (/dev/zero, also through a symbolic link
// with the expected extension) and a FIFO without a writer at once,
// instead of reading until memory runs out or waiting forever.
func TestFileArgumentsRefuseDevices(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.wasm")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatalf("mkfifo: %v", err)
	}
	link := func(name string) string {
		p := filepath.Join(dir, name)
		if err := os.Symlink("/dev/zero", p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	yaml, csv, json := link("zero.yaml"), link("zero.csv"), link("zero.json")
	for _, args := range [][]string{
		{"serve", "--config", "/dev/zero", "--print-config"},
		{"serve", "--config", fifo, "--print-config"},
		{"sim", "--workload", yaml},
		{"sim", "--phases", yaml},
		{"sim", "--tenants", yaml},
		{"plot", "--out", dir, csv},
		{"plot", "--out", dir, json},
		{"classifier", "check", "/dev/zero"},
		{"classifier", "check", fifo},
		{"sweep", "--phases", yaml},
	} {
		done := make(chan struct{})
		var out string
		var err error
		go func() {
			defer close(done)
			out, err = runApp(t, args...)
		}()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Fatalf("%v: still running after 20s", args)
		}
		if err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Errorf("%v: %v\n%.300s", args, err, out)
		}
	}
}
