package wasmclass

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/persephone-go/psp/wasmclass/internal/wasmbin"
)

func loadBin(tb testing.TB, bin []byte, opts Options) *Module {
	tb.Helper()
	m, err := Load(context.Background(), bin, opts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = m.Close(context.Background()) })
	return m
}

var i32Local = []wasmbin.LocalDecl{{Count: 1, Type: wasmbin.I32}}

func TestTimeLimitDisablesModule(t *testing.T) {
	// The fuel would allow a minute; the time limit stops the call. The
	// module recurses (1000 deep, again and again), so it exits to the
	// host between slices of fuel, where a garbage collection, and so the
	// watchdog, can run; a loop that calls nothing does not (see
	// watchdog).
	rec := advFunc{params: []byte{wasmbin.I32},
		body: cat(lget(0), []byte{0x04, 0x40}, lget(0), i32c(1), []byte{0x6b, 0x10, 7, 0x0b})}
	bin := advModule{spinIsClassify: true, extra: []advFunc{rec},
		body: cat([]byte{0x03, 0x40}, i32c(1000), []byte{0x10, 7, 0x0c, 0x00, 0x0b}, i32c(0))}.build()
	m := loadBin(t, bin, Options{Fuel: 1 << 36, TimeLimit: 40 * time.Millisecond, syncSpares: true})
	i := instance(t, m)
	start := time.Now()
	if got := i.Classify([]byte("x")); got != 0 {
		t.Errorf("Classify = %d, want 0", got)
	}
	t.Logf("the call was stopped after %v", time.Since(start))
	if f := i.Faults(); f.Time != 1 || !m.Disabled() {
		t.Fatalf("faults = %+v, disabled = %v; want one time fault and a disabled module", f, m.Disabled())
	}
	i.Classify([]byte("x"))
	if f := i.Faults(); f.Unavailable != 1 || f.Time != 1 {
		t.Errorf("after: faults = %+v, want the next packet unavailable (module disabled)", f)
	}
}

func TestInitialisationRunsOnceAtLoad(t *testing.T) {
	// The start function adds 1 to mem[0]. psp_classify traps if mem[4] is
	// set, else sets it and returns mem[0].
	inc := cat(i32c(0), i32c(0), []byte{0x28, 2, 0}, i32c(1), []byte{0x6a, 0x36, 2, 0})
	classify := cat(i32c(4), []byte{0x28, 2, 0, 0x04, 0x40, 0x00, 0x0b}, i32c(4), i32c(1), []byte{0x36, 2, 0}, i32c(0), []byte{0x28, 2, 0})
	bin := advModule{spinIsClassify: true, body: classify, init: inc, start: true}.build()
	m := loadBin(t, bin, Options{syncSpares: true})
	if !m.Info().Start {
		t.Fatal("start function not seen")
	}
	i := instance(t, m)
	for k, want := range []uint32{1, 0, 1, 0, 1} {
		if got := i.Classify([]byte("x")); got != want {
			t.Errorf("call %d: Classify = %d, want %d (the start function ran %d times)", k, got, want, got)
		}
	}
	if f := i.Faults(); f.Trap != 2 || f.Restarts != 2 {
		t.Errorf("faults = %+v, want 2 traps and 2 restarts", f)
	}
}

func TestSpareReadyAfterTrap(t *testing.T) {
	// Without syncSpares the replacement is built by the instance's own
	// goroutine; once it is ready the caller takes it without waiting.
	bin := advModule{spinIsClassify: true, body: []byte{0x00}}.build()
	m := loadBin(t, bin, Options{BreakerThreshold: 1000})
	i := instance(t, m)
	i.Classify([]byte("x"))
	deadline := time.Now().Add(10 * time.Second)
	for i.spare.Load() == nil && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	i.Classify([]byte("x"))
	if f := i.Faults(); f.Trap != 2 || f.Restarts != 1 || f.Unavailable != 0 {
		t.Errorf("faults = %+v, want 2 traps, 1 restart from the ready spare", f)
	}
}

func TestImportsRefused(t *testing.T) {
	good := fixture(t, "good")
	withImport := func(module, name string, ft wasmbin.FuncType) []byte {
		m, err := wasmbin.Decode(good, wasmbin.Bounds{})
		if err != nil {
			t.Fatal(err)
		}
		m.Types = append(m.Types, ft)
		m.Imports = append(m.Imports, wasmbin.Import{Module: module, Name: name, Kind: wasmbin.KindFunc, Type: uint32(len(m.Types) - 1)})
		return m.Encode()
	}
	i32 := []byte{wasmbin.I32}
	for _, tc := range []struct {
		name string
		bin  []byte
		msg  string
	}{
		{"not provided", withImport(wasiModule, "path_symlink", wasmbin.FuncType{Params: []byte{0x7f, 0x7f, 0x7f, 0x7f, 0x7f}, Results: i32}),
			`import "wasi_snapshot_preview1"."path_symlink" (func) refused`},
		{"other module", withImport("env", "now", wasmbin.FuncType{Results: i32}), `import "env"."now" (func) refused`},
		{"wrong type", withImport(wasiModule, "fd_write", wasmbin.FuncType{Params: i32, Results: i32}),
			`has type (i32)->i32, want (i32,i32,i32,i32)->i32`},
	} {
		_, err := Load(context.Background(), tc.bin, Options{})
		if !errors.Is(err, ErrForbiddenImport) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: err = %v, want ErrForbiddenImport and %q", tc.name, err, tc.msg)
		}
		if tc.name == "not provided" && (err == nil || !strings.Contains(err.Error(), "fd_write, fd_read")) && !strings.Contains(err.Error(), "random_get") {
			t.Errorf("%s: the message does not list what is provided: %v", tc.name, err)
		}
	}
}

func TestStackLimitBoundsRecursion(t *testing.T) {
	// f(n) recurses n times with 200 live i64 locals per frame; 10^7 deep
	// would need gigabytes. Fuel allows it; the stack account stops it.
	rec := advFunc{params: []byte{wasmbin.I32}, locals: []wasmbin.LocalDecl{{Count: 200, Type: wasmbin.I64}},
		body: cat(lget(0), []byte{0x04, 0x40}, lget(0), i32c(1), []byte{0x6b, 0x10, 7, 0x0b})}
	bin := advModule{spinIsClassify: true, extra: []advFunc{rec}, body: cat(i32c(10_000_000), []byte{0x10, 7}, i32c(0))}.build()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	m := loadBin(t, bin, Options{Fuel: 1 << 34, TimeLimit: time.Minute, StackLimit: 1 << 20, syncSpares: true})
	i := instance(t, m)
	if got := i.Classify([]byte("x")); got != 0 {
		t.Errorf("Classify = %d", got)
	}
	runtime.ReadMemStats(&after)
	if f := i.Faults(); f.Trap != 1 {
		t.Errorf("faults = %+v, want a trap (stack account over the limit)", f)
	}
	grown := int64(after.HeapInuse) - int64(before.HeapInuse)
	t.Logf("heap grew by %d KiB (estimated frames: %d bytes each)", grown>>10, m.Info().Fuel.MaxFrame)
	if grown > 64<<20 {
		t.Errorf("heap grew by %d MiB during a recursion bounded to 1 MiB of frames", grown>>20)
	}
}

func TestTypeNameAndCustomSectionLimits(t *testing.T) {
	ctx := context.Background()
	long := strings.Repeat("x", MaxTypeName+1)
	_, err := Load(ctx, withCustomSection(fixture(t, "good"), "psp.types", "UNKNOWN\n"+long), Options{})
	if !errors.Is(err, ErrBadABI) || !strings.Contains(err.Error(), "limit is 64") {
		t.Errorf("long name: err = %v", err)
	}
	_, err = Load(ctx, withCustomSection(fixture(t, "good"), "psp.types", strings.Repeat("a\n", MaxTypeNames)), Options{})
	if !errors.Is(err, ErrLimit) {
		t.Errorf("names section over %d bytes: err = %v, want ErrLimit", MaxTypeNames, err)
	}
	bin := fixture(t, "good")
	for k := 0; k <= MaxCustomSections; k++ {
		bin = withCustomSection(bin, "junk", "x")
	}
	if _, err = Load(ctx, bin, Options{}); !errors.Is(err, ErrLimit) || !strings.Contains(err.Error(), "custom sections") {
		t.Errorf("%d custom sections: err = %v, want ErrLimit", MaxCustomSections+1, err)
	}
}

func TestCompileInChild(t *testing.T) {
	ctx := context.Background()
	m, err := Load(ctx, fixture(t, "good"), Options{CompileInChild: true})
	if err != nil {
		t.Fatal(err)
	}
	i := instance(t, m)
	if got := i.Classify([]byte{2}); got != 2 {
		t.Errorf("Classify = %d, want 2", got)
	}
	_ = i.Close(ctx)
	_ = m.Close(ctx)
	// A child that cannot get the memory compilation needs fails cleanly.
	goModule, err := os.ReadFile(filepath.Join("..", "examples", "classifiers", "go", "pspheader.wasm"))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = Load(ctx, goModule, Options{CompileInChild: true, CompileMemory: 64 << 20})
	if !errors.Is(err, ErrCompile) {
		t.Errorf("64 MiB for the child: err = %v, want ErrCompile", err)
	}
	t.Logf("Go module, 64 MiB: %v after %v", err, time.Since(start))
	// A timeout stops (kills) the child.
	_, err = Load(ctx, fixture(t, "good"), Options{CompileInChild: true, CompileTimeout: time.Microsecond})
	if !errors.Is(err, ErrCompile) {
		t.Errorf("1 µs to compile: err = %v, want ErrCompile", err)
	}
}

func TestSwapsAreOrdered(t *testing.T) {
	ctx := context.Background()
	goModule, err := os.ReadFile(filepath.Join("..", "examples", "classifiers", "go", "pspheader.wasm"))
	if err != nil {
		t.Skip(err)
	}
	h := newTestHost(t, HostSpec{Name: "a", Wasm: fixture(t, "const1")})
	// A push whose client gave up never lands.
	gone, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := h.Swap(gone, fixture(t, "const2")); err == nil {
		t.Fatal("a push with a cancelled context landed")
	}
	// A slow push (Go: about a second to compile) then a fast one: the
	// newer wins, the older never lands.
	var wg sync.WaitGroup
	var slowErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, slowErr = h.Swap(ctx, goModule)
	}()
	time.Sleep(20 * time.Millisecond)
	v, err := h.Swap(ctx, fixture(t, "const2"))
	if err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if slowErr == nil && h.Status().Version > v {
		t.Fatalf("the older push landed after the newer one")
	}
	if st := h.Status(); st.Version != v || st.NumTypes != 3 {
		t.Errorf("status = %+v, want the newer push (const2, version %d)", st, v)
	}
	if slowErr == nil || !errors.Is(slowErr, ErrSuperseded) {
		t.Errorf("older push: err = %v, want ErrSuperseded", slowErr)
	}
	t.Logf("older push: %v", slowErr)
}
