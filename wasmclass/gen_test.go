package wasmclass

import (
	"bytes"
	"context"
	"runtime"
	"testing"
	"time"
)

// genModule builds a valid ABI v1 module from fuzz input: functions of
// random expressions (arithmetic, loads and stores, loops, blocks, ifs,
// br_table, direct and indirect calls including recursion, memory and
// table growth, bulk memory), every element segment form over one or two
// tables, every data segment form. Every choice comes from data, so the
// fuzzer explores module shapes, not byte soup.
func genModule(data []byte) []byte {
	g := &gen{data: data}
	nfuncs := 1 + g.n(6)
	ntables := 1 + g.n(2)
	// Types: 0 ()->i32, 1 (i32)->i32, 2 (i32,i32)->i32.
	types := [][]byte{{0x60, 0, 1, 0x7f}, {0x60, 1, 0x7f, 1, 0x7f}, {0x60, 2, 0x7f, 0x7f, 1, 0x7f}}
	var out []byte
	out = append(out, 0, 'a', 's', 'm', 1, 0, 0, 0)
	out = appendSection(out, 1, vec(types))
	// Functions: 5 constants, batch, then the generated ones (type 2).
	funcTypes := [][]byte{{0}, {0}, {0}, {0}, {0}, {1}}
	for i := 0; i < nfuncs; i++ {
		funcTypes = append(funcTypes, []byte{2})
	}
	out = appendSection(out, 3, vec(funcTypes))
	var tables [][]byte
	for i := 0; i < ntables; i++ {
		tables = append(tables, []byte{0x70, 1, 8, 64})
	}
	out = appendSection(out, 4, vec(tables))
	out = appendSection(out, 5, vec([][]byte{{0, 1 + byte(g.n(2))}}))
	out = appendSection(out, 6, vec([][]byte{{0x7f, 1, 0x41, 0, 0x0b}}))
	first := 6 // the first generated function
	exports := [][]byte{
		exportEntry("memory", 2, 0),
		exportEntry(exportABIVersion, 0, 0), exportEntry(exportIOBuffer, 0, 1), exportEntry(exportIOBufferSize, 0, 2),
		exportEntry(exportNumTypes, 0, 3), exportEntry(exportClassify, 0, 4), exportEntry(exportBatch, 0, 5),
	}
	out = appendSection(out, 7, vec(exports))
	// Elements: every form, over the tables.
	var elems [][]byte
	fn := func() byte { return byte(first + g.n(nfuncs)) }
	tbl := func() byte { return byte(g.n(ntables)) }
	off := func() []byte { return []byte{0x41, byte(g.n(4)), 0x0b} }
	for k := g.n(8); k > 0; k-- {
		switch g.n(8) {
		case 0:
			elems = append(elems, cat([]byte{0}, off(), []byte{1, fn()}))
		case 1:
			elems = append(elems, []byte{1, 0, 2, fn(), fn()})
		case 2:
			elems = append(elems, cat([]byte{2, tbl()}, off(), []byte{0, 1, fn()}))
		case 3:
			elems = append(elems, []byte{3, 0, 1, fn()})
		case 4:
			elems = append(elems, cat([]byte{4}, off(), []byte{2, 0xd2, fn(), 0x0b, 0xd0, 0x70, 0x0b}))
		case 5:
			elems = append(elems, []byte{5, 0x70, 2, 0xd0, 0x70, 0x0b, 0xd2, fn(), 0x0b})
		case 6:
			elems = append(elems, cat([]byte{6, tbl()}, off(), []byte{0x70, 1, 0xd2, fn(), 0x0b}))
		case 7:
			elems = append(elems, []byte{7, 0x70, 1, 0xd2, fn(), 0x0b})
		}
	}
	if len(elems) > 0 {
		out = appendSection(out, 9, vec(elems))
	}
	ndata := g.n(4)
	out = appendSection(out, 12, []byte{byte(ndata)})
	// Code.
	var bodies [][]byte
	for _, v := range []int32{1, 1024, 8320, 3} {
		bodies = append(bodies, body(nil, cat(i32c(v), []byte{0x0b})))
	}
	call := byte(first + nfuncs - 1)
	// psp_classify: f(load caplen, load first byte) mod 3
	bodies = append(bodies, body(nil, cat(i32c(1024+128), []byte{0x28, 2, 0}, i32c(1024+136), []byte{0x2d, 0, 0},
		[]byte{0x10, call}, i32c(3), []byte{0x70, 0x0b})))
	// psp_classify_batch(n): for i < n: results[i] = classify-like; return n
	bodies = append(bodies, body([]byte{1, 1, 0x7f}, cat(
		[]byte{0x02, 0x40, 0x03, 0x40}, lget(1), lget(0), []byte{0x4f, 0x0d, 1},
		lget(1), i32c(2), []byte{0x74}, // i*4
		lget(1), lget(1), i32c(256), []byte{0x6c}, i32c(1024+136), []byte{0x6a, 0x2d, 0, 0}, []byte{0x10, call},
		i32c(3), []byte{0x70}, []byte{0x36, 2, 0x80, 8}, // store at 1024 + i*4
		lget(1), i32c(1), []byte{0x6a}, lset(1), []byte{0x0c, 0, 0x0b, 0x0b}, lget(0), []byte{0x0b})))
	for i := 0; i < nfuncs; i++ {
		g.self, g.first, g.ntables = first+i, first, ntables
		bodies = append(bodies, body([]byte{1, 1, 0x7f}, cat(g.expr(4), []byte{0x0b})))
	}
	out = appendSection(out, 10, vec(bodies))
	var datas [][]byte
	for k := 0; k < ndata; k++ {
		switch g.n(3) {
		case 0:
			datas = append(datas, cat([]byte{0}, i32c(int32(g.n(256))), []byte{0x0b, 2, 'h', 'i'}))
		case 1:
			datas = append(datas, []byte{1, 3, 'a', 'b', 'c'})
		case 2:
			datas = append(datas, cat([]byte{2, 0}, i32c(int32(4096+g.n(256))), []byte{0x0b, 1, 'z'}))
		}
	}
	out = appendSection(out, 11, vec(datas))
	return out
}

// gen draws choices from fuzz input; past its end every choice is 0.
type gen struct {
	data                 []byte
	pos                  int
	self, first, ntables int
}

func (g *gen) n(k int) int {
	if g.pos >= len(g.data) || k <= 1 {
		g.pos++
		return 0
	}
	v := int(g.data[g.pos]) % k
	g.pos++
	return v
}

// expr returns an expression that leaves one i32 on the stack. Locals:
// 0 and 1 (parameters), 2 (a counter).
func (g *gen) expr(depth int) []byte {
	if depth == 0 {
		switch g.n(3) {
		case 0:
			return i32c(int32(g.n(256)) - 128)
		case 1:
			return lget(uint32(g.n(3)))
		}
		return []byte{0x23, 0} // global.get 0
	}
	d := depth - 1
	switch g.n(16) {
	case 0: // binary arithmetic (divisions may trap)
		ops := []byte{0x6a, 0x6b, 0x6c, 0x71, 0x72, 0x73, 0x74, 0x76, 0x6e, 0x70}
		return cat(g.expr(d), g.expr(d), []byte{ops[g.n(len(ops))]})
	case 1: // load, masked into the first page
		return cat(g.expr(d), i32c(0xfffc), []byte{0x71, 0x28, 2, 0})
	case 2: // store, then a value
		return cat(g.expr(d), i32c(0xfffc), []byte{0x71}, g.expr(d), []byte{0x36, 2, 0}, g.expr(d))
	case 3: // a loop counting local 2 up to a small or unbounded limit
		return cat([]byte{0x03, 0x7f}, lget(2), i32c(1), []byte{0x6a}, ltee(2), g.expr(d), []byte{0x49, 0x0d, 0}, lget(2), []byte{0x0b})
	case 4:
		return cat([]byte{0x02, 0x7f}, g.expr(d), []byte{0x0b})
	case 5:
		return cat(g.expr(d), []byte{0x04, 0x7f}, g.expr(d), []byte{0x05}, g.expr(d), []byte{0x0b})
	case 6: // br_table out of two blocks
		return cat([]byte{0x02, 0x7f, 0x02, 0x7f}, g.expr(d), g.expr(d), []byte{0x0e, 1, 0, 1, 0x0b, 0x0b})
	case 7: // direct call, to an earlier function or to itself (recursion)
		target := g.first + g.n(g.self-g.first+1)
		return cat(g.expr(d), g.expr(d), []byte{0x10, byte(target)})
	case 8: // indirect call through a table (may trap: null or out of range)
		return cat(g.expr(d), g.expr(d), g.expr(d), i32c(7), []byte{0x71, 0x11, 2, byte(g.n(g.ntables))})
	case 9: // memory.grow by 0..3 pages
		return cat(g.expr(d), i32c(3), []byte{0x71, 0x40, 0})
	case 10:
		return []byte{0x3f, 0}
	case 11: // memory.fill within the first page
		return cat(i32c(int32(g.n(1024))), g.expr(d), i32c(int32(g.n(4096))), []byte{0xfc, 0x0b, 0}, g.expr(d))
	case 12: // table.grow
		return cat([]byte{0xd0, 0x70}, g.expr(d), i32c(15), []byte{0x71, 0xfc, 0x0f, byte(g.n(g.ntables))})
	case 13: // global.set then a value
		return cat(g.expr(d), []byte{0x24, 0}, g.expr(d))
	case 14: // return from the middle
		return cat(g.expr(d), []byte{0x04, 0x40}, g.expr(d), []byte{0x0f, 0x0b}, g.expr(d))
	}
	return cat(g.expr(d), []byte{0x45}) // eqz
}

func body(locals []byte, code []byte) []byte {
	if locals == nil {
		locals = []byte{0}
	}
	b := append(append([]byte(nil), locals...), code...)
	return append(u32(uint32(len(b))), b...)
}

func vec(items [][]byte) []byte {
	return append(u32(uint32(len(items))), bytes.Join(items, nil)...)
}

func appendSection(out []byte, id byte, payload []byte) []byte {
	out = append(out, id)
	out = append(out, u32(uint32(len(payload)))...)
	return append(out, payload...)
}

func exportEntry(name string, kind, index byte) []byte {
	return cat(u32(uint32(len(name))), []byte(name), []byte{kind, index})
}

// fuzzOptions load generated modules cheaply: a small memory limit (every
// instance allocates its whole limit), and no time-limit watchdog, whose
// samples would add coverage that depends on timing, not on the input
// (fuzzInputBound bounds a call instead).
var fuzzOptions = Options{Fuel: 20_000, InitFuel: 200_000, MemoryLimitPages: 8, TimeLimit: time.Hour, CompileTimeout: 10 * time.Second, syncSpares: true}

// fuzzInputBound is the most one fuzz input may take (two loads and their
// calls): past it the input fails, as a module that stalls a load would
// stall a hot swap. Its loads take milliseconds.
const fuzzInputBound = 20 * time.Second

// checkLoadNeverPanics loads bin and, if it loads, classifies with it:
// nothing may panic or hang, and results stay in range.
func checkLoadNeverPanics(t *testing.T, bin []byte) {
	ctx := context.Background()
	m, err := Load(ctx, bin, fuzzOptions)
	if err != nil {
		return
	}
	defer m.Close(ctx)
	i, err := m.NewInstance(ctx)
	if err != nil {
		return
	}
	defer i.Close(ctx)
	out := make([]uint32, 40)
	for round := 0; round < 3; round++ {
		i.ClassifyBatch(payloads(40, 7), out)
		for k, v := range out {
			if v >= uint32(m.NumTypes()) {
				t.Fatalf("out[%d] = %d, N = %d", k, v, m.NumTypes())
			}
		}
		i.Classify([]byte{byte(round)})
	}
}

// FuzzLoad generates valid modules from the fuzz input (genModule) and
// also feeds the input itself to the loader as a binary.
func FuzzLoad(f *testing.F) {
	for _, name := range []string{"good", "wasi", "bulk", "escapes", "recurse", "loop"} {
		f.Add(fixture(f, name))
	}
	for k := 0; k < 32; k++ {
		f.Add(bytes.Repeat([]byte{byte(k * 37), byte(k*11 + 1), 3, byte(k)}, 16))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		withinBound(t, fuzzInputBound, func(t *testing.T) {
			checkLoadNeverPanics(t, data)
			checkLoadNeverPanics(t, genModule(data))
		})
	})
}

// withinBound runs f and fails t, with every goroutine's stack, if f runs
// past bound (then f is left running: the process is about to end).
func withinBound(t *testing.T, bound time.Duration, f func(t *testing.T)) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done) // also when f fails t (Goexit)
		f(t)
	}()
	timer := time.NewTimer(bound)
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		t.Fatalf("one input ran for more than %v (a load or a call that does not end):\n%s", bound, buf)
	}
}

// TestGeneratedModules runs a few hundred generated modules (the fuzz
// target's generator, deterministic inputs): every one must load (they are
// valid) and classify without panicking.
func TestGeneratedModules(t *testing.T) {
	n := 300
	if testing.Short() || raceEnabled {
		n = 40
	}
	start := time.Now()
	loaded := 0
	for k := 0; k < n; k++ {
		data := make([]byte, 64)
		x := uint32(k*2654435761 + 1)
		for j := range data {
			x ^= x << 13
			x ^= x >> 17
			x ^= x << 5
			data[j] = byte(x)
		}
		bin := genModule(data)
		m, err := Load(context.Background(), bin, Options{Fuel: 20_000, InitFuel: 200_000})
		if err != nil {
			t.Fatalf("generated module %d does not load: %v", k, err)
		}
		_ = m.Close(context.Background())
		loaded++
		checkLoadNeverPanics(t, bin)
	}
	t.Logf("%d generated modules loaded and ran in %v", loaded, time.Since(start))
}
