package wasmclass

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/tetratelabs/wabin/leb128"

	"github.com/persephone-go/psp/wasmclass/internal/wasmbin"
)

func TestLoadAndClassify(t *testing.T) {
	m := load(t, "good", Options{})
	if got, want := m.Types(), []string{"UNKNOWN", "type1", "type2", "type3"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Types = %q, want %q", got, want)
	}
	info := m.Info()
	if info.ABIVersion != 1 || info.NumTypes != 4 || info.IOBuffer != 1024 || info.Slots != 32 || info.WASI {
		t.Errorf("Info = %+v", info)
	}
	if info.Fuel.Functions == 0 || info.Fuel.BackEdges != 1 || info.Fuel.Wrapped != 6 {
		t.Errorf("fuel stats = %+v, want 1 back edge and 6 wrapped exports", info.Fuel)
	}
	i := instance(t, m)
	for _, tc := range []struct {
		payload []byte
		want    uint32
	}{{[]byte{2}, 2}, {[]byte{3, 9}, 3}, {[]byte{7}, 0}, {nil, 0}, {make([]byte, 1000), 0}} {
		if got := i.Classify(tc.payload); got != tc.want {
			t.Errorf("Classify(%v) = %d, want %d", tc.payload, got, tc.want)
		}
	}
	// More than one batch, odd size.
	ps := payloads(77, 5)
	out := make([]uint32, len(ps))
	i.ClassifyBatch(ps, out)
	for k, got := range out {
		want := uint32(k % 5)
		if want >= 4 {
			want = 0
		}
		if got != want {
			t.Fatalf("out[%d] = %d, want %d", k, got, want)
		}
	}
	if f := i.Faults(); f != (FaultCounts{}) {
		t.Errorf("faults = %+v, want none", f)
	}
}

// withCustomSection appends a custom section to a module.
func withCustomSection(bin []byte, name, data string) []byte {
	payload := append(leb128.EncodeUint32(uint32(len(name))), name...)
	payload = append(payload, data...)
	out := append([]byte(nil), bin...)
	out = append(out, 0)
	out = append(out, leb128.EncodeUint32(uint32(len(payload)))...)
	return append(out, payload...)
}

func TestTypeNames(t *testing.T) {
	ctx := context.Background()
	bin := withCustomSection(fixture(t, "good"), "psp.types", "UNKNOWN\nGET\n\nSET\n")
	m, err := Load(ctx, bin, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(ctx)
	if got, want := m.Types(), []string{"UNKNOWN", "GET", "type2", "SET"}; !reflect.DeepEqual(got, want) {
		t.Errorf("custom section: Types = %q, want %q", got, want)
	}
	// From the psp_type_names exports.
	if got, want := load(t, "const1", Options{}).Types(), []string{"UNKNOWN", "one", "two"}; !reflect.DeepEqual(got, want) {
		t.Errorf("exports: Types = %q, want %q", got, want)
	}
	// Too many names.
	_, err = Load(ctx, withCustomSection(fixture(t, "good"), "psp.types", "a\nb\nc\nd\ne"), Options{})
	if !errors.Is(err, ErrBadABI) || !strings.Contains(err.Error(), "5 type names for 4 types") {
		t.Errorf("too many names: err = %v", err)
	}
}

// withoutExport re-encodes a module without one export.
func withoutExport(tb testing.TB, bin []byte, name string) []byte {
	m, err := wasmbin.Decode(bin, wasmbin.Bounds{})
	if err != nil {
		tb.Fatal(err)
	}
	kept := m.Exports[:0]
	for _, e := range m.Exports {
		if e.Name != name {
			kept = append(kept, e)
		}
	}
	m.Exports = kept
	return m.Encode()
}

func TestLoadErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		bin  []byte
		opts Options
		is   error
		msg  string
	}{
		{"import", fixture(t, "import"), Options{}, ErrForbiddenImport, `import "env"."log" (func) refused`},
		{"badsig", fixture(t, "badsig"), Options{}, ErrBadABI, `export "psp_classify_batch" has type (i32,i32)->i32, want (i32)->i32`},
		{"abi2", fixture(t, "abi2"), Options{}, ErrBadABI, "module has ABI version 2, this host implements version 1"},
		{"bigmem", fixture(t, "bigmem"), Options{}, ErrMemoryLimit, "memory declares a maximum of 128 pages, limit is 64"},
		{"fits-limit", fixture(t, "good"), Options{MemoryLimitPages: 1, Fuel: 0}, nil, ""},
		{"toolarge", fixture(t, "good"), Options{MaxModuleSize: 100}, ErrTooLarge, "limit is 100"},
		{"garbage", []byte("not wasm at all"), Options{}, ErrInvalidModule, "decode"},
		{"missing", withoutExport(t, fixture(t, "good"), "psp_num_types"), Options{}, ErrBadABI, `missing export "psp_num_types" with type ()->i32`},
		{"nomemory", withoutExport(t, fixture(t, "good"), "memory"), Options{}, ErrBadABI, `missing memory export "memory"`},
		{"bad-options", withCustomSection(fixture(t, "good"), "x", ""), Options{BreakerThreshold: -1}, ErrBadSpec, "breaker settings"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := Load(context.Background(), tc.bin, tc.opts)
			if tc.is == nil {
				if err != nil {
					t.Fatalf("Load: %v", err)
				}
				_ = m.Close(context.Background())
				return
			}
			if err == nil {
				_ = m.Close(context.Background())
				t.Fatal("Load succeeded")
			}
			if !errors.Is(err, tc.is) || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("err = %v\nwant errors.Is %v and containing %q", err, tc.is, tc.msg)
			}
		})
	}
}

func TestWASIInitialize(t *testing.T) {
	m := load(t, "wasi", Options{})
	if !m.Info().WASI || !m.Info().Initialize {
		t.Errorf("Info = %+v, want WASI and _initialize", m.Info())
	}
	i := instance(t, m)
	if got := i.Classify([]byte("x")); got != 2 {
		t.Errorf("Classify = %d, want 2 (_initialize must run)", got)
	}
}

// TestDuplicateTypeNamesRefused: type names are keys (metrics labels,
// status): a module whose names repeat, or that gives a type another
// type's default name, is refused at load, whatever the section or export
// it names them with.
func TestDuplicateTypeNamesRefused(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct{ names, msg string }{
		{"UNKNOWN\nSHORT\nSHORT", `type names 1 and 2 are both "SHORT"`},
		{"UNKNOWN\nSHORT\nLONG\nSHORT", `type names 1 and 3 are both "SHORT"`},
		{"\nUNKNOWN", `type names 0 and 1 are both "UNKNOWN"`},
		{"UNKNOWN\n\ntype1", `type names 1 and 2 are both "type1"`},                  // default then explicit
		{"UNKNOWN\ntype3\n", `type name 1 is "type3", the name reserved for type 3`}, // a later default
		{"UNKNOWN\ntype0", `type name 1 is "type0", the name reserved for type 0`},
		{"x\nUNKNOWN", `type name 1 is "UNKNOWN", the name reserved for type 0`},
		{"UNKNOWN\n   \nLONG", `type name 1 ("   ") begins or ends with white space`}, // prints blank
		{"UNKNOWN\nSHORT \nSHORT", `type name 1 ("SHORT ") begins or ends with white space`},
	} {
		m, err := Load(ctx, withCustomSection(fixture(t, "good"), "psp.types", tc.names), Options{})
		if err == nil {
			t.Errorf("%q: loaded with types %q", tc.names, m.Types())
			_ = m.Close(ctx)
			continue
		}
		if !errors.Is(err, ErrBadABI) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%q: err = %v, want ErrBadABI and %q", tc.names, err, tc.msg)
		}
	}
	// Names that only look like defaults, and defaults at their own index, load.
	for _, names := range []string{"UNKNOWN\ntype1\ntype02\ntypeX", "type0\nA\n\ntype3", "UNKNOWN\nshort\nSHORT", "UNKNOWN\nGET SHORT"} {
		m, err := Load(ctx, withCustomSection(fixture(t, "good"), "psp.types", names), Options{})
		if err != nil {
			t.Errorf("%q: %v", names, err)
			continue
		}
		_ = m.Close(ctx)
	}
}
