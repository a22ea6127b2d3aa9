package memcached

import (
	"bytes"
	"testing"

	"github.com/persephone-go/psp/app/memcached/memcachedtest"
)

// TestConformanceWithMemcached sends the same command sequences to
// Debian's memcached and to psp's application behind a real UDP dataplane
// and dispatcher, and compares every reply datagram byte for byte (frame
// headers included).
func TestConformanceWithMemcached(t *testing.T) {
	mcAddr := startMemcached(t)
	pspAddr := startPipeline(t, openServer(t, Config{}), 1)
	mc, err := memcachedtest.Dial(mcAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer mc.Close()
	ps, err := memcachedtest.Dial(pspAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer ps.Close()
	id := uint16(100)
	for _, c := range memcachedtest.Cases {
		for i, r := range c.Requests {
			id++
			d := r.Datagram(id)
			want, err := mc.Exchange(d)
			if err != nil {
				t.Fatalf("%s, request %d: memcached: %v", c.Name, i, err)
			}
			got, err := ps.Exchange(d)
			if err != nil {
				t.Fatalf("%s, request %d: psp: %v", c.Name, i, err)
			}
			if !equal(got, want) {
				t.Errorf("%s, request %d %q:\npsp:%s\nmemcached:%s", c.Name, i, short(d), memcachedtest.Describe(got), memcachedtest.Describe(want))
			}
		}
	}
}

func equal(a, b [][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !bytes.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}

func short(b []byte) []byte {
	if len(b) > 120 {
		return append(append(b[:60:60], "..."...), b[len(b)-40:]...)
	}
	return b
}
