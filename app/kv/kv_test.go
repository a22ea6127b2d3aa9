package kv

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/persephone-go/psp/app"
	"github.com/persephone-go/psp/nic"
	"github.com/persephone-go/psp/wire"
)

func request(r Request) *nic.Buffer {
	b := &nic.Buffer{Data: make([]byte, 2048)}
	b.Len = Encode(b.Data, r)
	b.WireLen = b.Len
	return b
}

func TestGetAndScan(t *testing.T) {
	s, err := Open(Config{Keys: 100, ValueSize: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	b := request(Request{ID: 5, Op: wire.TypeGet, Key: Key(42)})
	if !s.Handle(0, 10, b) {
		t.Fatal("GET refused")
	}
	h, _ := wire.Decode(b.Payload())
	if h.ID != 5 || h.Type != wire.TypeGet || h.Reserved != StatusOK {
		t.Fatalf("GET header %+v", h)
	}
	if got, want := string(b.Payload()[wire.HeaderLen:]), "qrstuvwx"; got != want { // 'a'+(42+j)%26
		t.Errorf("GET value %q, want %q", got, want)
	}

	b = request(Request{ID: 6, Op: wire.TypeGet, Key: []byte("nope")})
	s.Handle(0, 10, b)
	if h, _ := wire.Decode(b.Payload()); h.Reserved != StatusNotFound || b.Len != wire.HeaderLen {
		t.Errorf("missing key: status %d len %d", h.Reserved, b.Len)
	}

	b = request(Request{ID: 7, Op: wire.TypeScan, Key: Key(90)}) // 10 keys left
	s.Handle(0, 11, b)
	p := b.Payload()
	if len(p) != wire.HeaderLen+16 {
		t.Fatalf("SCAN reply %d bytes", len(p))
	}
	if keys, bytes := binary.LittleEndian.Uint32(p[16:]), binary.LittleEndian.Uint32(p[20:]); keys != 10 || bytes != 80 {
		t.Errorf("SCAN from k00090: %d keys %d bytes, want 10 and 80", keys, bytes)
	}
	b = request(Request{ID: 8, Op: wire.TypeScan, Count: 3, Key: Key(0)})
	s.Handle(0, 11, b)
	if keys := binary.LittleEndian.Uint32(b.Payload()[16:]); keys != 3 {
		t.Errorf("SCAN count 3 read %d keys", keys)
	}

	b = request(Request{ID: 9, Op: wire.TypeShort, Key: Key(1)})
	s.Handle(0, 1, b)
	if h, _ := wire.Decode(b.Payload()); h.Reserved != StatusBadRequest {
		t.Errorf("bad op: status %d, want bad request", h.Reserved)
	}
	b.Len = 3
	if s.Handle(0, 0, b) {
		t.Error("runt accepted")
	}
}

func TestParseErrors(t *testing.T) {
	buf := make([]byte, 600)
	for _, tc := range []struct {
		r    Request
		n    int
		want error
	}{
		{Request{Op: wire.TypeGet, Key: Key(1)}, 0, nil},
		{Request{Op: wire.TypeScan, Count: 9, Key: Key(1)}, 0, nil},
		{Request{Op: wire.TypeGet}, 0, ErrKey},
		{Request{Op: wire.TypeGet, Key: make([]byte, 300)}, 0, ErrKey},
		{Request{Op: wire.TypeGet, Count: 1, Key: Key(1)}, 0, ErrCount},
		{Request{Op: wire.TypeScan, Count: MaxScanCount + 1, Key: Key(1)}, 0, ErrCount},
		{Request{Op: 3, Key: Key(1)}, 0, ErrOp},
		{Request{Op: wire.TypeGet, Key: Key(1)}, 10, ErrShort},
	} {
		n := Encode(buf, tc.r)
		if tc.n != 0 {
			n = tc.n
		}
		if _, err := Parse(buf[:n]); !errors.Is(err, tc.want) {
			t.Errorf("%+v: Parse = %v, want %v", tc.r, err, tc.want)
		}
	}
}

func TestClassifier(t *testing.T) {
	buf1, buf2 := make([]byte, 64), make([]byte, 64)
	n1 := Encode(buf1, Request{Op: wire.TypeGet, Key: Key(1)})
	n2 := Encode(buf2, Request{Op: wire.TypeScan, Key: Key(1)})
	payloads := [][]byte{buf1[:n1], buf2[:n2], buf1[:16], {1}}
	out := make([]app.Type, 4)
	Classifier{}.ClassifyBatch(payloads, out)
	if want := []app.Type{10, 11, 0, 0}; out[0] != want[0] || out[1] != want[1] || out[2] != want[2] || out[3] != want[3] {
		t.Errorf("classified %v, want %v", out, want)
	}
	if a := testing.AllocsPerRun(100, func() { Classifier{}.ClassifyBatch(payloads, out) }); a != 0 {
		t.Errorf("ClassifyBatch allocates %.1f", a)
	}
}

func FuzzParse(f *testing.F) {
	buf := make([]byte, 64)
	f.Add(buf[:Encode(buf, Request{Op: wire.TypeGet, Key: Key(1)})])
	f.Add(buf[:Encode(buf, Request{Op: wire.TypeScan, Count: 5, Key: Key(7)})])
	f.Add([]byte{})
	f.Add([]byte("GET k00001\r\n"))
	s, err := Open(Config{Keys: 50, ValueSize: 4})
	if err != nil {
		f.Fatal(err)
	}
	defer s.Close()
	f.Fuzz(func(t *testing.T, payload []byte) {
		r, err := Parse(payload)
		if err == nil && (len(r.Key) == 0 || len(r.Key) > MaxKeyLen || (r.Op != wire.TypeGet && r.Op != wire.TypeScan)) {
			t.Fatalf("Parse accepted %x as %+v", payload, r)
		}
		b := &nic.Buffer{Data: make([]byte, 512)}
		b.Len = copy(b.Data, payload)
		if s.Handle(0, 0, b) && (b.Len < wire.HeaderLen || b.Len > len(b.Data)) {
			t.Fatalf("reply length %d", b.Len)
		}
	})
}

func BenchmarkGet(b *testing.B) {
	benchmarkHandle(b, func(i int) Request { return Request{Op: wire.TypeGet, Key: Key(i % DefaultKeys)} })
}

func BenchmarkScan(b *testing.B) {
	key := Key(0)
	benchmarkHandle(b, func(int) Request { return Request{Op: wire.TypeScan, Key: key} })
}

// benchmarkHandle serves the i-th request of b.N, encoded in one buffer,
// with a store of the default config.
func benchmarkHandle(b *testing.B, request func(i int) Request) {
	s, err := Open(Config{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	buf := &nic.Buffer{Data: make([]byte, 2048)}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		r := request(i)
		buf.Len = Encode(buf.Data, r)
		s.Handle(0, app.Type(r.Op), buf)
	}
}

func TestReplyOverloaded(t *testing.T) {
	var s Store // ReplyOverloaded needs no database
	b := request(Request{ID: 7, Op: wire.TypeScan, Count: 9, Key: []byte("k00001")})
	if !s.ReplyOverloaded(11, b) {
		t.Fatal("no overloaded reply for a well-formed request")
	}
	h, _ := wire.Decode(b.Payload())
	if b.Len != wire.HeaderLen || h.ID != 7 || h.Type != wire.TypeScan || h.Reserved != StatusOverloaded {
		t.Errorf("reply len %d header %+v", b.Len, h)
	}
	b.Len = 5
	if s.ReplyOverloaded(0, b) {
		t.Error("replied to a 5-byte runt")
	}
	if a := testing.AllocsPerRun(100, func() { b.Len = 16; s.ReplyOverloaded(10, b) }); a != 0 {
		t.Errorf("ReplyOverloaded allocates %v times", a)
	}
}
