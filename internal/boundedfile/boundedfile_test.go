package boundedfile_test

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/persephone-go/psp/internal/boundedfile"
)

func TestRead(t *testing.T) {
	dir := t.TempDir()
	small := filepath.Join(dir, "small")
	if err := os.WriteFile(small, []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := boundedfile.Read(small, 5); err != nil || string(b) != "hello" {
		t.Fatalf("Read at its bound: %q, %v", b, err)
	}
	if _, err := boundedfile.Read(small, 4); !errors.Is(err, boundedfile.ErrTooLarge) {
		t.Errorf("Read over its bound: %v, want ErrTooLarge", err)
	}
	if _, err := boundedfile.Read(dir, 1<<20); !errors.Is(err, boundedfile.ErrNotRegular) {
		t.Errorf("Read of a directory: %v, want ErrNotRegular", err)
	}
	if _, err := boundedfile.Read(filepath.Join(dir, "missing"), 1); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Read of a missing file: %v, want ErrNotExist", err)
	}
}

// TestDevicesAndFIFOs: /dev/zero (endless) and a FIFO with no writer
// (which a plain open would wait on forever) are refused at once, through
// a symbolic link too.
func TestDevicesAndFIFOs(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	link := filepath.Join(dir, "zero")
	if err := os.Symlink("/dev/zero", link); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/dev/zero", link, fifo} {
		done := make(chan error, 1)
		go func() { _, err := boundedfile.Read(p, 1<<20); done <- err }()
		select {
		case err := <-done:
			if !errors.Is(err, boundedfile.ErrNotRegular) {
				t.Errorf("%s: %v, want ErrNotRegular", p, err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: Read still waiting after 5s", p)
		}
	}
}

// TestGrowsWhileRead: a file that grows past the bound after it was
// opened is refused, not cut.
func TestGrowsWhileRead(t *testing.T) {
	p := filepath.Join(t.TempDir(), "grows")
	if err := os.WriteFile(p, []byte("abc"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := boundedfile.Open(p, 3)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := os.WriteFile(p, []byte("abcdef"), 0o644); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 16)
	total := 0
	for {
		n, err := f.Read(buf)
		total += n
		if err != nil {
			if !errors.Is(err, boundedfile.ErrTooLarge) {
				t.Fatalf("after %d bytes: %v, want ErrTooLarge", total, err)
			}
			return
		}
	}
}
