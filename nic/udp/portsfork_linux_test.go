//go:build linux

package udp_test

import (
	"errors"
	"os/exec"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/persephone-go/psp/nic/udp"
)

// TestRemovedPortFreeDespiteForks: a port removed can be added again at
// once, even while the process starts children. A child gets a copy of
// every descriptor at fork and drops the close-on-exec ones only at exec,
// so a port closed in between stays bound by the child for a moment: with
// a server's compile children starting (hot swaps) while a tenant's ports
// moved back and forth, 533 of 5,387 port changes were refused with
// "bind: address already in use". AddPort now waits such a child out (a
// bounded number of retries).
func TestRemovedPortFreeDespiteForks(t *testing.T) {
	if _, err := exec.LookPath("true"); err != nil {
		t.Skip("no true(1) to start")
	}
	const cycles = 300
	dp := open(t, udp.Config{Workers: 4, Buffers: 64, BufSize: 512})
	port := freeUDPPort(t)
	var stop atomic.Bool
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				_ = exec.Command("true").Run()
			}
		}()
	}
	defer func() { stop.Store(true); wg.Wait() }()
	inUse := 0
	for range cycles {
		if err := dp.AddPort(port); err != nil {
			if !errors.Is(err, syscall.EADDRINUSE) {
				t.Fatal(err)
			}
			inUse++
			continue
		}
		if err := dp.RemovePort(port); err != nil {
			t.Fatal(err)
		}
	}
	if inUse > 0 {
		t.Errorf("%d of %d re-adds of a removed port found it still bound", inUse, cycles)
	}
}
