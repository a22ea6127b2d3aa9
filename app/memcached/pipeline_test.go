package memcached

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/persephone-go/psp/app/memcached/memcachedtest"
	"github.com/persephone-go/psp/darc"
	"github.com/persephone-go/psp/dispatcher"
	"github.com/persephone-go/psp/internal/testenv"
	"github.com/persephone-go/psp/nic/udp"
)

// startPipeline serves srv behind a real UDP dataplane and dispatcher
// (c-FCFS, the native classifier) on 127.0.0.1 and returns the address.
func startPipeline(t testing.TB, srv *Server, workers int) string {
	t.Helper()
	dp, err := udp.Open(udp.Config{Addr: "127.0.0.1:0", Workers: workers, Buffers: 256, BufSize: 65535})
	if err != nil {
		t.Fatal(err)
	}
	policy, err := darc.New(darc.NameCFCFS, darc.Config{Workers: workers, NumTypes: int(NumTypes), TypeNames: TypeNames()})
	if err != nil {
		t.Fatal(err)
	}
	d, err := dispatcher.New(dispatcher.Spec{Workers: workers, TypeNames: TypeNames()}, dp, Classifier{}, policy, srv)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("dispatcher: %v", err)
		}
		dp.Close()
	})
	return dp.Addr().String()
}

// openServer opens a Server closed at the end of the test.
func openServer(t testing.TB, cfg Config) *Server {
	t.Helper()
	srv, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return srv
}

// startMemcached starts Debian's memcached serving UDP only, with one
// thread (replies in request order), and returns its address.
func startMemcached(t testing.TB, extra ...string) string {
	t.Helper()
	bin := testenv.RequireTool(t, "memcached")
	for attempt := 0; ; attempt++ {
		port := freeUDPPort(t)
		args := append([]string{"-U", strconv.Itoa(port), "-p", "0", "-l", "127.0.0.1", "-t", "1"}, extra...)
		if os.Geteuid() == 0 {
			args = append(args, "-u", "nobody")
		}
		cmd := exec.Command(bin, args...)
		if err := cmd.Start(); err != nil {
			t.Fatalf("start memcached: %v", err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		c, err := memcachedtest.Dial(addr)
		if err != nil {
			t.Fatal(err)
		}
		c.Timeout = 200 * time.Millisecond
		for i := 0; i < 25; i++ {
			if _, err := c.Exchange(memcachedtest.Request{Body: "version\r\n"}.Datagram(1)); err == nil {
				c.Close()
				return addr
			}
			time.Sleep(20 * time.Millisecond)
		}
		c.Close()
		if attempt == 2 {
			t.Fatalf("memcached on %s does not answer", addr)
		}
	}
}

func freeUDPPort(t testing.TB) int {
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).Port
}
