// Package fuel bounds the time and the call stack a WebAssembly module may
// use per call, by rewriting its code before compilation.
//
// Instrument adds mutable globals (the fuel tank, a call counter and a
// call-stack account) and checks that take units from the tank and trap
// (unreachable) when it goes below zero. Charges follow a cost model
// (Costs) that weighs every instruction by the time it may take, in ticks:
//
//   - on every branch back to a loop header: the weight of the code from
//     the header to the branch, plus the loop's own check;
//   - at the entry of every function that calls others or is heavier than
//     Costs.Leaf: its body's weight, its locals, the entry itself (a call
//     to a lighter function that calls nothing costs that function's
//     weight at the call site, a call_indirect Costs.Leaf);
//   - before every bulk memory or table instruction, memory.grow and
//     table.grow: a charge computed at run time from its size operand;
//   - before every call to an import: the import's fixed cost (with the
//     surrounding code) and, for imports whose work grows with an
//     argument, a charge computed from it (Config.Imports).
//
// Code without back edges or calls runs at most its own weight; every
// cycle of calls goes through the entry of a function that calls; every
// instruction whose work is not constant is charged by its operand. So a
// call's time is bounded by its budget times the model's worst ratio of
// time to weight, which the host measures.
//
// Functions that call others also keep an account of the call stack: at
// entry they add an upper bound of their frame (16 bytes per parameter,
// local and operand stack slot, plus FrameOverhead) to a global and trap
// past Config.StackLimit, and they restore it on return. Functions that
// call nothing add one frame at most, bounded by the locals limit.
//
// Every exported function is replaced, in the export section only, by a
// wrapper that refills the tank, clears the stack account, counts the call
// and calls the original, so that a call from the host starts with a full
// budget while calls inside the module do not refill it. The start function
// is removed from the start section and exported, wrapped with the
// initialisation budget, as StartExport: the host runs it once, when it
// chooses. Every mutable global the module defines is exported as
// GlobalPrefix + its index, so that the host can snapshot and restore an
// instance's state. New functions, globals and types are appended, so no
// index changes; references to indexes past the module's own are refused.
//
// The package is pure and safe for concurrent use on distinct modules.
package fuel

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/persephone-go/psp/wasmclass/internal/wasmbin"
)

// Names the instrumented module exports. The prefix is reserved: modules
// may not export names that start with it.
const (
	Reserved     = "psp."
	GlobalExport = Reserved + "fuel"  // the tank (i64): below 0 after a fuel trap
	CallsExport  = Reserved + "calls" // calls from the host so far (i64)
	StackExport  = Reserved + "stack" // the call-stack account (i32, bytes)
	StartExport  = Reserved + "start" // the wrapped start function, if any
	GlobalPrefix = Reserved + "g"     // GlobalPrefix + index: a mutable global of the module
)

// FrameOverhead is the part of the frame estimate that does not depend on
// the function: return address, frame pointer, saved registers.
const FrameOverhead = 64

// DefaultStackLimit is Config.StackLimit's default, in bytes of estimated
// frames.
const DefaultStackLimit = 4 << 20

// Config says how much fuel a call gets and what things cost.
type Config struct {
	// Budget is the fuel of each call to an export. Must be > 0.
	Budget uint64
	// InitBudget replaces Budget for the start function and for the exports
	// named in InitExports (e.g. "_initialize"). Zero means Budget.
	InitBudget  uint64
	InitExports []string
	// Costs is the cost model; nil means DefaultCosts(65536, 1<<20).
	Costs *Costs
	// Imports lists, keyed "module.name", the imported functions the host
	// provides and what a call to each costs. Any other imported function
	// is refused.
	Imports map[string]ImportCost
	// StackLimit bounds the call-stack account, in bytes (default
	// DefaultStackLimit).
	StackLimit uint32
	// Bounds limit nesting, br_table targets and locals times blocks.
	Bounds wasmbin.Bounds
}

// ImportCost is what a call to an imported function costs: Ticks with the
// surrounding code and, if Param >= 0, PerArg computed at run time from
// argument Param (an i32 read as unsigned).
type ImportCost struct {
	Ticks  int64
	Param  int
	PerArg Sized
}

// Stats describes what Instrument changed.
type Stats struct {
	Functions   int // function bodies metered at entry
	BackEdges   int // branches back to a loop header metered
	Sized       int // bulk, grow instructions charged by size
	ImportCalls int // calls to imports charged by an argument
	StackFrames int // functions keeping the call-stack account
	Exports     int // entry points wrapped (start function included)
	// SizeBefore and SizeAfter are the sizes of the function bodies, in
	// bytes, before and after instrumentation.
	SizeBefore, SizeAfter int
	// MaxFrame is the largest frame estimate, in bytes.
	MaxFrame int
}

// Errors returned by Instrument.
var (
	// ErrReservedExport means the module exports a name starting with Reserved.
	ErrReservedExport = errors.New("export names starting with " + Reserved + " are reserved by the host")
	// ErrZeroBudget means Config.Budget is 0.
	ErrZeroBudget = errors.New("fuel budget must be positive")
	// ErrImport means the module imports a function the host does not provide.
	ErrImport = errors.New("import not provided")
)

// layout is the module's index spaces and the host's additions to them.
type layout struct {
	funcs, globals uint32 // before instrumentation
	tank, calls    uint32 // globals added
	sp, mark       uint32
	yield          uint32 // function added
	memory         bool   // the module has a memory
}

// Instrument meters m in place: see the package documentation. m must have
// been decoded by wasmbin.Decode and not otherwise modified.
func Instrument(m *wasmbin.Module, cfg Config) (Stats, error) {
	var st Stats
	if cfg.Budget == 0 {
		return st, ErrZeroBudget
	}
	if cfg.InitBudget == 0 {
		cfg.InitBudget = cfg.Budget
	}
	if cfg.Costs == nil {
		cfg.Costs = DefaultCosts(65536, 1<<20)
	}
	if cfg.StackLimit == 0 {
		cfg.StackLimit = DefaultStackLimit
	}
	// The stack a call's budget buys (see Costs.StackByte): frames
	// outside the account (chains of known depth, up to half the limit)
	// are bounded by it too.
	if sb := cfg.Costs.StackByte; sb > 0 {
		budget := max(cfg.Budget, 1)
		if bytes := budget / uint64(sb) * TicksPerUnit; budget < 1<<40 && bytes < uint64(cfg.StackLimit) {
			cfg.StackLimit = uint32(max(bytes, 1024))
		}
	}
	cfg.Bounds = cfg.Bounds.WithDefaults()
	if err := checkExportNames(m); err != nil {
		return st, err
	}
	lay := layout{funcs: m.NumFuncs(), globals: m.NumGlobals()}
	if err := checkRefs(m, lay); err != nil {
		return st, err
	}
	sc, err := newScope(m, cfg, lay)
	if err != nil {
		return st, err
	}
	funcs, err := analyzeFunctions(m, sc)
	if err != nil {
		return st, err
	}
	lay.tank, lay.calls, lay.sp, lay.mark = lay.globals, lay.globals+1, lay.globals+2, lay.globals+3
	lay.yield = lay.funcs // the first function added
	lay.memory = len(m.Memories) > 0 || m.ImportedMemories() > 0
	if err := rewriteBodies(m, sc, cfg, lay, funcs, &st); err != nil {
		return st, err
	}
	m.Functions = append(m.Functions, voidType(m))
	m.Code = append(m.Code, wasmbin.Code{Body: appendYieldFunc(lay)})
	if err := wrapEntryPoints(m, cfg, lay, &st); err != nil {
		return st, err
	}
	addGlobals(m, lay)
	return st, nil
}

// checkExportNames refuses exports in the reserved namespace.
func checkExportNames(m *wasmbin.Module) error {
	for _, e := range m.Exports {
		if strings.HasPrefix(e.Name, Reserved) {
			return fmt.Errorf("export %q: %w", e.Name, ErrReservedExport)
		}
	}
	return nil
}

// checkRefs refuses function references outside the module's functions in
// exports, the start section, element segments and global initialisers,
// and global references outside its globals: once instrumented, they would
// name the fuel globals or a wrapper.
func checkRefs(m *wasmbin.Module, lay layout) error {
	for _, e := range m.Exports {
		if (e.Kind == wasmbin.KindFunc && e.Index >= lay.funcs) || (e.Kind == wasmbin.KindGlobal && e.Index >= lay.globals) {
			return fmt.Errorf("export %q: %s index %d out of range", e.Name, wasmbin.KindName(e.Kind), e.Index)
		}
	}
	if m.Start != nil && *m.Start >= lay.funcs {
		return fmt.Errorf("start function index %d out of range (%d functions)", *m.Start, lay.funcs)
	}
	for i, seg := range m.Elements {
		for _, fn := range seg.Funcs {
			if fn >= lay.funcs {
				return fmt.Errorf("element segment %d: function index %d out of range (%d functions)", i, fn, lay.funcs)
			}
		}
	}
	for i, g := range m.Globals {
		if op, ref, ok := wasmbin.ConstExprRef(g.Init); ok {
			if (op == opRefFunc && ref >= lay.funcs) || (op == opGlobalGet && ref >= lay.globals) {
				return fmt.Errorf("global %d: initial value refers to index %d, out of range", i, ref)
			}
		}
	}
	return nil
}

// importCost is an ImportCost resolved against an imported function's type.
type importCost struct {
	ImportCost
	params []byte
}

// newScope resolves what walk needs: the imports' costs (refusing imports
// the host does not provide and references to imports charged by an
// argument other than direct calls) and the leaves' weights (filled in by
// analyzeFunctions).
func newScope(m *wasmbin.Module, cfg Config, lay layout) (*scope, error) {
	sc := &scope{m: m, costs: cfg.Costs, bounds: cfg.Bounds, funcs: lay.funcs, globals: lay.globals,
		imports: map[uint32]importCost{}, stackLimit: cfg.StackLimit}
	fixed := map[uint32]int64{}
	var fn uint32
	for _, im := range m.Imports {
		if im.Kind != wasmbin.KindFunc {
			continue
		}
		c, ok := cfg.Imports[im.Module+"."+im.Name]
		if !ok {
			return nil, fmt.Errorf("%q.%q: %w", im.Module, im.Name, ErrImport)
		}
		fixed[fn] = c.Ticks
		if c.Param >= 0 {
			params := m.Types[im.Type].Params
			if c.Param >= len(params) || params[c.Param] != wasmbin.I32 {
				return nil, fmt.Errorf("import %q.%q: parameter %d is not an i32", im.Module, im.Name, c.Param)
			}
			sc.imports[fn] = importCost{ImportCost: c, params: params}
		}
		fn++
	}
	sc.importTicks = func(fn uint32) int64 { return fixed[fn] }
	// An import charged by an argument must be called directly: a reference
	// to it would let call_indirect skip the charge.
	for i, seg := range m.Elements {
		for _, fn := range seg.Funcs {
			if _, ok := sc.imports[fn]; ok {
				return nil, fmt.Errorf("element segment %d: charged import %d may only be called directly", i, fn)
			}
		}
	}
	for i, g := range m.Globals {
		if op, fn, ok := wasmbin.ConstExprRef(g.Init); ok && op == opRefFunc {
			if _, charged := sc.imports[fn]; charged {
				return nil, fmt.Errorf("global %d: charged import %d may only be called directly", i, fn)
			}
		}
	}
	for _, e := range m.Exports {
		if _, charged := sc.imports[e.Index]; charged && e.Kind == wasmbin.KindFunc {
			return nil, fmt.Errorf("export %q: charged import %d may only be called directly", e.Name, e.Index)
		}
	}
	return sc, nil
}

// function is what the rewrite needs to know about one function body.
type function struct {
	analysis
	params  int
	locals  uint64
	entry   bool // metered at entry
	frame   int  // frame estimate, bytes
	account bool // keeps the call-stack account (see accountStack)
	// charge is what an accounted function adds to the account: its frame
	// and the deepest chain of unaccounted functions it calls.
	charge int
}

// analyzeFunctions walks every body. Leaves (functions that call nothing
// and weigh at most Costs.Leaf) are found in a first pass; functions that
// call are walked again with the leaves' weights known.
func analyzeFunctions(m *wasmbin.Module, sc *scope) ([]function, error) {
	imported := m.ImportedFuncs()
	funcs := make([]function, len(m.Code))
	leaf := make([]int64, len(m.Code))
	sc.leafWeight = func(fn uint32) int64 { return 0 }
	blocksSquared, calls := 0, 0
	for pass := 0; pass < 2; pass++ {
		if pass == 1 { // br_table targets were counted in the first pass
			counted := sc.brTables
			sc.brTables = math.MinInt / 2
			defer func() { sc.brTables = counted }()
		}
		for i := range m.Code {
			f := &funcs[i]
			if pass == 1 && !f.calls {
				continue
			}
			code := &m.Code[i]
			ft := m.Types[m.Functions[i]]
			a, err := walk(code.Body, len(ft.Params), int(min(code.NumLocals(), 1<<24)), sc)
			if err != nil {
				return nil, fmt.Errorf("function %d: %w", imported+uint32(i), err)
			}
			f.analysis, f.params, f.locals = a, len(ft.Params), code.NumLocals()
			if pass == 0 {
				blocksSquared += a.blocks * a.blocks
				calls += len(a.callees)
				if blocksSquared > sc.bounds.BlocksSquared {
					return nil, fmt.Errorf("%w: functions with too many blocks (sum of squares over %d)", wasmbin.ErrLimit, sc.bounds.BlocksSquared)
				}
				if calls > sc.bounds.Calls {
					return nil, fmt.Errorf("%w: more than %d direct calls", wasmbin.ErrLimit, sc.bounds.Calls)
				}
			}
			if f.locals*uint64(a.blocks+1) > uint64(sc.bounds.LocalsXBlocks) {
				return nil, fmt.Errorf("function %d: %w: %d locals times %d blocks, limit is %d",
					imported+uint32(i), wasmbin.ErrLimit, f.locals, a.blocks, sc.bounds.LocalsXBlocks)
			}
			total := sc.costs.Entry + sc.costs.PerLocal*int64(f.locals) + a.weight
			f.entry = a.calls || total > sc.costs.Leaf
			if !f.entry {
				leaf[i] = total
			}
			f.frame = 16*(f.params+int(f.locals)+a.height) + FrameOverhead
		}
		sc.leafWeight = func(fn uint32) int64 {
			if fn < imported || fn-imported >= uint32(len(leaf)) {
				return 0
			}
			return leaf[fn-imported]
		}
	}
	accountStack(funcs, imported, sc.stackLimit)
	return funcs, nil
}

// accountStack decides which functions keep the call-stack account. A
// call chain of functions that are not recursive has a depth known at load
// time: only functions in a cycle of calls (recursion), functions that call
// indirectly and functions whose deepest chain of callees would exceed half
// the limit keep the account at run time, each charging its frame plus the
// deepest chain of unaccounted functions below it. A call stack is then at
// most the limit (accounted frames) plus half of it (the unaccounted chain
// above the first accounted frame).
func accountStack(funcs []function, imported uint32, limit uint32) {
	n := len(funcs)
	// Tarjan's strongly connected components; they come out callees first.
	index := make([]int, n)
	low := make([]int, n)
	onStack := make([]bool, n)
	for i := range index {
		index[i] = -1
	}
	var stack, order []int
	cyclic := make([]bool, n)
	next := 0
	var visit func(v int)
	visit = func(v int) {
		index[v], low[v] = next, next
		next++
		stack = append(stack, v)
		onStack[v] = true
		for _, c := range funcs[v].callees {
			if c < imported {
				continue
			}
			w := int(c - imported)
			if index[w] < 0 {
				visit(w)
				low[v] = min(low[v], low[w])
			} else if onStack[w] {
				low[v] = min(low[v], index[w])
			}
			if w == v {
				cyclic[v] = true
			}
		}
		if low[v] == index[v] {
			start := len(stack) - 1
			for stack[start] != v {
				start--
			}
			scc := stack[start:]
			if len(scc) > 1 {
				for _, w := range scc {
					cyclic[w] = true
				}
			}
			for _, w := range scc {
				onStack[w] = false
			}
			order = append(order, scc...)
			stack = stack[:start]
		}
	}
	for v := range funcs {
		if index[v] < 0 {
			visit(v)
		}
	}
	// static[v]: the deepest chain from v through unaccounted functions.
	static := make([]int, n)
	for _, v := range order { // callees before callers (within an SCC all are accounted)
		f := &funcs[v]
		below := 0
		for _, c := range f.callees {
			if c >= imported && !funcs[c-imported].account && !cyclic[c-imported] {
				below = max(below, static[c-imported])
			}
		}
		f.account = cyclic[v] || f.indirect || f.frame+below > int(limit/2)
		if f.account {
			f.charge = f.frame + below
		} else {
			static[v] = f.frame + below
		}
	}
}

// locals allocates the scratch locals a rewritten body needs.
type locals struct {
	code *wasmbin.Code
	next uint32
	s64  uint32 // i64 scratch for charges
	n32  uint32 // i32 scratch for sizes
	r32  uint32 // i32 scratch for results
	sp   uint32 // the stack account at entry
}

func newLocals(code *wasmbin.Code, params int) *locals {
	l := &locals{code: code, next: uint32(params) + uint32(code.NumLocals())}
	l.s64 = l.add(wasmbin.I64)
	l.n32 = l.add(wasmbin.I32)
	l.r32 = l.add(wasmbin.I32)
	l.sp = l.add(wasmbin.I32)
	return l
}

func (l *locals) add(t byte) uint32 {
	l.code.Locals = append(l.code.Locals, wasmbin.LocalDecl{Count: 1, Type: t})
	l.next++
	return l.next - 1
}

// rewriteBodies applies the walk's edits to every body that needs them,
// adds the entry charge and the call-stack account.
func rewriteBodies(m *wasmbin.Module, sc *scope, cfg Config, lay layout, funcs []function, st *Stats) error {
	for i := range m.Code {
		code, f := &m.Code[i], &funcs[i]
		st.SizeBefore += len(code.Body)
		edits := f.edits
		if !f.account {
			edits = withoutReturns(edits)
		}
		if !f.entry && len(edits) == 0 {
			st.SizeAfter += len(code.Body)
			continue
		}
		loc := newLocals(code, f.params)
		spills := map[uint32]uint32{} // charged import -> first of its spill locals
		body := make([]byte, 0, len(code.Body)+(len(edits)+2)*40)
		if f.entry {
			ticks := sc.costs.Entry + sc.costs.PerLocal*int64(f.locals) + f.weight
			if f.account {
				ticks += sc.costs.StackByte * int64(f.charge)
			}
			units := ticksToUnits(ticks)
			body = appendCheck(body, lay, loc.s64, units)
			if f.account {
				body = appendYieldCheck(body, lay)
			}
			st.Functions++
		}
		if f.account {
			body = appendStackEnter(body, lay.sp, loc, uint32(f.charge), cfg.StackLimit)
			bt, err := blockType(m, m.Functions[i])
			if err != nil {
				return err
			}
			body = append(body, opBlock)
			body = append(body, bt...)
			st.StackFrames++
			st.MaxFrame = max(st.MaxFrame, f.charge)
		}
		prev := 0
		for _, e := range edits {
			body = append(body, code.Body[prev:e.at]...)
			prev = e.at
			switch e.kind {
			case editCheck:
				body = appendCheck(body, lay, loc.s64, e.cost)
				st.BackEdges++
			case editSized:
				body = appendSized(body, lay, loc, *e.sized)
				st.Sized++
			case editImportCall:
				ic := sc.imports[e.fn]
				base, ok := spills[e.fn]
				if !ok {
					base = loc.next
					for _, p := range ic.params {
						loc.add(p)
					}
					spills[e.fn] = base
				}
				body = appendImportCharge(body, lay, loc, base, ic)
				st.ImportCalls++
			case editBrIf:
				// if  <check>  br L+1  end: the if adds one block level.
				body = append(body, opIf, 0x40)
				body = appendCheck(body, lay, loc.s64, e.cost)
				body = append(body, opBr)
				body = wasmbin.AppendU32(body, e.label+1)
				body = append(body, opEnd)
				st.BackEdges++
				prev = e.end
			case editReturn:
				body = append(body, opBr)
				body = wasmbin.AppendU32(body, e.label)
				prev = e.end
			case editGrow:
				body = appendGrow(body, lay, loc, code.Body[e.at:e.end], *e.sized)
				st.Sized++
				prev = e.end
			}
		}
		body = append(body, code.Body[prev:]...)
		if f.account {
			// The original end closes the block; restore the account.
			body = append(body, 0x20) // local.get
			body = wasmbin.AppendU32(body, loc.sp)
			body = append(body, opGlobalSet)
			body = wasmbin.AppendU32(body, lay.sp)
			body = append(body, opEnd)
		}
		code.Body = body
		st.SizeAfter += len(body)
	}
	return nil
}

func withoutReturns(edits []edit) []edit {
	for _, e := range edits {
		if e.kind == editReturn {
			out := make([]edit, 0, len(edits))
			for _, e := range edits {
				if e.kind != editReturn {
					out = append(out, e)
				}
			}
			return out
		}
	}
	return edits
}

// voidType returns the index of the type () -> (), appending it if needed.
func voidType(m *wasmbin.Module) uint32 {
	for i, ft := range m.Types {
		if len(ft.Params) == 0 && len(ft.Results) == 0 {
			return uint32(i)
		}
	}
	m.Types = append(m.Types, wasmbin.FuncType{})
	return uint32(len(m.Types) - 1)
}

// blockType returns the block type encoding of a block whose results are
// those of function type t, appending a type when needed.
func blockType(m *wasmbin.Module, t uint32) ([]byte, error) {
	res := m.Types[t].Results
	switch len(res) {
	case 0:
		return []byte{0x40}, nil
	case 1:
		return []byte{res[0]}, nil
	}
	for i, ft := range m.Types {
		if len(ft.Params) == 0 && string(ft.Results) == string(res) {
			return wasmbin.AppendS64(nil, int64(i)), nil
		}
	}
	m.Types = append(m.Types, wasmbin.FuncType{Results: res})
	return wasmbin.AppendS64(nil, int64(len(m.Types)-1)), nil
}

// wrapEntryPoints replaces every exported function by a wrapper that
// refills the tank and calls the original, and moves the start function to
// an export (StartExport) with the initialisation budget. It also exports
// the module's mutable globals.
func wrapEntryPoints(m *wasmbin.Module, cfg Config, lay layout, st *Stats) error {
	wrappers := map[[2]uint64]uint32{} // (function, budget) -> wrapper
	wrap := func(fn uint32, budget uint64) uint32 {
		key := [2]uint64{uint64(fn), budget}
		if w, ok := wrappers[key]; ok {
			return w
		}
		t, _ := m.FuncTypeIndex(fn)
		body := appendRefill(nil, lay, budget)
		for p := range m.Types[t].Params {
			body = append(body, 0x20)
			body = wasmbin.AppendU32(body, uint32(p))
		}
		body = append(body, opCall)
		body = wasmbin.AppendU32(body, fn)
		body = append(body, opEnd)
		w := m.NumFuncs()
		m.Functions = append(m.Functions, t)
		m.Code = append(m.Code, wasmbin.Code{Body: body})
		wrappers[key] = w
		st.Exports++
		return w
	}
	var exported []uint32
	for i := range m.Exports {
		e := &m.Exports[i]
		if e.Kind != wasmbin.KindFunc {
			continue
		}
		exported = append(exported, e.Index)
		budget := cfg.Budget
		for _, name := range cfg.InitExports {
			if e.Name == name {
				budget = cfg.InitBudget
			}
		}
		e.Index = wrap(e.Index, budget)
	}
	if m.Start != nil {
		t, _ := m.FuncTypeIndex(*m.Start)
		if ft := m.Types[t]; len(ft.Params) != 0 || len(ft.Results) != 0 {
			return errors.New("start function must take and return nothing")
		}
		w := wrap(*m.Start, cfg.InitBudget)
		m.Start = nil
		m.Exports = append(m.Exports, wasmbin.Export{Name: StartExport, Kind: wasmbin.KindFunc, Index: w})
	}
	// An export declared its function for ref.func: keep it declared.
	m.DeclareFuncs(exported)
	imported := m.ImportedGlobals()
	for i, g := range m.Globals {
		if g.Mutable {
			idx := imported + uint32(i)
			m.Exports = append(m.Exports, wasmbin.Export{Name: GlobalPrefix + strconv.Itoa(int(idx)), Kind: wasmbin.KindGlobal, Index: idx})
		}
	}
	return nil
}

// addGlobals appends the tank, the call counter and the stack account,
// and exports them. The tank starts empty: only wrapped entry points
// (which refill it) can run code.
func addGlobals(m *wasmbin.Module, lay layout) {
	zero64 := []byte{0x42, 0, opEnd}
	zero32 := []byte{0x41, 0, opEnd}
	m.Globals = append(m.Globals,
		wasmbin.Global{Type: wasmbin.I64, Mutable: true, Init: zero64},
		wasmbin.Global{Type: wasmbin.I64, Mutable: true, Init: zero64},
		wasmbin.Global{Type: wasmbin.I32, Mutable: true, Init: zero32},
		wasmbin.Global{Type: wasmbin.I64, Mutable: true, Init: zero64})
	m.Exports = append(m.Exports,
		wasmbin.Export{Name: GlobalExport, Kind: wasmbin.KindGlobal, Index: lay.tank},
		wasmbin.Export{Name: CallsExport, Kind: wasmbin.KindGlobal, Index: lay.calls},
		wasmbin.Export{Name: StackExport, Kind: wasmbin.KindGlobal, Index: lay.sp})
}
