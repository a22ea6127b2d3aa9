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

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/persephone-go/psp/wasmclass/internal/fuel"
	"github.com/persephone-go/psp/wasmclass/internal/wasmbin"
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
	cleanup  func() // releases what compile created (cache, temporary directory)
	opts     Options
	info     Info
	snap     *snapshot // state after initialisation; nil: instantiation alone gives it
	breaker  breaker
	watch    *watchdog

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
	Initialize   bool // the module exports _initialize (run once, at load)
	Start        bool // the module has a start function (run once, at load)
	MemoryPages  uint32
	Fuel         FuelStats
	Compile      CompileStats
}

// FuelStats describes the fuel instrumentation of a module.
type FuelStats struct {
	Budget, InitBudget uint64
	Functions          int // functions metered at entry (those that call others or are heavy)
	BackEdges          int // branches back to a loop header metered
	BulkOps            int // bulk memory and table instructions, memory.grow and table.grow charged by size
	ImportCalls        int // calls to WASI functions charged by an argument
	StackFrames        int // functions keeping the call-stack account
	MaxFrame           int // the largest frame estimate, bytes
	Wrapped            int // entry points wrapped to refill the budget
	CodeBytesBefore    int
	CodeBytesAfter     int
}

// Load runs the loading pipeline on wasm: decode (checking the structural
// bounds), validate against ABI v1, instrument with fuel, encode, compile
// (in a child process with Options.CompileInChild), instantiate once to run
// the start function and _initialize and read the ABI constants. Each stage
// takes the previous one's result. ctx bounds the whole load: once it is
// done, Load returns its error and the module never becomes usable.
//
// # Errors
//
// The error wraps ErrTooLarge, ErrInvalidModule, ErrBadABI,
// ErrForbiddenImport, ErrMemoryLimit, ErrLimit, ErrCompile or ErrBadSpec
// and names the offending export, import or limit, e.g.
//
//	wasmclass: export "psp_classify_batch" has type (i32,i32)->i32, want (i32)->i32 (classifier ABI violation)
func Load(ctx context.Context, wasm []byte, opts Options) (*Module, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("wasmclass: %w", err)
	}
	dec, err := decode(wasm, opts)
	if err != nil {
		return nil, err
	}
	v, err := validate(dec, opts)
	if err != nil {
		return nil, err
	}
	if v.stats, err = instrument(dec, opts); err != nil {
		return nil, err
	}
	for _, e := range dec.Exports {
		if strings.HasPrefix(e.Name, fuel.GlobalPrefix) {
			v.globals = append(v.globals, e.Name)
		}
	}
	if opts.shared != nil {
		// The host's cache stays open until the module is compiled and
		// initialised in it; a closing host loads nothing.
		release, err := opts.shared.use()
		if err != nil {
			return nil, fmt.Errorf("wasmclass: load: %w", err)
		}
		defer release()
	}
	c, err := compile(ctx, dec.Encode(), opts)
	if err != nil {
		return nil, err
	}
	return initialize(ctx, c, v, opts)
}

// decode is the first stage: the size limit, then the structure, within
// Options.Bounds.
func decode(wasm []byte, opts Options) (*wasmbin.Module, error) {
	if len(wasm) > opts.MaxModuleSize {
		return nil, fmt.Errorf("wasmclass: module is %d bytes, limit is %d: %w (raise the module size limit)",
			len(wasm), opts.MaxModuleSize, ErrTooLarge)
	}
	b := opts.Bounds
	b.CustomSections = min(b.CustomSections, MaxCustomSections)
	m, err := wasmbin.Decode(wasm, b)
	switch {
	case errors.Is(err, wasmbin.ErrLimit):
		return nil, fmt.Errorf("wasmclass: decode: %w: %w", err, ErrLimit)
	case err != nil:
		return nil, fmt.Errorf("wasmclass: decode: %w: %w", err, ErrInvalidModule)
	}
	return m, nil
}

// validated is what validation learnt about a module.
type validated struct {
	info       Info
	names      []byte // type names from the psp.types section
	hasSection bool
	hasExports bool // psp_type_names and psp_type_names_len
	stats      fuel.Stats
	globals    []string // exports of the module's mutable globals
}

// validate is the second stage: imports (psp's WASI only), memory, tables,
// exports and their signatures, custom sections.
func validate(m *wasmbin.Module, opts Options) (*validated, error) {
	v := &validated{}
	for _, im := range m.Imports {
		f, ok := wasiFuncs[im.Name]
		if im.Module != wasiModule || im.Kind != wasmbin.KindFunc || !ok {
			return nil, fmt.Errorf("wasmclass: import %q.%q (%s) refused: %w (classifiers may import only these %s functions: %s; see sdk/ABI.md)",
				im.Module, im.Name, wasmbin.KindName(im.Kind), ErrForbiddenImport, wasiModule, wasiNames())
		}
		if ft := m.Types[im.Type]; !f.matches(ft.Params, ft.Results) {
			return nil, fmt.Errorf("wasmclass: import %q.%q has type %s, want %s: %w",
				im.Module, im.Name, formatType(ft.Params, ft.Results), formatType(f.params, f.results), ErrForbiddenImport)
		}
		v.info.WASI = true
	}
	if len(m.Memories) == 0 {
		return nil, fmt.Errorf("wasmclass: module defines no memory: %w (export one as %q)", ErrBadABI, exportMemory)
	}
	mem := m.Memories[0]
	if mem.Min > opts.MemoryLimitPages {
		return nil, fmt.Errorf("wasmclass: memory declares a minimum of %d pages, limit is %d: %w (raise the memory page limit)",
			mem.Min, opts.MemoryLimitPages, ErrMemoryLimit)
	}
	if mem.HasMax && mem.Max > opts.MemoryLimitPages {
		return nil, fmt.Errorf("wasmclass: memory declares a maximum of %d pages, limit is %d: %w (lower the module's maximum or raise the memory page limit)",
			mem.Max, opts.MemoryLimitPages, ErrMemoryLimit)
	}
	v.info.MemoryPages = mem.Min
	if err := capTables(m); err != nil {
		return nil, err
	}
	if err := checkExports(m, v); err != nil {
		return nil, err
	}
	v.info.Start = m.Start != nil
	// Custom sections: psp.types is read here; "name" goes to the compiler
	// (function names in traps) if small; the rest is dropped.
	kept := m.Customs[:0]
	for _, c := range m.Customs {
		switch {
		case c.Name == customTypeNames:
			if v.hasSection {
				return nil, fmt.Errorf("wasmclass: two %q sections: %w", customTypeNames, ErrBadABI)
			}
			if len(c.Data) > MaxTypeNames {
				return nil, fmt.Errorf("wasmclass: %q section of %d bytes, limit is %d: %w", customTypeNames, len(c.Data), MaxTypeNames, ErrLimit)
			}
			v.names, v.hasSection = bytes.Clone(c.Data), true
		case c.Name == "name" && len(c.Data) <= MaxNameSection:
			kept = append(kept, c)
		}
	}
	m.Customs = kept
	return v, nil
}

// instrument is the third stage: fuel, the call-stack account and the
// export wrappers (package fuel).
func instrument(m *wasmbin.Module, opts Options) (fuel.Stats, error) {
	if opts.noFuel {
		return fuel.Stats{}, nil
	}
	st, err := fuel.Instrument(m, fuel.Config{
		Budget: opts.Fuel, InitBudget: opts.InitFuel, InitExports: []string{exportInitialize},
		Costs:      fuel.DefaultCosts(opts.MemoryLimitPages, MaxTableElements),
		Imports:    wasiCosts(),
		StackLimit: opts.StackLimit,
		Bounds:     opts.Bounds,
	})
	switch {
	case errors.Is(err, wasmbin.ErrLimit):
		return st, fmt.Errorf("wasmclass: %w: %w", err, ErrLimit)
	case err != nil:
		return st, fmt.Errorf("wasmclass: fuel instrumentation: %w: %w", err, ErrInvalidModule)
	}
	return st, nil
}

// initialize is the last stage: a first instance runs the start function
// and _initialize under the initialisation budget, the ABI constants and
// type names are read from it, and its state becomes the snapshot every
// later instance starts from.
func initialize(ctx context.Context, c *compiledModule, v *validated, opts Options) (*Module, error) {
	m := &Module{rt: c.rt, compiled: c.compiled, cleanup: c.cleanup, opts: opts, info: v.info}
	m.info.Compile = c.stats
	m.info.Fuel = FuelStats{
		Budget: opts.Fuel, InitBudget: opts.InitFuel,
		Functions: v.stats.Functions, BackEdges: v.stats.BackEdges, BulkOps: v.stats.Sized, ImportCalls: v.stats.ImportCalls,
		StackFrames: v.stats.StackFrames, MaxFrame: v.stats.MaxFrame, Wrapped: v.stats.Exports,
		CodeBytesBefore: v.stats.SizeBefore, CodeBytesAfter: v.stats.SizeAfter,
	}
	if opts.noFuel {
		m.info.Fuel = FuelStats{}
	}
	m.breaker.init(opts)
	fail := func(err error) (*Module, error) {
		_ = m.Close(context.WithoutCancel(ctx))
		return nil, err
	}
	mod, err := m.rt.InstantiateModule(ctx, m.compiled, wazero.NewModuleConfig().WithName("").WithStartFunctions())
	if err != nil {
		return fail(fmt.Errorf("wasmclass: instantiate: %w", err))
	}
	defer mod.Close(context.WithoutCancel(ctx))
	for _, name := range []string{fuel.StartExport, exportInitialize} {
		if f := mod.ExportedFunction(name); f != nil {
			if _, err := f.Call(ctx); err != nil {
				return fail(fmt.Errorf("wasmclass: %s: %w (it has %d units of fuel, Options.InitFuel)", strings.TrimPrefix(name, fuel.Reserved), err, opts.InitFuel))
			}
		}
	}
	if m.info.Start || m.info.Initialize {
		m.snap = takeSnapshot(mod, v.globals)
	}
	if err := readConstants(ctx, mod, &m.info); err != nil {
		return fail(err)
	}
	names := v.names
	if !v.hasSection && v.hasExports {
		if names, err = readNames(ctx, mod); err != nil {
			return fail(err)
		}
	}
	if m.info.TypeNames, err = parseTypeNames(names, m.info.NumTypes); err != nil {
		return fail(err)
	}
	if err := ctx.Err(); err != nil {
		return fail(fmt.Errorf("wasmclass: load: %w", err))
	}
	m.watch = newWatchdog(m, opts.TimeLimit)
	return m, nil
}

// snapshot is an instance's state after initialisation: its memory and
// the values of the module's mutable globals.
type snapshot struct {
	memory  []byte
	globals map[string]uint64
}

func takeSnapshot(mod api.Module, globals []string) *snapshot {
	s := &snapshot{globals: map[string]uint64{}}
	if mem, ok := mod.Memory().Read(0, mod.Memory().Size()); ok {
		s.memory = bytes.Clone(mem)
	}
	for _, name := range globals {
		if g := mod.ExportedGlobal(name); g != nil {
			s.globals[name] = g.Get()
		}
	}
	return s
}

// restore puts s into a fresh instance.
func (s *snapshot) restore(mod api.Module) error {
	mem := mod.Memory()
	if want := uint32(len(s.memory)); mem.Size() < want {
		if _, ok := mem.Grow((want - mem.Size()) / 65536); !ok {
			return errors.New("restore: cannot grow the memory to its initialised size")
		}
	}
	if !mem.Write(0, s.memory) {
		return errors.New("restore: memory write failed")
	}
	for name, val := range s.globals {
		g, ok := mod.ExportedGlobal(name).(api.MutableGlobal)
		if !ok {
			return fmt.Errorf("restore: global %s is missing", name)
		}
		g.Set(val)
	}
	return nil
}

// Info returns what Load learnt about the module.
func (m *Module) Info() Info { return m.info }

// Types returns the type names, index = type id; len = N.
func (m *Module) Types() []string { return append([]string(nil), m.info.TypeNames...) }

// NumTypes returns N: the classifier's types are 0..N-1.
func (m *Module) NumTypes() int { return m.info.NumTypes }

// Options returns the options the module was loaded with, defaults filled in.
func (m *Module) Options() Options { return m.opts }

// Disabled reports whether the module was disabled (a call exceeded
// Options.TimeLimit).
func (m *Module) Disabled() bool { return m.breaker.disabled() }

// BreakerOpen reports whether the module's circuit breaker is open.
func (m *Module) BreakerOpen() bool { return m.breaker.isOpen() }

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
	if m.watch != nil {
		m.watch.stop()
	}
	var errs []error
	if m.rt != nil {
		errs = append(errs, m.rt.Close(ctx))
	}
	if m.cleanup != nil {
		m.cleanup()
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

// signature is a function type of i32s only: params count, has a result.
type signature struct {
	params  int
	results int
}

func (s signature) String() string {
	return formatType(bytes.Repeat([]byte{wasmbin.I32}, s.params), bytes.Repeat([]byte{wasmbin.I32}, s.results))
}

func formatType[T ~byte](params, results []T) string {
	ps := make([]string, len(params))
	for i, p := range params {
		ps[i] = wasmbin.ValueTypeName(byte(p))
	}
	rs := make([]string, len(results))
	for i, r := range results {
		rs[i] = wasmbin.ValueTypeName(byte(r))
	}
	res := strings.Join(rs, ",")
	if len(rs) != 1 {
		res = "(" + res + ")"
	}
	return "(" + strings.Join(ps, ",") + ")->" + res
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

// checkExports checks the exports ABI v1 requires and their signatures.
func checkExports(m *wasmbin.Module, v *validated) error {
	exports := map[string]wasmbin.Export{}
	for _, e := range m.Exports {
		exports[e.Name] = e
	}
	if e, ok := exports[exportMemory]; !ok || e.Kind != wasmbin.KindMemory {
		return fmt.Errorf("wasmclass: missing memory export %q: %w", exportMemory, ErrBadABI)
	}
	check := func(name string, want signature) error {
		e, ok := exports[name]
		if !ok {
			return fmt.Errorf("wasmclass: missing export %q with type %s: %w (see sdk/ABI.md)", name, want, ErrBadABI)
		}
		if e.Kind != wasmbin.KindFunc {
			return fmt.Errorf("wasmclass: export %q is a %s, want a function %s: %w", name, wasmbin.KindName(e.Kind), want, ErrBadABI)
		}
		ft, ok := m.FuncType(e.Index)
		if !ok {
			return fmt.Errorf("wasmclass: export %q: function %d out of range: %w", name, e.Index, ErrInvalidModule)
		}
		if !isI32s(ft.Params, want.params) || !isI32s(ft.Results, want.results) {
			return fmt.Errorf("wasmclass: export %q has type %s, want %s: %w", name, formatType(ft.Params, ft.Results), want, ErrBadABI)
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
		v.hasExports = true
	}
	if _, ok := exports[exportInitialize]; ok {
		if err := check(exportInitialize, signature{0, 0}); err != nil {
			return err
		}
		v.info.Initialize = true
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
func capTables(m *wasmbin.Module) error {
	var declared uint64
	for i, t := range m.Tables {
		size := uint64(t.Min)
		if t.HasMax {
			size = max(uint64(t.Max), size)
		}
		declared += size
		if declared > MaxTableElements {
			return fmt.Errorf("wasmclass: table %d: tables declare %d elements or more, limit is %d: %w (declare smaller tables, with a maximum)",
				i, declared, MaxTableElements, ErrMemoryLimit)
		}
	}
	for i := range m.Tables {
		t := &m.Tables[i]
		if !t.HasMax {
			room := uint32(MaxTableElements - declared + uint64(t.Min))
			t.Max, t.HasMax = room, true
			declared += uint64(room - t.Min)
		}
	}
	return nil
}

func isI32s(ts []byte, n int) bool {
	if len(ts) != n {
		return false
	}
	for _, t := range ts {
		if t != wasmbin.I32 {
			return false
		}
	}
	return true
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
	if n > MaxTypeNames {
		return nil, fmt.Errorf("wasmclass: type names of %d bytes, limit is %d: %w", n, MaxTypeNames, ErrLimit)
	}
	b, ok := mod.Memory().Read(addr, n)
	if !ok {
		return nil, fmt.Errorf("wasmclass: type names [%d, +%d) are outside the memory: %w", addr, n, ErrBadABI)
	}
	return bytes.Clone(b), nil
}

// parseTypeNames splits newline-separated names; missing or empty names
// get a default ("UNKNOWN" for 0, "type<i>" otherwise). Each name is at
// most MaxTypeName bytes of UTF-8 text without control characters, and
// unique: no two types share a name, and no type takes another's default.
func parseTypeNames(b []byte, n int) ([]string, error) {
	names := make([]string, n)
	text := strings.TrimRight(string(b), "\n\x00") // tolerate a final newline or C string terminator
	if text != "" {
		if lines := strings.Count(text, "\n") + 1; lines > n {
			return nil, fmt.Errorf("wasmclass: %d type names for %d types: %w", lines, n, ErrBadABI)
		}
		copy(names, strings.Split(text, "\n"))
	}
	for i, s := range names {
		if len(s) > MaxTypeName {
			return nil, fmt.Errorf("wasmclass: type name %d is %d bytes long, limit is %d: %w", i, len(s), MaxTypeName, ErrBadABI)
		}
		if !utf8.ValidString(s) || strings.ContainsFunc(s, unicode.IsControl) {
			return nil, fmt.Errorf("wasmclass: type name %d (%q) is not UTF-8 text without control characters: %w", i, s, ErrBadABI)
		}
		if strings.TrimSpace(s) != s {
			// " " or "GET " would print as a blank or look like "GET".
			return nil, fmt.Errorf("wasmclass: type name %d (%q) begins or ends with white space: %w", i, s, ErrBadABI)
		}
	}
	for i, s := range names {
		if s == "" {
			names[i] = defaultTypeName(i)
		}
	}
	if names[0] == "type0" {
		names[0] = "UNKNOWN"
	}
	// Names are label values (metrics, status) and keys: each must be
	// unique, defaults included, and a default name ("type<k>",
	// "UNKNOWN") may only be given to the type that would get it anyway,
	// since a Host names the ids of its range past N that way.
	seen := make(map[string]int, n)
	for i, s := range names {
		if j, dup := seen[s]; dup {
			return nil, fmt.Errorf("wasmclass: type names %d and %d are both %q: %w (type names must be unique)", j, i, s, ErrBadABI)
		}
		seen[s] = i
		if k, ok := defaultTypeIndex(s); ok && k != i {
			return nil, fmt.Errorf("wasmclass: type name %d is %q, the name reserved for type %d: %w (type names must be unique; leave a name empty for its default)",
				i, s, k, ErrBadABI)
		}
	}
	return names, nil
}

// defaultTypeName is the name of type i when the module gives none.
func defaultTypeName(i int) string {
	if i == 0 {
		return "UNKNOWN"
	}
	return "type" + strconv.Itoa(i)
}

// defaultTypeIndex reports whether s is the default name of a type id,
// and which ("type7": 7; "UNKNOWN" and "type0": 0).
func defaultTypeIndex(s string) (int, bool) {
	if s == "UNKNOWN" {
		return 0, true
	}
	digits, ok := strings.CutPrefix(s, "type")
	if !ok || digits == "" || len(digits) > 6 || (digits[0] == '0' && len(digits) > 1) {
		return 0, false
	}
	k := 0
	for _, c := range []byte(digits) {
		if c < '0' || c > '9' {
			return 0, false
		}
		k = 10*k + int(c-'0')
	}
	return k, true
}
