package wasmclass

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/persephone-go/psp/wasmclass/internal/wasmbin"
)

// The adversarial modules: for each instruction class and each host call,
// a module whose export "spin" loops forever over the dearest code of that
// class it can find, so that a call runs until its fuel runs out. Their
// time per unit of fuel, against an empty loop's, is the cost model's bar:
// at most 2x (BenchmarkAdversarial).

// advModule describes one adversarial module: the body of the loop, the
// locals it uses, code run once before the loop, imports and extra
// functions.
type advModule struct {
	name    string
	locals  []wasmbin.LocalDecl
	setup   []byte // before the loop
	init    []byte // _initialize: run once at load, its memory kept for every instance
	body    []byte // the loop body (the loop and its br are added)
	imports []string
	extra   []advFunc // functions after spin (indexes from imports + 6 + 1)
	table   bool      // a funcref table of 16 elements filled with the first extra function
	pages   uint32    // memory pages (default 64)
	// spinIsClassify exports spin (which must leave an i32) as
	// psp_classify instead of a constant.
	spinIsClassify bool
	start          bool // spin's setup also runs as the start function (setup must leave nothing)
}

type advFunc struct {
	params, results []byte
	locals          []wasmbin.LocalDecl
	body            []byte // without the final end
}

func rep(n int, b ...byte) []byte { return bytes.Repeat(b, n) }

func cat(bs ...[]byte) []byte { return bytes.Join(bs, nil) }

func u32(v uint32) []byte { return wasmbin.AppendU32(nil, v) }

func i32c(v int32) []byte { return wasmbin.AppendS64([]byte{0x41}, int64(v)) }

func i64c(v int64) []byte { return wasmbin.AppendS64([]byte{0x42}, v) }

func lget(i uint32) []byte { return cat([]byte{0x20}, u32(i)) }
func lset(i uint32) []byte { return cat([]byte{0x21}, u32(i)) }
func ltee(i uint32) []byte { return cat([]byte{0x22}, u32(i)) }

// wasiSigs are the WASI types the adversarial modules import.
var advWASI = map[string]wasmbin.FuncType{}

func init() {
	for name, f := range wasiFuncs {
		advWASI[name] = wasmbin.FuncType{Params: bytesOf(f.params), Results: bytesOf(f.results)}
	}
}

func bytesOf[T ~byte](ts []T) []byte {
	b := make([]byte, len(ts))
	for i, t := range ts {
		b[i] = byte(t)
	}
	return b
}

// build encodes the module: imports, the six ABI functions, spin, extras.
func (a advModule) build() []byte {
	m := &wasmbin.Module{}
	typ := func(ft wasmbin.FuncType) uint32 {
		for i, t := range m.Types {
			if bytes.Equal(t.Params, ft.Params) && bytes.Equal(t.Results, ft.Results) {
				return uint32(i)
			}
		}
		m.Types = append(m.Types, ft)
		return uint32(len(m.Types) - 1)
	}
	for _, name := range a.imports {
		m.Imports = append(m.Imports, wasmbin.Import{Module: wasiModule, Name: name, Kind: wasmbin.KindFunc, Type: typ(advWASI[name])})
	}
	nimp := uint32(len(a.imports))
	i32r := wasmbin.FuncType{Results: []byte{wasmbin.I32}}
	consts := []struct {
		name string
		v    int32
	}{{exportABIVersion, 1}, {exportIOBuffer, 1024}, {exportIOBufferSize, 8320}, {exportNumTypes, 2}, {exportClassify, 0}}
	for k, c := range consts {
		m.Functions = append(m.Functions, typ(i32r))
		m.Code = append(m.Code, wasmbin.Code{Body: cat(i32c(c.v), []byte{0x0b})})
		name := c.name
		if name == exportClassify && a.spinIsClassify {
			name = "unused"
		}
		m.Exports = append(m.Exports, wasmbin.Export{Name: name, Kind: wasmbin.KindFunc, Index: nimp + uint32(k)})
	}
	m.Functions = append(m.Functions, typ(wasmbin.FuncType{Params: []byte{wasmbin.I32}, Results: []byte{wasmbin.I32}}))
	m.Code = append(m.Code, wasmbin.Code{Body: []byte{0x20, 0x00, 0x0b}})
	m.Exports = append(m.Exports, wasmbin.Export{Name: exportBatch, Kind: wasmbin.KindFunc, Index: nimp + 5})
	// spin: setup, then loop { body; br 0 }.
	spin := nimp + 6
	if a.spinIsClassify {
		m.Functions = append(m.Functions, typ(i32r))
		m.Code = append(m.Code, wasmbin.Code{Locals: a.locals, Body: cat(a.setup, a.body, []byte{0x0b})})
		m.Exports = append(m.Exports, wasmbin.Export{Name: exportClassify, Kind: wasmbin.KindFunc, Index: spin})
	} else {
		m.Functions = append(m.Functions, typ(wasmbin.FuncType{}))
		m.Code = append(m.Code, wasmbin.Code{Locals: a.locals, Body: cat(a.setup, []byte{0x03, 0x40}, a.body, []byte{0x0c, 0x00, 0x0b, 0x0b})})
		m.Exports = append(m.Exports, wasmbin.Export{Name: "spin", Kind: wasmbin.KindFunc, Index: spin})
	}
	for k, f := range a.extra {
		m.Functions = append(m.Functions, typ(wasmbin.FuncType{Params: f.params, Results: f.results}))
		m.Code = append(m.Code, wasmbin.Code{Locals: f.locals, Body: cat(f.body, []byte{0x0b})})
		if len(a.extra) <= 64 { // exported: declared for ref.func
			m.Exports = append(m.Exports, wasmbin.Export{Name: fmt.Sprintf("f%d", k), Kind: wasmbin.KindFunc, Index: spin + 1 + uint32(k)})
		}
	}
	if a.init != nil {
		if a.start {
			st := m.NumFuncs()
			m.Start = &st
		}
		m.Functions = append(m.Functions, typ(wasmbin.FuncType{}))
		m.Code = append(m.Code, wasmbin.Code{Locals: a.locals, Body: cat(a.init, []byte{0x0b})})
		if !a.start {
			m.Exports = append(m.Exports, wasmbin.Export{Name: exportInitialize, Kind: wasmbin.KindFunc, Index: spin + 1 + uint32(len(a.extra))})
		}
	}
	m.Globals = []wasmbin.Global{{Type: wasmbin.I32, Mutable: true, Init: []byte{0x41, 0x00, 0x0b}}}
	pages := a.pages
	if pages == 0 {
		pages = 64
	}
	m.Memories = []wasmbin.Limits{{Min: pages, Max: 64, HasMax: true}}
	if pages == 1 {
		m.Memories[0].HasMax = false
	}
	m.Exports = append(m.Exports, wasmbin.Export{Name: exportMemory, Kind: wasmbin.KindMemory})
	if a.table {
		m.Tables = []wasmbin.Table{{RefType: wasmbin.FuncRef, Limits: wasmbin.Limits{Min: 16, Max: 1 << 16, HasMax: true}}}
	}
	return m.Encode()
}

// advModules returns the adversarial modules, the empty loop first.
func advModules() []advModule {
	const n = 16 // repetitions of the class's instruction in one loop body
	var mods []advModule
	add := func(a advModule) { mods = append(mods, a) }
	l := func(t byte, k uint32) []wasmbin.LocalDecl { return []wasmbin.LocalDecl{{Count: k, Type: t}} }
	add(advModule{name: "empty loop"})
	add(advModule{name: "nop", body: rep(64, 0x01)})
	add(advModule{name: "i32 arithmetic (dependent)", locals: l(wasmbin.I32, 1), body: cat(lget(0), rep(n, cat(i32c(7), []byte{0x6c})...), lset(0))})
	add(advModule{name: "i64 multiply chain", locals: l(wasmbin.I64, 1), body: cat(lget(0), rep(n, cat(i64c(7), []byte{0x7e})...), lset(0))})
	add(advModule{name: "i32 division", locals: l(wasmbin.I32, 1), setup: cat(i32c(-1), lset(0)),
		body: cat(rep(n, cat(i32c(-1), lget(0), []byte{0x6e, 0x1a})...), lget(0), i32c(1), []byte{0x72}, lset(0))})
	add(advModule{name: "i64 division (dependent)", locals: l(wasmbin.I64, 1), setup: cat(i64c(-1), lset(0)),
		body: cat(lget(0), rep(n, cat(i64c(3), []byte{0x80})...), i64c(-1), []byte{0x84}, lset(0))})
	add(advModule{name: "f64 sqrt (dependent)", locals: l(wasmbin.F64, 1),
		body: cat(lget(0), rep(n, 0x9f), lset(0))})
	add(advModule{name: "f64 division (dependent)", locals: l(wasmbin.F64, 1),
		body: cat(lget(0), rep(n, cat([]byte{0x44}, rep(8, 0x3f), []byte{0xa3})...), lset(0))})
	add(advModule{name: "f64 nearest/floor", locals: l(wasmbin.F64, 1),
		body: cat(lget(0), rep(n, 0x9e, 0x9c), lset(0))})
	add(advModule{name: "f64 min/max", locals: l(wasmbin.F64, 1),
		body: cat(lget(0), rep(n, cat(lget(0), []byte{0xa4})...), lset(0))})
	add(advModule{name: "float to int (trapping, checked)", locals: l(wasmbin.F64, 1),
		body: rep(n, cat(lget(0), []byte{0xb0, 0x1a})...)})
	add(advModule{name: "float to int (saturating)", locals: l(wasmbin.F64, 1),
		body: rep(n, cat(lget(0), []byte{0xfc, 0x07, 0x1a})...)})
	add(advModule{name: "global.get/set",
		body: rep(n, cat([]byte{0x23, 0x00}, i32c(1), []byte{0x6a, 0x24, 0x00})...)})
	// Pointer chasing over the whole memory: each load depends on the
	// previous one and lands on another cache line (a permutation with a
	// large odd stride).
	add(advModule{name: "memory load chain (4 MiB)", locals: l(wasmbin.I32, 2),
		init: cat(
			// for i in 0..N: mem[(i*4099*64) & mask] = ((i+1)*4099*64) & mask
			[]byte{0x03, 0x40}, lget(1), i32c(4099*64), []byte{0x6c}, i32c(64*65536-1), []byte{0x71},
			lget(1), i32c(1), []byte{0x6a}, ltee(1), i32c(4099*64), []byte{0x6c}, i32c(64*65536-1), []byte{0x71},
			[]byte{0x36, 0x02, 0x00}, lget(1), i32c(65536), []byte{0x49, 0x0d, 0x00, 0x0b}),
		body: rep(n, cat(lget(0), []byte{0x28, 0x02, 0x00}, lset(0))...)})
	add(advModule{name: "memory stores (scattered)", locals: l(wasmbin.I32, 1),
		body: rep(n, cat(lget(0), i32c(4099*64), []byte{0x6a}, i32c(64*65536-8), []byte{0x71}, ltee(0), lget(0), []byte{0x36, 0x02, 0x00})...)})
	add(advModule{name: "v128 ops (i64x2.mul, shuffles)", locals: l(wasmbin.V128, 1),
		body: cat(lget(0), rep(n, cat(lget(0), []byte{0xfd, 0xd5, 0x01}, lget(0), []byte{0xfd, 0x0d}, rep(16, 0x03))...), lset(0))})
	add(advModule{name: "v128 popcnt/sqrt", locals: l(wasmbin.V128, 1),
		body: cat(lget(0), rep(n, 0xfd, 0x62, 0xfd, 0xef, 0x01), lset(0))})
	leaf := advFunc{params: []byte{wasmbin.I32}, results: []byte{wasmbin.I32}, body: lget(0)}
	add(advModule{name: "call to a leaf", locals: l(wasmbin.I32, 1), extra: []advFunc{leaf},
		body: cat(lget(0), rep(n, 0x10, 7), lset(0))})
	add(advModule{name: "call_indirect", locals: l(wasmbin.I32, 1), extra: []advFunc{leaf}, table: true,
		setup: cat(i32c(0), []byte{0xd2, 7}, i32c(16), []byte{0xfc, 0x11, 0x00}),
		body:  cat(lget(0), rep(n, cat(i32c(3), []byte{0x11, 0x01, 0x00})...), lset(0))})
	add(advModule{name: "call with 1000 locals", extra: []advFunc{{locals: l(wasmbin.I64, 1000)}},
		body: rep(4, 0x10, 7)})
	add(advModule{name: "call with 2000 v128 locals", extra: []advFunc{{locals: l(wasmbin.V128, 2000)}},
		body: []byte{0x10, 7}})
	add(advModule{name: "deep frames (recursion)", extra: []advFunc{{params: []byte{wasmbin.I32}, locals: l(wasmbin.I64, 200),
		body: cat(lget(0), []byte{0x04, 0x40}, lget(0), i32c(1), []byte{0x6b, 0x10, 7, 0x0b})}},
		body: cat(i32c(1000), []byte{0x10, 7})})
	// Warm stacks: a recursion repeated within one call, its frames
	// spilling live values (see stack_test.go for cold stacks).
	add(advModule{name: "recursion keeping 1000 i64 live, repeated", extra: []advFunc{{params: dx, results: []byte{wasmbin.I64}, body: recurse(1000, []byte{0x10, 7})}},
		body: cat(i32c(50), i64c(1), []byte{0x10, 7, 0x1a})})
	add(advModule{name: "recursion keeping 8 i64 live, repeated", extra: []advFunc{{params: dx, results: []byte{wasmbin.I64}, body: recurse(8, []byte{0x10, 7})}},
		body: cat(i32c(200), i64c(1), []byte{0x10, 7, 0x1a})})
	add(advModule{name: "br_table", locals: l(wasmbin.I32, 1),
		body: rep(n, cat([]byte{0x02, 0x40, 0x02, 0x40}, lget(0), []byte{0x0e, 0x02, 0x00, 0x01, 0x00, 0x0b, 0x0b})...)})
	add(advModule{name: "memory.grow(0)", body: rep(n, cat(i32c(0), []byte{0x40, 0x00, 0x1a})...)})
	add(advModule{name: "memory.grow(1) up to the limit", pages: 1, body: cat(i32c(1), []byte{0x40, 0x00, 0x1a})})
	add(advModule{name: "memory.fill 2.5 MiB", body: cat(i32c(0), i32c(0), i32c(40*65536), []byte{0xfc, 0x0b, 0x00})})
	add(advModule{name: "memory.fill 0 bytes", body: rep(n, cat(i32c(0), i32c(0), i32c(0), []byte{0xfc, 0x0b, 0x00})...)})
	add(advModule{name: "memory.copy 1.25 MiB", body: cat(i32c(0), i32c(24*65536), i32c(20*65536), []byte{0xfc, 0x0a, 0x00, 0x00})})
	add(advModule{name: "table.fill 64K", table: true, extra: []advFunc{leaf},
		setup: cat([]byte{0xd0, 0x70}, i32c(1<<16-16), []byte{0xfc, 0x0f, 0x00, 0x1a}),
		body:  cat(i32c(0), []byte{0xd2, 7}, i32c(1<<16), []byte{0xfc, 0x11, 0x00})})
	add(advModule{name: "table.grow(0)", table: true,
		body: rep(n, cat([]byte{0xd0, 0x70}, i32c(0), []byte{0xfc, 0x0f, 0x00, 0x1a})...)})
	// Host calls: the exit to Go, and the work that grows with an argument.
	host := func(name, fn string, args []byte) {
		ft := advWASI[fn]
		drop := rep(len(ft.Results), 0x1a)
		add(advModule{name: name, imports: []string{fn}, body: rep(4, cat(args, []byte{0x10, 0x00}, drop)...)})
	}
	host("wasi clock_time_get", "clock_time_get", cat(i32c(1), i64c(0), i32c(0)))
	host("wasi args_sizes_get", "args_sizes_get", cat(i32c(0), i32c(8)))
	host("wasi sched_yield", "sched_yield", nil)
	host("wasi fd_fdstat_get", "fd_fdstat_get", cat(i32c(1), i32c(0)))
	host("wasi path_open (EBADF)", "path_open", cat(i32c(3), i32c(0), i32c(0), i32c(1<<20), i32c(0), i64c(0), i64c(0), i32c(0), i32c(0)))
	host("wasi random_get 0 bytes", "random_get", cat(i32c(0), i32c(0)))
	host("wasi random_get 64 KiB", "random_get", cat(i32c(0), i32c(65536)))
	host("wasi fd_write 1 iovec", "fd_write", cat(i32c(1), i32c(0), i32c(1), i32c(65536)))
	host("wasi fd_write 1024 iovecs", "fd_write", cat(i32c(1), i32c(0), i32c(1024), i32c(65536)))
	host("wasi fd_read stdin", "fd_read", cat(i32c(0), i32c(0), i32c(1024), i32c(65536)))
	host("wasi poll_oneoff 1 clock", "poll_oneoff", cat(i32c(0), i32c(65536), i32c(1), i32c(131072)))
	host("wasi poll_oneoff 1024 subscriptions", "poll_oneoff", cat(i32c(0), i32c(65536), i32c(1024), i32c(131072)))
	return mods
}

// advResult is one module's measurement.
type advResult struct {
	name      string
	nsPerUnit float64
	ratio     float64
}

// measureAdversarial loads each module with budget units of fuel and
// times calls of "spin" (which run until the fuel runs out), keeping the
// fastest of rounds calls.
func measureAdversarial(tb testing.TB, budget uint64, rounds int) []advResult {
	ctx := context.Background()
	var res []advResult
	for _, a := range advModules() {
		m, err := Load(ctx, a.build(), Options{Fuel: budget, TimeLimit: time.Hour})
		if err != nil {
			tb.Fatalf("%s: %v", a.name, err)
		}
		best := time.Duration(1 << 62)
		for r := 0; r < rounds; r++ {
			g, err := m.newGuest(ctx)
			if err != nil {
				tb.Fatalf("%s: %v", a.name, err)
			}
			spin := g.mod.ExportedFunction("spin")
			start := time.Now()
			_, err = spin.Call(ctx)
			d := time.Since(start)
			if err == nil || int64(g.tank.Get()) >= 0 {
				tb.Fatalf("%s: spin returned without running out of fuel: %v", a.name, err)
			}
			best = min(best, d)
			_ = g.mod.Close(ctx)
		}
		_ = m.Close(ctx)
		res = append(res, advResult{name: a.name, nsPerUnit: float64(best.Nanoseconds()) / float64(budget)})
	}
	for i := range res {
		res[i].ratio = res[i].nsPerUnit / res[0].nsPerUnit
	}
	return res
}

// BenchmarkAdversarial prints, for every adversarial module, its time per
// unit of fuel and its ratio to the empty loop's, and fails if the worst
// ratio exceeds 2 (the cost model's bar). Each figure is the fastest of
// several calls of a whole budget: run it on a quiet machine.
func BenchmarkAdversarial(b *testing.B) {
	var res []advResult
	for b.Loop() {
		res = measureAdversarial(b, DefaultFuel, 5)
	}
	worst := res[0]
	var w strings.Builder
	tw := tabwriter.NewWriter(&w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "module class\tns/unit\tratio to empty loop\t")
	sorted := append([]advResult(nil), res...)
	sort.SliceStable(sorted[1:], func(i, j int) bool { return sorted[1+i].ratio > sorted[1+j].ratio })
	for _, r := range sorted {
		fmt.Fprintf(tw, "%s\t%.3f\t%.2f\t\n", r.name, r.nsPerUnit, r.ratio)
		if r.ratio > worst.ratio {
			worst = r
		}
	}
	tw.Flush()
	fmt.Fprint(os.Stdout, w.String())
	fmt.Fprintf(os.Stdout, "worst ratio: %.2f (%s)\n", worst.ratio, worst.name)
	b.ReportMetric(worst.ratio, "worst-ratio")
	b.ReportMetric(res[0].nsPerUnit, "ns/unit-empty")
	if worst.ratio > 2 {
		b.Errorf("%s costs %.2fx an empty loop per unit of fuel (bar: 2x)", worst.name, worst.ratio)
	}
}

// TestAdversarialModulesRunOutOfFuel checks, with a small budget, that
// every adversarial module loads, runs and is stopped by its fuel.
func TestAdversarialModulesRunOutOfFuel(t *testing.T) {
	res := measureAdversarial(t, 20_000, 1)
	if len(res) < 40 {
		t.Errorf("%d adversarial modules, want one per instruction class and host call", len(res))
	}
}
