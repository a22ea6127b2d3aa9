package wasmbin

// Encode returns the binary form of m: known sections in the order the
// specification requires, each custom section after the known section it
// followed when decoded, element and data sections byte for byte.
func (m *Module) Encode() []byte {
	out := []byte{0, 'a', 's', 'm', 1, 0, 0, 0}
	out = m.appendCustoms(out, 0)
	for _, id := range []byte{SecType, SecImport, SecFunction, SecTable, SecMemory, SecGlobal, SecExport,
		SecStart, SecElement, SecDataCount, SecCode, SecData} {
		if payload, ok := m.section(id); ok {
			out = append(out, id)
			out = AppendU32(out, uint32(len(payload)))
			out = append(out, payload...)
		}
		out = m.appendCustoms(out, id)
	}
	return out
}

func (m *Module) appendCustoms(out []byte, after byte) []byte {
	for _, c := range m.Customs {
		if c.After != after {
			continue
		}
		var p []byte
		p = appendName(p, c.Name)
		p = append(p, c.Data...)
		out = append(out, SecCustom)
		out = AppendU32(out, uint32(len(p)))
		out = append(out, p...)
	}
	return out
}

// section returns the payload of section id, and false if m has none.
func (m *Module) section(id byte) ([]byte, bool) {
	var p []byte
	switch id {
	case SecType:
		if len(m.Types) == 0 {
			return nil, false
		}
		p = AppendU32(p, uint32(len(m.Types)))
		for _, t := range m.Types {
			p = append(p, 0x60)
			p = AppendU32(p, uint32(len(t.Params)))
			p = append(p, t.Params...)
			p = AppendU32(p, uint32(len(t.Results)))
			p = append(p, t.Results...)
		}
	case SecImport:
		if len(m.Imports) == 0 {
			return nil, false
		}
		p = AppendU32(p, uint32(len(m.Imports)))
		for _, im := range m.Imports {
			p = appendName(p, im.Module)
			p = appendName(p, im.Name)
			p = append(p, im.Kind)
			if im.Kind == KindFunc {
				p = AppendU32(p, im.Type)
			} else {
				p = append(p, im.desc...)
			}
		}
	case SecFunction:
		if len(m.Functions) == 0 {
			return nil, false
		}
		p = AppendU32(p, uint32(len(m.Functions)))
		for _, t := range m.Functions {
			p = AppendU32(p, t)
		}
	case SecTable:
		if len(m.Tables) == 0 {
			return nil, false
		}
		p = AppendU32(p, uint32(len(m.Tables)))
		for _, t := range m.Tables {
			p = append(p, t.RefType)
			p = appendLimits(p, t.Limits)
		}
	case SecMemory:
		if len(m.Memories) == 0 {
			return nil, false
		}
		p = AppendU32(p, uint32(len(m.Memories)))
		for _, l := range m.Memories {
			p = appendLimits(p, l)
		}
	case SecGlobal:
		if len(m.Globals) == 0 {
			return nil, false
		}
		p = AppendU32(p, uint32(len(m.Globals)))
		for _, g := range m.Globals {
			mut := byte(0)
			if g.Mutable {
				mut = 1
			}
			p = append(p, g.Type, mut)
			p = append(p, g.Init...)
		}
	case SecExport:
		if len(m.Exports) == 0 {
			return nil, false
		}
		p = AppendU32(p, uint32(len(m.Exports)))
		for _, e := range m.Exports {
			p = appendName(p, e.Name)
			p = append(p, e.Kind)
			p = AppendU32(p, e.Index)
		}
	case SecStart:
		if m.Start == nil {
			return nil, false
		}
		p = AppendU32(p, *m.Start)
	case SecElement:
		if m.elementRaw == nil {
			return nil, false
		}
		p = m.elementRaw
	case SecDataCount:
		if m.DataCount == nil {
			return nil, false
		}
		p = AppendU32(p, *m.DataCount)
	case SecCode:
		if len(m.Code) == 0 {
			return nil, false
		}
		p = AppendU32(p, uint32(len(m.Code)))
		for _, c := range m.Code {
			var f []byte
			f = AppendU32(f, uint32(len(c.Locals)))
			for _, l := range c.Locals {
				f = AppendU32(f, l.Count)
				f = append(f, l.Type)
			}
			f = append(f, c.Body...)
			p = AppendU32(p, uint32(len(f)))
			p = append(p, f...)
		}
	case SecData:
		if m.dataRaw == nil {
			return nil, false
		}
		p = m.dataRaw
	}
	return p, true
}

func appendLimits(p []byte, l Limits) []byte {
	if l.HasMax {
		p = append(p, 1)
		p = AppendU32(p, l.Min)
		return AppendU32(p, l.Max)
	}
	p = append(p, 0)
	return AppendU32(p, l.Min)
}

func appendName(p []byte, s string) []byte {
	p = AppendU32(p, uint32(len(s)))
	return append(p, s...)
}

// AppendU32 appends v in unsigned LEB128.
func AppendU32(b []byte, v uint32) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if v != 0 {
			b = append(b, c|0x80)
			continue
		}
		return append(b, c)
	}
}

// AppendS64 appends v in signed LEB128.
func AppendS64(b []byte, v int64) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if (v == 0 && c&0x40 == 0) || (v == -1 && c&0x40 != 0) {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

// FuncType returns the type of function fn in the function index space
// (imports first), and false if fn is out of range.
func (m *Module) FuncType(fn uint32) (FuncType, bool) {
	t, ok := m.FuncTypeIndex(fn)
	if !ok {
		return FuncType{}, false
	}
	return m.Types[t], true
}

// FuncTypeIndex returns the type index of function fn.
func (m *Module) FuncTypeIndex(fn uint32) (uint32, bool) {
	n := uint32(0)
	for _, im := range m.Imports {
		if im.Kind != KindFunc {
			continue
		}
		if n == fn {
			return im.Type, true
		}
		n++
	}
	local := uint64(fn) - uint64(n)
	if local >= uint64(len(m.Functions)) {
		return 0, false
	}
	return m.Functions[local], true
}

// ImportedFuncs returns the number of imported functions.
func (m *Module) ImportedFuncs() uint32 { return m.imported(KindFunc) }

// ImportedGlobals returns the number of imported globals.
func (m *Module) ImportedGlobals() uint32 { return m.imported(KindGlobal) }

// ImportedMemories returns the number of imported memories.
func (m *Module) ImportedMemories() uint32 { return m.imported(KindMemory) }

// ImportedTables returns the number of imported tables.
func (m *Module) ImportedTables() uint32 { return m.imported(KindTable) }

func (m *Module) imported(kind byte) uint32 {
	var n uint32
	for _, im := range m.Imports {
		if im.Kind == kind {
			n++
		}
	}
	return n
}

// NumFuncs returns the size of the function index space.
func (m *Module) NumFuncs() uint32 { return m.ImportedFuncs() + uint32(len(m.Functions)) }

// NumGlobals returns the size of the global index space.
func (m *Module) NumGlobals() uint32 { return m.ImportedGlobals() + uint32(len(m.Globals)) }

// DeclareFuncs appends a declarative element segment naming funcs, so that
// ref.func may refer to them (the rewriter moves exports, which declared
// them, to wrappers).
func (m *Module) DeclareFuncs(funcs []uint32) {
	if len(funcs) == 0 {
		return
	}
	seg := []byte{3, 0x00} // declarative, elemkind funcref
	seg = AppendU32(seg, uint32(len(funcs)))
	for _, f := range funcs {
		seg = AppendU32(seg, f)
	}
	var rest []byte
	n := uint32(0)
	if m.elementRaw != nil {
		r := &Reader{B: m.elementRaw}
		n, _ = r.U32() // Decode checked it
		rest = m.elementRaw[r.Pos:]
	}
	raw := AppendU32(nil, n+1)
	raw = append(raw, rest...)
	m.elementRaw = append(raw, seg...)
	m.Elements = append(m.Elements, Element{Mode: ElemDeclarative, Type: FuncRef, Funcs: funcs})
}
