package dirlock

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble"
)

// TestMain makes the test binary, started with DIRLOCK_HOLD=dir, open a
// Pebble store in dir, say "ready" and hold it until its input closes.
func TestMain(m *testing.M) {
	if dir := os.Getenv("DIRLOCK_HOLD"); dir != "" {
		db, err := pebble.Open(dir, &pebble.Options{})
		if err != nil {
			os.Stdout.WriteString("error " + err.Error() + "\n")
			os.Exit(1)
		}
		os.Stdout.WriteString("ready\n")
		bufio.NewReader(os.Stdin).ReadString('\n')
		db.Close()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// holdInChild opens dir in a child process and returns its pid.
func holdInChild(t *testing.T, dir string) int {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "DIRLOCK_HOLD="+dir)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.Close(); cmd.Wait() })
	line, _ := bufio.NewReader(out).ReadString('\n')
	if line != "ready\n" {
		t.Fatalf("child: %q", line)
	}
	return cmd.Process.Pid
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
