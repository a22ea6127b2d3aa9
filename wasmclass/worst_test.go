package wasmclass

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"
)

// hostileExamples are the example hostile classifiers that load.
var hostileExamples = []string{"loop", "recursion", "membomb", "trap", "badcount", "outofrange"}

// worstCall is one module's call time: the fastest of several rounds (its
// own cost, without the machine's preemptions) and the slowest.
type worstCall struct {
	name      string
	cost, max time.Duration
}

func (w *worstCall) add(d time.Duration) {
	if w.cost == 0 || d < w.cost {
		w.cost = d
	}
	w.max = max(w.max, d)
}

// measureWorstCalls returns, for the given options, the cost of one call
// of every adversarial module (its "spin", which runs until its fuel is
// spent) and of every hostile example's batch of 32 packets through a
// fresh instance (its first call is the dearest), dearest first.
func measureWorstCalls(tb testing.TB, opts Options, rounds int, adversarial bool, only ...string) []worstCall {
	ctx := context.Background()
	opts.TimeLimit, opts.BreakerThreshold = time.Hour, 1<<30
	var res []worstCall
	if adversarial {
		for _, a := range advModules() {
			m, err := Load(ctx, a.build(), opts)
			if err != nil {
				tb.Fatalf("%s: %v", a.name, err)
			}
			w := worstCall{name: a.name}
			for range rounds {
				g, err := m.newGuest(ctx)
				if err != nil {
					tb.Fatal(err)
				}
				spin := g.mod.ExportedFunction("spin")
				start := time.Now()
				spin.Call(ctx)
				w.add(time.Since(start))
				_ = g.mod.Close(ctx)
			}
			_ = m.Close(ctx)
			res = append(res, w)
		}
	}
	payloads := make([][]byte, MaxBatch)
	for i := range payloads {
		payloads[i] = []byte("0123456789abcdef")
	}
	out := make([]uint32, MaxBatch)
	hostile := hostileExamples
	if len(only) > 0 {
		hostile = only
	}
	for _, name := range hostile {
		bin, err := os.ReadFile(filepath.Join("..", "examples", "classifiers", "hostile", name+".wasm"))
		if err != nil {
			tb.Fatal(err)
		}
		m, err := Load(ctx, bin, opts)
		if err != nil {
			tb.Fatalf("hostile %s: %v", name, err)
		}
		w := worstCall{name: "hostile " + name}
		for range rounds {
			inst, err := m.NewInstance(ctx)
			if err != nil {
				tb.Fatal(err)
			}
			start := time.Now()
			inst.ClassifyBatch(payloads, out)
			w.add(time.Since(start))
			_ = inst.Close(ctx)
		}
		_ = m.Close(ctx)
		res = append(res, w)
	}
	sort.Slice(res, func(i, j int) bool { return res[i].cost > res[j].cost })
	return res
}

// BenchmarkWorstCall measures the longest one classifier call (a batch of
// up to 32 packets) takes with any adversarial module or hostile example:
// the most a tenant's packet can cost the goroutine that classifies it
// (the dispatcher's, for one call, before the tenant is moved to its
// lane). Fuel bounds the work; the stack limit bounds a recursion, whose
// trap unwinds every frame. It prints the dearest modules for the default
// limits, a tenth of the fuel, and a sixteenth of the stack, and reports
// the worst module's cost (the fastest of 5 calls: its own time, without
// the machine's preemptions) as worst-ms.
//
//	go test -run '^$' -bench WorstCall -benchtime 1x ./wasmclass
func BenchmarkWorstCall(b *testing.B) {
	for _, c := range []struct {
		name string
		opts Options
	}{
		{"defaults", Options{}},
		{"fuel=100000", Options{Fuel: 100_000}},
		{"stack=256KiB", Options{StackLimit: 256 << 10}},
		{"fuel=100000,stack=256KiB", Options{Fuel: 100_000, StackLimit: 256 << 10}},
	} {
		b.Run(c.name, func(b *testing.B) {
			var res []worstCall
			for b.Loop() {
				res = measureWorstCalls(b, c.opts, 5, true)
			}
			for _, r := range res[:6] {
				fmt.Fprintf(os.Stdout, "%s: %-40s %8v (slowest of 5: %v)\n", c.name, r.name, r.cost.Round(time.Microsecond), r.max.Round(time.Microsecond))
			}
			b.ReportMetric(float64(res[0].cost.Microseconds())/1e3, "worst-ms")
		})
	}
}

// TestWorstCallBoundedByConfiguration: a tenth of the fuel cuts the worst
// looping module's call, a sixteenth of the stack the hostile recursion's:
// the bound is the configuration's.
func TestWorstCallBoundedByConfiguration(t *testing.T) {
	if raceEnabled {
		t.Skip("timing: the race detector's instrumentation of the host side, not the module's work, dominates a call")
	}
	cost := func(opts Options, name string) time.Duration {
		for _, r := range measureWorstCalls(t, opts, 5, false, name) {
			return r.cost
		}
		t.Fatalf("no module %s", name)
		return 0
	}
	retry := func(what string, small, large func() time.Duration) {
		// The machine's noise can only slow a call: retry the measure,
		// never the bar.
		var s, l time.Duration
		for range 3 {
			if s, l = small(), large(); s*3 < l {
				t.Logf("%s: %v against %v", what, s, l)
				return
			}
		}
		t.Errorf("%s: %v with the smaller limit, %v with the larger: not bounded by it", what, s, l)
	}
	retry("hostile loop, fuel 20k vs 200k",
		func() time.Duration { return cost(Options{Fuel: 20_000}, "loop") },
		func() time.Duration { return cost(Options{Fuel: 200_000}, "loop") })
	retry("hostile recursion, stack 256 KiB vs 4 MiB",
		func() time.Duration { return cost(Options{Fuel: 1 << 30, StackLimit: 256 << 10}, "recursion") },
		func() time.Duration { return cost(Options{Fuel: 1 << 30, StackLimit: 4 << 20}, "recursion") })
}
