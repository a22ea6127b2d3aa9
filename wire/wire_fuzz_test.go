package wire

import (
	"bytes"
	"errors"
	"testing"
)

// FuzzDecode checks that Decode accepts any input without panicking, fails
// exactly on short payloads, agrees with TypeOf, and round-trips through
// Encode.
func FuzzDecode(f *testing.F) {
	f.Add([]byte{})
	f.Add(make([]byte, HeaderLen-1))
	f.Add([]byte{1, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0xe8, 0x03, 0, 0})
	f.Add(bytes.Repeat([]byte{0xff}, 64))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := Decode(b)
		if len(b) < HeaderLen {
			if !errors.Is(err, ErrShort) || h != (Header{}) {
				t.Fatalf("Decode(%d bytes) = %+v, %v; want zero, ErrShort", len(b), h, err)
			}
			if TypeOf(b) != TypeUnknown {
				t.Fatalf("TypeOf(%d bytes) = %d, want TypeUnknown", len(b), TypeOf(b))
			}
			return
		}
		if err != nil {
			t.Fatalf("Decode(%d bytes): %v", len(b), err)
		}
		if TypeOf(b) != h.Type {
			t.Fatalf("TypeOf = %d, Decode type = %d", TypeOf(b), h.Type)
		}
		out := make([]byte, HeaderLen)
		h.Encode(out)
		if !bytes.Equal(out, b[:HeaderLen]) {
			t.Fatalf("Encode(Decode(%x)) = %x", b[:HeaderLen], out)
		}
	})
}

func TestDecodeAllocatesNothing(t *testing.T) {
	b := make([]byte, HeaderLen)
	if a := testing.AllocsPerRun(100, func() { Decode(b); TypeOf(b) }); a != 0 {
		t.Fatalf("Decode+TypeOf allocated %.1f times", a)
	}
}
