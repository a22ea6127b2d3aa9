package wasmclass

import (
	"testing"

	"github.com/persephone-go/psp/app"
)

func TestClassifyNoAlloc(t *testing.T) {
	i := instance(t, load(t, "good", Options{}))
	ps := payloads(MaxBatch, 4)
	out := make([]uint32, len(ps))
	if n := testing.AllocsPerRun(100, func() { i.ClassifyBatch(ps, out) }); n != 0 {
		t.Errorf("Instance.ClassifyBatch: %v allocs per batch, want 0", n)
	}
	if n := testing.AllocsPerRun(100, func() { i.Classify(ps[1]) }); n != 0 {
		t.Errorf("Instance.Classify: %v allocs, want 0", n)
	}
	h := newTestHost(t, HostSpec{Tenants: []TenantSpec{
		{Name: "a", Ports: []uint16{1}, Wasm: fixture(t, "good")},
		{Name: "b", Wasm: fixture(t, "const2")},
	}})
	c, err := h.NewCaller()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ports := make([]uint16, 100)
	for k := range ports {
		ports[k] = uint16(k % 2)
	}
	ps = payloads(100, 4)
	gout := make([]app.Type, len(ps))
	c.ClassifyBatch(ps, ports, gout) // create the instances
	if n := testing.AllocsPerRun(100, func() { c.ClassifyBatch(ps, ports, gout) }); n != 0 {
		t.Errorf("Caller.ClassifyBatch: %v allocs per call, want 0", n)
	}
}
