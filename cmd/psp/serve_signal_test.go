package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/persephone-go/psp/admin"
	"github.com/persephone-go/psp/internal/testenv"
	"github.com/persephone-go/psp/server"
	"github.com/persephone-go/psp/wire"
)

// TestServeSecondSignalQuits runs psp serve in a child process (this test
// binary, re-executed), gives it a request that takes 10s, sends SIGINT
// (graceful shutdown: the drain waits for that request) and then a second
// SIGINT, which must end the process at once (killed by the signal) instead
// of being swallowed until the drain ends.
func TestServeSecondSignalQuits(t *testing.T) {
	if os.Getenv("PSP_TEST_SERVE_CHILD") == "1" {
		exitWithPSP("serve", "--listen", os.Getenv("PSP_TEST_LISTEN"), "--admin", os.Getenv("PSP_TEST_ADMIN"),
			"--workers", "1", "--policy", "cfcfs", "--app", "emulate", "--dilation", "10000", "--drain-timeout", "1m")
	}
	if testing.Short() {
		t.Skip("starts a server process")
	}
	adminAddr := freeAddr(t, "tcp")
	listen := freeAddr(t, "udp")

	cmd := exec.Command(os.Args[0], "-test.run=^TestServeSecondSignalQuits$")
	cmd.Env = append(os.Environ(), "PSP_TEST_SERVE_CHILD=1", "PSP_TEST_LISTEN="+listen, "PSP_TEST_ADMIN="+adminAddr)
	cmd.Stderr = os.Stderr
	exited := testenv.Start(t, cmd)

	status := func() (server.Status, bool) {
		c, err := admin.NewClient(adminAddr, time.Second)
		if err != nil {
			return server.Status{}, false
		}
		st, err := c.Status(context.Background())
		if err != nil {
			return server.Status{}, false
		}
		return *st, true
	}
	waitFor := func(what string, ok func(server.Status) bool) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for time.Now().Before(deadline) {
			if st, got := status(); got && ok(st) {
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Fatalf("server never %s", what)
	}
	waitFor("started", func(server.Status) bool { return true })

	// 1ms of service (the app's cap) at dilation 10000: the worker is busy
	// for 10s.
	sendHeader(t, listen, wire.Header{ID: 1, Type: wire.TypeLong, ServiceNs: 1_000_000})
	waitFor("ran the request", func(st server.Status) bool { return st.Busy == 1 })

	cmd.Process.Signal(os.Interrupt)
	waitFor("started draining", func(st server.Status) bool { return st.Draining })
	cmd.Process.Signal(os.Interrupt)

	err := testenv.Await(t, exited, 30*time.Second, "the server to exit after a second SIGINT")
	var ee *exec.ExitError
	if !errors.As(err, &ee) || !ee.Sys().(syscall.WaitStatus).Signaled() {
		t.Fatalf("after a second SIGINT the server exited with %v, want killed by the signal", err)
	}
}
