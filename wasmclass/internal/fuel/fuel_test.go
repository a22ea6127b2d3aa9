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

	"github.com/tetratelabs/wabin/wasm"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
)

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
	m, err := Decode(bin)
	if err != nil {
		tb.Fatal(err)
	}
	st, err := Instrument(m, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	return Encode(m), st
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
	if got := mod.ExportedGlobal(GlobalExport).Get(); got != 998 {
		t.Errorf("tank = %d after psp_classify_batch(0), want 998", got)
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
	if got := int64(mod.ExportedGlobal(GlobalExport).Get()); got != -1 {
		t.Errorf("tank = %d, want -1", got)
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
			m, err := Decode(orig)
			if err != nil {
				t.Skipf("not a classifier fixture: %v", err)
			}
			if len(m.ImportSection) > 0 && m.ImportSection[0].Module != "wasi_snapshot_preview1" {
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
	noTypes := limits{funcs: 1, globals: 1, typeParams: func(uint32) (int, error) { return 0, errors.New("no types") }}
	oneParam := limits{funcs: 1, globals: 1, typeParams: func(uint32) (int, error) { return 1, nil }}
	leaf30 := noTypes
	leaf30.callWeight = func(uint32) int { return 30 }
	for _, tc := range []struct {
		name   string
		body   []byte
		types  limits
		edits  []edit
		calls  bool
		errMsg string
	}{
		// i32.const 3 (a 0x03 immediate, not a loop), drop, loop br 0 end, end.
		{"br", []byte{0x41, 0x03, 0x1a, 0x03, 0x40, 0x0c, 0x00, 0x0b, 0x0b}, noTypes,
			[]edit{{kind: editCheck, at: 5, cost: 1}}, false, ""},
		// loop i32.const 1 br_if 0 end end
		{"br_if", []byte{0x03, 0x40, 0x41, 0x01, 0x0d, 0x00, 0x0b, 0x0b}, noTypes,
			[]edit{{kind: editBrIf, at: 4, end: 6, label: 0, cost: 1}}, false, ""},
		// block loop br_if 1 (to the block: no edit) end end end
		{"br_if out", []byte{0x02, 0x40, 0x03, 0x40, 0x41, 0x01, 0x0d, 0x01, 0x0b, 0x0b, 0x0b}, noTypes,
			nil, false, ""},
		// loop (type 0 with a parameter) br_if 0: charged before the br_if.
		{"br_if params", []byte{0x41, 0x00, 0x03, 0x00, 0x41, 0x01, 0x0d, 0x00, 0x0b, 0x0b}, oneParam,
			[]edit{{kind: editCheck, at: 6, cost: 1}}, false, ""},
		// loop block br_table [0 1] 0 end end end: one target is the loop.
		{"br_table", []byte{0x03, 0x40, 0x02, 0x40, 0x41, 0x00, 0x0e, 0x02, 0x00, 0x01, 0x00, 0x0b, 0x0b, 0x0b}, noTypes,
			[]edit{{kind: editCheck, at: 6, cost: 1}}, false, ""},
		// loop, 40 bytes of nop, br 0: the back edge costs 1 + 42/32.
		{"long loop", append(append([]byte{0x03, 0x40}, bytes.Repeat([]byte{0x01}, 40)...), 0x0c, 0x00, 0x0b, 0x0b), noTypes,
			[]edit{{kind: editCheck, at: 42, cost: 2}}, false, ""},
		// block loop (35 nops) br_table [1 0] 0: the dearest target is the loop.
		{"br_table cost", append(append([]byte{0x02, 0x40, 0x03, 0x40}, bytes.Repeat([]byte{0x01}, 35)...),
			0x41, 0x00, 0x0e, 0x01, 0x01, 0x00, 0x0b, 0x0b, 0x0b), noTypes,
			[]edit{{kind: editCheck, at: 41, cost: 2}}, false, ""},
		// i32.const 0 ×3, memory.fill 0; memory.copy 0 0; table.grow 0: all
		// metered by length; data.drop 0 is not.
		{"bulk", []byte{0x41, 0x00, 0x41, 0x00, 0x41, 0x00, 0xfc, 0x0b, 0x00,
			0x41, 0x00, 0x41, 0x00, 0x41, 0x00, 0xfc, 0x0a, 0x00, 0x00,
			0xd0, 0x70, 0x41, 0x00, 0xfc, 0x0f, 0x00, 0x1a, 0xfc, 0x09, 0x00, 0x0b}, noTypes,
			[]edit{{kind: editBulk, at: 6}, {kind: editBulk, at: 15}, {kind: editBulk, at: 23}}, false, ""},
		// loop call 0 call 0 br 0: each call counts as the callee's 30
		// bytes (not metered at its entry): 1 + (6+60)/32.
		{"call weight", []byte{0x03, 0x40, 0x10, 0x00, 0x10, 0x00, 0x0c, 0x00, 0x0b, 0x0b}, leaf30,
			[]edit{{kind: editCheck, at: 6, cost: 3}}, true, ""},
		// loop i32.const 0 call_indirect 0 0 br 0: counts as 32 bytes more.
		{"call_indirect weight", []byte{0x03, 0x40, 0x41, 0x00, 0x11, 0x00, 0x00, 0x0c, 0x00, 0x0b, 0x0b}, noTypes,
			[]edit{{kind: editCheck, at: 7, cost: 2}}, true, ""},
		// return_call 0 and return_call_indirect 0 0 are calls.
		{"return_call", []byte{0x12, 0x00, 0x0b}, noTypes, nil, true, ""},
		{"return_call_indirect", []byte{0x41, 0x00, 0x13, 0x00, 0x00, 0x0b}, noTypes, nil, true, ""},
		// i32.const 0x10 (not a call), drop, call 0, end.
		{"call", []byte{0x41, 0x10, 0x1a, 0x10, 0x00, 0x0b}, noTypes, nil, true, ""},
		// v128.const with 0x03 bytes, drop, loop br 0 end, end.
		{"simd", append(append([]byte{0xfd, 0x0c}, bytes.Repeat([]byte{0x03}, 16)...), 0x1a, 0x03, 0x40, 0x0c, 0x00, 0x0b, 0x0b), noTypes,
			[]edit{{kind: editCheck, at: 21, cost: 1}}, false, ""},
		{"unknown opcode", []byte{0xff, 0x0b}, noTypes, nil, false, "unknown opcode"},
		{"truncated", []byte{0x41}, noTypes, nil, false, "truncated"},
		{"bad depth", []byte{0x0c, 0x05, 0x0b}, noTypes, nil, false, "outside the 1 enclosing blocks"},
		{"unbalanced", []byte{0x02, 0x40, 0x0b}, noTypes, nil, false, "does not end its blocks"},
		// References to what the instrumentation adds are refused: they
		// would let the code refill its fuel.
		{"tank", []byte{0x42, 0x00, 0x24, 0x01, 0x0b}, noTypes, nil, false, "global index 1 out of range"},
		{"wrapper", []byte{0x10, 0x01, 0x0b}, noTypes, nil, false, "function index 1 out of range"},
		{"ref wrapper", []byte{0xd2, 0x01, 0x1a, 0x0b}, noTypes, nil, false, "function index 1 out of range"},
		{"global ok", []byte{0x23, 0x00, 0x1a, 0x0b}, noTypes, nil, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			edits, calls, _, err := walk(tc.body, tc.types)
			if tc.errMsg != "" {
				if err == nil || !strings.Contains(err.Error(), tc.errMsg) {
					t.Fatalf("err = %v, want %q", err, tc.errMsg)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(edits, tc.edits) || calls != tc.calls {
				t.Errorf("edits = %+v, calls = %v; want %+v, %v", edits, calls, tc.edits, tc.calls)
			}
		})
	}
}

func TestReservedExport(t *testing.T) {
	m, err := Decode(readFixture(t, "good"))
	if err != nil {
		t.Fatal(err)
	}
	m.ExportSection[0].Name = GlobalExport
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
		mutate func(m *wasm.Module)
		want   string
	}{
		// Index len(globals) is the tank once instrumented.
		{"export tank", func(m *wasm.Module) {
			m.ExportSection = append(m.ExportSection, &wasm.Export{Type: wasm.ExternTypeGlobal, Name: "t", Index: uint32(len(m.GlobalSection))})
		}, "global index"},
		// Index len(functions) is the first wrapper once instrumented.
		{"export wrapper", func(m *wasm.Module) {
			m.ExportSection = append(m.ExportSection, &wasm.Export{Type: wasm.ExternTypeFunc, Name: "w", Index: uint32(len(m.FunctionSection))})
		}, "func index"},
		{"start wrapper", func(m *wasm.Module) {
			fn := uint32(len(m.FunctionSection))
			m.StartSection = &fn
		}, "start function index"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := Decode(readFixture(t, "good"))
			if err != nil {
				t.Fatal(err)
			}
			tc.mutate(m)
			if _, err := Instrument(m, Config{Budget: 10}); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want %q", err, tc.want)
			}
		})
	}
}
