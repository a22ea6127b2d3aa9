package wasmclass_test

import (
	"context"
	"fmt"
	"os"

	"github.com/persephone-go/psp/app"
	"github.com/persephone-go/psp/wasmclass"
)

// Load a classifier, classify a batch on one goroutine's instance.
func ExampleLoad() {
	ctx := context.Background()
	bin, err := os.ReadFile("testdata/good.wasm") // type = first payload byte if < 4
	if err != nil {
		panic(err)
	}
	m, err := wasmclass.Load(ctx, bin, wasmclass.Options{})
	if err != nil {
		panic(err)
	}
	defer m.Close(ctx)
	inst, err := m.NewInstance(ctx)
	if err != nil {
		panic(err)
	}
	defer inst.Close(ctx)

	out := make([]uint32, 3)
	inst.ClassifyBatch([][]byte{{1}, {3}, {9}}, out)
	fmt.Println(m.Types(), out, inst.Faults().Total())
	// Output: [UNKNOWN type1 type2 type3] [1 3 0] 0
}

// A classifier, then a hot swap.
func ExampleHost() {
	ctx := context.Background()
	read := func(name string) []byte {
		b, err := os.ReadFile("testdata/" + name + ".wasm")
		if err != nil {
			panic(err)
		}
		return b
	}
	h, err := wasmclass.NewHost(ctx, wasmclass.HostSpec{Name: "web", Wasm: read("const1")})
	if err != nil {
		panic(err)
	}
	defer h.Close(ctx)
	c, err := h.NewCaller()
	if err != nil {
		panic(err)
	}
	defer c.Close()

	out := make([]app.Type, 2)
	c.ClassifyBatch([][]byte{{2}, {2}}, out)
	fmt.Println(out, h.Types()[out[0]])
	if _, err := h.Swap(ctx, read("const2")); err != nil {
		panic(err)
	}
	c.ClassifyBatch([][]byte{{2}, {2}}, out)
	fmt.Println(out, h.Types()[out[0]])
	// Output:
	// [1 1] web/one
	// [2 2] web/two
}
