package classifiers_test

import (
	"testing"

	"github.com/persephone-go/psp/app/redis"
	"github.com/persephone-go/psp/app/redis/redistest"
	"github.com/persephone-go/psp/wasmclass"
)

// FuzzRESPAgrees: the Wasm RESP classifiers (C and Rust) and psp's native
// one (app/redis.Classify) give every payload the same type.
func FuzzRESPAgrees(f *testing.F) {
	for _, r := range respRequests(f) {
		f.Add(r.payload)
	}
	for _, c := range redistest.Cases {
		for _, cmd := range c.Commands {
			f.Add(redistest.Command(redistest.Args(cmd)...)) // the table has the inline forms
		}
	}
	if redis.ClassifyPrefix != wasmclass.Prefix {
		f.Fatalf("the native classifier reads %d bytes, a Wasm one %d", redis.ClassifyPrefix, wasmclass.Prefix)
	}
	var insts []*wasmclass.Instance
	for _, path := range respModules {
		insts = append(insts, newInstance(f, load(f, path)))
	}
	f.Fuzz(func(t *testing.T, p []byte) {
		if len(p) > 4096 {
			p = p[:4096]
		}
		native := redis.Classify(p)
		for i, inst := range insts {
			if wasm := inst.Classify(p); wasm != uint32(native) {
				t.Fatalf("%q: %s %d (%s), native %d (%s)", p, respModules[i], wasm, respNames[wasm], native, respNames[native])
			}
		}
	})
}
