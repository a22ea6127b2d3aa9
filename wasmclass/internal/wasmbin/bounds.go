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
	// The following are checked by the instruction walker (package fuel).
	Nesting       int // depth of nested blocks, loops and ifs in a body
	BrTable       int // targets of one br_table
	BrTableTotal  int // targets of all br_tables of the module
	LocalsXBlocks int // locals times control instructions of one function
}

// Default bounds. They admit every example classifier with room to spare
// (Go's wasip1 runtime is the largest: 1,300 functions, bodies up to
// 12 KB, 17 locals, blocks nested 359 deep, 43,000 br_table targets).
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
	Nesting:        1024,
	BrTable:        1 << 14,
	BrTableTotal:   1 << 18,
	LocalsXBlocks:  1 << 20,
}

func (b Bounds) withDefaults() Bounds {
	d := DefaultBounds
	for _, f := range []struct{ v, dflt *int }{
		{&b.Types, &d.Types}, {&b.TypeArity, &d.TypeArity}, {&b.Imports, &d.Imports},
		{&b.Functions, &d.Functions}, {&b.Tables, &d.Tables}, {&b.Globals, &d.Globals},
		{&b.Exports, &d.Exports}, {&b.Elements, &d.Elements}, {&b.ElementEntries, &d.ElementEntries},
		{&b.DataSegments, &d.DataSegments}, {&b.CustomSections, &d.CustomSections},
		{&b.Locals, &d.Locals}, {&b.FunctionBytes, &d.FunctionBytes}, {&b.Nesting, &d.Nesting},
		{&b.BrTable, &d.BrTable}, {&b.BrTableTotal, &d.BrTableTotal}, {&b.LocalsXBlocks, &d.LocalsXBlocks},
	} {
		if *f.v <= 0 {
			*f.v = *f.dflt
		}
	}
	return b
}

// WithDefaults returns b with zero fields set to DefaultBounds'.
func (b Bounds) WithDefaults() Bounds { return b.withDefaults() }
