package classifiers_test

import (
	"testing"

	"github.com/persephone-go/psp/app/memcached"
	"github.com/persephone-go/psp/app/memcached/memcachedtest"
	"github.com/persephone-go/psp/wasmclass"
)

// FuzzMemcachedAgrees: the Wasm memcached classifier and psp's native one
// (app/memcached.Classify) give every payload the same type.
func FuzzMemcachedAgrees(f *testing.F) {
	for _, c := range memcachedCases() {
		f.Add(c.payload)
	}
	for _, c := range memcachedtest.Cases {
		for i, r := range c.Requests {
			f.Add(r.Datagram(uint16(i)))
		}
	}
	if memcached.ClassifyPrefix != wasmclass.Prefix {
		f.Fatalf("the native classifier reads %d bytes, a Wasm one %d", memcached.ClassifyPrefix, wasmclass.Prefix)
	}
	inst := newInstance(f, load(f, "c/memcached.wasm"))
	f.Fuzz(func(t *testing.T, p []byte) {
		if len(p) > 4096 {
			p = p[:4096] // the host's capture limit is larger; keep runs fast
		}
		native := memcached.Classify(p)
		if wasm := inst.Classify(p); wasm != uint32(native) {
			t.Fatalf("%q: wasm %d, native %d", p, wasm, native)
		}
	})
}
