package wasmclass

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"path/filepath"
	"reflect"
	"strings"
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

func TestHostTenants(t *testing.T) {
	h := newTestHost(t, HostSpec{Tenants: []TenantSpec{
		{Name: "kv", Ports: []uint16{11211, 11212}, Wasm: fixture(t, "good"), MaxTypes: 6},
		{Name: "web", Wasm: fixture(t, "const2")}, // default tenant
		{Name: "bad", Ports: []uint16{666}, Wasm: fixture(t, "trap")},
	}})
	want := []string{"UNKNOWN", "kv/type1", "kv/type2", "kv/type3", "kv/type4", "kv/type5", "web/one", "web/two", "bad/type1"}
	if got := h.Types(); !reflect.DeepEqual(got, want) {
		t.Errorf("Types = %q\nwant %q", got, want)
	}
	if h.NumTypes() != len(want) {
		t.Errorf("NumTypes = %d, want %d", h.NumTypes(), len(want))
	}
	c, err := h.NewCaller()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ps := [][]byte{{1}, {3}, {1}, {0}, {2}, {9}, {1}}
	ports := []uint16{11211, 11212, 80, 11211, 666, 11212, 0}
	out := make([]app.Type, len(ps))
	c.ClassifyBatch(ps, ports, out)
	// kv: local 1 -> 1, 3 -> 3; web: local 2 -> base 6 + 1 = 7; bad -> 0.
	wantOut := []app.Type{1, 3, 7, 0, 0, 0, 7}
	if !reflect.DeepEqual(out, wantOut) {
		t.Errorf("out = %v, want %v", out, wantOut)
	}
	st := h.Status()
	if st[2].Name != "bad" || st[2].Faults.Trap != 1 || st[0].Faults.Total() != 0 || st[1].Faults.Total() != 0 {
		t.Errorf("status = %+v, want one trap for bad only", st)
	}
	// nil ports: everything to the default tenant.
	c.ClassifyBatch(ps, nil, out)
	for k, v := range out {
		if v != 7 {
			t.Errorf("nil ports: out[%d] = %d, want 7", k, v)
		}
	}
}

func TestHostSpecErrors(t *testing.T) {
	ctx := context.Background()
	good := fixture(t, "good")
	for name, spec := range map[string]HostSpec{
		"no tenants":   {},
		"two defaults": {Tenants: []TenantSpec{{Name: "a", Wasm: good}, {Name: "b", Wasm: good}}},
		"shared port":  {Tenants: []TenantSpec{{Name: "a", Ports: []uint16{1}, Wasm: good}, {Name: "b", Ports: []uint16{1}, Wasm: good}}},
		"bad name":     {Tenants: []TenantSpec{{Name: "a/b", Wasm: good}}},
		"small range":  {Tenants: []TenantSpec{{Name: "a", Wasm: good, MaxTypes: 2}}},
	} {
		if h, err := NewHost(ctx, spec); !errors.Is(err, ErrBadSpec) {
			t.Errorf("%s: err = %v, want ErrBadSpec", name, err)
			if h != nil {
				_ = h.Close(ctx)
			}
		}
	}
	// A tenant's own fault comes as a TenantError naming it once; the
	// second tenant's bad module is the one named.
	_, err := NewHost(ctx, HostSpec{Tenants: []TenantSpec{{Name: "a", Ports: []uint16{1}, Wasm: good}, {Name: "b", Wasm: fixture(t, "import")}}})
	if !errors.Is(err, ErrForbiddenImport) {
		t.Errorf("bad module: err = %v, want ErrForbiddenImport", err)
	}
	if te, ok := errors.AsType[*TenantError](err); !ok || te.Tenant != "b" || strings.Count(err.Error(), `tenant "b"`) != 1 {
		t.Errorf("bad module: err = %v, want a TenantError naming tenant \"b\" once", err)
	}
	_, err = NewHost(ctx, HostSpec{Tenants: []TenantSpec{{Name: "a", Wasm: good, MaxTypes: 2}}})
	if te, ok := errors.AsType[*TenantError](err); !ok || te.Tenant != "a" || !errors.Is(err, ErrBadSpec) {
		t.Errorf("small range: err = %v, want a TenantError naming tenant \"a\" with ErrBadSpec", err)
	}
	_, err = NewHost(ctx, HostSpec{Tenants: []TenantSpec{{Name: "a", Wasm: good}, {Name: "b", Wasm: good}}})
	if _, ok := errors.AsType[*TenantError](err); ok {
		t.Errorf("two defaults: err = %v is about two tenants, not one's TenantError", err)
	}
}

func TestSwapFailureKeepsRunningVersion(t *testing.T) {
	ctx := context.Background()
	h := newTestHost(t, HostSpec{Tenants: []TenantSpec{{Name: "a", Wasm: fixture(t, "const1")}}})
	if _, err := h.Swap(ctx, "a", fixture(t, "badsig")); !errors.Is(err, ErrBadABI) {
		t.Errorf("swap to badsig: err = %v, want ErrBadABI", err)
	}
	if _, err := h.Swap(ctx, "a", fixture(t, "good")); !errors.Is(err, ErrBadABI) {
		t.Errorf("swap to a module with more types than the range: err = %v, want ErrBadABI", err)
	}
	if _, err := h.Swap(ctx, "nobody", fixture(t, "const2")); !errors.Is(err, ErrUnknownTenant) {
		t.Errorf("swap unknown tenant: err = %v", err)
	}
	if st := h.Status(); st[0].Version != 1 {
		t.Errorf("version = %d after failed swaps, want 1", st[0].Version)
	}
	c, _ := h.NewCaller()
	defer c.Close()
	out := make([]app.Type, 1)
	c.ClassifyBatch([][]byte{{0}}, nil, out)
	if out[0] != 1 {
		t.Errorf("out = %d, want 1 (const1 still running)", out[0])
	}
}

// TestHotSwapUnderLoad swaps between two modules that answer different
// constant types while callers classify: every packet must get one of the
// two answers (none lost to UNKNOWN) and the callers must see both.
func TestHotSwapUnderLoad(t *testing.T) {
	ctx := context.Background()
	versions := [][]byte{fixture(t, "const1"), fixture(t, "const2")}
	h := newTestHost(t, HostSpec{Tenants: []TenantSpec{{Name: "a", Wasm: versions[0]}}})
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
				c.ClassifyBatch(ps, nil, out)
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
		v, err := h.Swap(ctx, "a", versions[k%2])
		if err != nil {
			t.Fatal(err)
		}
		if v != k+1 {
			t.Errorf("Swap returned version %d, want %d", v, k+1)
		}
		// Let the callers run a little on each version.
		for j := 0; j < 3; j++ {
			c, _ := h.NewCaller()
			out := make([]app.Type, 1)
			c.ClassifyBatch([][]byte{{0}}, nil, out)
			if want := app.Type(1 + k%2); out[0] != want {
				t.Errorf("after swap %d: fresh caller got %d, want %d", k, out[0], want)
			}
			_ = c.Close()
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
	if st := h.Status(); st[0].Version != swaps+1 || st[0].Faults.Total() != 0 {
		t.Errorf("status = %+v", st[0])
	}
	// The callers have closed; their last old instances close on
	// goroutines of their own, so every retired module must close soon
	// (none is leaked by an instance left open).
	h.swapMu.Lock()
	retired := append([]*Module(nil), h.tenants[0].retired...)
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
		Tenants: []TenantSpec{{Name: "a", Wasm: fixture(t, "good")}, {Name: "b", Ports: []uint16{1}, Wasm: fixture(t, "const1")}},
		Options: Options{CacheDir: dir},
	}
	h := newTestHost(t, spec)
	if h.opts.Cache == nil {
		t.Fatal("no shared cache")
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*", "*"))
	if len(files) < 2 {
		t.Errorf("cache dir holds %d files, want one per tenant module at least", len(files))
	}
	// A restart loads from the cache.
	if err := h.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	h2 := newTestHost(t, spec)
	c, _ := h2.NewCaller()
	defer c.Close()
	out := make([]app.Type, 1)
	c.ClassifyBatch([][]byte{{2}}, nil, out)
	if out[0] != 2 {
		t.Errorf("after restart: out = %d, want 2", out[0])
	}
}

func TestSwapPrecreatesInstances(t *testing.T) {
	ctx := context.Background()
	h := newTestHost(t, HostSpec{Tenants: []TenantSpec{
		{Name: "a", Wasm: fixture(t, "const1")},
		{Name: "b", Ports: []uint16{9}, Wasm: fixture(t, "const1")},
	}})
	c, _ := h.NewCaller()
	defer c.Close()
	out := make([]app.Type, 1)
	c.ClassifyBatch([][]byte{{0}}, nil, out) // uses tenant a only
	if _, err := h.Swap(ctx, "a", fixture(t, "const2")); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Swap(ctx, "b", fixture(t, "const2")); err != nil {
		t.Fatal(err)
	}
	p := c.tenants[0].pending.Load()
	if p == nil || p.ver != h.tenants[0].current.Load() {
		t.Fatalf("no instance pre-created for the new version of a: %+v", p)
	}
	if p := c.tenants[1].pending.Load(); p == nil || p.ver != h.tenants[1].current.Load() {
		t.Error("no instance pre-created for tenant b")
	}
	c.ClassifyBatch([][]byte{{0}}, nil, out)
	if out[0] != 2 || c.tenants[0].inst != p.inst || c.tenants[0].pending.Load() != nil {
		t.Errorf("out = %d (want 2); the caller did not take the pre-created instance", out[0])
	}
}

// TestHostCloseUnderLoad closes the host while callers classify: every
// batch that starts after Close returned gets UNKNOWN, nothing panics or
// hangs.
func TestHostCloseUnderLoad(t *testing.T) {
	h, err := NewHost(context.Background(), HostSpec{Tenants: []TenantSpec{{Name: "a", Wasm: fixture(t, "const1")}}})
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
				c.ClassifyBatch(ps, nil, out)
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

func TestRollbackAndIdentity(t *testing.T) {
	ctx := context.Background()
	v1, v2 := fixture(t, "good"), fixture(t, "const2")
	h, err := NewHost(ctx, HostSpec{Tenants: []TenantSpec{{Name: "a", Wasm: v1, MaxTypes: 16}}})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(ctx)
	st := h.Status()[0]
	if want := sha256.Sum256(v1); st.SHA256 != hex.EncodeToString(want[:]) || st.Size != len(v1) || st.LoadedAt.IsZero() || st.PreviousSHA256 != "" {
		t.Fatalf("status of version 1: %+v", st)
	}
	if _, err := h.Rollback(ctx, "a"); !errors.Is(err, ErrNoPrevious) {
		t.Fatalf("rollback before a swap: %v", err)
	}
	if v, err := h.Swap(ctx, "a", v2); err != nil || v != 2 {
		t.Fatalf("swap: %d, %v", v, err)
	}
	st = h.Status()[0]
	if want := sha256.Sum256(v2); st.SHA256 != hex.EncodeToString(want[:]) || st.PreviousSHA256 != hex.EncodeToString(sha256Of(v1)) {
		t.Fatalf("status of version 2: %+v", st)
	}
	if v, err := h.Rollback(ctx, "a"); err != nil || v != 3 {
		t.Fatalf("rollback: %d, %v", v, err)
	}
	st = h.Status()[0]
	if st.SHA256 != hex.EncodeToString(sha256Of(v1)) || st.PreviousSHA256 != hex.EncodeToString(sha256Of(v2)) {
		t.Fatalf("after the rollback: %+v", st)
	}
	if wasm, sum, n, err := h.Current("a"); err != nil || n != 3 || sum != sha256.Sum256(v1) || len(wasm) != len(v1) {
		t.Fatalf("current: %d bytes, version %d, %v", len(wasm), n, err)
	}
	if _, err := h.Rollback(ctx, "b"); !errors.Is(err, ErrUnknownTenant) {
		t.Fatalf("rollback of an unknown tenant: %v", err)
	}
}

func sha256Of(b []byte) []byte {
	s := sha256.Sum256(b)
	return s[:]
}
