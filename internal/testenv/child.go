package testenv

import (
	"bufio"
	"bytes"
	"net"
	"os"
	"os/exec"
	"testing"
	"time"
)

// Child runs the test binary again as a helper process, with env added to
// the environment and no test selected: its TestMain sees the variable
// and plays its part (a server under other limits, a lone client) until
// its standard input closes. Child returns the helper's standard output;
// when the test ends it closes the helper's input and waits for it to
// exit (a helper still running 10 s later is killed and the test fails;
// so does one exiting with an error).
func Child(tb testing.TB, env ...string) *bufio.Reader {
	tb.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	tb.Cleanup(func() {
		stdin.Close()
		select {
		case err := <-exited:
			if err != nil {
				tb.Errorf("helper process %v: %v", env, err)
			}
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-exited
			tb.Errorf("helper process %v did not exit", env)
		}
	})
	return bufio.NewReader(stdout)
}

// Start starts cmd and returns a channel that receives the result of its
// Wait once. When the test ends a process still running is killed and
// reaped, so that no test leaves one behind.
func Start(tb testing.TB, cmd *exec.Cmd) <-chan error {
	tb.Helper()
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	exited := make(chan error, 1)
	reaped := make(chan struct{})
	go func() {
		exited <- cmd.Wait()
		close(reaped)
	}()
	tb.Cleanup(func() {
		cmd.Process.Kill() // fails harmlessly once the process has exited
		<-reaped
	})
	return exited
}

// DebianPython runs script as `python3 - HOST PORT` against addr (host:port)
// with /usr/bin/python3, the interpreter Debian's python3-* packages are
// installed for, and returns its combined output. Without module (of
// Debian's package pkg) it skips the test, failing it in CI.
func DebianPython(tb testing.TB, pkg, module string, script []byte, addr string) ([]byte, error) {
	tb.Helper()
	py := "/usr/bin/python3"
	if err := exec.Command(py, "-c", "import "+module).Run(); err != nil {
		Skip(tb, "%s is not installed for %s: %v", pkg, py, err)
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		tb.Fatal(err)
	}
	cmd := exec.Command(py, "-", host, port)
	cmd.Stdin = bytes.NewReader(script)
	return cmd.CombinedOutput()
}
