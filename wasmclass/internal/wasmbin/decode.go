// Package wasmbin decodes and encodes the module structure of WebAssembly
// 2.0 binaries, for a host that rewrites function bodies.
//
// Decode checks structural limits while it reads (Limits), so that a small
// binary cannot make it allocate much: every count is checked against its
// limit and against the bytes left before anything is allocated for it.
// Sections the rewriter does not change (tables, elements, data) keep their
// bytes and are only parsed enough to check them; Encode writes them back
// verbatim, so every element and data segment form survives untouched.
//
// Decode never panics on any input; Encode never panics on a Module that
// Decode returned and the caller changed only as the field docs allow.
// Neither validates everything: instruction typing is left to the compiler.
package wasmbin

import (
	"errors"
	"fmt"
	"unicode/utf8"
)

// Section ids.
const (
	SecCustom    = 0
	SecType      = 1
	SecImport    = 2
	SecFunction  = 3
	SecTable     = 4
	SecMemory    = 5
	SecGlobal    = 6
	SecExport    = 7
	SecStart     = 8
	SecElement   = 9
	SecCode      = 10
	SecData      = 11
	SecDataCount = 12
)

// Value types.
const (
	I32       = 0x7f
	I64       = 0x7e
	F32       = 0x7d
	F64       = 0x7c
	V128      = 0x7b
	FuncRef   = 0x70
	ExternRef = 0x6f
)

// External kinds (imports and exports).
const (
	KindFunc   = 0
	KindTable  = 1
	KindMemory = 2
	KindGlobal = 3
)

// KindName names an external kind.
func KindName(k byte) string {
	switch k {
	case KindFunc:
		return "func"
	case KindTable:
		return "table"
	case KindMemory:
		return "memory"
	case KindGlobal:
		return "global"
	}
	return fmt.Sprintf("kind 0x%02x", k)
}

// ValueTypeName names a value type.
func ValueTypeName(t byte) string {
	switch t {
	case I32:
		return "i32"
	case I64:
		return "i64"
	case F32:
		return "f32"
	case F64:
		return "f64"
	case V128:
		return "v128"
	case FuncRef:
		return "funcref"
	case ExternRef:
		return "externref"
	}
	return fmt.Sprintf("type 0x%02x", t)
}

// Module is a decoded module. Fields marked "rewritable" may be changed
// before Encode; the others are written back as they were read.
type Module struct {
	Types     []FuncType // rewritable: append only
	Imports   []Import
	Functions []uint32 // type index of each function defined here; rewritable: append only
	Tables    []Table  // rewritable: limits
	Memories  []Limits
	Globals   []Global // rewritable: append only
	Exports   []Export // rewritable
	Start     *uint32  // rewritable
	Elements  []Element
	DataCount *uint32
	Code      []Code // rewritable: bodies and locals; append only
	Data      []Data
	Customs   []Custom // rewritable: may be dropped

	elementRaw []byte // the element section's payload
	dataRaw    []byte // the data section's payload
}

// FuncType is a function type.
type FuncType struct {
	Params, Results []byte
}

// Import is an imported entity. Only functions carry a Type; other kinds
// keep their description's bytes.
type Import struct {
	Module, Name string
	Kind         byte
	Type         uint32 // KindFunc: type index
	desc         []byte // other kinds: the description's bytes
}

// Limits are the limits of a memory or table.
type Limits struct {
	Min    uint32
	Max    uint32
	HasMax bool
}

// Table is a table declaration.
type Table struct {
	RefType byte
	Limits
}

// Global is a global declaration; Init is its constant expression, end
// opcode included.
type Global struct {
	Type    byte
	Mutable bool
	Init    []byte
}

// Export is an exported entity.
type Export struct {
	Name  string
	Kind  byte
	Index uint32
}

// Element is what the host needs of an element segment: its mode, table,
// type and the functions it references (ref.func and index vectors; nil
// for ref.null). The segment's bytes stay in the section.
type Element struct {
	Mode  ElementMode
	Table uint32
	Type  byte
	Funcs []uint32 // functions referenced
	Nulls int      // ref.null entries
}

// ElementMode is an element segment's mode.
type ElementMode byte

// Element segment modes.
const (
	ElemActive ElementMode = iota
	ElemPassive
	ElemDeclarative
)

// Code is a function body: its local declarations and its instructions
// (the final end included).
type Code struct {
	Locals []LocalDecl
	Body   []byte
}

// NumLocals returns the number of locals the body declares.
func (c *Code) NumLocals() uint64 {
	var n uint64
	for _, d := range c.Locals {
		n += uint64(d.Count)
	}
	return n
}

// LocalDecl declares Count locals of Type.
type LocalDecl struct {
	Count uint32
	Type  byte
}

// Data is what the host needs of a data segment.
type Data struct {
	Passive bool
	Memory  uint32
	Size    int
}

// Custom is a custom section, with the id of the known section it followed
// (0 if none), so Encode can keep it in place.
type Custom struct {
	Name  string
	Data  []byte
	After byte
}

// Errors.
var (
	// ErrLimit: the module exceeds a structural limit.
	ErrLimit = errors.New("structural limit exceeded")
	// ErrMalformed: the binary is not a well-formed module.
	ErrMalformed = errors.New("malformed module")
)

// Decode parses bin, checking lim as it goes. Errors wrap ErrLimit or
// ErrMalformed.
func Decode(bin []byte, lim Bounds) (*Module, error) {
	lim = lim.withDefaults()
	if len(bin) < 8 || string(bin[:4]) != "\x00asm" {
		return nil, fmt.Errorf("%w: no \\0asm magic", ErrMalformed)
	}
	if bin[4] != 1 || bin[5] != 0 || bin[6] != 0 || bin[7] != 0 {
		return nil, fmt.Errorf("%w: binary version %x, want 1", ErrMalformed, bin[4:8])
	}
	m := &Module{}
	d := &decoder{lim: lim, m: m}
	r := &Reader{B: bin, Pos: 8}
	var last byte // order of known sections
	var lastKnown byte
	seen := map[byte]bool{}
	for r.Pos < len(r.B) {
		at := r.Pos
		id, err := r.Byte()
		if err != nil {
			return nil, d.malformed(at, err)
		}
		size, err := r.U32()
		if err != nil {
			return nil, d.malformed(at, err)
		}
		if int(size) > len(r.B)-r.Pos {
			return nil, d.malformed(at, fmt.Errorf("section %d of %d bytes past the end", id, size))
		}
		body := &Reader{B: r.B[r.Pos : r.Pos+int(size)]}
		r.Pos += int(size)
		if id == SecCustom {
			if d.customs++; d.customs > lim.CustomSections {
				return nil, fmt.Errorf("%w: more than %d custom sections", ErrLimit, lim.CustomSections)
			}
			name, err := body.Name()
			if err != nil {
				return nil, d.malformed(at, fmt.Errorf("custom section name: %w", err))
			}
			m.Customs = append(m.Customs, Custom{Name: name, Data: body.B[body.Pos:], After: lastKnown})
			continue
		}
		if id > SecDataCount {
			return nil, d.malformed(at, fmt.Errorf("unknown section id %d", id))
		}
		if seen[id] {
			return nil, d.malformed(at, fmt.Errorf("duplicate section %d", id))
		}
		seen[id] = true
		if order(id) <= order(last) && last != 0 {
			return nil, d.malformed(at, fmt.Errorf("section %d out of order", id))
		}
		last, lastKnown = id, id
		if err := d.section(id, body); err != nil {
			return nil, fmt.Errorf("section %d: %w", id, err)
		}
		if body.Pos != len(body.B) {
			return nil, d.malformed(at, fmt.Errorf("section %d: %d bytes left over", id, len(body.B)-body.Pos))
		}
	}
	if len(m.Functions) != len(m.Code) {
		return nil, fmt.Errorf("%w: %d functions declared, %d bodies", ErrMalformed, len(m.Functions), len(m.Code))
	}
	if m.DataCount != nil && int(*m.DataCount) != len(m.Data) {
		return nil, fmt.Errorf("%w: data count %d, %d segments", ErrMalformed, *m.DataCount, len(m.Data))
	}
	return m, nil
}

// order returns the position of a known section in the binary.
func order(id byte) int {
	if id == SecDataCount {
		return int(SecElement) + 1 // between element and code
	}
	if id >= SecCode {
		return int(id) + 1
	}
	return int(id)
}

type decoder struct {
	lim     Bounds
	m       *Module
	customs int
}

func (d *decoder) malformed(at int, err error) error {
	return fmt.Errorf("%w: at byte %d: %w", ErrMalformed, at, err)
}

// count reads a vector length and checks it against a limit and the bytes
// left (each entry takes at least minBytes).
func (d *decoder) count(r *Reader, what string, limit int, minBytes int) (int, error) {
	n, err := r.U32()
	if err != nil {
		return 0, fmt.Errorf("%w: %s count: %w", ErrMalformed, what, err)
	}
	if uint64(n) > uint64(limit) {
		return 0, fmt.Errorf("%w: %d %s, limit is %d", ErrLimit, n, what, limit)
	}
	if uint64(n)*uint64(minBytes) > uint64(len(r.B)-r.Pos) {
		return 0, fmt.Errorf("%w: %d %s in %d bytes", ErrMalformed, n, what, len(r.B)-r.Pos)
	}
	return int(n), nil
}

func (d *decoder) section(id byte, r *Reader) error {
	m, lim := d.m, d.lim
	switch id {
	case SecType:
		n, err := d.count(r, "types", lim.Types, 3)
		if err != nil {
			return err
		}
		m.Types = make([]FuncType, n)
		for i := range m.Types {
			if b, err := r.Byte(); err != nil || b != 0x60 {
				return fmt.Errorf("%w: type %d is not a function type", ErrMalformed, i)
			}
			for _, list := range []*[]byte{&m.Types[i].Params, &m.Types[i].Results} {
				k, err := d.count(r, "parameters or results of a type", lim.TypeArity, 1)
				if err != nil {
					return fmt.Errorf("type %d: %w", i, err)
				}
				if *list, err = r.Bytes(k); err != nil {
					return fmt.Errorf("%w: type %d: %w", ErrMalformed, i, err)
				}
				for _, t := range *list {
					if !isValueType(t) {
						return fmt.Errorf("%w: type %d: bad value type 0x%02x", ErrMalformed, i, t)
					}
				}
			}
		}
	case SecImport:
		n, err := d.count(r, "imports", lim.Imports, 4)
		if err != nil {
			return err
		}
		m.Imports = make([]Import, n)
		for i := range m.Imports {
			im := &m.Imports[i]
			if im.Module, err = r.Name(); err == nil {
				im.Name, err = r.Name()
			}
			if err == nil {
				im.Kind, err = r.Byte()
			}
			if err != nil {
				return fmt.Errorf("%w: import %d: %w", ErrMalformed, i, err)
			}
			start := r.Pos
			switch im.Kind {
			case KindFunc:
				im.Type, err = r.U32()
			case KindTable:
				_, err = readTable(r)
			case KindMemory:
				_, err = readLimits(r)
			case KindGlobal:
				_, err = r.Bytes(2)
			default:
				err = fmt.Errorf("bad import kind 0x%02x", im.Kind)
			}
			if err != nil {
				return fmt.Errorf("%w: import %d: %w", ErrMalformed, i, err)
			}
			im.desc = r.B[start:r.Pos]
			if im.Kind == KindFunc && int(im.Type) >= len(m.Types) {
				return fmt.Errorf("%w: import %d: type %d out of range", ErrMalformed, i, im.Type)
			}
		}
	case SecFunction:
		n, err := d.count(r, "functions", lim.Functions, 1)
		if err != nil {
			return err
		}
		m.Functions = make([]uint32, n)
		for i := range m.Functions {
			if m.Functions[i], err = r.U32(); err != nil {
				return fmt.Errorf("%w: function %d: %w", ErrMalformed, i, err)
			}
			if int(m.Functions[i]) >= len(m.Types) {
				return fmt.Errorf("%w: function %d: type %d out of range", ErrMalformed, i, m.Functions[i])
			}
		}
	case SecTable:
		n, err := d.count(r, "tables", lim.Tables, 3)
		if err != nil {
			return err
		}
		m.Tables = make([]Table, n)
		for i := range m.Tables {
			if m.Tables[i], err = readTable(r); err != nil {
				return fmt.Errorf("%w: table %d: %w", ErrMalformed, i, err)
			}
		}
	case SecMemory:
		n, err := d.count(r, "memories", 1, 2)
		if err != nil {
			return err
		}
		m.Memories = make([]Limits, n)
		for i := range m.Memories {
			if m.Memories[i], err = readLimits(r); err != nil {
				return fmt.Errorf("%w: memory %d: %w", ErrMalformed, i, err)
			}
		}
	case SecGlobal:
		n, err := d.count(r, "globals", lim.Globals, 4)
		if err != nil {
			return err
		}
		m.Globals = make([]Global, n)
		for i := range m.Globals {
			g := &m.Globals[i]
			var mut byte
			if g.Type, err = r.Byte(); err == nil {
				mut, err = r.Byte()
			}
			if err == nil && (!isValueType(g.Type) || mut > 1) {
				err = errors.New("bad global type")
			}
			if err == nil {
				g.Mutable = mut == 1
				g.Init, err = readConstExpr(r)
			}
			if err != nil {
				return fmt.Errorf("%w: global %d: %w", ErrMalformed, i, err)
			}
		}
	case SecExport:
		n, err := d.count(r, "exports", lim.Exports, 3)
		if err != nil {
			return err
		}
		m.Exports = make([]Export, n)
		names := make(map[string]bool, n)
		for i := range m.Exports {
			e := &m.Exports[i]
			if e.Name, err = r.Name(); err == nil {
				if e.Kind, err = r.Byte(); err == nil {
					e.Index, err = r.U32()
				}
			}
			if err == nil && e.Kind > KindGlobal {
				err = fmt.Errorf("bad export kind 0x%02x", e.Kind)
			}
			if err == nil && names[e.Name] {
				err = fmt.Errorf("duplicate export %q", e.Name)
			}
			if err != nil {
				return fmt.Errorf("%w: export %d: %w", ErrMalformed, i, err)
			}
			names[e.Name] = true
		}
	case SecStart:
		s, err := r.U32()
		if err != nil {
			return fmt.Errorf("%w: %w", ErrMalformed, err)
		}
		m.Start = &s
	case SecElement:
		m.elementRaw = r.B
		n, err := d.count(r, "element segments", lim.Elements, 2)
		if err != nil {
			return err
		}
		m.Elements = make([]Element, n)
		total := 0
		for i := range m.Elements {
			if err := readElement(r, &m.Elements[i]); err != nil {
				return fmt.Errorf("%w: element segment %d: %w", ErrMalformed, i, err)
			}
			if total += len(m.Elements[i].Funcs) + m.Elements[i].Nulls; total > lim.ElementEntries {
				return fmt.Errorf("%w: element segments hold more than %d entries", ErrLimit, lim.ElementEntries)
			}
		}
	case SecDataCount:
		c, err := r.U32()
		if err != nil {
			return fmt.Errorf("%w: %w", ErrMalformed, err)
		}
		m.DataCount = &c
	case SecCode:
		if len(r.B) > lim.CodeBytes {
			return fmt.Errorf("%w: %d bytes of code, limit is %d", ErrLimit, len(r.B), lim.CodeBytes)
		}
		n, err := d.count(r, "function bodies", lim.Functions, 2)
		if err != nil {
			return err
		}
		m.Code = make([]Code, n)
		for i := range m.Code {
			if err := d.code(r, &m.Code[i]); err != nil {
				return fmt.Errorf("function body %d: %w", i, err)
			}
		}
	case SecData:
		m.dataRaw = r.B
		n, err := d.count(r, "data segments", lim.DataSegments, 2)
		if err != nil {
			return err
		}
		m.Data = make([]Data, n)
		for i := range m.Data {
			if err := readData(r, &m.Data[i]); err != nil {
				return fmt.Errorf("%w: data segment %d: %w", ErrMalformed, i, err)
			}
		}
	}
	return nil
}

// code reads one function body, checking the locals and body size limits.
func (d *decoder) code(r *Reader, c *Code) error {
	size, err := r.U32()
	if err != nil {
		return fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	if int(size) > len(r.B)-r.Pos {
		return fmt.Errorf("%w: body of %d bytes past the end", ErrMalformed, size)
	}
	if int(size) > d.lim.FunctionBytes {
		return fmt.Errorf("%w: body of %d bytes, limit is %d", ErrLimit, size, d.lim.FunctionBytes)
	}
	br := &Reader{B: r.B[r.Pos : r.Pos+int(size)]}
	r.Pos += int(size)
	n, err := d.count(br, "local declarations", d.lim.Locals, 2)
	if err != nil {
		return err
	}
	c.Locals = make([]LocalDecl, n)
	var total uint64
	for i := range c.Locals {
		cnt, err := br.U32()
		if err == nil {
			c.Locals[i].Type, err = br.Byte()
		}
		if err != nil {
			return fmt.Errorf("%w: locals: %w", ErrMalformed, err)
		}
		if !isValueType(c.Locals[i].Type) {
			return fmt.Errorf("%w: local of type 0x%02x", ErrMalformed, c.Locals[i].Type)
		}
		c.Locals[i].Count = cnt
		if total += uint64(cnt); total > uint64(d.lim.Locals) {
			return fmt.Errorf("%w: more than %d locals", ErrLimit, d.lim.Locals)
		}
	}
	c.Body = br.B[br.Pos:]
	if len(c.Body) == 0 || c.Body[len(c.Body)-1] != 0x0b {
		return fmt.Errorf("%w: body does not end with end", ErrMalformed)
	}
	return nil
}

func isValueType(t byte) bool {
	switch t {
	case I32, I64, F32, F64, V128, FuncRef, ExternRef:
		return true
	}
	return false
}

func readLimits(r *Reader) (Limits, error) {
	var l Limits
	flag, err := r.Byte()
	if err != nil {
		return l, err
	}
	if flag > 1 {
		return l, fmt.Errorf("limits flag 0x%02x (shared or 64-bit memories are not supported)", flag)
	}
	if l.Min, err = r.U32(); err != nil {
		return l, err
	}
	if flag == 1 {
		l.HasMax = true
		if l.Max, err = r.U32(); err != nil {
			return l, err
		}
		if l.Max < l.Min {
			return l, fmt.Errorf("maximum %d below minimum %d", l.Max, l.Min)
		}
	}
	return l, nil
}

func readTable(r *Reader) (Table, error) {
	var t Table
	var err error
	if t.RefType, err = r.Byte(); err != nil {
		return t, err
	}
	if t.RefType != FuncRef && t.RefType != ExternRef {
		return t, fmt.Errorf("table of type 0x%02x", t.RefType)
	}
	t.Limits, err = readLimits(r)
	return t, err
}

// readConstExpr reads a constant expression up to and including its end,
// and returns its bytes. Only the instructions of Wasm 2.0 constant
// expressions are accepted.
func readConstExpr(r *Reader) ([]byte, error) {
	start := r.Pos
	for n := 0; ; n++ {
		if n > 64 {
			return nil, errors.New("constant expression too long")
		}
		op, err := r.Byte()
		if err != nil {
			return nil, err
		}
		switch op {
		case 0x0b:
			return r.B[start:r.Pos], nil
		case 0x41, 0x42, 0x23, 0xd2: // i32.const i64.const global.get ref.func
			_, err = r.LEB()
		case 0x43:
			_, err = r.Bytes(4)
		case 0x44:
			_, err = r.Bytes(8)
		case 0xd0: // ref.null t
			_, err = r.Byte()
		case 0xfd: // v128.const
			var sub uint32
			if sub, err = r.U32(); err == nil && sub != 12 {
				err = fmt.Errorf("0xfd %d in a constant expression", sub)
			}
			if err == nil {
				_, err = r.Bytes(16)
			}
		default:
			return nil, fmt.Errorf("opcode 0x%02x in a constant expression", op)
		}
		if err != nil {
			return nil, err
		}
	}
}

// ConstExprRef returns the index a constant expression refers to with
// global.get or ref.func (op is the opcode), if it is one of those.
func ConstExprRef(expr []byte) (op byte, index uint32, ok bool) {
	if len(expr) < 2 || (expr[0] != 0x23 && expr[0] != 0xd2) {
		return 0, 0, false
	}
	r := &Reader{B: expr, Pos: 1}
	v, err := r.U32()
	if err != nil {
		return 0, 0, false
	}
	return expr[0], v, true
}

// readElement parses one element segment of any of the eight forms.
func readElement(r *Reader, e *Element) error {
	flags, err := r.U32()
	if err != nil {
		return err
	}
	if flags > 7 {
		return fmt.Errorf("element segment flags %d", flags)
	}
	passiveOrDecl := flags&1 != 0
	explicitTable := flags&2 != 0
	exprs := flags&4 != 0
	switch {
	case !passiveOrDecl:
		e.Mode = ElemActive
	case explicitTable:
		e.Mode = ElemDeclarative
	default:
		e.Mode = ElemPassive
	}
	if !passiveOrDecl && explicitTable {
		if e.Table, err = r.U32(); err != nil {
			return err
		}
	}
	if !passiveOrDecl {
		if _, err := readConstExpr(r); err != nil {
			return fmt.Errorf("offset: %w", err)
		}
	}
	e.Type = FuncRef
	if passiveOrDecl || explicitTable { // elemkind or reftype
		k, err := r.Byte()
		if err != nil {
			return err
		}
		switch {
		case !exprs && k != 0x00:
			return fmt.Errorf("element kind 0x%02x", k)
		case exprs && k != FuncRef && k != ExternRef:
			return fmt.Errorf("element type 0x%02x", k)
		case exprs:
			e.Type = k
		}
	}
	n, err := r.U32()
	if err != nil {
		return err
	}
	if uint64(n) > uint64(len(r.B)-r.Pos) {
		return fmt.Errorf("%d entries in %d bytes", n, len(r.B)-r.Pos)
	}
	for i := uint32(0); i < n; i++ {
		if !exprs {
			fn, err := r.U32()
			if err != nil {
				return err
			}
			e.Funcs = append(e.Funcs, fn)
			continue
		}
		expr, err := readConstExpr(r)
		if err != nil {
			return err
		}
		switch op, idx, ok := ConstExprRef(expr); {
		case ok && op == 0xd2:
			e.Funcs = append(e.Funcs, idx)
		case expr[0] == 0xd0:
			e.Nulls++
		case ok: // global.get of a reference global
			e.Nulls++
		default:
			return fmt.Errorf("element expression opcode 0x%02x", expr[0])
		}
	}
	return nil
}

// readData parses one data segment of any of the three forms.
func readData(r *Reader, d *Data) error {
	flags, err := r.U32()
	if err != nil {
		return err
	}
	switch flags {
	case 0:
	case 1:
		d.Passive = true
	case 2:
		if d.Memory, err = r.U32(); err != nil {
			return err
		}
	default:
		return fmt.Errorf("data segment flags %d", flags)
	}
	if !d.Passive {
		if _, err := readConstExpr(r); err != nil {
			return fmt.Errorf("offset: %w", err)
		}
	}
	n, err := r.U32()
	if err != nil {
		return err
	}
	if _, err := r.Bytes(int(n)); err != nil {
		return err
	}
	d.Size = int(n)
	return nil
}

// errEOF reports a read past the end.
var errEOF = errors.New("unexpected end")

// Reader reads bytes and LEB128 numbers from B starting at Pos.
type Reader struct {
	B   []byte
	Pos int
}

// Byte reads one byte.
func (r *Reader) Byte() (byte, error) {
	if r.Pos >= len(r.B) {
		return 0, errEOF
	}
	c := r.B[r.Pos]
	r.Pos++
	return c, nil
}

// Bytes returns the next n bytes (a view of B).
func (r *Reader) Bytes(n int) ([]byte, error) {
	if n < 0 || n > len(r.B)-r.Pos {
		return nil, errEOF
	}
	b := r.B[r.Pos : r.Pos+n : r.Pos+n]
	r.Pos += n
	return b, nil
}

// U32 reads an unsigned LEB128 number of at most 32 bits.
func (r *Reader) U32() (uint32, error) {
	var v uint32
	for shift := uint(0); ; shift += 7 {
		c, err := r.Byte()
		if err != nil {
			return 0, err
		}
		if shift == 28 && c&0x70 != 0 {
			return 0, errors.New("u32 overflow")
		}
		v |= uint32(c&0x7f) << shift
		if c&0x80 == 0 {
			return v, nil
		}
		if shift == 28 {
			return 0, errors.New("u32 too long")
		}
	}
}

// LEB skips an LEB128 number of up to 64 bits (signed or not) and returns
// its low bits read as unsigned.
func (r *Reader) LEB() (uint64, error) {
	var v uint64
	for shift := uint(0); shift < 70; shift += 7 {
		c, err := r.Byte()
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

// S64 reads a signed LEB128 number of up to 64 bits.
func (r *Reader) S64() (int64, error) {
	var v int64
	var shift uint
	for {
		c, err := r.Byte()
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

// Name reads a length-prefixed UTF-8 name.
func (r *Reader) Name() (string, error) {
	n, err := r.U32()
	if err != nil {
		return "", err
	}
	b, err := r.Bytes(int(n))
	if err != nil {
		return "", err
	}
	if !utf8.Valid(b) {
		return "", errors.New("name is not UTF-8")
	}
	return string(b), nil
}
