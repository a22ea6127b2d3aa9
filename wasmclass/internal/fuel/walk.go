package fuel

import (
	"errors"
	"fmt"
)

// errTruncated reports a function body that ends inside an instruction.
var errTruncated = errors.New("truncated instruction")

// reader walks a function body one byte or one LEB128 number at a time.
type reader struct {
	b   []byte
	pos int
}

func (r *reader) byte() (byte, error) {
	if r.pos >= len(r.b) {
		return 0, errTruncated
	}
	c := r.b[r.pos]
	r.pos++
	return c, nil
}

// skip advances over n raw bytes.
func (r *reader) skip(n int) error {
	if len(r.b)-r.pos < n {
		return errTruncated
	}
	r.pos += n
	return nil
}

// leb skips one LEB128 number (signed or unsigned, up to 64 bits) and
// returns its value read as unsigned (meaningful only for small unsigned
// immediates such as sub-opcodes and vector lengths).
func (r *reader) leb() (uint64, error) {
	var v uint64
	for shift := uint(0); shift < 70; shift += 7 {
		c, err := r.byte()
		if err != nil {
			return 0, err
		}
		if shift < 64 {
			v |= uint64(c&0x7f) << shift
		}
		if c&0x80 == 0 {
			return v, nil
		}
	}
	return 0, errors.New("LEB128 number too long")
}

// sleb reads a signed LEB128 number of up to 64 bits.
func (r *reader) sleb() (int64, error) {
	var v int64
	var shift uint
	for {
		c, err := r.byte()
		if err != nil {
			return 0, err
		}
		if shift < 64 {
			v |= int64(c&0x7f) << shift
		}
		shift += 7
		if c&0x80 == 0 {
			if shift < 64 && c&0x40 != 0 {
				v |= -1 << shift
			}
			return v, nil
		}
		if shift >= 70 {
			return 0, errors.New("LEB128 number too long")
		}
	}
}

// lebs skips n LEB128 numbers.
func (r *reader) lebs(n int) error {
	for ; n > 0; n-- {
		if _, err := r.leb(); err != nil {
			return err
		}
	}
	return nil
}

// Opcodes the walker treats specially.
const (
	opBlock              = 0x02
	opLoop               = 0x03
	opIf                 = 0x04
	opEnd                = 0x0b
	opBr                 = 0x0c
	opBrIf               = 0x0d
	opBrTable            = 0x0e
	opCall               = 0x10
	opCallIndirect       = 0x11
	opReturnCall         = 0x12
	opReturnCallIndirect = 0x13
	opGlobalGet          = 0x23
	opGlobalSet          = 0x24
	opRefFunc            = 0xd2
	opPrefix             = 0xfc // saturating conversions, bulk memory, tables
	opSIMD               = 0xfd
	opAtomic             = 0xfe
)

// editKind says how an instruction is metered.
type editKind int

const (
	// editCheck inserts the fuel check before the instruction at `at`.
	editCheck editKind = iota
	// editBrIf replaces `br_if L` (bytes at..end) by
	// `if  <check>  br L+1  end`: the check runs only when the branch is
	// taken.
	editBrIf
	// editBulk inserts, before a bulk memory or table instruction whose
	// last operand is an i32 length (memory.fill, memory.copy,
	// memory.init, table.fill, table.copy, table.init, table.grow), a check
	// that charges 1 + length/BulkBytesPerUnit.
	editBulk
	// editImportCall inserts, before a call to a metered import, a check
	// that charges by one of its arguments (Config.ImportCosts).
	editImportCall
)

// Costs. A unit of fuel stands for a few nanoseconds of work: one loop
// iteration or function entry over up to CodeBytesPerUnit bytes of code, or
// BulkBytesPerUnit bytes (or table elements) handled by a bulk instruction.
const (
	// CodeBytesPerUnit: a back edge costs 1 + (its distance in bytes from
	// the loop header)/CodeBytesPerUnit, a metered function entry 1 +
	// (body bytes + locals)/CodeBytesPerUnit. Functions that call nothing
	// and are at most this long are not metered at entry.
	CodeBytesPerUnit = 32
	// bulkShift is log2(BulkBytesPerUnit).
	bulkShift = 4
	// BulkBytesPerUnit is the length a bulk instruction handles per unit.
	BulkBytesPerUnit = 1 << bulkShift
)

// edit is one change walk asks for, in body order.
type edit struct {
	kind    editKind
	at, end int
	label   uint32 // editBrIf: the br_if's label
	cost    int64  // editCheck, editBrIf: units charged
	fn      uint32 // editImportCall: the imported function
}

// limits are the index spaces of the module before instrumentation. The
// instrumentation adds a global and functions after them: code that names
// them (invalid before instrumentation, valid after) could refill its own
// fuel, so walk refuses any index outside these limits.
type limits struct {
	funcs, globals uint32
	typeParams     func(typeIndex uint32) (int, error) // parameter count of a type (block types)
	// callWeight is the code a direct call to fn may run without charging
	// fuel itself (the size of a function not metered at entry), counted
	// as if it were part of the caller's code. Nil means 0.
	callWeight func(fn uint32) int
	// meteredImport reports whether calls to fn are metered by an
	// argument (Config.ImportCosts). Nil means none.
	meteredImport func(fn uint32) bool
}

// label is an entry of the control stack.
type label struct {
	loop   bool
	params bool // a loop whose block type takes parameters
	start  int  // weighted offset of the block's opcode
}

// backEdgeCost is the charge of a branch at offset at back to a loop
// starting at offset start: each instruction an iteration runs outside
// inner loops' further iterations and metered calls lies between the two.
// Offsets are weighted: a call to a function not metered at entry counts
// as that function's code (see limits.callWeight).
func backEdgeCost(start, at int) int64 {
	return 1 + int64(at-start)/CodeBytesPerUnit
}

// walk finds where body must be metered: every branch back to a loop
// header (br, br_if or br_table that targets a loop), so that each loop
// iteration after the first costs fuel; a loop entered without branching
// back runs its body once, which the enclosing code already pays for. It
// also reports whether body calls a function (call, call_indirect or their
// tail-call forms). walk decodes every instruction's immediates, so that
// bytes inside immediates are never mistaken for opcodes, and fails on an
// opcode it does not know: the host then refuses the module rather than
// leaving a loop unmetered.
//
// size is the body's length weighted like offsets (see backEdgeCost).
func walk(body []byte, lim limits) (edits []edit, calls bool, size int, err error) {
	r := &reader{b: body}
	extra := 0           // weight of the calls seen so far (offsets + extra are weighted)
	stack := []label{{}} // the function body is a block
	target := func(l uint64) (label, error) {
		if l >= uint64(len(stack)) {
			return label{}, fmt.Errorf("branch depth %d outside the %d enclosing blocks", l, len(stack))
		}
		return stack[len(stack)-1-int(l)], nil
	}
	for r.pos < len(r.b) {
		at := r.pos
		op, _ := r.byte()
		var lbl label
		switch op {
		case opBlock, opLoop, opIf:
			bt, err := r.sleb()
			if err != nil {
				return nil, false, 0, fmt.Errorf("opcode 0x%02x at offset %d: %w", op, at, err)
			}
			lbl.loop = op == opLoop
			lbl.start = at + extra
			if bt >= 0 { // a type index; negative values are 0x40 or a value type
				n, err := lim.typeParams(uint32(bt))
				if err != nil {
					return nil, false, 0, fmt.Errorf("block type at offset %d: %w", at, err)
				}
				lbl.params = n > 0
			}
			stack = append(stack, lbl)
			continue
		case opEnd:
			if len(stack) == 0 {
				return nil, false, 0, fmt.Errorf("unbalanced end at offset %d", at)
			}
			stack = stack[:len(stack)-1]
			continue
		case opBr, opBrIf:
			l, err := r.leb()
			if err == nil {
				lbl, err = target(l)
			}
			if err != nil {
				return nil, false, 0, fmt.Errorf("opcode 0x%02x at offset %d: %w", op, at, err)
			}
			switch {
			case !lbl.loop:
			case op == opBrIf && !lbl.params:
				edits = append(edits, edit{kind: editBrIf, at: at, end: r.pos, label: uint32(l), cost: backEdgeCost(lbl.start, at+extra)})
			default: // br, or br_if to a loop with parameters: charge every execution
				edits = append(edits, edit{kind: editCheck, at: at, cost: backEdgeCost(lbl.start, at+extra)})
			}
			continue
		case opBrTable:
			n, err := r.leb()
			var cost int64 // the dearest loop target; 0: no loop target
			for i := uint64(0); err == nil && i <= n; i++ {
				var l uint64
				if l, err = r.leb(); err == nil {
					if lbl, err = target(l); err == nil && lbl.loop {
						cost = max(cost, backEdgeCost(lbl.start, at+extra))
					}
				}
			}
			if err != nil {
				return nil, false, 0, fmt.Errorf("br_table at offset %d: %w", at, err)
			}
			if cost > 0 {
				edits = append(edits, edit{kind: editCheck, at: at, cost: cost})
			}
			continue
		case opCall, opReturnCall, opRefFunc:
			calls = calls || op != opRefFunc
			fn, err := r.leb()
			if err == nil && fn >= uint64(lim.funcs) {
				err = fmt.Errorf("function index %d out of range (%d functions)", fn, lim.funcs)
			}
			if err != nil {
				return nil, false, 0, fmt.Errorf("opcode 0x%02x at offset %d: %w", op, at, err)
			}
			if op != opRefFunc && lim.callWeight != nil {
				extra += lim.callWeight(uint32(fn))
			}
			if lim.meteredImport != nil && lim.meteredImport(uint32(fn)) {
				if op == opRefFunc {
					return nil, false, 0, fmt.Errorf("ref.func at offset %d: metered import %d may only be called directly", at, fn)
				}
				edits = append(edits, edit{kind: editImportCall, at: at, fn: uint32(fn)})
			}
			continue
		case opGlobalGet, opGlobalSet:
			g, err := r.leb()
			if err == nil && g >= uint64(lim.globals) {
				err = fmt.Errorf("global index %d out of range (%d globals)", g, lim.globals)
			}
			if err != nil {
				return nil, false, 0, fmt.Errorf("opcode 0x%02x at offset %d: %w", op, at, err)
			}
			continue
		case opCallIndirect, opReturnCallIndirect:
			calls = true
			extra += CodeBytesPerUnit // the largest function not metered at entry
		case opPrefix:
			save := r.pos
			sub, err := r.leb()
			if err != nil {
				return nil, false, 0, fmt.Errorf("opcode 0x%02x at offset %d: %w", op, at, err)
			}
			r.pos = save
			switch sub {
			case 8, 10, 11, 12, 14, 15, 17: // memory.init/copy/fill, table.init/copy/grow/fill
				edits = append(edits, edit{kind: editBulk, at: at})
			}
		}
		if err := skipImmediates(r, op); err != nil {
			return nil, false, 0, fmt.Errorf("opcode 0x%02x at offset %d: %w", op, at, err)
		}
	}
	if len(stack) != 0 {
		return nil, false, 0, errors.New("function body does not end its blocks")
	}
	return edits, calls, len(body) + extra, nil
}

// skipImmediates advances r over the immediates of the instruction op.
func skipImmediates(r *reader, op byte) error {
	switch {
	case op == 0x00 || op == 0x01 || op == 0x05 || op == 0x0b || op == 0x0f || op == 0x1a || op == 0x1b:
		return nil // unreachable nop else end return drop select
	case op >= 0x02 && op <= 0x04:
		_, err := r.leb() // block type: 0x40, a value type or an s33 type index
		return err
	case op == 0x0c || op == 0x0d || op == 0x10 || op == 0x12:
		_, err := r.leb() // br br_if call return_call
		return err
	case op == 0x0e: // br_table
		n, err := r.leb()
		if err != nil {
			return err
		}
		return r.lebs(int(n) + 1)
	case op == 0x11 || op == 0x13: // call_indirect return_call_indirect: type, table
		return r.lebs(2)
	case op == 0x1c: // select t*
		n, err := r.leb()
		if err != nil {
			return err
		}
		return r.skip(int(n))
	case op >= 0x20 && op <= 0x26: // locals, globals, table.get/set
		_, err := r.leb()
		return err
	case op >= 0x28 && op <= 0x3e: // loads and stores: memarg
		return r.lebs(2)
	case op == 0x3f || op == 0x40: // memory.size memory.grow: memory index
		_, err := r.leb()
		return err
	case op == 0x41 || op == 0x42: // i32.const i64.const
		_, err := r.leb()
		return err
	case op == 0x43:
		return r.skip(4)
	case op == 0x44:
		return r.skip(8)
	case op >= 0x45 && op <= 0xc4: // numeric, sign extension
		return nil
	case op == 0xd0: // ref.null t
		return r.skip(1)
	case op == 0xd1: // ref.is_null
		return nil
	case op == 0xd2: // ref.func
		_, err := r.leb()
		return err
	case op == opPrefix:
		return skipPrefixed(r)
	case op == opSIMD:
		return skipSIMD(r)
	case op == opAtomic:
		return skipAtomic(r)
	}
	return errors.New("unknown opcode")
}

// skipPrefixed handles the 0xfc family.
func skipPrefixed(r *reader) error {
	sub, err := r.leb()
	if err != nil {
		return err
	}
	switch {
	case sub <= 7: // trunc_sat
		return nil
	case sub == 8: // memory.init data mem
		return r.lebs(2)
	case sub == 9: // data.drop
		return r.lebs(1)
	case sub == 10: // memory.copy mem mem
		return r.lebs(2)
	case sub == 11: // memory.fill mem
		return r.lebs(1)
	case sub == 12 || sub == 14: // table.init, table.copy
		return r.lebs(2)
	case sub == 13 || (sub >= 15 && sub <= 17): // elem.drop table.grow table.size table.fill
		return r.lebs(1)
	}
	return fmt.Errorf("unknown 0xfc sub-opcode %d", sub)
}

// skipSIMD handles the 0xfd family (fixed-width SIMD).
func skipSIMD(r *reader) error {
	sub, err := r.leb()
	if err != nil {
		return err
	}
	switch {
	case sub <= 11 || sub == 92 || sub == 93: // v128 loads and stores: memarg
		return r.lebs(2)
	case sub == 12 || sub == 13: // v128.const, i8x16.shuffle
		return r.skip(16)
	case sub >= 21 && sub <= 34: // extract_lane, replace_lane
		return r.skip(1)
	case sub >= 84 && sub <= 91: // load_lane, store_lane: memarg, lane
		if err := r.lebs(2); err != nil {
			return err
		}
		return r.skip(1)
	case sub <= 275:
		return nil // all other SIMD instructions have no immediates
	}
	return fmt.Errorf("unknown 0xfd sub-opcode %d", sub)
}

// skipAtomic handles the 0xfe family (threads).
func skipAtomic(r *reader) error {
	sub, err := r.leb()
	if err != nil {
		return err
	}
	switch {
	case sub == 3: // atomic.fence: one reserved byte
		return r.skip(1)
	case sub <= 2 || (sub >= 0x10 && sub <= 0x4e):
		return r.lebs(2)
	}
	return fmt.Errorf("unknown 0xfe sub-opcode %d", sub)
}
