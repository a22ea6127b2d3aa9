package wasmclass

import (
	"context"
	"embed"
	"testing"
)

//go:embed testdata/*.wasm
var testdata embed.FS

// fixture returns testdata/<name>.wasm.
func fixture(tb testing.TB, name string) []byte {
	tb.Helper()
	b, err := testdata.ReadFile("testdata/" + name + ".wasm")
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// load loads a fixture, closing it at the end of the test.
func load(tb testing.TB, name string, opts Options) *Module {
	tb.Helper()
	opts.syncSpares = true
	m, err := Load(context.Background(), fixture(tb, name), opts)
	if err != nil {
		tb.Fatalf("load %s: %v", name, err)
	}
	tb.Cleanup(func() { _ = m.Close(context.Background()) })
	return m
}

// instance creates an instance of m, closing it at the end of the test.
func instance(tb testing.TB, m *Module) *Instance {
	tb.Helper()
	i, err := m.NewInstance(context.Background())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = i.Close(context.Background()) })
	return i
}

// payloads returns n payloads whose first byte is i%mod.
func payloads(n, mod int) [][]byte {
	ps := make([][]byte, n)
	for i := range ps {
		ps[i] = []byte{byte(i % mod), 'x', 'y'}
	}
	return ps
}
