package fuel

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/persephone-go/psp/wasmclass/internal/wasmbin"
)

// decode decodes bin with the default bounds.
func decode(tb testing.TB, bin []byte) *wasmbin.Module {
	tb.Helper()
	m, err := wasmbin.Decode(bin, wasmbin.Bounds{})
	if err != nil {
		tb.Fatal(err)
	}
	return m
}

// withImports fills cfg.Imports with a call cost for every imported
// function of m.
func withImports(m *wasmbin.Module, cfg Config) Config {
	if cfg.Imports == nil {
		cfg.Imports = map[string]ImportCost{}
	}
	for _, im := range m.Imports {
		if _, ok := cfg.Imports[im.Module+"."+im.Name]; !ok {
			cfg.Imports[im.Module+"."+im.Name] = ImportCost{Ticks: 16, Param: -1}
		}
	}
	return cfg
}

func readFixture(tb testing.TB, name string) []byte {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "testdata", name+".wasm"))
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

func instrument(tb testing.TB, bin []byte, cfg Config) ([]byte, Stats) {
	tb.Helper()
	m := decode(tb, bin)
	st, err := Instrument(m, withImports(m, cfg))
	if err != nil {
		tb.Fatal(err)
	}
	return m.Encode(), st
}

// instantiate compiles and instantiates bin in a fresh runtime (with WASI
// when imported) and calls _initialize if exported.
func instantiate(tb testing.TB, bin []byte) api.Module {
	tb.Helper()
	ctx := context.Background()
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().WithMemoryLimitPages(64))
	tb.Cleanup(func() { _ = rt.Close(ctx) })
	wasi_snapshot_preview1.MustInstantiate(ctx, rt)
	mod, err := rt.InstantiateWithConfig(ctx, bin, wazero.NewModuleConfig().WithStartFunctions())
	if err != nil {
		tb.Fatal(err)
	}
	if f := mod.ExportedFunction(StartExport); f != nil {
		if _, err := f.Call(ctx); err != nil {
			tb.Fatal(err)
		}
	}
	if f := mod.ExportedFunction("_initialize"); f != nil {
		if _, err := f.Call(ctx); err != nil {
			tb.Fatal(err)
		}
	}
	return mod
}

func TestInfiniteLoopTraps(t *testing.T) {
	bin, st := instrument(t, readFixture(t, "loop"), Config{Budget: 1000})
	if st.BackEdges != 2 || st.Exports != 6 || st.Functions != 2 {
		t.Errorf("stats = %+v, want 2 back edges, 6 exports, 2 functions metered at entry", st)
	}
	mod := instantiate(t, bin)
	_, err := mod.ExportedFunction("psp_classify").Call(context.Background())
	if err == nil || !strings.Contains(err.Error(), "unreachable") {
		t.Fatalf("err = %v, want an unreachable trap", err)
	}
	if got := int64(mod.ExportedGlobal(GlobalExport).Get()); got != -1 {
		t.Errorf("tank = %d after the trap, want -1", got)
	}
	// The instance stays usable and the next call gets a full budget.
	res, err := mod.ExportedFunction("psp_abi_version").Call(context.Background())
	if err != nil || res[0] != 1 {
		t.Errorf("after the trap: psp_abi_version = %v, %v", res, err)
	}
	// A leaf without loops is not metered: the tank stays full.
	if got := mod.ExportedGlobal(GlobalExport).Get(); got != 1000 {
		t.Errorf("tank = %d after a call to a leaf, want 1000 (refilled, unmetered)", got)
	}
	// The batch calls $one from a loop; for n = 0 the loop exits before
	// branching back: only the batch's entry is charged, 1 + its 38 body
	// bytes / CodeBytesPerUnit = 2 units.
	if _, err := mod.ExportedFunction("psp_classify_batch").Call(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
	if got := mod.ExportedGlobal(GlobalExport).Get(); got >= 1000 || got < 500 {
		t.Errorf("tank = %d after psp_classify_batch(0), want a few units charged", got)
	}
}

func TestInternalCallsDoNotRefill(t *testing.T) {
	// recurse's $one calls itself: if internal calls refilled the tank it
	// would run until the stack overflows instead of spending the budget.
	bin, _ := instrument(t, readFixture(t, "recurse"), Config{Budget: 100})
	mod := instantiate(t, bin)
	_, err := mod.ExportedFunction("psp_classify").Call(context.Background())
	if err == nil || !strings.Contains(err.Error(), "unreachable") {
		t.Fatalf("err = %v, want a fuel trap (unreachable)", err)
	}
	if got := int64(mod.ExportedGlobal(GlobalExport).Get()); got >= 0 {
		t.Errorf("tank = %d, want below 0", got)
	}
}

// classifyAll runs psp_classify and a batch over fixed payloads.
func classifyAll(tb testing.TB, mod api.Module) []uint64 {
	ctx := context.Background()
	call := func(name string, args ...uint64) uint64 {
		res, err := mod.ExportedFunction(name).Call(ctx, args...)
		if err != nil {
			tb.Fatalf("%s: %v", name, err)
		}
		return res[0]
	}
	buf := uint32(call("psp_io_buffer"))
	size := uint32(call("psp_io_buffer_size"))
	slots := min(32, (size-128)/256)
	var out []uint64
	mem := mod.Memory()
	for p := 0; p < 64; p++ {
		payload := []byte("GET key\r\n\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00")
		payload[0], payload[4], payload[5] = byte(p*7), byte(p%13), byte(p)
		for s := uint32(0); s < slots; s++ {
			off := buf + 128 + s*256
			mem.WriteUint32Le(off, uint32(len(payload)))
			mem.WriteUint32Le(off+4, uint32(len(payload)))
			mem.Write(off+8, payload)
			payload[4]++
		}
		out = append(out, call("psp_classify"), call("psp_classify_batch", uint64(slots)))
		res, _ := mem.Read(buf, 4*slots)
		for s := uint32(0); s < slots; s++ {
			out = append(out, uint64(binary.LittleEndian.Uint32(res[4*s:])))
		}
	}
	return out
}

// TestSameResults instruments every fixture and every committed example
// classifier and checks that the instrumented module compiles and answers
// like the original.
func TestSameResults(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("..", "..", "..", "examples", "classifiers", "*", "*.wasm"))
	for _, name := range []string{"good", "const1", "bulk", "wasi", "membomb"} {
		files = append(files, filepath.Join("..", "..", "testdata", name+".wasm"))
	}
	for _, f := range files {
		if strings.Contains(f, "hostile") {
			continue
		}
		t.Run(filepath.Base(filepath.Dir(f))+"/"+filepath.Base(f), func(t *testing.T) {
			orig, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if raceEnabled && len(orig) > 256<<10 {
				// Compiling a Go guest twice under the race detector takes
				// ~40 s; this package has no concurrency to check.
				t.Skip("large module under the race detector")
			}
			m, err := wasmbin.Decode(orig, wasmbin.Bounds{})
			if err != nil {
				t.Skipf("not a classifier fixture: %v", err)
			}
			if len(m.Imports) > 0 && m.Imports[0].Module != "wasi_snapshot_preview1" {
				t.Skip("imports other than WASI")
			}
			bin, st := instrument(t, orig, Config{Budget: 1 << 40})
			t.Logf("%+v", st)
			want := classifyAll(t, instantiate(t, orig))
			got := classifyAll(t, instantiate(t, bin))
			for k := range want {
				if got[k] != want[k] {
					t.Fatalf("result %d: instrumented %d, original %d", k, got[k], want[k])
				}
			}
		})
	}
}

func TestWalker(t *testing.T) {
	one := &wasmbin.Module{Types: []wasmbin.FuncType{{Params: []byte{wasmbin.I32}}}, Functions: []uint32{0}}
	costs := DefaultCosts(64, 1<<20)
	sc := func(leaf int64) *scope {
		return &scope{m: one, costs: costs, bounds: wasmbin.DefaultBounds, funcs: 1, globals: 1,
			leafWeight: func(uint32) int64 { return leaf }, importTicks: func(uint32) int64 { return 0 }}
	}
	nop := costs.Op[0x01]
	for _, tc := range []struct {
		name   string
		body   []byte
		leaf   int64
		kinds  []editKind
		cost   int64 // of the first edit
		calls  bool
		errMsg string
	}{
		// i32.const 3 (a 0x03 immediate, not a loop), drop, loop br 0 end, end.
		{"br", []byte{0x41, 0x03, 0x1a, 0x03, 0x40, 0x0c, 0x00, 0x0b, 0x0b}, 0, []editKind{editCheck}, 1, false, ""},
		// loop i32.const 1 br_if 0 end end
		{"br_if", []byte{0x03, 0x40, 0x41, 0x01, 0x0d, 0x00, 0x0b, 0x0b}, 0, []editKind{editBrIf}, 2, false, ""},
		// block loop br_if 1 (to the block: no edit) end end end
		{"br_if out", []byte{0x02, 0x40, 0x03, 0x40, 0x41, 0x01, 0x0d, 0x01, 0x0b, 0x0b, 0x0b}, 0, nil, 0, false, ""},
		// loop (type 0 with a parameter) br_if 0: charged before the br_if.
		{"br_if params", []byte{0x41, 0x00, 0x03, 0x00, 0x41, 0x01, 0x0d, 0x00, 0x0b, 0x0b}, 0, []editKind{editCheck}, 2, false, ""},
		// loop block br_table [0 1] 0 end end end: one target is the loop.
		{"br_table", []byte{0x03, 0x40, 0x02, 0x40, 0x41, 0x00, 0x0e, 0x02, 0x00, 0x01, 0x00, 0x0b, 0x0b, 0x0b}, 0, []editKind{editCheck}, 3, false, ""},
		// loop, 100 nops, br 0: the back edge pays for the nops.
		{"long loop", append(append([]byte{0x03, 0x40}, bytes.Repeat([]byte{0x01}, 100)...), 0x0c, 0x00, 0x0b, 0x0b), 0,
			[]editKind{editCheck}, ticksToUnits(costs.BackEdge + 100*nop + costs.Op[0x0c]), false, ""},
		// memory.fill, memory.copy, table.grow, memory.grow: charged by size; data.drop is not.
		{"sized", []byte{0x41, 0x00, 0x41, 0x00, 0x41, 0x00, 0xfc, 0x0b, 0x00,
			0x41, 0x00, 0x41, 0x00, 0x41, 0x00, 0xfc, 0x0a, 0x00, 0x00,
			0xd0, 0x70, 0x41, 0x00, 0xfc, 0x0f, 0x00, 0x1a, 0xfc, 0x09, 0x00,
			0x41, 0x00, 0x40, 0x00, 0x1a, 0x0b}, 0, []editKind{editSized, editSized, editSized, editGrow}, 0, false, ""},
		// loop call 0 call 0 br 0: each call counts its callee's weight, and
		// the spill of the caller's one parameter.
		{"call weight", []byte{0x03, 0x40, 0x41, 0x00, 0x10, 0x00, 0x41, 0x00, 0x10, 0x00, 0x0c, 0x00, 0x0b, 0x0b}, 1000,
			[]editKind{editCheck}, ticksToUnits(2000 + costs.BackEdge + 2*costs.Op[0x10] + 2*costs.SpillSlot + 2*costs.Op[0x41] + costs.Op[0x0c]), true, ""},
		// return_call 0 is a call; return is an edit (for the stack account).
		{"return_call", []byte{0x41, 0x00, 0x12, 0x00, 0x0b}, 0, nil, 0, true, ""},
		{"return", []byte{0x0f, 0x0b}, 0, []editKind{editReturn}, 0, false, ""},
		// v128.const with 0x03 bytes, drop, loop br 0 end, end.
		{"simd", append(append([]byte{0xfd, 0x0c}, bytes.Repeat([]byte{0x03}, 16)...), 0x1a, 0x03, 0x40, 0x0c, 0x00, 0x0b, 0x0b), 0,
			[]editKind{editCheck}, 1, false, ""},
		{"unknown opcode", []byte{0xff, 0x0b}, 0, nil, 0, false, "unknown opcode"},
		{"truncated", []byte{0x41}, 0, nil, 0, false, "unexpected end"},
		{"bad depth", []byte{0x0c, 0x05, 0x0b}, 0, nil, 0, false, "outside the 1 enclosing blocks"},
		{"unbalanced", []byte{0x02, 0x40, 0x0b}, 0, nil, 0, false, "does not end its blocks"},
		{"nesting", append(bytes.Repeat([]byte{0x02, 0x40}, 1100), 0x0b), 0, nil, 0, false, "nested deeper than 1024"},
		{"br_table size", append([]byte{0x41, 0x00, 0x0e, 0x80, 0x80, 0x02}, 0x00), 0, nil, 0, false, "br_table of 32768 targets"},
		// References to what the instrumentation adds are refused: they
		// would let the code refill its fuel.
		{"tank", []byte{0x42, 0x00, 0x24, 0x01, 0x0b}, 0, nil, 0, false, "global index 1 out of range"},
		{"wrapper", []byte{0x10, 0x01, 0x0b}, 0, nil, 0, false, "function index 1 out of range"},
		{"ref wrapper", []byte{0xd2, 0x01, 0x1a, 0x0b}, 0, nil, 0, false, "function index 1 out of range"},
		{"global ok", []byte{0x23, 0x00, 0x1a, 0x0b}, 0, nil, 0, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := walk(tc.body, 1, 0, sc(tc.leaf))
			if tc.errMsg != "" {
				if err == nil || !strings.Contains(err.Error(), tc.errMsg) {
					t.Fatalf("err = %v, want %q", err, tc.errMsg)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var kinds []editKind
			for _, e := range a.edits {
				kinds = append(kinds, e.kind)
			}
			if !reflect.DeepEqual(kinds, tc.kinds) || a.calls != tc.calls {
				t.Errorf("edits = %+v, calls = %v; want kinds %v, %v", a.edits, a.calls, tc.kinds, tc.calls)
			}
			if tc.cost != 0 && len(a.edits) > 0 && a.edits[0].cost != tc.cost {
				t.Errorf("cost = %d, want %d", a.edits[0].cost, tc.cost)
			}
		})
	}
}

func TestReservedExport(t *testing.T) {
	m := decode(t, readFixture(t, "good"))
	m.Exports[0].Name = GlobalExport
	if _, err := Instrument(m, Config{Budget: 1}); !errors.Is(err, ErrReservedExport) {
		t.Errorf("err = %v, want ErrReservedExport", err)
	}
	if _, err := Instrument(m, Config{}); !errors.Is(err, ErrZeroBudget) {
		t.Errorf("err = %v, want ErrZeroBudget", err)
	}
}

func TestRefsToInstrumentationRefused(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(m *wasmbin.Module)
		want   string
	}{
		// Index len(globals) is the tank once instrumented.
		{"export tank", func(m *wasmbin.Module) {
			m.Exports = append(m.Exports, wasmbin.Export{Kind: wasmbin.KindGlobal, Name: "t", Index: m.NumGlobals()})
		}, "global index"},
		// Index len(functions) is the first wrapper once instrumented.
		{"export wrapper", func(m *wasmbin.Module) {
			m.Exports = append(m.Exports, wasmbin.Export{Kind: wasmbin.KindFunc, Name: "w", Index: m.NumFuncs()})
		}, "func index"},
		{"start wrapper", func(m *wasmbin.Module) {
			fn := m.NumFuncs()
			m.Start = &fn
		}, "start function index"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := decode(t, readFixture(t, "good"))
			tc.mutate(m)
			if _, err := Instrument(m, Config{Budget: 10}); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want %q", err, tc.want)
			}
		})
	}
}
