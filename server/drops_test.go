package server

import (
	"context"
	"net"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// TestKernelDropsSaid: datagrams the kernel drops at a UDP port's socket
// (here: a server not yet running reads nothing while 20,000 arrive) are
// said per port in /status and /metrics, whether UDP is served alone or
// joined with TCP on the same address.
func TestKernelDropsSaid(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the kernel's drops per socket are read on Linux only")
	}
	for _, listen := range []string{"udp://127.0.0.1:0", "udp://127.0.0.1:0,tcp://127.0.0.1:0"} {
		t.Run(listen, func(t *testing.T) {
			srv := newMemcachedOn(t, listen)
			defer srv.Close()
			addr := strings.TrimPrefix(strings.Split(srv.Addr(), ",")[0], "udp://")
			c, err := net.Dial("udp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			for range 20000 {
				c.Write([]byte("\x00\x01\x00\x00\x00\x01\x00\x00version\r\n"))
			}
			port := addr[strings.LastIndexByte(addr, ':')+1:]
			st := srv.Status()
			if len(st.KernelDrops) != 1 || strconv.Itoa(int(st.KernelDrops[0].Port)) != port || st.KernelDrops[0].Drops == 0 {
				t.Fatalf("kernel drops %+v, want some at port %s", st.KernelDrops, port)
			}
			_, metrics := scrape(t, srv.Handler(), "")
			if got := sumMetric(metrics, `psp_dataplane_socket_drops_total{port="`+port+`"}`); got < float64(st.KernelDrops[0].Drops) {
				t.Errorf("/metrics: %g socket drops at port %s, /status %d", got, port, st.KernelDrops[0].Drops)
			}
		})
	}
}

// newMemcachedOn returns a server (not running) of the memcached
// application on listen, without an admin endpoint.
func newMemcachedOn(t *testing.T, listen string) *Server {
	t.Helper()
	cfg := Config{Listen: listen, Workers: 2, Buffers: 512, App: App{Name: AppMemcached}, Admin: Admin{Addr: "off"}}
	srv, err := New(context.Background(), cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return srv
}
