package server

import (
	"bytes"
	"slices"
	"testing"

	"github.com/persephone-go/psp/app"
	"github.com/persephone-go/psp/app/memcached"
	"github.com/persephone-go/psp/app/memcached/memcachedtest"
)

// The memcached application answers with several datagrams, and answers
// shed requests "overloaded".
var (
	_ app.MultiHandler    = (*memcached.Server)(nil)
	_ app.OverloadReplier = (*memcached.Server)(nil)
)

// startMemcachedServer runs the memcached application over the UDP
// dataplane on a free port (admin off) until the test ends. Nothing is
// served in place: with one worker, every reply then leaves in the order
// its request came (a request served in place on the dispatcher can
// overtake one handed to the worker, and the conformance client's
// sentinel request with it).
func startMemcachedServer(t testing.TB, workers int, policy string) *Server {
	t.Helper()
	return runServer(t, Config{Listen: "127.0.0.1:0", Workers: workers, Policy: policy, App: App{Name: AppMemcached}, Admin: Admin{Addr: "off"}, Buffers: 512, InPlace: -1})
}

// runServer starts a server for cfg and stops it when the test ends.
func runServer(t testing.TB, cfg Config) *Server {
	t.Helper()
	r := startWith(t, cfg, Options{})
	t.Cleanup(func() {
		if err := r.stop(); err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return r.srv
}

// TestMemcachedConformance sends the same command sequences to Debian's
// memcached and to psp's memcached application behind the UDP dataplane,
// the dispatcher and the native classifier, and compares every reply
// datagram byte for byte (frame headers included).
func TestMemcachedConformance(t *testing.T) {
	mcAddr := memcachedtest.StartMemcached(t, true)
	srv := startMemcachedServer(t, 1, "cfcfs") // one worker: replies in order
	mc, err := memcachedtest.Dial(mcAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer mc.Close()
	ps, err := memcachedtest.Dial(srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer ps.Close()
	memcachedtest.CompareUDP(t, ps, mc)
}

// TestMemcachedStatsConformance sends each StatCase that fits in
// datagrams to a fresh memcached 1.6.18 and a fresh psp behind the UDP
// dataplane and the dispatcher, and compares their item and command
// stats.
func TestMemcachedStatsConformance(t *testing.T) {
	body := func(dgs [][]byte) []byte {
		var b []byte
		for _, d := range dgs {
			b = append(b, d[8:]...)
		}
		return b
	}
cases:
	for _, c := range memcachedtest.StatCases {
		for _, r := range c.Requests {
			if len(r) > 60000 {
				continue cases // more than a datagram takes
			}
		}
		t.Run(c.Name, func(t *testing.T) {
			mc, err := memcachedtest.Dial(memcachedtest.StartMemcached(t, true, "-o", "no_lru_maintainer,no_lru_crawler"))
			if err != nil {
				t.Fatal(err)
			}
			defer mc.Close()
			ps, err := memcachedtest.Dial(startMemcachedServer(t, 1, "cfcfs").Addr())
			if err != nil {
				t.Fatal(err)
			}
			defer ps.Close()
			for i, r := range append(append([]string(nil), c.Requests...), "stats\r\n") {
				d := memcachedtest.Request{Body: r}.Datagram(uint16(100 + i))
				want, err := mc.Exchange(d)
				if err != nil {
					t.Fatalf("request %d: memcached: %v", i, err)
				}
				got, err := ps.Exchange(d)
				if err != nil {
					t.Fatalf("request %d: psp: %v", i, err)
				}
				if i == len(c.Requests) {
					for _, d := range memcachedtest.CompareStats(body(got), body(want), c.Stats...) {
						t.Error(d)
					}
				} else if !slices.EqualFunc(got, want, bytes.Equal) {
					t.Errorf("request %d %.60q:\npsp:%s\nmemcached:%s", i, r, memcachedtest.Describe(got), memcachedtest.Describe(want))
				}
			}
		})
	}
}
