package dirlock

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble"

	"github.com/persephone-go/psp/internal/testenv"
)

// TestMain makes the test binary, started with DIRLOCK_HOLD=dir, open a
// Pebble store in dir, say "ready" and its pid, and hold the store until
// its input closes.
func TestMain(m *testing.M) {
	if dir := os.Getenv("DIRLOCK_HOLD"); dir != "" {
		db, err := pebble.Open(dir, &pebble.Options{})
		if err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		fmt.Println("ready", os.Getpid())
		bufio.NewReader(os.Stdin).ReadString('\n')
		db.Close()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// holdInChild opens dir in a child process and returns its pid.
func holdInChild(t *testing.T, dir string) int {
	t.Helper()
	line, _ := testenv.Child(t, "DIRLOCK_HOLD="+dir).ReadString('\n')
	var pid int
	if _, err := fmt.Sscanf(line, "ready %d", &pid); err != nil {
		t.Fatalf("child: %q", line)
	}
	return pid
}

// TestCheck: a directory another process holds is named with that
// process's pid; one this process holds says so; other errors pass.
func TestCheck(t *testing.T) {
	dir := t.TempDir()
	pid := holdInChild(t, dir)
	_, err := pebble.Open(dir, &pebble.Options{})
	if err == nil {
		t.Fatal("a second open of a held directory succeeded")
	}
	err = Check(dir, err)
	var iu *InUseError
	if !errors.As(err, &iu) || !errors.Is(err, ErrInUse) || iu.PID != pid || iu.Self {
		t.Fatalf("Check: %v (%+v), want in use by pid %d", err, iu, pid)
	}
	if want := "in use by another psp (pid "; !strings.Contains(err.Error(), want) {
		t.Errorf("message %q lacks %q", err, want)
	}

	own := t.TempDir()
	db, err := pebble.Open(own, &pebble.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	_, err = pebble.Open(own, &pebble.Options{})
	if err = Check(own, err); !errors.As(err, &iu) || !iu.Self || !errors.Is(err, ErrInUse) {
		t.Errorf("second open in this process: %v", err)
	}

	file := filepath.Join(t.TempDir(), "file")
	os.WriteFile(file, nil, 0o600)
	_, err = pebble.Open(file, &pebble.Options{})
	if err == nil || errors.Is(Check(file, err), ErrInUse) {
		t.Errorf("a file for a directory: %v, taken for a directory in use", err)
	}
	if Check(dir, nil) != nil {
		t.Error("Check of no error is an error")
	}
}
