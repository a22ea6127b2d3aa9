// Package fuel bounds the work a WebAssembly module may do per call by
// rewriting its code before compilation.
//
// Instrument adds one mutable i64 global, the fuel tank, and a check on every
// branch back to a loop header (each loop iteration after the first) and at
// the entry of every function that calls a function: the tank loses one
// unit and, when it goes below zero, the code executes unreachable (a trap).
// That bounds all execution: code without back edges or calls runs a
// bounded number of instructions, and every cycle of calls (recursion) goes
// through the entry of functions that call. Every
// exported function is replaced, in the export section only, by a wrapper
// that refills the tank and calls the original, so that a call from the host
// starts with a full budget while calls inside the module do not refill it.
// The start function is wrapped the same way with the initialisation budget.
// Wrappers are appended after the existing functions, so no index changes.
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
}

// Stats describes what Instrument changed.
type Stats struct {
	Functions int // function bodies metered at entry (those that call)
	BackEdges int // branches back to a loop header metered
	Exports   int // exported functions wrapped (start function included)
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

// Decode parses a binary module with every feature wazero's default
// configuration accepts (WebAssembly 2.0).
func Decode(bin []byte) (*wasm.Module, error) {
	return binary.DecodeModule(bin, wasm.CoreFeaturesV2)
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

	// The tank: a new global after all others, so no index moves. It starts
	// empty: only wrapped entry points (which refill it) can run code.
	tank := lim.globals
	m.GlobalSection = append(m.GlobalSection, &wasm.Global{
		Type: &wasm.GlobalType{ValType: wasm.ValueTypeI64, Mutable: true},
		Init: &wasm.ConstantExpression{Opcode: wasm.OpcodeI64Const, Data: leb128.EncodeInt64(0)},
	})
	for i, code := range m.CodeSection {
		st.SizeBefore += len(code.Body)
		edits, calls, err := walk(code.Body, lim)
		if err != nil {
			return st, fmt.Errorf("function %d: %w", m.ImportFuncCount()+uint32(i), err)
		}
		if !calls && len(edits) == 0 {
			st.SizeAfter += len(code.Body)
			continue
		}
		// A scratch i64 local for the check.
		typeIdx, err := funcType(m, m.ImportFuncCount()+uint32(i))
		if err != nil {
			return st, err
		}
		scratch := uint32(len(m.TypeSection[typeIdx].Params) + len(code.LocalTypes))
		code.LocalTypes = append(code.LocalTypes, wasm.ValueTypeI64)
		check := checkCode(tank, scratch)
		body := make([]byte, 0, len(code.Body)+(len(edits)+1)*(len(check)+8))
		if calls {
			body = append(body, check...)
			st.Functions++
		}
		prev := 0
		for _, e := range edits {
			body = append(body, code.Body[prev:e.at]...)
			switch e.kind {
			case editCheck:
				body = append(body, check...)
				prev = e.at
			case editBrIf:
				// if  <check>  br L+1  end: the if adds one block level.
				body = append(body, wasm.OpcodeIf, 0x40)
				body = append(body, check...)
				body = append(body, wasm.OpcodeBr)
				body = append(body, leb128.EncodeUint32(e.label+1)...)
				body = append(body, wasm.OpcodeEnd)
				prev = e.end
			}
		}
		body = append(body, code.Body[prev:]...)
		code.Body = body
		st.BackEdges += len(edits)
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
// element segments and global initialisers (see limits).
func checkRefs(m *wasm.Module, lim limits) error {
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
//	global.get $tank  i64.const 1  i64.sub  local.tee $scratch  global.set $tank
//	local.get $scratch  i64.const 0  i64.lt_s  if  unreachable  end
func checkCode(tank, scratch uint32) []byte {
	g := leb128.EncodeUint32(tank)
	l := leb128.EncodeUint32(scratch)
	var b []byte
	b = append(b, wasm.OpcodeGlobalGet)
	b = append(b, g...)
	b = append(b, wasm.OpcodeI64Const, 1, wasm.OpcodeI64Sub, wasm.OpcodeLocalTee)
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
