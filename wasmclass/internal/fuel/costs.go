package fuel

// Ticks are the unit of the static cost model: a fuel unit is TicksPerUnit
// ticks. The instrumentation adds up the ticks of the code a check pays for
// and charges ceil(ticks / TicksPerUnit) units, at least one.
const TicksPerUnit = 16

// Costs is the cost model: the time each kind of instruction may take,
// in ticks, measured against the cheapest loop iteration (one unit). The
// host's adversarial benchmark (wasmclass BenchmarkAdversarial) checks the
// model: for every instruction class and host call, a loop made of the
// dearest instructions of that class must not cost more than twice an
// empty loop per unit of fuel.
type Costs struct {
	// Op is the weight of each one-byte opcode; Prefixed of each 0xfc
	// sub-opcode; SIMD of each 0xfd sub-opcode (index 0..SIMDOps-1).
	Op       [256]int64
	Prefixed [18]int64
	SIMD     [SIMDOps]int64
	// BackEdge is what a loop iteration costs beyond its instructions
	// (the fuel check and the branch). An empty loop costs this much.
	BackEdge int64
	// Entry is a function entry beyond its instructions; PerLocal is added
	// per declared local (the engine zeroes them).
	Entry, PerLocal int64
	// SpillSlot is what a call costs per value its caller may keep live
	// across it (parameters, locals and the operand stack below the
	// arguments): the compiled code stores each to the stack and loads it
	// back.
	SpillSlot int64
	// StackByte is what a function that keeps the call-stack account pays
	// at entry per byte of its frame estimate (and of the chain of frames
	// below it that it answers for): a deep call grows the stack, which on
	// an instance's first deep call means allocating, zeroing and copying
	// it. It also bounds the stack account: a budget buys at most
	// Budget*TicksPerUnit/StackByte bytes of estimated frames.
	StackByte int64
	// Leaf is the largest weight of a function that calls nothing and is
	// not metered at entry: its callers pay for it at the call site.
	// call_indirect is charged as a call to such a leaf.
	Leaf int64
	// Sized charges, computed at run time from an operand.
	Bulk       Sized // memory.fill, memory.copy, memory.init: by bytes
	TableBulk  Sized // table.fill, table.copy, table.init: by elements
	MemoryGrow Sized // by pages (capped at the memory limit)
	TableGrow  Sized // by elements (capped at the table limit)
}

// SIMDOps is the number of 0xfd sub-opcodes the walker knows.
const SIMDOps = 276

// Sized is a charge that grows with an operand x: Base + (min(x, Cap) *
// Mul) >> Shift units. Cap 0 means no cap.
type Sized struct {
	Base       int64
	Mul        int64
	Shift      uint8
	Cap        uint32
	fixedTicks int64 // part charged statically with the surrounding code
}

// units returns the charge for x, as the instrumented code computes it.
func (s Sized) units(x uint32) int64 {
	if s.Cap != 0 && x > s.Cap {
		x = s.Cap
	}
	return s.Base + (int64(x)*s.Mul)>>s.Shift
}

// DefaultCosts returns the cost model measured on the project's machines
// (see BenchmarkAdversarial in wasmclass), for a memory of memoryPages
// pages at most and tables of tableElements elements at most.
func DefaultCosts(memoryPages, tableElements uint32) *Costs {
	c := &Costs{
		BackEdge:  16,
		Entry:     24,
		PerLocal:  1,
		Leaf:      320,
		SpillSlot: 10,
		StackByte: 32,
	}
	// Everything not listed: a register or stack-slot operation.
	for i := range c.Op {
		c.Op[i] = 5 // one cycle of latency or so
	}
	set := func(w int64, ops ...int) {
		for _, op := range ops {
			c.Op[op] = w
		}
	}
	setRange := func(w int64, from, to int) {
		for op := from; op <= to; op++ {
			c.Op[op] = w
		}
	}
	set(1, 0x01, 0x02, 0x0b, 0x05) // nop block end else
	set(0, 0x03, 0x0c, 0x0d)       // loop br br_if: part of BackEdge
	set(0, 0x20, 0x21, 0x22)       // locals: registers or stack slots
	// Memory: a load or store that misses the caches. The dearest pattern
	// is a dependent chain of loads spread over the whole memory.
	mem := memoryCost(memoryPages)
	setRange(mem, 0x28, 0x3e)
	set(8, 0x23, 0x24)  // global.get/set: through the module context
	set(8, 0x25, 0x26)  // table.get/set
	set(6, 0x3f)        // memory.size
	set(20, 0x0e)       // br_table: a bounds check and an indirect jump
	set(40, 0x10, 0x12) // call: a frame, spills, a stack check
	set(80, 0x11, 0x13) // call_indirect: table and type checks on top
	// Measured (BenchmarkAdversarial): dependent chains of these take
	// several nanoseconds each on the project's machines.
	set(12, 0x6c, 0x7e, 0x94, 0xa2)                         // multiplications
	set(32, 0x6d, 0x6e, 0x6f, 0x70)                         // i32 div/rem
	set(88, 0x7f, 0x80, 0x81, 0x82)                         // i64 div/rem
	set(72, 0x95, 0xa3)                                     // f32.div f64.div
	set(80, 0x91, 0x9f)                                     // f32.sqrt f64.sqrt
	set(12, 0x96, 0x97, 0xa4, 0xa5)                         // min/max: NaN and zero-sign handling
	setRange(8, 0xa8, 0xb1)                                 // float to int: range checks
	set(48, 0x8d, 0x8e, 0x8f, 0x90, 0x9b, 0x9c, 0x9d, 0x9e) // ceil floor trunc nearest
	// 0xfc sub-opcodes: saturating conversions; bulk operations are
	// charged at run time (Sized) on top of these.
	for i := range c.Prefixed {
		c.Prefixed[i] = 4
	}
	// SIMD: most lanes operations are one or two instructions; a few
	// (shuffles, 64-bit multiplies, conversions, popcounts) are sequences.
	for i := range c.SIMD {
		c.SIMD[i] = 8
	}
	for i := 0; i <= 11; i++ {
		c.SIMD[i] = mem // loads and stores
	}
	for i := 84; i <= 93; i++ {
		c.SIMD[i] = mem
	}
	for _, i := range []int{13, 14, 98, 0xde, 0xdd, 0xd5, 0xfa, 0xfb, 0xfc, 0xfd, 0xfe, 0xff, 0x100, 0x101, 0x102, 0x103,
		0xe3, 0xef, 0xf4, 0xf5, 0xf6, 0xf7, 0x5e, 0x5f, 0x67, 0x68, 0x69, 0x6a, 0x74, 0x75, 0x7a, 0x7c, 0x7d, 0x7e, 0x7f,
		0x80, 0x81, 0x82, 0x83, 0x84, 0x85, 0x86, 0x87, 0x88, 0x89, 0x8a, 0x8b, 0x8c, 0x8d, 0x8e, 0x8f, 0x90, 0x91,
		0x94, 0x95, 0x96, 0x97, 0x9b, 0x9c, 0x9d, 0x9e, 0x9f, 0xa0, 0xa1, 0xa4, 0xa7, 0xa8, 0xab, 0xac, 0xad, 0xae, 0xaf,
		0xb0, 0xb1, 0xb3, 0xb5, 0xb6, 0xb7, 0xb8, 0xb9, 0xba, 0xbc, 0xbd, 0xbe, 0xbf, 0xc0, 0xc1, 0xc3, 0xc4, 0xc7,
		0xc8, 0xc9, 0xcb, 0xcc, 0xcd, 0xce, 0xcf, 0xd0, 0xd1, 0xd2, 0xd3, 0xd4, 0xd6, 0xd7, 0xd8, 0xd9, 0xda, 0xdb,
		0xdc, 0xe0, 0xe1, 0xe4, 0xe5, 0xe6, 0xe7, 0xe8, 0xe9, 0xea, 0xeb, 0xec, 0xed, 0xee, 0xf0, 0xf1, 0xf2, 0xf3,
		0xf8, 0xf9} {
		if i < len(c.SIMD) {
			c.SIMD[i] = 32
		}
	}
	// Square roots, divisions and roundings of lanes: as the scalar ones.
	for _, i := range []int{0xe3, 0xe7, 0xef, 0xf3} {
		c.SIMD[i] = 80
	}
	for _, i := range []int{0x67, 0x68, 0x69, 0x6a, 0x74, 0x75, 0x7a, 0x94} {
		c.SIMD[i] = 48
	}
	c.Bulk = Sized{Base: 4, Mul: 3, Shift: 3}                   // 8 bytes per 3 units
	c.TableBulk = Sized{Base: 4, Mul: 1, Shift: 1}              // 2 elements a unit
	c.MemoryGrow = Sized{Base: 60, Mul: 4096, Cap: memoryPages} // a page is zeroed: 64 KiB
	c.TableGrow = Sized{Base: 60, Mul: 1, Shift: 1, Cap: tableElements}
	return c
}

// memoryCost is the weight of a load or store in a memory of pages pages:
// a miss in the caches the memory does not fit in.
func memoryCost(pages uint32) int64 {
	switch bytes := uint64(pages) << 16; {
	case bytes <= 1<<20: // fits a core's cache
		return 64
	case bytes <= 8<<20: // misses the core's cache: ~7 ns a dependent load
		return 128
	case bytes <= 64<<20:
		return 256
	default: // main memory: ~100 ns
		return 1600
	}
}

// weight returns the ticks of the instruction at the start of body (op and
// its sub-opcode for the prefixed families).
func (c *Costs) weight(op byte, sub uint32) int64 {
	switch op {
	case opPrefix:
		if int(sub) < len(c.Prefixed) {
			return c.Prefixed[sub]
		}
		return 16
	case opSIMD:
		if int(sub) < len(c.SIMD) {
			return c.SIMD[sub]
		}
		return 16
	case opAtomic:
		return 16
	}
	return c.Op[op]
}

// ticksToUnits rounds ticks up to whole units, at least one.
func ticksToUnits(t int64) int64 {
	return max(1, (t+TicksPerUnit-1)/TicksPerUnit)
}
