package memcached

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestTableFS: a table written in pieces of any size reads back whole and
// at any offset, counts its chunks as held while it has a name, and
// follows links, renames and removals; other files are MemFS's.
func TestTableFS(t *testing.T) {
	fs := newTableFS()
	rng := rand.New(rand.NewPCG(5, 6))
	want := make([]byte, 3*tableChunk+1234)
	for i := range want {
		want[i] = byte(rng.Uint32())
	}
	f, err := fs.Create("/000007.sst")
	if err != nil {
		t.Fatal(err)
	}
	for rest := want; len(rest) > 0; {
		n := min(len(rest), 1+rng.IntN(3*tableChunk/2))
		if k, err := f.Write(rest[:n]); k != n || err != nil {
			t.Fatalf("write %d: %d, %v", n, k, err)
		}
		rest = rest[n:]
	}
	if _, err := f.WriteAt([]byte("x"), 0); err == nil {
		t.Error("WriteAt on a table accepted")
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	chunks := int64(len(want)+tableChunk-1) / tableChunk * tableChunk
	if got := fs.held.Load(); got != chunks {
		t.Errorf("held %d, want %d", got, chunks)
	}
	if info, err := fs.Stat("000007.sst"); err != nil || info.Size() != int64(len(want)) {
		t.Errorf("stat: %v, %v; want size %d", info, err, len(want))
	}
	if names, err := fs.List(""); err != nil || !slices.Contains(names, "000007.sst") {
		t.Errorf("list: %q, %v", names, err)
	}

	check := func(name string) {
		t.Helper()
		r, err := fs.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		if info, err := r.Stat(); err != nil || info.Size() != int64(len(want)) {
			t.Errorf("%s: file stat %v, %v", name, info, err)
		}
		if got, err := io.ReadAll(r); err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s: read %d bytes, %v; want the %d written", name, len(got), err, len(want))
		}
		for _, off := range []int{0, 1, tableChunk - 1, tableChunk, 2*tableChunk + 7, len(want) - 10} {
			p := make([]byte, min(2*tableChunk, len(want)-off))
			if n, err := r.ReadAt(p, int64(off)); n != len(p) || err != nil || !bytes.Equal(p, want[off:off+n]) {
				t.Errorf("%s: ReadAt(%d bytes, %d): %d, %v", name, len(p), off, n, err)
			}
		}
		p := make([]byte, 20)
		if n, err := r.ReadAt(p, int64(len(want)-10)); n != 10 || !errors.Is(err, io.EOF) || !bytes.Equal(p[:n], want[len(want)-10:]) {
			t.Errorf("%s: ReadAt past the end: %d, %v", name, n, err)
		}
	}
	check("000007.sst")

	if err := fs.Link("000007.sst", "000008.sst"); err != nil {
		t.Fatal(err)
	}
	if err := fs.Remove("000007.sst"); err != nil {
		t.Fatal(err)
	}
	check("000008.sst")
	if got := fs.held.Load(); got != chunks {
		t.Errorf("held %d after a link and a removal, want %d", got, chunks)
	}
	if err := fs.Rename("000008.sst", "000009.sst"); err != nil {
		t.Fatal(err)
	}
	check("000009.sst")
	if _, err := fs.OpenReadWrite("000009.sst"); err == nil {
		t.Error("a table opened for reading and writing")
	}
	if err := fs.Remove("000009.sst"); err != nil {
		t.Fatal(err)
	}
	if got := fs.held.Load(); got != 0 {
		t.Errorf("held %d with no table left", got)
	}
	if _, err := fs.Open("000009.sst"); err == nil {
		t.Error("a removed table opened")
	}

	// Other files are MemFS's, read and written as there.
	m, err := fs.Create("MANIFEST-000001")
	if err != nil {
		t.Fatal(err)
	}
	m.Write([]byte("manifest"))
	m.Close()
	r, err := fs.Open("MANIFEST-000001")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := io.ReadAll(r); string(got) != "manifest" || err != nil {
		t.Errorf("manifest: %q, %v", got, err)
	}
	r.Close()
	if got := fs.held.Load(); got != 0 {
		t.Errorf("held %d for a file other than a table", got)
	}
}
