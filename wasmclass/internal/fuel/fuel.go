// Package fuel bounds the work a WebAssembly module may do per call by
// rewriting its code before compilation.
//
// Instrument adds one mutable i64 global, the fuel tank, and checks that
// take units from it and, when it goes below zero, execute unreachable (a
// trap):
//
//   - on every branch back to a loop header (each loop iteration after the
//     first): 1 + (bytes from the loop header to the branch) /
//     CodeBytesPerUnit, where a direct call to a function not metered at its
//     entry counts as that function's bytes and call_indirect as
//     CodeBytesPerUnit bytes;
//   - at the entry of every function that calls a function or whose body and
//     locals exceed CodeBytesPerUnit: 1 + (its weighted size) /
//     CodeBytesPerUnit;
//   - before every bulk memory or table instruction: 1 + length /
//     BulkBytesPerUnit;
//   - before every call to an import listed in Config.ImportCosts: 1 + (one
//     argument) >> shift.
//
// That bounds all execution by the budget times a constant: code without
// back edges or calls runs at most its own length, every cycle of calls
// (recursion) goes through the entry of a function that calls, and every
// instruction whose work is not constant is charged by its operand. Every
// exported function is replaced, in the export section only, by a wrapper
// that refills the tank and calls the original, so that a call from the host
// starts with a full budget while calls inside the module do not refill it.
// The start function is wrapped the same way with the initialisation budget.
// Wrappers are appended after the existing functions, so no index changes;
// references to indexes past the module's own (which would name the tank or
// a wrapper) are refused, as are references to metered imports other than
// direct calls.
//
// The package is pure: it works on a decoded module (github.com/tetratelabs/wabin)
// and is safe for concurrent use on distinct modules.
package fuel

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/tetratelabs/wabin/binary"
	"github.com/tetratelabs/wabin/leb128"
	"github.com/tetratelabs/wabin/wasm"
)

// GlobalExport is the export name under which the instrumented module exposes
// its fuel global, so that the host can tell a fuel trap (tank below 0) from
// other traps. Modules may not use this name themselves.
const GlobalExport = "psp.fuel"

// Config says how much fuel a call gets.
type Config struct {
	// Budget is the fuel of each call to an export: the number of function
	// entries plus loop iterations it may execute before trapping. Must be > 0.
	Budget uint64
	// InitBudget replaces Budget for the start function and for the exports
	// named in InitExports (e.g. "_initialize"): initialisation code may be
	// much longer than a classification. Zero means Budget.
	InitBudget uint64
	// InitExports lists the exports that get InitBudget.
	InitExports []string
	// ImportCosts meters calls to imported functions whose work grows with
	// one of their arguments, keyed by "module.name" (e.g.
	// "wasi_snapshot_preview1.random_get"). Other imports are not metered.
	ImportCosts map[string]ImportCost
}

// ImportCost says how a call to an imported function is charged: 1 +
// (argument Param, an i32 read as unsigned) >> Shift units, before the call.
type ImportCost struct {
	Param int
	Shift uint8
}

// Stats describes what Instrument changed.
type Stats struct {
	Functions int // function bodies metered at entry (those that call or are long)
	BackEdges int // branches back to a loop header metered
	BulkOps   int // bulk memory and table instructions metered by length
	// ImportCalls counts calls to imported functions metered by an argument.
	ImportCalls int
	Exports     int // exported functions wrapped (start function included)
	// SizeBefore and SizeAfter are the sizes of the code section bodies, in
	// bytes, before and after instrumentation.
	SizeBefore, SizeAfter int
}

// Errors returned by Instrument.
var (
	// ErrReservedExport means the module already exports GlobalExport.
	ErrReservedExport = errors.New("export name " + GlobalExport + " is reserved by the host")
	// ErrZeroBudget means Config.Budget is 0.
	ErrZeroBudget = errors.New("fuel budget must be positive")
)

// MaxLocals is the largest number of locals (parameters excluded) a
// function may declare. The binary format encodes a run of locals as a
// count, so a few bytes can ask for 2^32 of them, which the decoder would
// expand in memory (and every call would zero).
const MaxLocals = 50000

// ErrTooManyLocals means a function declares more than MaxLocals locals.
var ErrTooManyLocals = fmt.Errorf("function declares more than %d locals", MaxLocals)

// Decode parses a binary module with every feature wazero's default
// configuration accepts (WebAssembly 2.0). It refuses functions with more
// than MaxLocals locals before decoding them.
func Decode(bin []byte) (*wasm.Module, error) {
	if err := checkLocals(bin); err != nil {
		return nil, err
	}
	return binary.DecodeModule(bin, wasm.CoreFeaturesV2)
}

// checkLocals scans the code section's local declarations. Malformed input
// is left to the decoder to report.
func checkLocals(bin []byte) error {
	if len(bin) < 8 {
		return nil
	}
	r := &reader{b: bin, pos: 8}
	for r.pos < len(r.b) {
		id, err := r.byte()
		if err != nil {
			return nil
		}
		size, err := r.leb()
		if err != nil || size > uint64(len(r.b)-r.pos) {
			return nil
		}
		if id != wasm.SectionIDCode {
			r.pos += int(size)
			continue
		}
		count, err := r.leb()
		if err != nil {
			return nil
		}
		for fn := uint64(0); fn < count; fn++ {
			bodySize, err := r.leb()
			if err != nil || bodySize > uint64(len(r.b)-r.pos) {
				return nil
			}
			next := r.pos + int(bodySize)
			decls, err := r.leb()
			if err != nil {
				return nil
			}
			var sum uint64
			for d := uint64(0); d < decls && r.pos < next; d++ {
				n, err := r.leb()
				if err != nil {
					return nil
				}
				if sum += n; sum > MaxLocals {
					return fmt.Errorf("code entry %d: %w", fn, ErrTooManyLocals)
				}
				if _, err := r.byte(); err != nil {
					return nil
				}
			}
			r.pos = next
		}
		return nil
	}
	return nil
}

// Instrument meters m in place: see the package documentation. m must have
// been decoded by Decode and not otherwise modified.
func Instrument(m *wasm.Module, cfg Config) (Stats, error) {
	var st Stats
	if cfg.Budget == 0 {
		return st, ErrZeroBudget
	}
	if cfg.InitBudget == 0 {
		cfg.InitBudget = cfg.Budget
	}
	for _, e := range m.ExportSection {
		if e.Name == GlobalExport {
			return st, ErrReservedExport
		}
	}

	lim := limits{
		funcs:   m.ImportFuncCount() + uint32(len(m.FunctionSection)),
		globals: m.ImportGlobalCount() + uint32(len(m.GlobalSection)),
		typeParams: func(idx uint32) (int, error) {
			if idx >= uint32(len(m.TypeSection)) {
				return 0, fmt.Errorf("type index %d out of range", idx)
			}
			return len(m.TypeSection[idx].Params), nil
		},
	}
	if err := checkRefs(m, lim); err != nil {
		return st, err
	}
	importCosts, err := meteredImports(m, cfg.ImportCosts)
	if err != nil {
		return st, err
	}
	lim.meteredImport = func(fn uint32) bool { _, ok := importCosts[fn]; return ok }
	// A metered import must be called directly: a reference to it would
	// let call_indirect skip the charge.
	for i, seg := range m.ElementSection {
		for _, fn := range seg.Init {
			if fn != nil && lim.meteredImport(*fn) {
				return st, fmt.Errorf("element segment %d: metered import %d may only be called directly", i, *fn)
			}
		}
	}
	for i, g := range m.GlobalSection {
		if g.Init != nil && g.Init.Opcode == wasm.OpcodeRefFunc {
			if fn, _, err := leb128.DecodeUint32(bytes.NewReader(g.Init.Data)); err == nil && lim.meteredImport(fn) {
				return st, fmt.Errorf("global %d: metered import %d may only be called directly", i, fn)
			}
		}
	}
	// Sizes before instrumentation changes the bodies.
	imported := m.ImportFuncCount()
	leafSize := make([]int, len(m.CodeSection))
	for i, code := range m.CodeSection {
		if size := len(code.Body) + len(code.LocalTypes); size <= CodeBytesPerUnit {
			leafSize[i] = size
		} // else 0: metered at its entry
	}
	lim.callWeight = func(fn uint32) int {
		if fn < imported || fn-imported >= uint32(len(leafSize)) {
			return 0 // imported: host functions are not metered
		}
		return leafSize[fn-imported]
	}

	// The tank: a new global after all others, so no index moves. It starts
	// empty: only wrapped entry points (which refill it) can run code.
	tank := lim.globals
	m.GlobalSection = append(m.GlobalSection, &wasm.Global{
		Type: &wasm.GlobalType{ValType: wasm.ValueTypeI64, Mutable: true},
		Init: &wasm.ConstantExpression{Opcode: wasm.OpcodeI64Const, Data: leb128.EncodeInt64(0)},
	})
	for i, code := range m.CodeSection {
		st.SizeBefore += len(code.Body)
		edits, calls, weighted, err := walk(code.Body, lim)
		if err != nil {
			return st, fmt.Errorf("function %d: %w", m.ImportFuncCount()+uint32(i), err)
		}
		// Entering a function runs its body once (and zeroes its locals):
		// metered when the function calls others (every cycle of calls goes
		// through such a function) or is longer than a unit of code.
		entry := calls || len(code.Body)+len(code.LocalTypes) > CodeBytesPerUnit
		size := weighted + len(code.LocalTypes)
		if !entry && len(edits) == 0 {
			st.SizeAfter += len(code.Body)
			continue
		}
		// Scratch locals for the checks: an i64, and an i32 for lengths.
		typeIdx, err := funcType(m, m.ImportFuncCount()+uint32(i))
		if err != nil {
			return st, err
		}
		scratch := uint32(len(m.TypeSection[typeIdx].Params) + len(code.LocalTypes))
		code.LocalTypes = append(code.LocalTypes, wasm.ValueTypeI64, wasm.ValueTypeI32)
		body := make([]byte, 0, len(code.Body)+(len(edits)+1)*48)
		spill := map[uint32]uint32{} // metered import -> first of its scratch locals
		if entry {
			body = append(body, checkCode(tank, scratch, 1+int64(size)/CodeBytesPerUnit)...)
			st.Functions++
		}
		prev := 0
		for _, e := range edits {
			body = append(body, code.Body[prev:e.at]...)
			switch e.kind {
			case editCheck:
				body = append(body, checkCode(tank, scratch, e.cost)...)
				st.BackEdges++
				prev = e.at
			case editBulk:
				body = append(body, bulkCode(tank, scratch)...)
				st.BulkOps++
				prev = e.at
			case editImportCall:
				ic := importCosts[e.fn]
				base, ok := spill[e.fn]
				if !ok {
					base = uint32(len(m.TypeSection[typeIdx].Params) + len(code.LocalTypes))
					code.LocalTypes = append(code.LocalTypes, ic.params...)
					spill[e.fn] = base
				}
				body = append(body, importCallCode(tank, scratch, base, ic)...)
				st.ImportCalls++
				prev = e.at
			case editBrIf:
				// if  <check>  br L+1  end: the if adds one block level.
				body = append(body, wasm.OpcodeIf, 0x40)
				body = append(body, checkCode(tank, scratch, e.cost)...)
				st.BackEdges++
				body = append(body, wasm.OpcodeBr)
				body = append(body, leb128.EncodeUint32(e.label+1)...)
				body = append(body, wasm.OpcodeEnd)
				prev = e.end
			}
		}
		body = append(body, code.Body[prev:]...)
		code.Body = body
		st.SizeAfter += len(body)
	}

	// Wrappers, appended after the existing functions.
	wrappers := map[uint32]uint32{} // (original index, budget class) -> wrapper index
	wrap := func(fn uint32, budget uint64) (uint32, error) {
		key := fn<<1 | boolBit(budget != cfg.Budget)
		if w, ok := wrappers[key]; ok {
			return w, nil
		}
		typeIdx, err := funcType(m, fn)
		if err != nil {
			return 0, err
		}
		ft := m.TypeSection[typeIdx]
		body := refillCode(tank, budget)
		for p := range ft.Params {
			body = append(body, wasm.OpcodeLocalGet)
			body = append(body, leb128.EncodeUint32(uint32(p))...)
		}
		body = append(body, wasm.OpcodeCall)
		body = append(body, leb128.EncodeUint32(fn)...)
		body = append(body, wasm.OpcodeEnd)
		w := m.ImportFuncCount() + uint32(len(m.FunctionSection))
		m.FunctionSection = append(m.FunctionSection, typeIdx)
		m.CodeSection = append(m.CodeSection, &wasm.Code{Body: body})
		wrappers[key] = w
		st.Exports++
		return w, nil
	}
	for _, e := range m.ExportSection {
		if e.Type != wasm.ExternTypeFunc {
			continue
		}
		budget := cfg.Budget
		for _, name := range cfg.InitExports {
			if e.Name == name {
				budget = cfg.InitBudget
			}
		}
		w, err := wrap(e.Index, budget)
		if err != nil {
			return st, fmt.Errorf("export %q: %w", e.Name, err)
		}
		e.Index = w
	}
	if m.StartSection != nil {
		w, err := wrap(*m.StartSection, cfg.InitBudget)
		if err != nil {
			return st, fmt.Errorf("start function: %w", err)
		}
		*m.StartSection = w
	}
	m.ExportSection = append(m.ExportSection, &wasm.Export{Type: wasm.ExternTypeGlobal, Name: GlobalExport, Index: tank})
	return st, nil
}

// checkRefs refuses function references outside the module's functions in
// exports, the start section, element segments and global initialisers, and
// global references outside its globals (see limits): once instrumented,
// they would name the tank or a wrapper.
func checkRefs(m *wasm.Module, lim limits) error {
	for _, e := range m.ExportSection {
		if (e.Type == wasm.ExternTypeFunc && e.Index >= lim.funcs) || (e.Type == wasm.ExternTypeGlobal && e.Index >= lim.globals) {
			return fmt.Errorf("export %q: %s index %d out of range", e.Name, wasm.ExternTypeName(e.Type), e.Index)
		}
	}
	if m.StartSection != nil && *m.StartSection >= lim.funcs {
		return fmt.Errorf("start function index %d out of range (%d functions)", *m.StartSection, lim.funcs)
	}
	for i, seg := range m.ElementSection {
		for _, fn := range seg.Init {
			if fn != nil && *fn >= lim.funcs {
				return fmt.Errorf("element segment %d: function index %d out of range (%d functions)", i, *fn, lim.funcs)
			}
		}
	}
	for i, g := range m.GlobalSection {
		if g.Init == nil {
			continue
		}
		switch g.Init.Opcode {
		case wasm.OpcodeRefFunc:
			fn, _, err := leb128.DecodeUint32(bytes.NewReader(g.Init.Data))
			if err != nil || fn >= lim.funcs {
				return fmt.Errorf("global %d: initial ref.func out of range", i)
			}
		case wasm.OpcodeGlobalGet:
			ref, _, err := leb128.DecodeUint32(bytes.NewReader(g.Init.Data))
			if err != nil || ref >= lim.globals {
				return fmt.Errorf("global %d: initial global.get out of range", i)
			}
		}
	}
	return nil
}

func boolBit(b bool) uint32 {
	if b {
		return 1
	}
	return 0
}

// funcType returns the type index of function fn (imports included).
func funcType(m *wasm.Module, fn uint32) (uint32, error) {
	var imported uint32
	for _, im := range m.ImportSection {
		if im.Type != wasm.ExternTypeFunc {
			continue
		}
		if imported == fn {
			return im.DescFunc, nil
		}
		imported++
	}
	local := fn - imported
	if local >= uint32(len(m.FunctionSection)) {
		return 0, fmt.Errorf("function index %d out of range", fn)
	}
	t := m.FunctionSection[local]
	if t >= uint32(len(m.TypeSection)) {
		return 0, fmt.Errorf("function %d: type index %d out of range", fn, t)
	}
	return t, nil
}

// checkCode is the metering sequence (one read of the global):
//
//	global.get $tank  i64.const cost  i64.sub  local.tee $scratch  global.set $tank
//	local.get $scratch  i64.const 0  i64.lt_s  if  unreachable  end
func checkCode(tank, scratch uint32, cost int64) []byte {
	b := []byte{wasm.OpcodeGlobalGet}
	b = append(b, leb128.EncodeUint32(tank)...)
	b = append(b, wasm.OpcodeI64Const)
	b = append(b, leb128.EncodeInt64(cost)...)
	return appendCharge(b, tank, scratch)
}

// bulkCode meters a bulk instruction by its length, the i32 on top of the
// stack, which it leaves in place ($len is the i32 scratch local):
//
//	local.tee $len  global.get $tank  local.get $len  i64.extend_i32_u
//	i64.const bulkShift  i64.shr_u  i64.const 1  i64.add  <charge>
func bulkCode(tank, scratch uint32) []byte {
	l32 := leb128.EncodeUint32(scratch + 1)
	b := []byte{wasm.OpcodeLocalTee}
	b = append(b, l32...)
	b = append(b, wasm.OpcodeGlobalGet)
	b = append(b, leb128.EncodeUint32(tank)...)
	b = append(b, wasm.OpcodeLocalGet)
	b = append(b, l32...)
	b = append(b, wasm.OpcodeI64ExtendI32U, wasm.OpcodeI64Const, bulkShift, wasm.OpcodeI64ShrU,
		wasm.OpcodeI64Const, 1, wasm.OpcodeI64Add)
	return appendCharge(b, tank, scratch)
}

// importCost is an ImportCost resolved against an imported function's type.
type importCost struct {
	ImportCost
	params []wasm.ValueType
}

// meteredImports resolves costs (see Config.ImportCosts) to imported
// function indexes.
func meteredImports(m *wasm.Module, costs map[string]ImportCost) (map[uint32]importCost, error) {
	res := map[uint32]importCost{}
	var fn uint32
	for _, im := range m.ImportSection {
		if im.Type != wasm.ExternTypeFunc {
			continue
		}
		if c, ok := costs[im.Module+"."+im.Name]; ok {
			if im.DescFunc >= uint32(len(m.TypeSection)) {
				return nil, fmt.Errorf("import %q.%q: type index %d out of range", im.Module, im.Name, im.DescFunc)
			}
			params := m.TypeSection[im.DescFunc].Params
			if c.Param < 0 || c.Param >= len(params) || params[c.Param] != wasm.ValueTypeI32 {
				return nil, fmt.Errorf("import %q.%q: parameter %d is not an i32", im.Module, im.Name, c.Param)
			}
			res[fn] = importCost{ImportCost: c, params: params}
		}
		fn++
	}
	return res, nil
}

// importCallCode meters a call to a metered import, with its arguments on
// the stack: they are saved to scratch locals base.., the cost is charged
// from the metered one, and they are pushed back.
func importCallCode(tank, scratch, base uint32, ic importCost) []byte {
	var b []byte
	for p := len(ic.params) - 1; p >= 0; p-- {
		b = append(b, wasm.OpcodeLocalSet)
		b = append(b, leb128.EncodeUint32(base+uint32(p))...)
	}
	b = append(b, wasm.OpcodeGlobalGet)
	b = append(b, leb128.EncodeUint32(tank)...)
	b = append(b, wasm.OpcodeLocalGet)
	b = append(b, leb128.EncodeUint32(base+uint32(ic.Param))...)
	b = append(b, wasm.OpcodeI64ExtendI32U, wasm.OpcodeI64Const)
	b = append(b, leb128.EncodeInt64(int64(ic.Shift))...)
	b = append(b, wasm.OpcodeI64ShrU, wasm.OpcodeI64Const, 1, wasm.OpcodeI64Add)
	b = appendCharge(b, tank, scratch)
	for p := range ic.params {
		b = append(b, wasm.OpcodeLocalGet)
		b = append(b, leb128.EncodeUint32(base+uint32(p))...)
	}
	return b
}

// appendCharge appends, with the tank and a cost on the stack:
//
//	i64.sub  local.tee $scratch  global.set $tank
//	local.get $scratch  i64.const 0  i64.lt_s  if  unreachable  end
func appendCharge(b []byte, tank, scratch uint32) []byte {
	g := leb128.EncodeUint32(tank)
	l := leb128.EncodeUint32(scratch)
	b = append(b, wasm.OpcodeI64Sub, wasm.OpcodeLocalTee)
	b = append(b, l...)
	b = append(b, wasm.OpcodeGlobalSet)
	b = append(b, g...)
	b = append(b, wasm.OpcodeLocalGet)
	b = append(b, l...)
	b = append(b, wasm.OpcodeI64Const, 0, wasm.OpcodeI64LtS, wasm.OpcodeIf, 0x40, wasm.OpcodeUnreachable, wasm.OpcodeEnd)
	return b
}

// refillCode is `i64.const budget  global.set $tank`.
func refillCode(tank uint32, budget uint64) []byte {
	b := []byte{wasm.OpcodeI64Const}
	b = append(b, leb128.EncodeInt64(int64(budget))...)
	b = append(b, wasm.OpcodeGlobalSet)
	return append(b, leb128.EncodeUint32(tank)...)
}

// Encode returns the binary form of m. Unlike binary.EncodeModule alone it
// keeps the data count section (needed by modules that use memory.init or
// data.drop).
func Encode(m *wasm.Module) []byte {
	out := binary.EncodeModule(m)
	if m.DataCountSection == nil {
		return out
	}
	sec := []byte{wasm.SectionIDDataCount}
	payload := leb128.EncodeUint32(*m.DataCountSection)
	sec = append(sec, leb128.EncodeUint32(uint32(len(payload)))...)
	sec = append(sec, payload...)
	// The data count section goes right before the code section (or the
	// data section when there is no code).
	at := len(out)
	r := bytes.NewReader(out[8:])
	for r.Len() > 0 {
		start := len(out) - r.Len()
		id, _ := r.ReadByte()
		size, _, err := leb128.DecodeUint32(r)
		if err != nil {
			break
		}
		if id == wasm.SectionIDCode || id == wasm.SectionIDData {
			at = start
			break
		}
		if _, err := r.Seek(int64(size), 1); err != nil {
			break
		}
	}
	res := make([]byte, 0, len(out)+len(sec))
	res = append(res, out[:at]...)
	res = append(res, sec...)
	return append(res, out[at:]...)
}
