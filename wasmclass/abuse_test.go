package wasmclass

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/persephone-go/psp/wasmclass/internal/wasmbin"
)

// abuse returns testdata/abuse.wasm with its globals (buffer, size, types,
// names, names length, batch count) set to vals; nil keeps a global.
func abuse(tb testing.TB, vals ...*int32) []byte {
	tb.Helper()
	m, err := wasmbin.Decode(fixture(tb, "abuse"), wasmbin.Bounds{})
	if err != nil {
		tb.Fatal(err)
	}
	for g, v := range vals {
		if v != nil {
			m.Globals[g].Init = append(wasmbin.AppendS64([]byte{0x41}, int64(*v)), 0x0b)
		}
	}
	return m.Encode()
}

func i32(v int32) *int32 { return &v }

func TestABIAbuseRefusedAtLoad(t *testing.T) {
	for _, tc := range []struct {
		name string
		bin  []byte
		msg  string
	}{
		{"buffer outside memory", abuse(t, i32(65536)), "I/O buffer [65536, 73856) is outside the memory"},
		{"buffer straddles end", abuse(t, i32(65536-512)), "is outside the memory"},
		{"buffer misaligned", abuse(t, i32(1028)), "I/O buffer at 1028 is not 8-byte aligned"},
		{"buffer negative", abuse(t, i32(-8)), "is outside the memory"},
		{"size huge", abuse(t, nil, i32(1<<30)), "is outside the memory"},
		{"size negative", abuse(t, nil, i32(-1)), "is outside the memory"},
		{"size too small", abuse(t, nil, i32(383)), "below the minimum 384"},
		{"size wraps", abuse(t, i32(8), i32(-8)), "is outside the memory"},
		{"no types", abuse(t, nil, nil, i32(0)), "psp_num_types returned 0, want 1..65536"},
		{"too many types", abuse(t, nil, nil, i32(65537)), "returned 65537"},
		{"negative types", abuse(t, nil, nil, i32(-1)), "returned -1"},
		{"names outside memory", abuse(t, nil, nil, nil, i32(65530)), "type names [65530, +12) are outside the memory"},
		{"names huge", abuse(t, nil, nil, nil, nil, i32(-1)), "type names of 4294967295 bytes, limit is 65536"},
		{"names negative", abuse(t, nil, nil, nil, i32(-16)), "are outside the memory"},
		{"more names than types", abuse(t, nil, nil, i32(1)), "2 type names for 1 types"},
		// "UNKNOWN\none\n" read from offset 15: a NUL byte starts name 0.
		{"control character in names", abuse(t, nil, nil, nil, i32(15), i32(13)), `type name 0 ("\x00UNKNOWN")`},
		{"names not UTF-8", withCustomSection(fixture(t, "abuse"), "psp.types", "UNKNOWN\n\xff\xfe"), "is not UTF-8 text"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := Load(context.Background(), tc.bin, Options{})
			if err == nil {
				_ = m.Close(context.Background())
				t.Fatal("Load succeeded")
			}
			if !(errors.Is(err, ErrBadABI) || errors.Is(err, ErrLimit)) || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("err = %v\nwant ErrBadABI or ErrLimit and %q", err, tc.msg)
			}
		})
	}
}

func TestABIAbuseBatchCount(t *testing.T) {
	for _, count := range []int32{-2, 0, 4, 33, 1<<31 - 1} {
		m, err := Load(context.Background(), abuse(t, nil, nil, nil, nil, nil, i32(count)), Options{BreakerThreshold: 100})
		if err != nil {
			t.Fatal(err)
		}
		i := instance(t, m)
		out := []uint32{9, 9, 9}
		i.ClassifyBatch(payloads(3, 2), out)
		if out[0] != 0 || out[1] != 0 || out[2] != 0 {
			t.Errorf("count %d: out = %v, want all UNKNOWN", count, out)
		}
		if f := i.Faults(); f.BadCount != 3 {
			t.Errorf("count %d: faults = %+v, want 3 bad count", count, f)
		}
		_ = i.Close(context.Background())
		_ = m.Close(context.Background())
	}
	// The unmodified fixture is valid: the batch path works.
	i := instance(t, load(t, "abuse", Options{}))
	out := make([]uint32, 3)
	i.ClassifyBatch(payloads(3, 2), out)
	if out[0] != 1 || out[1] != 0 || out[2] != 0 || i.Faults().Total() != 0 {
		t.Errorf("valid module: out = %v, faults %+v; want [1 0 0], none", out, i.Faults())
	}
}
