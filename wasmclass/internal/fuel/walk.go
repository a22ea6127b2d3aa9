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
	opLoop   = 0x03
	opPrefix = 0xfc // saturating conversions, bulk memory, tables
	opSIMD   = 0xfd
	opAtomic = 0xfe
)

// walk calls onLoop with the offset just past the block type of every loop
// instruction of body (the loop header, where each iteration starts), in
// order. It decodes every instruction's immediates, so that bytes inside
// immediates are never mistaken for opcodes, and fails on an opcode it does
// not know: the host then refuses the module rather than leaving a loop
// unmetered.
func walk(body []byte, onLoop func(off int)) error {
	r := &reader{b: body}
	for r.pos < len(r.b) {
		at := r.pos
		op, _ := r.byte()
		if err := skipImmediates(r, op); err != nil {
			return fmt.Errorf("opcode 0x%02x at offset %d: %w", op, at, err)
		}
		if op == opLoop {
			onLoop(r.pos)
		}
	}
	return nil
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
