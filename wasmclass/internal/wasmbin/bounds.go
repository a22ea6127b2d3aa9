package wasmbin

// Bounds are the structural limits Decode checks. Zero fields take the
// defaults below. They bound what a module costs to decode, instrument
// and compile (compilation time and memory grow with functions, locals,
// nesting, br_table targets and code size, some super-linearly).
type Bounds struct {
	Types          int // function types
	TypeArity      int // parameters or results of one type
	Imports        int
	Functions      int // functions defined in the module
	Tables         int
	Globals        int
	Exports        int
	Elements       int // element segments
	ElementEntries int // entries of all element segments
	DataSegments   int
	CustomSections int
	Locals         int // locals declared by one function (parameters excluded)
	FunctionBytes  int // bytes of one function body
	CodeBytes      int // bytes of all function bodies
	// The following are checked by the instruction walker (package fuel).
	Nesting       int // depth of nested blocks, loops and ifs in a body
	BrTable       int // targets of one br_table
	BrTableTotal  int // targets of all br_tables of the module
	LocalsXBlocks int // locals times control instructions of one function
	Blocks        int // control instructions (block, loop, if) of one function
	// BlocksSquared bounds the sum over functions of their control
	// instructions squared: wazero's compile time grows with the square of
	// a function's blocks.
	BlocksSquared int
	Calls         int // direct calls in all function bodies
}

// Default bounds. They admit every example classifier with room to spare
// (Go's wasip1 runtime is the largest: 1,300 functions, 1.15 MB of code,
// bodies up to 12 KB, 17 locals, blocks nested 359 deep, at most 385 blocks
// in a function and 2.6 million blocks squared in all, 11,600 direct calls,
// 43,000 br_table targets). Within them the slowest modules we built
// compile in about 10 s and the largest are refused by the compile child's
// memory limit (wasmclass BenchmarkLoadWorst).
var DefaultBounds = Bounds{
	Types:          10_000,
	TypeArity:      1_000,
	Imports:        100,
	Functions:      50_000,
	Tables:         16,
	Globals:        10_000,
	Exports:        1_000,
	Elements:       1_000,
	ElementEntries: 1 << 20,
	DataSegments:   100_000,
	CustomSections: 100,
	Locals:         2_000,
	FunctionBytes:  256 << 10,
	CodeBytes:      4 << 20,
	Nesting:        1024,
	BrTable:        1 << 14,
	BrTableTotal:   1 << 16,
	LocalsXBlocks:  1 << 20,
	Blocks:         4096,
	BlocksSquared:  1 << 24,
	Calls:          1 << 17,
}

func (b Bounds) withDefaults() Bounds {
	d := DefaultBounds
	for _, f := range []struct{ v, dflt *int }{
		{&b.Types, &d.Types}, {&b.TypeArity, &d.TypeArity}, {&b.Imports, &d.Imports},
		{&b.Functions, &d.Functions}, {&b.Tables, &d.Tables}, {&b.Globals, &d.Globals},
		{&b.Exports, &d.Exports}, {&b.Elements, &d.Elements}, {&b.ElementEntries, &d.ElementEntries},
		{&b.DataSegments, &d.DataSegments}, {&b.CustomSections, &d.CustomSections},
		{&b.Locals, &d.Locals}, {&b.FunctionBytes, &d.FunctionBytes}, {&b.CodeBytes, &d.CodeBytes}, {&b.Nesting, &d.Nesting},
		{&b.BrTable, &d.BrTable}, {&b.BrTableTotal, &d.BrTableTotal}, {&b.LocalsXBlocks, &d.LocalsXBlocks},
		{&b.Blocks, &d.Blocks}, {&b.BlocksSquared, &d.BlocksSquared}, {&b.Calls, &d.Calls},
	} {
		if *f.v <= 0 {
			*f.v = *f.dflt
		}
	}
	return b
}

// WithDefaults returns b with zero fields set to DefaultBounds'.
func (b Bounds) WithDefaults() Bounds { return b.withDefaults() }
