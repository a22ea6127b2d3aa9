package wasmclass

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"sort"
	"testing"
	"time"

	"github.com/persephone-go/psp/wasmclass/internal/fuel"
	"github.com/persephone-go/psp/wasmclass/internal/wasmbin"
)

// The stack modules: classifiers whose call goes deep into recursion,
// keeping many values live across every call (which the compiled code
// spills to its stack) or few, through direct, mutual and indirect calls,
// many parameters and many locals. A call's stack costs time beyond its
// instructions: spilling, and on an instance's first deep call (after a
// trap every call is one) a stack that grows by allocating and copying,
// and memory that stays held. Their worst call must stay within twice that
// of a loop that spends the whole budget (TestStackModulesBoundedByFuel).

// stackShape is one stack module: psp_classify calls f(depth) and
// returns its result folded to 0.
type stackShape struct {
	name  string
	depth int32
	f     []advFunc // f is extra function 0 (index 7); others follow
	setup []byte    // run by psp_classify before the call
	table bool
}

// Function indexes in advModule: 0-4 constants, 5 batch, 6 spin
// (psp_classify here), 7.. extras.
const stackF = 7

// liveValues pushes k distinct i64 values computed from local x (cheap
// instructions: each is a live value across the next call).
func liveValues(x uint32, k int) []byte {
	var b []byte
	for i := 0; i < k; i++ {
		b = append(b, cat(lget(x), i64c(int64(i+1)), []byte{0x7c})...)
	}
	return b
}

// recurse is the body of f(d i32, x i64) -> i64: if d == 0 return x;
// push k live values; r = call(d-1, x); fold the values into r. call is
// the call instruction (with its immediates).
func recurse(k int, call []byte) []byte {
	return cat(lget(0), []byte{0x45, 0x04, 0x40}, lget(1), []byte{0x0f, 0x0b},
		liveValues(1, k), lget(0), i32c(1), []byte{0x6b}, lget(1), call, rep(k, 0x7c))
}

var dx = []byte{wasmbin.I32, wasmbin.I64} // (d i32, x i64)

func stackShapes() []stackShape {
	i64 := []byte{wasmbin.I64}
	callF := []byte{0x10, stackF}
	var shapes []stackShape
	for _, depth := range []int32{3000, 1 << 30} {
		for _, k := range []int{1000, 100, 8} {
			shapes = append(shapes, stackShape{name: fmt.Sprintf("recursion, %d live i64, depth %d", k, depth), depth: depth,
				f: []advFunc{{params: dx, results: i64, body: recurse(k, callF)}}})
		}
	}
	deep := int32(1 << 30)
	// Nothing live: the deepest recursion per unit of fuel.
	shapes = append(shapes, stackShape{name: "recursion, nothing live", depth: deep,
		f: []advFunc{{params: dx, results: i64, body: cat(lget(0), []byte{0x45, 0x04, 0x40}, lget(1), []byte{0x0f, 0x0b},
			lget(0), i32c(1), []byte{0x6b}, lget(1), callF)}}})
	// Mutual recursion, f -> g -> f.
	shapes = append(shapes, stackShape{name: "mutual recursion, 500 live i64 each", depth: deep,
		f: []advFunc{{params: dx, results: i64, body: recurse(500, []byte{0x10, stackF + 1})},
			{params: dx, results: i64, body: cat(liveValues(1, 500), lget(0), lget(1), callF, rep(500, 0x7c))}}})
	// call_indirect to itself through a table.
	shapes = append(shapes, stackShape{name: "call_indirect recursion, 1000 live i64", depth: deep, table: true,
		setup: cat(i32c(0), []byte{0xd2, stackF}, i32c(16), []byte{0xfc, 0x11, 0x00}),
		f:     []advFunc{{params: dx, results: i64, body: recurse(1000, cat(i32c(3), []byte{0x11}, u32(2), []byte{0x00})) /* type 2: (i32,i64)->i64 */}}})
	// Many parameters (the most a type may have), passed on and live
	// across the call.
	params := append([]byte{wasmbin.I32}, rep(999, wasmbin.I64)...)
	var args, fold []byte
	for p := uint32(1); p <= 999; p++ {
		args = append(args, lget(p)...)
		fold = append(fold, cat(lget(p), []byte{0x7c})...)
	}
	shapes = append(shapes, stackShape{name: "recursion, 999 i64 parameters", depth: deep,
		f: []advFunc{
			{params: dx, results: i64, body: cat(lget(0), liveValues(1, 999), []byte{0x10, stackF + 1})},
			{params: params, results: i64, body: cat(lget(0), []byte{0x45, 0x04, 0x40}, lget(1), []byte{0x0f, 0x0b},
				lget(0), i32c(1), []byte{0x6b}, args, []byte{0x10, stackF + 1}, fold)}}})
	// Many locals, each set before the call and read after.
	var set, get []byte
	for l := uint32(2); l < 1002; l++ {
		set = append(set, cat(lget(1), i64c(int64(l)), []byte{0x7c}, lset(l))...)
		get = append(get, cat(lget(l), []byte{0x7c})...)
	}
	shapes = append(shapes, stackShape{name: "recursion, 1000 i64 locals", depth: deep,
		f: []advFunc{{params: dx, results: i64, locals: []wasmbin.LocalDecl{{Count: 1000, Type: wasmbin.I64}},
			body: cat(lget(0), []byte{0x45, 0x04, 0x40}, lget(1), []byte{0x0f, 0x0b}, set,
				lget(0), i32c(1), []byte{0x6b}, lget(1), callF, get)}}})
	// v128 values.
	var vpush []byte
	for k := 0; k < 500; k++ {
		vpush = append(vpush, cat(lget(1), []byte{0xfd, 0x12}, lget(1), i64c(int64(k)), []byte{0x7c, 0xfd, 0x12, 0xfd, 0xce, 0x01})...) // i64x2.splat, i64x2.add
	}
	shapes = append(shapes, stackShape{name: "recursion, 500 live v128", depth: deep,
		f: []advFunc{{params: dx, results: i64, body: cat(lget(0), []byte{0x45, 0x04, 0x40}, lget(1), []byte{0x0f, 0x0b},
			vpush, lget(0), i32c(1), []byte{0x6b}, lget(1), callF, []byte{0xfd, 0x12}, rep(500, 0xfd, 0xce, 0x01), []byte{0xfd, 0x1d, 0x00})}}}) // i64x2.extract_lane 0
	return shapes
}

func (s stackShape) build() []byte {
	return advModule{spinIsClassify: true, extra: s.f, table: s.table,
		body: cat(s.setup, i32c(s.depth), i64c(1), []byte{0x10, stackF, 0xa7}, i32c(1), []byte{0x71, 0x1a}, i32c(0))}.build()
}

// stackCall is one module's worst call: the fastest of several rounds,
// each a call on a fresh instance (a cold stack, as after every trap).
type stackCall struct {
	name  string
	cost  time.Duration
	alloc uint64 // bytes the call allocated (its stack, as it grew)
	fault string // how the call ended
}

// measureStackCalls times the first call of every stack module on fresh
// instances, and the empty loop's call that spends the whole budget, with
// opts; the loop comes first.
func measureStackCalls(tb testing.TB, opts Options, rounds int) []stackCall {
	ctx := context.Background()
	opts.TimeLimit, opts.BreakerThreshold = time.Hour, 1<<30
	type mod struct {
		name string
		bin  []byte
		spin bool
	}
	mods := []mod{{name: "empty loop (whole budget)", bin: advModule{name: "empty loop"}.build(), spin: true}}
	for _, s := range stackShapes() {
		mods = append(mods, mod{name: s.name, bin: s.build()})
	}
	var res []stackCall
	for _, md := range mods {
		m, err := Load(ctx, md.bin, opts)
		if err != nil {
			tb.Fatalf("%s: %v", md.name, err)
		}
		c := stackCall{name: md.name, cost: time.Duration(1 << 62)}
		for range rounds {
			g, err := m.newGuest(ctx)
			if err != nil {
				tb.Fatal(err)
			}
			name := exportClassify
			if md.spin {
				name = "spin"
			}
			f := g.mod.ExportedFunction(name)
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			start := time.Now()
			_, err = f.Call(ctx)
			d := time.Since(start)
			runtime.ReadMemStats(&after)
			c.alloc = max(c.alloc, after.TotalAlloc-before.TotalAlloc)
			switch {
			case err == nil:
				c.fault = "returned"
			case int64(g.tank.Get()) < 0:
				c.fault = "out of fuel"
			default:
				c.fault = "trap (stack)"
			}
			c.cost = min(c.cost, d)
			_ = g.mod.Close(ctx)
		}
		_ = m.Close(ctx)
		res = append(res, c)
	}
	return res
}

func printStackCalls(w *os.File, res []stackCall) (worst stackCall, ratio float64) {
	loop := res[0]
	sorted := append([]stackCall(nil), res[1:]...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].cost > sorted[j].cost })
	fmt.Fprintf(w, "%-45s %10v\n", loop.name, loop.cost.Round(time.Microsecond))
	for _, r := range sorted {
		fmt.Fprintf(w, "%-45s %10v  %5.2fx  %6d KiB allocated  %s\n", r.name, r.cost.Round(time.Microsecond), float64(r.cost)/float64(loop.cost), r.alloc>>10, r.fault)
	}
	return sorted[0], float64(sorted[0].cost) / float64(loop.cost)
}

// BenchmarkStackCalls prints every stack module's worst call against the
// loop that spends the same budget, for the default options and a tenth
// of the fuel, and reports the worst ratio.
//
//	go test -run '^$' -bench StackCalls -benchtime 1x ./wasmclass
func BenchmarkStackCalls(b *testing.B) {
	for _, c := range []struct {
		name string
		opts Options
	}{{"defaults", Options{}}, {"fuel=100000", Options{Fuel: 100_000}}} {
		b.Run(c.name, func(b *testing.B) {
			var res []stackCall
			for b.Loop() {
				res = measureStackCalls(b, c.opts, 9)
			}
			worst, ratio := printStackCalls(os.Stdout, res)
			fmt.Fprintf(os.Stdout, "%s: worst %s, %.2fx the loop\n", c.name, worst.name, ratio)
			b.ReportMetric(ratio, "worst-ratio")
			b.ReportMetric(float64(res[0].cost.Microseconds())/1e3, "loop-ms")
		})
	}
}

// TestStackModulesBoundedByFuel: no stack module's call (on a fresh
// instance: a cold stack, as after every trap) makes wazero allocate more
// stack than its budget buys (fuel.Costs.StackByte: a byte of estimated
// frame costs two units; the stack doubles as it grows). The time each
// call takes against a loop that spends the whole budget (bar: 2x) is
// BenchmarkStackCalls'. Before the call stack
// was priced, a call could allocate 4 MiB of estimated frames whatever its
// budget (about 6 MiB of real stack; 7-12x the loop here, more in a server
// whose heap makes the allocation trigger a collection).
func TestStackModulesBoundedByFuel(t *testing.T) {
	for _, budget := range []uint64{DefaultFuel, 100_000} {
		res := measureStackCalls(t, Options{Fuel: budget}, 1)
		base := res[0].alloc // a fresh instance's first call, without a deep stack
		buys := budget * fuel.TicksPerUnit / uint64(fuel.DefaultCosts(DefaultMemoryLimitPages, MaxTableElements).StackByte)
		for _, r := range res[1:] {
			// The account bounds estimated frames to the budget's bytes
			// (and a chain of known depth below them to half that); the
			// stack doubles as it grows, from 10 KiB, by at least the
			// frame it needs: what it allocates is a few times its size.
			if extra := int64(r.alloc) - int64(base); extra > int64(4*buys+64<<10) {
				t.Errorf("fuel %d: %s: one call allocated %d KiB beyond a shallow call's, the budget buys %d KiB of stack",
					budget, r.name, extra>>10, buys>>10)
			}
		}
	}
	// The time bar (no call over twice the loop that spends the whole
	// budget) is BenchmarkStackCalls': a timed test on a shared machine
	// fails on the machine's noise, not the module's cost.
}
