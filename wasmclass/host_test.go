package wasmclass

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"path/filepath"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/persephone-go/psp/app"
)

func newTestHost(tb testing.TB, spec HostSpec) *Host {
	tb.Helper()
	h, err := NewHost(context.Background(), spec)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = h.Close(context.Background()) })
	return h
}

// TestHostTypes: a Host's type ids are its module's, named "name/type"
// (ids past the module's N by number); a faulting call counts in its
// status only.
func TestHostTypes(t *testing.T) {
	h := newTestHost(t, HostSpec{Name: "kv", Wasm: fixture(t, "good"), MaxTypes: 6})
	want := []string{"UNKNOWN", "kv/type1", "kv/type2", "kv/type3", "kv/type4", "kv/type5"}
	if got := h.Types(); !reflect.DeepEqual(got, want) {
		t.Errorf("Types = %q\nwant %q", got, want)
	}
	if h.NumTypes() != len(want) {
		t.Errorf("NumTypes = %d, want %d", h.NumTypes(), len(want))
	}
	bad := newTestHost(t, HostSpec{Name: "bad", Wasm: fixture(t, "trap")})
	c, err := h.NewCaller()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cb, err := bad.NewCaller()
	if err != nil {
		t.Fatal(err)
	}
	defer cb.Close()
	ps := [][]byte{{1}, {3}, {0}, {9}}
	out := make([]app.Type, len(ps))
	c.ClassifyBatch(ps, out)
	if wantOut := []app.Type{1, 3, 0, 0}; !reflect.DeepEqual(out, wantOut) {
		t.Errorf("out = %v, want %v", out, wantOut)
	}
	cb.ClassifyBatch([][]byte{{2}}, out[:1])
	if out[0] != app.Unknown {
		t.Errorf("a trap classified %d, want UNKNOWN", out[0])
	}
	if st, sb := h.Status(), bad.Status(); sb.Name != "bad" || sb.Faults.Trap != 1 || st.Faults.Total() != 0 {
		t.Errorf("status = %+v and %+v, want one trap for bad only", st, sb)
	}
}

func TestHostSpecErrors(t *testing.T) {
	ctx := context.Background()
	good := fixture(t, "good")
	for name, spec := range map[string]HostSpec{
		"no name":     {Wasm: good},
		"bad name":    {Name: "a/b", Wasm: good},
		"small range": {Name: "a", Wasm: good, MaxTypes: 2},
	} {
		if h, err := NewHost(ctx, spec); !errors.Is(err, ErrBadSpec) {
			t.Errorf("%s: err = %v, want ErrBadSpec", name, err)
			if h != nil {
				_ = h.Close(ctx)
			}
		}
	}
	if _, err := NewHost(ctx, HostSpec{Name: "b", Wasm: fixture(t, "import")}); !errors.Is(err, ErrForbiddenImport) {
		t.Errorf("bad module: err = %v, want ErrForbiddenImport", err)
	}
}

func TestSwapFailureKeepsRunningVersion(t *testing.T) {
	ctx := context.Background()
	h := newTestHost(t, HostSpec{Name: "a", Wasm: fixture(t, "const1")})
	if _, err := h.Swap(ctx, fixture(t, "badsig")); !errors.Is(err, ErrBadABI) {
		t.Errorf("swap to badsig: err = %v, want ErrBadABI", err)
	}
	if _, err := h.Swap(ctx, fixture(t, "good")); !errors.Is(err, ErrBadABI) {
		t.Errorf("swap to a module with more types than the range: err = %v, want ErrBadABI", err)
	}
	if st := h.Status(); st.Version != 1 {
		t.Errorf("version = %d after failed swaps, want 1", st.Version)
	}
	if got := classifyWithNewCaller(h, 0); got != 1 {
		t.Errorf("out = %d, want 1 (const1 still running)", got)
	}
}

// TestHotSwapUnderLoad swaps between two modules that answer different
// constant types while callers classify: every packet must get one of the
// two answers (none lost to UNKNOWN) and the callers must see both.
func TestHotSwapUnderLoad(t *testing.T) {
	ctx := context.Background()
	versions := [][]byte{fixture(t, "const1"), fixture(t, "const2")}
	h := newTestHost(t, HostSpec{Name: "a", Wasm: versions[0]})
	const swaps = 60
	var stop atomic.Bool
	var wg sync.WaitGroup
	seen := make([][3]uint64, 2)
	errs := make(chan error, 2)
	for g := range seen {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := h.NewCaller()
			if err != nil {
				errs <- err
				return
			}
			defer c.Close()
			ps := payloads(40, 4)
			out := make([]app.Type, len(ps))
			for !stop.Load() {
				c.ClassifyBatch(ps, out)
				for _, v := range out {
					if v > 2 {
						v = 0
					}
					seen[g][v]++
				}
			}
		}()
	}
	for k := 1; k <= swaps; k++ {
		v, err := h.Swap(ctx, versions[k%2])
		if err != nil {
			t.Fatal(err)
		}
		if v != k+1 {
			t.Errorf("Swap returned version %d, want %d", v, k+1)
		}
		// Let the callers run a little on each version.
		for j := 0; j < 3; j++ {
			if got, want := classifyWithNewCaller(h, 0), app.Type(1+k%2); got != want {
				t.Errorf("after swap %d: fresh caller got %d, want %d", k, got, want)
			}
		}
	}
	stop.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for g, s := range seen {
		t.Logf("caller %d: unknown %d, v1 %d, v2 %d", g, s[0], s[1], s[2])
		if s[0] != 0 {
			t.Errorf("caller %d: %d packets lost to UNKNOWN during swaps", g, s[0])
		}
		if s[1] == 0 || s[2] == 0 {
			t.Errorf("caller %d never saw one of the versions: %v", g, s)
		}
	}
	if st := h.Status(); st.Version != swaps+1 || st.Faults.Total() != 0 {
		t.Errorf("status = %+v", st)
	}
	// The callers have closed; their last old instances close on
	// goroutines of their own, so every retired module must close soon
	// (none is leaked by an instance left open).
	h.swapMu.Lock()
	retired := append([]*Module(nil), h.retired...)
	h.swapMu.Unlock()
	deadline := time.Now().Add(30 * time.Second)
	for _, m := range retired {
		for {
			m.mu.Lock()
			closed, live := m.closed, m.live
			m.mu.Unlock()
			if closed {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("a retired module is still open (%d live instances) after every caller closed", live)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

func TestHostCompilationCacheDir(t *testing.T) {
	dir := t.TempDir()
	spec := HostSpec{
		Name: "a", Wasm: fixture(t, "good"),
		Options: Options{CacheDir: dir},
	}
	h := newTestHost(t, spec)
	if h.opts.Cache == nil {
		t.Fatal("no shared cache")
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*", "*"))
	if len(files) < 1 {
		t.Errorf("cache dir holds %d files, want the module's at least", len(files))
	}
	// A restart loads from the cache.
	if err := h.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	h2 := newTestHost(t, spec)
	if got := classifyWithNewCaller(h2, 2); got != 2 {
		t.Errorf("after restart: out = %d, want 2", got)
	}
}

func TestSwapPrecreatesInstances(t *testing.T) {
	ctx := context.Background()
	h := newTestHost(t, HostSpec{Name: "a", Wasm: fixture(t, "const1")})
	c, _ := h.NewCaller()
	defer c.Close()
	out := make([]app.Type, 1)
	c.ClassifyBatch([][]byte{{0}}, out)
	// Two swaps before the caller classifies again: the instance made for
	// the first is replaced by the second's.
	if _, err := h.Swap(ctx, fixture(t, "const2")); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Swap(ctx, fixture(t, "const2")); err != nil {
		t.Fatal(err)
	}
	p := c.pending.Load()
	if p == nil || p.ver != h.current.Load() {
		t.Fatalf("no instance pre-created for the new version: %+v", p)
	}
	c.ClassifyBatch([][]byte{{0}}, out)
	if out[0] != 2 || c.inst != p.inst || c.pending.Load() != nil {
		t.Errorf("out = %d (want 2); the caller did not take the pre-created instance", out[0])
	}
}

// TestHostCloseUnderLoad closes the host while callers classify: every
// batch that starts after Close returned gets UNKNOWN, nothing panics or
// hangs.
func TestHostCloseUnderLoad(t *testing.T) {
	h, err := NewHost(context.Background(), HostSpec{Name: "a", Wasm: fixture(t, "const1")})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var closed atomic.Bool
	classifiedAfter := make([]int, 2)
	for g := range classifiedAfter {
		c, err := h.NewCaller()
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.Close()
			ps := payloads(8, 2)
			out := make([]app.Type, len(ps))
			for after := 0; after < 100; {
				isClosed := closed.Load()
				c.ClassifyBatch(ps, out)
				if isClosed {
					after++
					for _, v := range out {
						if v != app.Unknown {
							classifiedAfter[g]++
						}
					}
				}
			}
		}()
	}
	if err := h.Close(context.Background()); err != nil {
		t.Error(err)
	}
	closed.Store(true)
	wg.Wait()
	for g, n := range classifiedAfter {
		if n != 0 {
			t.Errorf("caller %d: %d packets classified after Close", g, n)
		}
	}
	if _, err := h.NewCaller(); !errors.Is(err, ErrClosed) {
		t.Errorf("NewCaller after Close: err = %v, want ErrClosed", err)
	}
}

// twoVersions returns a Host running fixture "good" (v1), closed at the
// test's end, and fixture "const2" (v2) to swap in.
func twoVersions(t *testing.T) (h *Host, v1, v2 []byte) {
	t.Helper()
	ctx := context.Background()
	v1, v2 = fixture(t, "good"), fixture(t, "const2")
	h, err := NewHost(ctx, HostSpec{Name: "a", Wasm: v1, MaxTypes: 16})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(ctx) })
	return h, v1, v2
}

func TestRollbackAndIdentity(t *testing.T) {
	ctx := context.Background()
	h, v1, v2 := twoVersions(t)
	st := h.Status()
	if want := sha256.Sum256(v1); st.SHA256 != hex.EncodeToString(want[:]) || st.Size != len(v1) || st.LoadedAt.IsZero() || st.PreviousSHA256 != "" {
		t.Fatalf("status of version 1: %+v", st)
	}
	if _, err := h.Rollback(ctx); !errors.Is(err, ErrNoPrevious) {
		t.Fatalf("rollback before a swap: %v", err)
	}
	if v, err := h.Swap(ctx, v2); err != nil || v != 2 {
		t.Fatalf("swap: %d, %v", v, err)
	}
	st = h.Status()
	if want := sha256.Sum256(v2); st.SHA256 != hex.EncodeToString(want[:]) || st.PreviousSHA256 != hex.EncodeToString(sha256Of(v1)) {
		t.Fatalf("status of version 2: %+v", st)
	}
	if v, err := h.Rollback(ctx); err != nil || v != 3 {
		t.Fatalf("rollback: %d, %v", v, err)
	}
	st = h.Status()
	if st.SHA256 != hex.EncodeToString(sha256Of(v1)) || st.PreviousSHA256 != hex.EncodeToString(sha256Of(v2)) {
		t.Fatalf("after the rollback: %+v", st)
	}
	if wasm, sum, n := h.Current(); n != 3 || sum != sha256.Sum256(v1) || len(wasm) != len(v1) {
		t.Fatalf("current: %d bytes, version %d", len(wasm), n)
	}
}

func sha256Of(b []byte) []byte {
	s := sha256.Sum256(b)
	return s[:]
}

// classifyWithNewCaller classifies the one-byte payload b with a caller
// made for it and closed after.
func classifyWithNewCaller(h *Host, b byte) app.Type {
	c, _ := h.NewCaller()
	defer c.Close()
	out := make([]app.Type, 1)
	c.ClassifyBatch([][]byte{{b}}, out)
	return out[0]
}
