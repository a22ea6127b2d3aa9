package wasmclass

import (
	"testing"
	"time"

	"github.com/persephone-go/psp/app"
)

func TestClassifyNoAlloc(t *testing.T) {
	i := instance(t, load(t, "good", Options{}))
	// testing.AllocsPerRun counts every goroutine: let the instance's
	// goroutine finish building its spare guest first.
	deadline := time.Now().Add(10 * time.Second)
	for i.spare.Load() == nil && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	ps := payloads(MaxBatch, 4)
	out := make([]uint32, len(ps))
	if n := testing.AllocsPerRun(100, func() { i.ClassifyBatch(ps, out) }); n != 0 {
		t.Errorf("Instance.ClassifyBatch: %v allocs per batch, want 0", n)
	}
	if n := testing.AllocsPerRun(100, func() { i.Classify(ps[1]) }); n != 0 {
		t.Errorf("Instance.Classify: %v allocs, want 0", n)
	}
	h := newTestHost(t, HostSpec{Name: "a", Wasm: fixture(t, "good")})
	c, err := h.NewCaller()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ps = payloads(100, 4)
	gout := make([]app.Type, len(ps))
	c.ClassifyBatch(ps, gout) // create the instance
	if n := testing.AllocsPerRun(100, func() { c.ClassifyBatch(ps, gout) }); n != 0 {
		t.Errorf("Caller.ClassifyBatch: %v allocs per call, want 0", n)
	}
}
