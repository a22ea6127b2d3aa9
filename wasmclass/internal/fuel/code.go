package fuel

import "github.com/persephone-go/psp/wasmclass/internal/wasmbin"

// Instruction sequences the rewrite inserts.

const (
	opLocalGet = 0x20
	opLocalSet = 0x21
	opLocalTee = 0x22
	opI32Const = 0x41
	opI64Const = 0x42
	opI32GtU   = 0x4b
	opI32LtU   = 0x49
	opI32Ne    = 0x47
	opI64LtS   = 0x53
	opI32Add   = 0x6a
	opI64Add   = 0x7c
	opI64Sub   = 0x7d
	opI64Mul   = 0x7e
	opI64ShrU  = 0x88
	opI64ExtU  = 0xad
	opSelect   = 0x1b
)

func appendIdx(b []byte, op byte, idx uint32) []byte {
	return wasmbin.AppendU32(append(b, op), idx)
}

func appendI64(b []byte, v int64) []byte {
	return wasmbin.AppendS64(append(b, opI64Const), v)
}

func appendI32(b []byte, v uint32) []byte {
	return wasmbin.AppendS64(append(b, opI32Const), int64(int32(v)))
}

// appendCheck charges a constant (one read of the tank):
//
//	global.get $tank  i64.const cost  <charge>
func appendCheck(b []byte, lay layout, s64 uint32, cost int64) []byte {
	b = appendIdx(b, opGlobalGet, lay.tank)
	b = appendI64(b, cost)
	return appendCharge(b, lay, s64)
}

// appendCharge, with the tank and a cost on the stack:
//
//	i64.sub  local.tee $s64  global.set $tank
//	local.get $s64  i64.const 0  i64.lt_s  if  unreachable  end
func appendCharge(b []byte, lay layout, s64 uint32) []byte {
	b = append(b, opI64Sub)
	b = appendIdx(b, opLocalTee, s64)
	b = appendIdx(b, opGlobalSet, lay.tank)
	b = appendIdx(b, opLocalGet, s64)
	return append(b, opI64Const, 0, opI64LtS, opIf, 0x40, opUnreachable, opEnd)
}

// appendYieldCheck, at the entry of a function that keeps the stack
// account (after its charge), calls $yield each time the tank has gone
// down by another SliceUnits since the call from the host began:
//
//	global.get $tank  global.get $mark  i64.lt_s  if  call $yield  end
//
// A call (or memory.grow) in a check, even on its cold path, makes the
// compiler keep registers across it, which costs more than the checks
// themselves (measured: +6% on the C RESP classifier for one at a function
// entry, +14% at back edges); so only these entries, rarely per-packet
// code, have one.
func appendYieldCheck(b []byte, lay layout) []byte {
	b = appendIdx(b, opGlobalGet, lay.tank)
	b = appendIdx(b, opGlobalGet, lay.mark)
	b = append(b, opI64LtS, opIf, 0x40)
	b = appendIdx(b, opCall, lay.yield)
	return append(b, opEnd)
}

// appendYieldFunc is the body of $yield: it moves the mark down by a
// slice and exits to the host with a memory.grow of 0 pages, where the Go
// runtime can stop the goroutine for a garbage collection (compiled code
// cannot be interrupted) and the time-limit watchdog can run.
//
//	global.get $mark  i64.const SliceUnits  i64.sub  global.set $mark
//	i32.const 0  memory.grow 0  drop
func appendYieldFunc(lay layout) []byte {
	var b []byte
	b = appendIdx(b, opGlobalGet, lay.mark)
	b = appendI64(b, SliceUnits)
	b = append(b, opI64Sub)
	b = appendIdx(b, opGlobalSet, lay.mark)
	if lay.memory {
		b = appendI32(b, 0)
		b = append(b, opMemoryGrow, 0, 0x1a)
	}
	return append(b, opEnd)
}

// appendSizedUnits pushes s's charge (an i64) for the i32 in local n32.
func appendSizedUnits(b []byte, n32 uint32, s Sized) []byte {
	b = appendIdx(b, opLocalGet, n32)
	if s.Cap != 0 { // select(n, cap, n < cap)
		b = appendI32(b, s.Cap)
		b = appendIdx(b, opLocalGet, n32)
		b = appendI32(b, s.Cap)
		b = append(b, opI32LtU, opSelect)
	}
	b = append(b, opI64ExtU)
	if s.Mul != 1 {
		b = appendI64(b, s.Mul)
		b = append(b, opI64Mul)
	}
	if s.Shift != 0 {
		b = appendI64(b, int64(s.Shift))
		b = append(b, opI64ShrU)
	}
	if s.Base != 0 {
		b = appendI64(b, s.Base)
		b = append(b, opI64Add)
	}
	return b
}

// appendSized charges s for the size on top of the stack, which it leaves
// in place:
//
//	local.tee $n32  global.get $tank  <units of $n32>  <charge>
func appendSized(b []byte, lay layout, l *locals, s Sized) []byte {
	b = appendIdx(b, opLocalTee, l.n32)
	b = appendIdx(b, opGlobalGet, lay.tank)
	b = appendSizedUnits(b, l.n32, s)
	return appendCharge(b, lay, l.s64)
}

// appendImportCharge charges a call to an import by one of its arguments,
// with the arguments on the stack: they are saved to locals base.., the
// charge is taken, and they are pushed back.
func appendImportCharge(b []byte, lay layout, l *locals, base uint32, ic importCost) []byte {
	for p := len(ic.params) - 1; p >= 0; p-- {
		b = appendIdx(b, opLocalSet, base+uint32(p))
	}
	b = appendIdx(b, opGlobalGet, lay.tank)
	b = appendSizedUnits(b, base+uint32(ic.Param), ic.PerArg)
	b = appendCharge(b, lay, l.s64)
	for p := range ic.params {
		b = appendIdx(b, opLocalGet, base+uint32(p))
	}
	return b
}

// appendStackEnter adds a frame to the stack account, trapping past the
// limit, and keeps the previous account in $sp for the exit:
//
//	global.get $stack  local.tee $sp  i32.const frame  i32.add  local.tee $n32
//	global.set $stack  local.get $n32  i32.const limit  i32.gt_u  if unreachable end
func appendStackEnter(b []byte, stack uint32, l *locals, frame, limit uint32) []byte {
	b = appendIdx(b, opGlobalGet, stack)
	b = appendIdx(b, opLocalTee, l.sp)
	b = appendI32(b, frame)
	b = append(b, opI32Add)
	b = appendIdx(b, opLocalTee, l.n32)
	b = appendIdx(b, opGlobalSet, stack)
	b = appendIdx(b, opLocalGet, l.n32)
	b = appendI32(b, limit)
	return append(b, opI32GtU, opIf, 0x40, opUnreachable, opEnd)
}

// appendRefill starts a call from the host: a full tank, the yield mark a
// slice below, an empty stack account, one more call.
func appendRefill(b []byte, lay layout, budget uint64) []byte {
	b = appendI64(b, int64(budget))
	b = appendIdx(b, opGlobalSet, lay.tank)
	b = appendI64(b, int64(budget)-SliceUnits)
	b = appendIdx(b, opGlobalSet, lay.mark)
	b = appendI32(b, 0)
	b = appendIdx(b, opGlobalSet, lay.sp)
	b = appendIdx(b, opGlobalGet, lay.calls)
	b = appendI64(b, 1)
	b = append(b, opI64Add)
	return appendIdx(b, opGlobalSet, lay.calls)
}

// appendGrow replaces memory.grow (the instruction's bytes in grow) by a
// growth charged after the fact, for the pages it added:
//
//	local.tee $n32  memory.grow  local.tee $r32  global.get $tank
//	local.get $n32  i32.const 0  local.get $r32  i32.const -1  i32.ne  select
//	<units>  <charge>
func appendGrow(b []byte, lay layout, l *locals, grow []byte, s Sized) []byte {
	b = appendIdx(b, opLocalTee, l.n32)
	b = append(b, grow...)
	b = appendIdx(b, opLocalTee, l.r32)
	b = appendIdx(b, opGlobalGet, lay.tank)
	b = appendIdx(b, opLocalGet, l.n32)
	b = appendI32(b, 0)
	b = appendIdx(b, opLocalGet, l.r32)
	b = appendI32(b, 0xffffffff)
	b = append(b, opI32Ne, opSelect)
	b = appendIdx(b, opLocalSet, l.n32)
	b = appendSizedUnits(b, l.n32, s)
	return appendCharge(b, lay, l.s64)
}

// SliceUnits is how much fuel a call spends between two exits to the host
// in functions that keep the stack account (see appendYieldCheck).
const SliceUnits = 1 << 16
