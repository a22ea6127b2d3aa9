package memcached

import (
	"strings"
	"testing"
	"time"

	"github.com/persephone-go/psp/app/memcached/memcachedtest"
)

// TestStatsConformance sends each StatCase over TCP to a fresh memcached
// 1.6.18 and a fresh psp, then compares their item and command stats.
func TestStatsConformance(t *testing.T) {
	for _, c := range memcachedtest.StatCases {
		t.Run(strings.ReplaceAll(c.Name, " ", "_"), func(t *testing.T) {
			// Without its LRU maintainer and crawler, memcached removes an
			// expired item when it is read or its memory is needed, as psp.
			mc := memcachedtest.StartMemcached(t, false, "-o", "no_lru_maintainer,no_lru_crawler")
			psp := serveTCP(t, openServer(t, Config{}))
			for i, r := range c.Requests {
				want, err := memcachedtest.ExchangeTCP(mc, r, 5*time.Second)
				if err != nil {
					t.Fatalf("request %d: memcached: %v", i, err)
				}
				got, err := memcachedtest.ExchangeTCP(psp, r, 5*time.Second)
				if err != nil {
					t.Fatalf("request %d: psp: %v", i, err)
				}
				if string(got) != string(want) {
					t.Errorf("request %d %.60q:\npsp:       %.200q\nmemcached: %.200q", i, r, got, want)
				}
			}
			want, err := memcachedtest.ExchangeTCP(mc, "stats\r\n", 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			got, err := memcachedtest.ExchangeTCP(psp, "stats\r\n", 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range memcachedtest.CompareStats(got, want, c.Stats...) {
				t.Error(d)
			}
		})
	}
}
