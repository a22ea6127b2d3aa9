package classifiers_test

import (
	"context"
	"fmt"
	"os"

	"github.com/persephone-go/psp/wasmclass"
)

// Load the RESP classifier and classify two Redis requests, one RESP array
// and one inline command.
func Example_resp() {
	ctx := context.Background()
	bin, err := os.ReadFile("c/resp.wasm")
	if err != nil {
		fmt.Println(err)
		return
	}
	m, err := wasmclass.Load(ctx, bin, wasmclass.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer m.Close(ctx)
	inst, err := m.NewInstance(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer inst.Close(ctx)

	for _, req := range []string{"*2\r\n$3\r\nget\r\n$3\r\nkey\r\n", "SCAN 0 COUNT 10\r\n", "SCAN 0 COUNT 10000\r\n"} {
		typ := inst.Classify([]byte(req))
		fmt.Printf("%q: %d %s\n", req, typ, m.Types()[typ])
	}
	// Output:
	// "*2\r\n$3\r\nget\r\n$3\r\nkey\r\n": 31 GET
	// "SCAN 0 COUNT 10\r\n": 100 SCAN
	// "SCAN 0 COUNT 10000\r\n": 178 SCAN_10K
}
