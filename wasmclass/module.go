package wasmclass

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/tetratelabs/wabin/wasm"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/persephone-go/psp/wasmclass/internal/fuel"
)

// Module is one compiled, validated, fuel-instrumented classifier. It owns
// a wazero.Runtime of its own, so modules never see each other's exports.
//
// A Module is safe for concurrent use. Instances are created from it with
// NewInstance, one per calling goroutine. Close releases it (and stops its
// instances).
type Module struct {
	rt       wazero.Runtime
	compiled wazero.CompiledModule
	ownCache wazero.CompilationCache // created by Load from CacheDir, closed by Close
	opts     Options
	info     Info

	mu      sync.Mutex
	live    int  // open Instances
	retired bool // close when live reaches 0
	closed  bool
}

// Info describes a loaded classifier.
type Info struct {
	ABIVersion   uint32
	NumTypes     int      // N
	TypeNames    []string // len N; index = type id
	IOBuffer     uint32   // address of the I/O buffer in the guest memory
	IOBufferSize uint32
	Slots        int  // packets per batch call: min(MaxBatch, (size-IOHeader)/SlotSize)
	WASI         bool // the module imports wasi_snapshot_preview1
	Initialize   bool // the module exports _initialize (called per instance)
	MemoryPages  uint32
	Fuel         FuelStats
}

// FuelStats describes the fuel instrumentation of a module.
type FuelStats struct {
	Budget, InitBudget uint64
	Functions          int // functions metered at entry (those that call others or are long)
	BackEdges          int // branches back to a loop header metered
	BulkOps            int // bulk memory and table instructions metered by length
	ImportCalls        int // calls to WASI functions metered by an argument
	Wrapped            int // entry points wrapped to refill the budget
	CodeBytesBefore    int
	CodeBytesAfter     int
}

// Load validates wasm against ABI v1, instruments it with fuel, compiles it
// and reads its constants (ABI version, I/O buffer, number of types, type
// names) from a probe instance.
//
// # Errors
//
// The error wraps ErrTooLarge, ErrInvalidModule, ErrBadABI,
// ErrForbiddenImport, ErrMemoryLimit or ErrBadSpec and names the offending
// export, import or limit, e.g.
//
//	wasmclass: export "psp_classify_batch" has type (i32,i32)->i32, want (i32)->i32 (classifier ABI violation)
func Load(ctx context.Context, bin []byte, opts Options) (*Module, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("wasmclass: %w", err)
	}
	if len(bin) > opts.MaxModuleSize {
		return nil, fmt.Errorf("wasmclass: module is %d bytes, limit is %d: %w (raise the module size limit)",
			len(bin), opts.MaxModuleSize, ErrTooLarge)
	}
	dec, err := fuel.Decode(bin)
	if err != nil {
		return nil, fmt.Errorf("wasmclass: decode: %w: %w", err, ErrInvalidModule)
	}
	var info Info
	if err := checkStatic(dec, opts, &info); err != nil {
		return nil, err
	}
	namesFromSection, hasSection := customSection(dec, customTypeNames)

	instrumented := bin
	if !opts.noFuel {
		st, err := fuel.Instrument(dec, fuel.Config{
			Budget: opts.Fuel, InitBudget: opts.InitFuel, InitExports: []string{exportInitialize},
			ImportCosts: wasiCosts,
		})
		if err != nil {
			return nil, fmt.Errorf("wasmclass: fuel instrumentation: %v: %w", err, ErrInvalidModule)
		}
		info.Fuel = FuelStats{
			Budget: opts.Fuel, InitBudget: opts.InitFuel,
			Functions: st.Functions, BackEdges: st.BackEdges, BulkOps: st.BulkOps, ImportCalls: st.ImportCalls, Wrapped: st.Exports,
			CodeBytesBefore: st.SizeBefore, CodeBytesAfter: st.SizeAfter,
		}
		instrumented = fuel.Encode(dec)
	}

	m := &Module{opts: opts}
	cache := opts.Cache
	if cache == nil && opts.CacheDir != "" {
		if cache, err = wazero.NewCompilationCacheWithDir(opts.CacheDir); err != nil {
			return nil, fmt.Errorf("wasmclass: compilation cache %q: %w", opts.CacheDir, err)
		}
		m.ownCache = cache
	}
	cfg := wazero.NewRuntimeConfig().WithMemoryLimitPages(opts.MemoryLimitPages).WithCloseOnContextDone(false)
	if cache != nil {
		cfg = cfg.WithCompilationCache(cache)
	}
	m.rt = wazero.NewRuntimeWithConfig(ctx, cfg)
	fail := func(err error) (*Module, error) {
		_ = m.Close(ctx)
		return nil, err
	}
	if info.WASI {
		if _, err := wasi_snapshot_preview1.Instantiate(ctx, m.rt); err != nil {
			return fail(fmt.Errorf("wasmclass: instantiate WASI: %w", err))
		}
	}
	if m.compiled, err = m.rt.CompileModule(ctx, instrumented); err != nil {
		return fail(fmt.Errorf("wasmclass: compile: %v: %w", err, ErrInvalidModule))
	}

	// Probe instance: read the constants the ABI says are fixed.
	mod, err := m.instantiate(ctx, info.Initialize)
	if err != nil {
		return fail(err)
	}
	defer mod.Close(ctx)
	if err := readConstants(ctx, mod, &info); err != nil {
		return fail(err)
	}
	var names []byte
	if hasSection {
		names = namesFromSection
	} else if mod.ExportedFunction(exportNames) != nil {
		if names, err = readNames(ctx, mod); err != nil {
			return fail(err)
		}
	}
	if info.TypeNames, err = parseTypeNames(names, info.NumTypes); err != nil {
		return fail(err)
	}
	m.info = info
	return m, nil
}

// Info returns what Load learnt about the module.
func (m *Module) Info() Info { return m.info }

// Types returns the type names, index = type id; len = N.
func (m *Module) Types() []string { return append([]string(nil), m.info.TypeNames...) }

// NumTypes returns N: the classifier's types are 0..N-1.
func (m *Module) NumTypes() int { return m.info.NumTypes }

// Close releases the module and its runtime; instances still open stop
// working (their calls fault and return UNKNOWN). Safe to call twice.
func (m *Module) Close(ctx context.Context) error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	m.mu.Unlock()
	return m.closeResources(ctx)
}

func (m *Module) closeResources(ctx context.Context) error {
	var errs []error
	if m.rt != nil {
		errs = append(errs, m.rt.Close(ctx))
	}
	if m.ownCache != nil {
		errs = append(errs, m.ownCache.Close(ctx))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("wasmclass: close module: %w", err)
	}
	return nil
}

// retire closes the module once its last instance is closed (now if none
// is open). Used by hot swap: callers still using the old version keep
// working until they switch.
func (m *Module) retire(ctx context.Context) {
	m.mu.Lock()
	m.retired = true
	closeNow := m.live == 0 && !m.closed
	if closeNow {
		m.closed = true
	}
	m.mu.Unlock()
	if closeNow {
		_ = m.closeResources(ctx)
	}
}

// acquire and release count open Instances.
func (m *Module) acquire() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed || m.retired {
		return fmt.Errorf("wasmclass: new instance: %w", ErrClosed)
	}
	m.live++
	return nil
}

func (m *Module) release(ctx context.Context) {
	m.mu.Lock()
	m.live--
	closeNow := m.live == 0 && m.retired && !m.closed
	if closeNow {
		m.closed = true
	}
	m.mu.Unlock()
	if closeNow {
		_ = m.closeResources(ctx)
	}
}

// instantiate creates an anonymous instance and runs _initialize if asked.
func (m *Module) instantiate(ctx context.Context, initialize bool) (api.Module, error) {
	mod, err := m.rt.InstantiateModule(ctx, m.compiled, wazero.NewModuleConfig().WithName("").WithStartFunctions())
	if err != nil {
		return nil, fmt.Errorf("wasmclass: instantiate: %w", err)
	}
	if initialize {
		if _, err := mod.ExportedFunction(exportInitialize).Call(ctx); err != nil {
			_ = mod.Close(ctx)
			return nil, fmt.Errorf("wasmclass: %s: %w", exportInitialize, err)
		}
	}
	return mod, nil
}

// signature is a function type of i32s only: params count, has a result.
type signature struct {
	params  int
	results int
}

func (s signature) String() string {
	return "(" + strings.TrimSuffix(strings.Repeat("i32,", s.params), ",") + ")->" + typeList(s.results)
}

func typeList(n int) string {
	switch n {
	case 0:
		return "()"
	case 1:
		return "i32"
	}
	return "(" + strings.TrimSuffix(strings.Repeat("i32,", n), ",") + ")"
}

func formatType(ft *wasm.FunctionType) string {
	ps := make([]string, len(ft.Params))
	for i, p := range ft.Params {
		ps[i] = wasm.ValueTypeName(p)
	}
	rs := make([]string, len(ft.Results))
	for i, r := range ft.Results {
		rs[i] = wasm.ValueTypeName(r)
	}
	res := strings.Join(rs, ",")
	if len(rs) != 1 {
		res = "(" + res + ")"
	}
	return "(" + strings.Join(ps, ",") + ")->" + res
}

// wasiCosts meters the WASI functions whose work grows with an argument:
// the bytes random_get fills, the buffers (iovecs) the fd_ functions walk,
// the subscriptions poll_oneoff handles. Other WASI functions do a bounded
// amount of work per call: the host gives no files, no arguments and no
// environment, and sleeping returns at once.
var wasiCosts = map[string]fuel.ImportCost{
	wasiModule + ".random_get":  {Param: 1, Shift: 2}, // slower than memory.fill: 4 bytes a unit
	wasiModule + ".fd_write":    {Param: 2},
	wasiModule + ".fd_read":     {Param: 2},
	wasiModule + ".fd_pwrite":   {Param: 2},
	wasiModule + ".fd_pread":    {Param: 2},
	wasiModule + ".poll_oneoff": {Param: 2},
}

// required lists the exported functions of ABI v1 and their signatures.
var required = []struct {
	name string
	sig  signature
}{
	{exportABIVersion, signature{0, 1}},
	{exportIOBuffer, signature{0, 1}},
	{exportIOBufferSize, signature{0, 1}},
	{exportNumTypes, signature{0, 1}},
	{exportClassify, signature{0, 1}},
	{exportBatch, signature{1, 1}},
}

// checkStatic validates what can be checked without running the module:
// imports, memory, exports and their signatures.
func checkStatic(m *wasm.Module, opts Options, info *Info) error {
	for _, im := range m.ImportSection {
		if im.Module != wasiModule || im.Type != wasm.ExternTypeFunc {
			return fmt.Errorf("wasmclass: import %q.%q (%s) refused: %w (classifiers may import only %s functions, see sdk/ABI.md)",
				im.Module, im.Name, wasm.ExternTypeName(im.Type), ErrForbiddenImport, wasiModule)
		}
		info.WASI = true
	}
	if m.MemorySection == nil {
		return fmt.Errorf("wasmclass: module defines no memory: %w (export one as %q)", ErrBadABI, exportMemory)
	}
	mem := m.MemorySection
	if mem.Min > opts.MemoryLimitPages {
		return fmt.Errorf("wasmclass: memory declares a minimum of %d pages, limit is %d: %w (raise the memory page limit)",
			mem.Min, opts.MemoryLimitPages, ErrMemoryLimit)
	}
	if mem.IsMaxEncoded && mem.Max > opts.MemoryLimitPages {
		return fmt.Errorf("wasmclass: memory declares a maximum of %d pages, limit is %d: %w (lower the module's maximum or raise the memory page limit)",
			mem.Max, opts.MemoryLimitPages, ErrMemoryLimit)
	}
	info.MemoryPages = mem.Min
	if err := capTables(m); err != nil {
		return err
	}

	exports := map[string]*wasm.Export{}
	for _, e := range m.ExportSection {
		exports[e.Name] = e
	}
	if e, ok := exports[exportMemory]; !ok || e.Type != wasm.ExternTypeMemory {
		return fmt.Errorf("wasmclass: missing memory export %q: %w", exportMemory, ErrBadABI)
	}
	check := func(name string, want signature) error {
		e, ok := exports[name]
		if !ok {
			return fmt.Errorf("wasmclass: missing export %q with type %s: %w (see sdk/ABI.md)", name, want, ErrBadABI)
		}
		if e.Type != wasm.ExternTypeFunc {
			return fmt.Errorf("wasmclass: export %q is a %s, want a function %s: %w", name, wasm.ExternTypeName(e.Type), want, ErrBadABI)
		}
		ft, err := exportType(m, e.Index)
		if err != nil {
			return fmt.Errorf("wasmclass: export %q: %v: %w", name, err, ErrInvalidModule)
		}
		if !isI32s(ft.Params, want.params) || !isI32s(ft.Results, want.results) {
			return fmt.Errorf("wasmclass: export %q has type %s, want %s: %w", name, formatType(ft), want, ErrBadABI)
		}
		return nil
	}
	for _, r := range required {
		if err := check(r.name, r.sig); err != nil {
			return err
		}
	}
	_, hasNames := exports[exportNames]
	_, hasLen := exports[exportNamesLen]
	if hasNames != hasLen {
		return fmt.Errorf("wasmclass: %q and %q must be exported together: %w", exportNames, exportNamesLen, ErrBadABI)
	}
	if hasNames {
		for _, name := range []string{exportNames, exportNamesLen} {
			if err := check(name, signature{0, 1}); err != nil {
				return err
			}
		}
	}
	if _, ok := exports[exportInitialize]; ok {
		if err := check(exportInitialize, signature{0, 0}); err != nil {
			return err
		}
		info.Initialize = true
	}
	return nil
}

// MaxTableElements caps the elements of a module's tables, all tables
// together: each element takes 8 bytes of host memory per instance, and
// table.grow is otherwise limited only by the 32-bit index space.
const MaxTableElements = 1 << 20

// capTables refuses tables whose declared sizes exceed MaxTableElements and
// gives each table without a declared maximum the room left, so that
// table.grow fails (returns -1) past the cap.
func capTables(m *wasm.Module) error {
	var declared uint64
	for i, t := range m.TableSection {
		size := uint64(t.Min)
		if t.Max != nil {
			size = uint64(*t.Max)
		}
		if size < uint64(t.Min) {
			size = uint64(t.Min)
		}
		declared += size
		if declared > MaxTableElements {
			return fmt.Errorf("wasmclass: table %d: tables declare %d elements or more, limit is %d: %w (declare smaller tables, with a maximum)",
				i, declared, MaxTableElements, ErrMemoryLimit)
		}
	}
	for _, t := range m.TableSection {
		if t.Max == nil {
			room := uint32(MaxTableElements - declared + uint64(t.Min))
			t.Max = &room
			declared += uint64(room - t.Min)
		}
	}
	return nil
}

func isI32s(ts []wasm.ValueType, n int) bool {
	if len(ts) != n {
		return false
	}
	for _, t := range ts {
		if t != wasm.ValueTypeI32 {
			return false
		}
	}
	return true
}

// exportType returns the type of function fn (index space including imports).
func exportType(m *wasm.Module, fn uint32) (*wasm.FunctionType, error) {
	var imported uint32
	for _, im := range m.ImportSection {
		if im.Type != wasm.ExternTypeFunc {
			continue
		}
		if imported == fn {
			if int(im.DescFunc) >= len(m.TypeSection) {
				return nil, errors.New("type index out of range")
			}
			return m.TypeSection[im.DescFunc], nil
		}
		imported++
	}
	local := fn - imported
	if int(local) >= len(m.FunctionSection) || int(m.FunctionSection[local]) >= len(m.TypeSection) {
		return nil, fmt.Errorf("function index %d out of range", fn)
	}
	return m.TypeSection[m.FunctionSection[local]], nil
}

func customSection(m *wasm.Module, name string) ([]byte, bool) {
	for _, c := range m.CustomSections {
		if c.Name == name {
			return c.Data, true
		}
	}
	return nil, false
}

// call0 calls a () -> i32 export.
func call0(ctx context.Context, mod api.Module, name string) (uint32, error) {
	res, err := mod.ExportedFunction(name).Call(ctx)
	if err != nil {
		return 0, fmt.Errorf("wasmclass: call %q: %w", name, err)
	}
	return uint32(res[0]), nil
}

// readConstants reads and checks the ABI constants of an instance.
func readConstants(ctx context.Context, mod api.Module, info *Info) error {
	var err error
	if info.ABIVersion, err = call0(ctx, mod, exportABIVersion); err != nil {
		return err
	}
	if info.ABIVersion != ABIVersion {
		return fmt.Errorf("wasmclass: module has ABI version %d, this host implements version %d: %w",
			info.ABIVersion, ABIVersion, ErrBadABI)
	}
	n, err := call0(ctx, mod, exportNumTypes)
	if err != nil {
		return err
	}
	if n < 1 || n > MaxTypes {
		return fmt.Errorf("wasmclass: %s returned %d, want 1..%d: %w", exportNumTypes, int32(n), MaxTypes, ErrBadABI)
	}
	info.NumTypes = int(n)
	if info.IOBuffer, info.IOBufferSize, err = ioBuffer(ctx, mod); err != nil {
		return err
	}
	info.Slots = int(min(MaxBatch, (info.IOBufferSize-IOHeader)/SlotSize))
	return nil
}

// ioBuffer reads and checks the I/O buffer's address and size.
func ioBuffer(ctx context.Context, mod api.Module) (addr, size uint32, err error) {
	if addr, err = call0(ctx, mod, exportIOBuffer); err != nil {
		return 0, 0, err
	}
	if size, err = call0(ctx, mod, exportIOBufferSize); err != nil {
		return 0, 0, err
	}
	if addr%8 != 0 {
		return 0, 0, fmt.Errorf("wasmclass: I/O buffer at %d is not 8-byte aligned: %w", addr, ErrBadABI)
	}
	if size < IOHeader+SlotSize {
		return 0, 0, fmt.Errorf("wasmclass: I/O buffer size %d is below the minimum %d: %w", size, IOHeader+SlotSize, ErrBadABI)
	}
	if uint64(addr)+uint64(size) > uint64(mod.Memory().Size()) {
		return 0, 0, fmt.Errorf("wasmclass: I/O buffer [%d, %d) is outside the memory (%d bytes): %w",
			addr, uint64(addr)+uint64(size), mod.Memory().Size(), ErrBadABI)
	}
	return addr, size, nil
}

func readNames(ctx context.Context, mod api.Module) ([]byte, error) {
	addr, err := call0(ctx, mod, exportNames)
	if err != nil {
		return nil, err
	}
	n, err := call0(ctx, mod, exportNamesLen)
	if err != nil {
		return nil, err
	}
	b, ok := mod.Memory().Read(addr, n)
	if !ok {
		return nil, fmt.Errorf("wasmclass: type names [%d, +%d) are outside the memory: %w", addr, n, ErrBadABI)
	}
	return bytes.Clone(b), nil
}

// parseTypeNames splits newline-separated names; missing or empty names
// get a default ("UNKNOWN" for 0, "type<i>" otherwise).
func parseTypeNames(b []byte, n int) ([]string, error) {
	names := make([]string, n)
	text := strings.TrimRight(string(b), "\n\x00") // tolerate a final newline or C string terminator
	if text != "" {
		lines := strings.Split(text, "\n")
		if len(lines) > n {
			return nil, fmt.Errorf("wasmclass: %d type names for %d types: %w", len(lines), n, ErrBadABI)
		}
		copy(names, lines)
	}
	for i, s := range names {
		if !utf8.ValidString(s) || strings.ContainsFunc(s, unicode.IsControl) {
			return nil, fmt.Errorf("wasmclass: type name %d (%q) is not UTF-8 text without control characters: %w", i, s, ErrBadABI)
		}
	}
	for i, s := range names {
		if s == "" {
			names[i] = "type" + strconv.Itoa(i)
		}
	}
	if names[0] == "type0" {
		names[0] = "UNKNOWN"
	}
	return names, nil
}
