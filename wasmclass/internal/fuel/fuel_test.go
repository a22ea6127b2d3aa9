package fuel

import (
	"context"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

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
	if st.Loops != 2 || st.Exports != 6 {
		t.Errorf("stats = %+v, want 2 loops, 6 exports", st)
	}
	mod := instantiate(t, bin)
	_, err := mod.ExportedFunction("psp_classify").Call(context.Background())
	if err == nil || !strings.Contains(err.Error(), "unreachable") {
		t.Fatalf("err = %v, want an unreachable trap", err)
	}
	if got := mod.ExportedGlobal(GlobalExport).Get(); got != 0 {
		t.Errorf("tank = %d after the trap, want 0", got)
	}
	// The instance stays usable and the next call gets a full budget.
	res, err := mod.ExportedFunction("psp_abi_version").Call(context.Background())
	if err != nil || res[0] != 1 {
		t.Errorf("after the trap: psp_abi_version = %v, %v", res, err)
	}
	if got := mod.ExportedGlobal(GlobalExport).Get(); got != 999 {
		t.Errorf("tank = %d after a one-function call, want 999", got)
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
	if got := mod.ExportedGlobal(GlobalExport).Get(); got != 0 {
		t.Errorf("tank = %d, want 0", got)
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
	// i32.const 3 (a 0x03 immediate, not a loop), drop,
	// loop (block type 0x40) br 0 end, end.
	body := []byte{0x41, 0x03, 0x1a, 0x03, 0x40, 0x0c, 0x00, 0x0b, 0x0b}
	var got []int
	if err := walk(body, func(off int) { got = append(got, off) }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0] != 5 {
		t.Errorf("loop headers at %v, want [5]", got)
	}
	// v128.const with 0x03 bytes in its immediate, then a loop.
	body = append([]byte{0xfd, 0x0c}, make([]byte, 16)...)
	for k := 2; k < 18; k++ {
		body[k] = 0x03
	}
	body = append(body, 0x1a, 0x03, 0x7f, 0x41, 0x00, 0x0b, 0x1a, 0x0b)
	got = got[:0]
	if err := walk(body, func(off int) { got = append(got, off) }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0] != 21 {
		t.Errorf("SIMD: loop headers at %v, want [21]", got)
	}
	if err := walk([]byte{0xff, 0x0b}, func(int) {}); err == nil || !strings.Contains(err.Error(), "unknown opcode") {
		t.Errorf("0xff: err = %v, want unknown opcode", err)
	}
	if err := walk([]byte{0x41}, func(int) {}); !errors.Is(err, errTruncated) {
		t.Errorf("truncated: err = %v", err)
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
