package fuel

import (
	"errors"
	"fmt"

	"github.com/persephone-go/psp/wasmclass/internal/wasmbin"
)

// Opcodes the walker treats specially.
const (
	opUnreachable        = 0x00
	opBlock              = 0x02
	opLoop               = 0x03
	opIf                 = 0x04
	opElse               = 0x05
	opEnd                = 0x0b
	opBr                 = 0x0c
	opBrIf               = 0x0d
	opBrTable            = 0x0e
	opReturn             = 0x0f
	opCall               = 0x10
	opCallIndirect       = 0x11
	opReturnCall         = 0x12
	opReturnCallIndirect = 0x13
	opGlobalGet          = 0x23
	opGlobalSet          = 0x24
	opMemoryGrow         = 0x40
	opRefFunc            = 0xd2
	opPrefix             = 0xfc // saturating conversions, bulk memory, tables
	opSIMD               = 0xfd
	opAtomic             = 0xfe
)

// editKind says how an instruction is rewritten.
type editKind int

const (
	// editCheck inserts a charge of cost units before the instruction.
	editCheck editKind = iota
	// editBrIf replaces `br_if L` by `if <charge> br L+1 end`: the charge
	// runs only when the branch is taken.
	editBrIf
	// editSized inserts, before an instruction whose last operand is an
	// i32 size (bulk memory and table instructions, memory.grow,
	// table.grow), a charge computed from it (Costs' Sized fields).
	editSized
	// editImportCall inserts, before a call to an import charged by an
	// argument, that charge.
	editImportCall
	// editReturn replaces `return` by a branch to the block that restores
	// the call-stack account (functions that call others).
	editReturn
	// editGrow replaces memory.grow by a sequence that charges, after the
	// growth, for the pages it added (a failed growth costs only Base).
	editGrow
)

// edit is one change walk asks for, in body order.
type edit struct {
	kind    editKind
	at, end int
	label   uint32 // editBrIf: the br_if's label; editReturn: depth of the body block
	cost    int64  // editCheck, editBrIf: units
	sized   *Sized // editSized
	fn      uint32 // editImportCall: the imported function
}

// scope is what walk needs to know about the module.
type scope struct {
	m       *wasmbin.Module
	costs   *Costs
	bounds  wasmbin.Bounds
	funcs   uint32 // function index space before instrumentation
	globals uint32 // global index space before instrumentation
	// leafWeight is the weight (ticks) a direct call to fn adds to its
	// caller: the body of a function not metered at entry, 0 otherwise.
	leafWeight func(fn uint32) int64
	// imports maps the imported functions charged by an argument to their
	// charge; importTicks is the fixed cost of a call to each import.
	imports     map[uint32]importCost
	importTicks func(fn uint32) int64
	// brTables counts br_table targets over the whole module.
	brTables   int
	stackLimit uint32
}

// label is an entry of the control stack.
type label struct {
	loop   bool
	params bool  // a loop whose block type takes parameters
	start  int64 // weighted position of the block's opcode
	height int   // operand stack height below the block's parameters
	arity  int   // results
}

// analysis is what walk learnt about a function body.
type analysis struct {
	edits    []edit
	calls    bool     // the body calls a function
	callees  []uint32 // functions called directly
	indirect bool     // the body calls indirectly
	weight   int64    // ticks of one pass through the body, calls to leaves included
	height   int      // an upper bound of the operand stack height
	blocks   int      // control instructions
}

// walk decodes every instruction of body (so that bytes inside immediates
// are never taken for opcodes) and finds where it must be metered: every
// branch back to a loop header (each iteration after the first costs the
// instructions from the header to the branch), every bulk instruction and
// memory or table growth (charged by size at run time), every call to an
// import charged by an argument, every return (when the function calls
// others, see callStack). It fails on an opcode it does not know, an index
// outside the module's index spaces (which after instrumentation could name
// the fuel globals or the wrappers) and on bodies over the nesting and
// br_table bounds.
func walk(body []byte, params, locals int, sc *scope) (a analysis, err error) {
	r := &wasmbin.Reader{B: body}
	var pos int64 // weighted position: ticks of the instructions so far
	height := 0
	stack := []label{{arity: 0}}
	fail := func(at int, op byte, err error) (analysis, error) {
		return analysis{}, fmt.Errorf("opcode 0x%02x at offset %d: %w", op, at, err)
	}
	target := func(l uint64) (label, error) {
		if l >= uint64(len(stack)) {
			return label{}, fmt.Errorf("branch depth %d outside the %d enclosing blocks", l, len(stack))
		}
		return stack[len(stack)-1-int(l)], nil
	}
	push := func(n int) {
		height += n
		a.height = max(a.height, height)
	}
	pop := func(n int) {
		height = max(height-n, stack[len(stack)-1].height)
	}
	for r.Pos < len(r.B) {
		at := r.Pos
		op, _ := r.Byte()
		var sub uint32
		if op == opPrefix || op == opSIMD || op == opAtomic {
			save := r.Pos
			if sub, err = r.U32(); err != nil {
				return fail(at, op, err)
			}
			r.Pos = save
		}
		pos += sc.costs.weight(op, sub)
		switch op {
		case opBlock, opLoop, opIf:
			bt, err := r.S64()
			if err != nil {
				return fail(at, op, err)
			}
			if op == opIf {
				pop(1)
			}
			np, nr := 0, 0
			switch {
			case bt == -64: // 0x40: empty
			case bt < 0: // a value type
				nr = 1
			default:
				if bt >= int64(len(sc.m.Types)) {
					return fail(at, op, fmt.Errorf("block type %d out of range", bt))
				}
				np, nr = len(sc.m.Types[bt].Params), len(sc.m.Types[bt].Results)
			}
			if len(stack) > sc.bounds.Nesting {
				return fail(at, op, fmt.Errorf("%w: blocks nested deeper than %d", wasmbin.ErrLimit, sc.bounds.Nesting))
			}
			if a.blocks++; a.blocks > sc.bounds.Blocks {
				return fail(at, op, fmt.Errorf("%w: more than %d blocks, loops and ifs in a function", wasmbin.ErrLimit, sc.bounds.Blocks))
			}
			stack = append(stack, label{loop: op == opLoop, params: np > 0, start: pos, height: max(0, height-np), arity: nr})
			continue
		case opElse:
			top := stack[len(stack)-1]
			height = top.height + top.arity // a bound: the else arm starts from the params
			push(0)
			continue
		case opEnd:
			top := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			height = top.height
			push(top.arity)
			if len(stack) == 0 {
				if r.Pos != len(r.B) {
					return fail(at, op, errors.New("code after the function's end"))
				}
				a.weight = pos
				return a, nil
			}
			continue
		case opBr, opBrIf:
			l, err := r.LEB()
			var lbl label
			if err == nil {
				lbl, err = target(l)
			}
			if err != nil {
				return fail(at, op, err)
			}
			if op == opBrIf {
				pop(1)
			}
			switch cost := ticksToUnits(sc.costs.BackEdge + pos - lbl.start); {
			case !lbl.loop:
			case op == opBrIf && !lbl.params:
				a.edits = append(a.edits, edit{kind: editBrIf, at: at, end: r.Pos, label: uint32(l), cost: cost})
			default: // br, or br_if to a loop with parameters: charge every execution
				a.edits = append(a.edits, edit{kind: editCheck, at: at, cost: cost})
			}
			continue
		case opBrTable:
			n, err := r.U32()
			if err == nil && int(n) >= sc.bounds.BrTable {
				err = fmt.Errorf("%w: br_table of %d targets, limit is %d", wasmbin.ErrLimit, n, sc.bounds.BrTable)
			}
			if sc.brTables += int(n); err == nil && sc.brTables > sc.bounds.BrTableTotal {
				err = fmt.Errorf("%w: br_tables of more than %d targets in all", wasmbin.ErrLimit, sc.bounds.BrTableTotal)
			}
			var cost int64 // the dearest loop target; 0: no loop target
			for i := uint32(0); err == nil && i <= n; i++ {
				var l uint64
				if l, err = r.LEB(); err == nil {
					var lbl label
					if lbl, err = target(l); err == nil && lbl.loop {
						cost = max(cost, ticksToUnits(sc.costs.BackEdge+pos-lbl.start))
					}
				}
			}
			if err != nil {
				return fail(at, op, err)
			}
			pop(1)
			if cost > 0 {
				a.edits = append(a.edits, edit{kind: editCheck, at: at, cost: cost})
			}
			continue
		case opReturn:
			a.edits = append(a.edits, edit{kind: editReturn, at: at, end: r.Pos, label: uint32(len(stack) - 1)})
			continue
		case opCall, opReturnCall, opRefFunc:
			fn, err := r.U32()
			if err == nil && fn >= sc.funcs {
				err = fmt.Errorf("function index %d out of range (%d functions)", fn, sc.funcs)
			}
			if err != nil {
				return fail(at, op, err)
			}
			if op == opRefFunc {
				if _, ok := sc.imports[fn]; ok {
					return fail(at, op, fmt.Errorf("charged import %d may only be called directly", fn))
				}
				push(1)
				continue
			}
			a.calls = true
			a.callees = append(a.callees, fn)
			ft, _ := sc.m.FuncType(fn)
			pop(len(ft.Params))
			pos += sc.costs.SpillSlot * int64(params+locals+height)
			push(len(ft.Results))
			pos += sc.leafWeight(fn) + sc.importTicks(fn)
			if _, ok := sc.imports[fn]; ok {
				a.edits = append(a.edits, edit{kind: editImportCall, at: at, fn: fn})
			}
			continue
		case opCallIndirect, opReturnCallIndirect:
			t, err := r.U32()
			if err == nil {
				_, err = r.U32()
			}
			if err == nil && t >= uint32(len(sc.m.Types)) {
				err = fmt.Errorf("type %d out of range", t)
			}
			if err != nil {
				return fail(at, op, err)
			}
			a.calls, a.indirect = true, true
			pos += sc.costs.Leaf // the dearest callee not metered at entry
			pop(len(sc.m.Types[t].Params) + 1)
			pos += sc.costs.SpillSlot * int64(params+locals+height)
			push(len(sc.m.Types[t].Results))
			continue
		case opGlobalGet, opGlobalSet:
			g, err := r.U32()
			if err == nil && g >= sc.globals {
				err = fmt.Errorf("global index %d out of range (%d globals)", g, sc.globals)
			}
			if err != nil {
				return fail(at, op, err)
			}
			if op == opGlobalGet {
				push(1)
			} else {
				pop(1)
			}
			continue
		case opMemoryGrow:
			a.edits = append(a.edits, edit{kind: editGrow, at: at, sized: &sc.costs.MemoryGrow})
		case opPrefix:
			switch sub {
			case 8, 10, 11: // memory.init, memory.copy, memory.fill
				a.edits = append(a.edits, edit{kind: editSized, at: at, sized: &sc.costs.Bulk})
			case 12, 14, 17: // table.init, table.copy, table.fill
				a.edits = append(a.edits, edit{kind: editSized, at: at, sized: &sc.costs.TableBulk})
			case 15: // table.grow
				a.edits = append(a.edits, edit{kind: editSized, at: at, sized: &sc.costs.TableGrow})
			}
		}
		if err := skipImmediates(r, op); err != nil {
			return fail(at, op, err)
		}
		if op == opMemoryGrow {
			a.edits[len(a.edits)-1].end = r.Pos
		}
		pops, pushes := stackEffect(op, sub)
		pop(pops)
		push(pushes)
		if op == opUnreachable {
			height = stack[len(stack)-1].height
		}
	}
	return analysis{}, errors.New("function body does not end its blocks")
}

// stackEffect returns how many operands the instruction pops and pushes,
// for instructions whose effect does not depend on the module. Where unsure
// it pops less or pushes more: the height is an upper bound.
func stackEffect(op byte, sub uint32) (pops, pushes int) {
	switch {
	case op == 0x1a: // drop
		return 1, 0
	case op == 0x1b || op == 0x1c: // select
		return 3, 1
	case op == 0x20: // local.get
		return 0, 1
	case op == 0x21:
		return 1, 0
	case op == 0x22:
		return 1, 1
	case op == 0x25: // table.get
		return 1, 1
	case op == 0x26:
		return 2, 0
	case op >= 0x28 && op <= 0x35: // loads
		return 1, 1
	case op >= 0x36 && op <= 0x3e: // stores
		return 2, 0
	case op == 0x3f:
		return 0, 1
	case op == 0x40:
		return 1, 1
	case op >= 0x41 && op <= 0x44:
		return 0, 1
	case op == 0x45 || op == 0x50: // eqz
		return 1, 1
	case op >= 0x46 && op <= 0x66: // comparisons
		return 2, 1
	case op >= 0x67 && op <= 0x69, op >= 0x79 && op <= 0x7b, op >= 0x8b && op <= 0x91, op >= 0x99 && op <= 0x9f:
		return 1, 1 // unary
	case op >= 0x6a && op <= 0x78, op >= 0x7c && op <= 0x8a, op >= 0x92 && op <= 0x98, op >= 0xa0 && op <= 0xa6:
		return 2, 1 // binary
	case op >= 0xa7 && op <= 0xc4: // conversions, sign extension
		return 1, 1
	case op == 0xd0:
		return 0, 1
	case op == 0xd1:
		return 1, 1
	case op == opPrefix:
		switch {
		case sub <= 7:
			return 1, 1
		case sub == 8, sub == 10, sub == 11, sub == 12, sub == 14, sub == 17:
			return 3, 0
		case sub == 15:
			return 2, 1
		case sub == 16:
			return 0, 1
		}
		return 0, 0
	case op == opSIMD:
		switch {
		case sub == 11:
			return 2, 0
		case sub == 12:
			return 0, 1
		case sub >= 88 && sub <= 91:
			return 2, 0
		}
		return 1, 1
	}
	return 0, 0
}

// skipImmediates advances r over the immediates of the instruction op.
func skipImmediates(r *wasmbin.Reader, op byte) error {
	switch {
	case op == 0x00 || op == 0x01 || op == 0x05 || op == 0x0b || op == 0x0f || op == 0x1a || op == 0x1b:
		return nil // unreachable nop else end return drop select
	case op == 0x1c: // select t*
		n, err := r.U32()
		if err != nil {
			return err
		}
		_, err = r.Bytes(int(n))
		return err
	case op >= 0x20 && op <= 0x26: // locals, globals, table.get/set
		_, err := r.LEB()
		return err
	case op >= 0x28 && op <= 0x3e: // loads and stores: memarg
		return lebs(r, 2)
	case op == 0x3f || op == 0x40: // memory.size memory.grow: memory index
		_, err := r.LEB()
		return err
	case op == 0x41 || op == 0x42: // i32.const i64.const
		_, err := r.LEB()
		return err
	case op == 0x43:
		_, err := r.Bytes(4)
		return err
	case op == 0x44:
		_, err := r.Bytes(8)
		return err
	case op >= 0x45 && op <= 0xc4: // numeric, sign extension
		return nil
	case op == 0xd0: // ref.null t
		_, err := r.Byte()
		return err
	case op == 0xd1: // ref.is_null
		return nil
	case op == opPrefix:
		return skipPrefixed(r)
	case op == opSIMD:
		return skipSIMD(r)
	case op == opAtomic:
		return skipAtomic(r)
	}
	return errors.New("unknown opcode")
}

func lebs(r *wasmbin.Reader, n int) error {
	for ; n > 0; n-- {
		if _, err := r.LEB(); err != nil {
			return err
		}
	}
	return nil
}

// skipPrefixed handles the 0xfc family.
func skipPrefixed(r *wasmbin.Reader) error {
	sub, err := r.U32()
	if err != nil {
		return err
	}
	switch {
	case sub <= 7: // trunc_sat
		return nil
	case sub == 8, sub == 10, sub == 12, sub == 14: // memory.init, memory.copy, table.init, table.copy
		return lebs(r, 2)
	case sub == 9, sub == 11, sub == 13, sub >= 15 && sub <= 17: // data.drop memory.fill elem.drop table.grow/size/fill
		return lebs(r, 1)
	}
	return fmt.Errorf("unknown 0xfc sub-opcode %d", sub)
}

// skipSIMD handles the 0xfd family (fixed-width SIMD).
func skipSIMD(r *wasmbin.Reader) error {
	sub, err := r.U32()
	if err != nil {
		return err
	}
	switch {
	case sub <= 11 || sub == 92 || sub == 93: // v128 loads and stores: memarg
		return lebs(r, 2)
	case sub == 12 || sub == 13: // v128.const, i8x16.shuffle
		_, err := r.Bytes(16)
		return err
	case sub >= 21 && sub <= 34: // extract_lane, replace_lane
		_, err := r.Byte()
		return err
	case sub >= 84 && sub <= 91: // load_lane, store_lane: memarg, lane
		if err := lebs(r, 2); err != nil {
			return err
		}
		_, err := r.Byte()
		return err
	case sub < SIMDOps:
		return nil // all other SIMD instructions have no immediates
	}
	return fmt.Errorf("unknown 0xfd sub-opcode %d", sub)
}

// skipAtomic handles the 0xfe family (threads).
func skipAtomic(r *wasmbin.Reader) error {
	sub, err := r.U32()
	if err != nil {
		return err
	}
	switch {
	case sub == 3: // atomic.fence: one reserved byte
		_, err := r.Byte()
		return err
	case sub <= 2 || (sub >= 0x10 && sub <= 0x4e):
		return lebs(r, 2)
	}
	return fmt.Errorf("unknown 0xfe sub-opcode %d", sub)
}
