package dispatcher

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/persephone-go/psp/nic"
	"github.com/persephone-go/psp/wasmclass"
	"github.com/persephone-go/psp/wire"
)

// hostileModules are the example hostile classifiers that load (the
// others are refused at load: they never run).
var hostileModules = []string{"loop", "recursion", "membomb", "trap", "badcount", "outofrange"}

func readExample(tb testing.TB, path ...string) []byte {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join(append([]string{"..", "examples", "classifiers"}, path...)...))
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// tenantHost loads one tenant's classifier in a host of its own, as a
// multi-tenant server does, and returns its caller.
func tenantHost(tb testing.TB, name string, wasm []byte) *wasmclass.Caller {
	tb.Helper()
	_, c := hostCaller(tb, wasmclass.HostSpec{Name: name, Wasm: wasm, MaxTypes: HeaderNumTypes})
	return c
}

// hostCaller loads a host of spec and makes it a caller; both close when
// the test ends.
func hostCaller(tb testing.TB, spec wasmclass.HostSpec) (*wasmclass.Host, *wasmclass.Caller) {
	tb.Helper()
	ctx := context.Background()
	h, err := wasmclass.NewHost(ctx, spec)
	if err != nil {
		tb.Fatal(err)
	}
	c, err := h.NewCaller()
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close(); h.Close(ctx) })
	return h, c
}

// burstTimes summarises per-burst latencies.
func burstTimes(b *testing.B, ds []time.Duration) {
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	b.ReportMetric(float64(sum.Nanoseconds())/float64(len(ds))/1e3, "A-burst-mean-µs")
	b.ReportMetric(float64(ds[len(ds)/2].Nanoseconds())/1e3, "A-burst-p50-µs")
	b.ReportMetric(float64(ds[len(ds)*99/100].Nanoseconds())/1e3, "A-burst-p99-µs")
	b.ReportMetric(float64(ds[len(ds)-1].Nanoseconds())/1e3, "A-burst-max-µs")
}

// BenchmarkTenantBurst measures how long tenant A's burst of 31 packets
// takes to be classified (and, with lanes, enqueued) alone and with one
// packet of a hostile tenant B in it, for each hostile example module:
//
//   - auto: a multi-tenant dispatcher, each tenant its own Host and
//     Caller, classified apart (IsolateAuto, the default): inline while a
//     classifier behaves, on the tenant's lane after a fault or a slow
//     call;
//   - lane: the same with IsolateLane: always on the tenants' lanes.
//
// Run it with -benchtime 200x: each iteration is one burst.
func BenchmarkTenantBurst(b *testing.B) {
	good := readExample(b, "c", "pspheader.wasm")
	for _, hostile := range append([]string{"alone"}, hostileModules...) {
		bWasm := good
		if hostile != "alone" {
			bWasm = readExample(b, "hostile", hostile+".wasm")
		}
		b.Run("auto/"+hostile, func(b *testing.B) { benchTenants(b, good, bWasm, hostile != "alone", IsolateAuto) })
		b.Run("lane/"+hostile, func(b *testing.B) { benchTenants(b, good, bWasm, hostile != "alone", IsolateLane) })
	}
}

func burstPayloads(withB bool) ([][]byte, []uint16) {
	var payloads [][]byte
	var ports []uint16
	for i := range 31 {
		payloads = append(payloads, header(uint32(i), wire.TypeShort, 1000))
		ports = append(ports, portA)
	}
	if withB {
		payloads = append(payloads, header(99, wire.TypeShort, 1000))
		ports = append(ports, portB)
	}
	return payloads, ports
}

func benchTenants(b *testing.B, aWasm, bWasm []byte, withB bool, iso Isolation) {
	dp := newFakeDataplane(32, 2048, 64)
	dp.keep = false
	d, err := New(Spec{Workers: 32, Tenants: []TenantSpec{
		{Name: "a", Ports: []uint16{portA}, Classifier: tenantHost(b, "a", aWasm), Isolation: iso},
		{Name: "b", Ports: []uint16{portB}, Classifier: tenantHost(b, "b", bWasm), Isolation: iso},
	}}, dp, nil, tenantPolicy(b, 32, 0), echo)
	if err != nil {
		b.Fatal(err)
	}
	// The lanes run on goroutines; the benchmark plays the dispatcher
	// goroutine (step) and the workers.
	d.lifeMu.Lock()
	d.started = true
	d.startLanes()
	d.lifeMu.Unlock()
	defer func() {
		for _, t := range d.mt.tenants {
			t.lane.halt()
		}
		d.mt.lanes.Wait()
	}()
	payloads, ports := burstPayloads(withB)
	aShort := &d.counters[1+wire.TypeShort]
	one := make([]*nic.Buffer, 1)
	playWorkers := func() {
		for _, w := range d.workers {
			if tk, ok := w.in.Pop(); ok {
				one[0] = tk.buf
				w.tx.Send(one)
				w.out.Push(completion{typ: tk.typ, end: 1000})
			}
		}
	}
	ds := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		before := aShort.received
		for i, p := range payloads {
			for !dp.inject(p, ports[i]) {
				d.step(0)
				playWorkers()
			}
		}
		start := time.Now()
		for aShort.received-before < 31 {
			d.step(0)
			playWorkers()
			if time.Since(start) > 10*time.Second {
				b.Fatalf("A's burst not classified in 10s")
			}
		}
		ds = append(ds, time.Since(start))
	}
	b.StopTimer()
	burstTimes(b, ds)
	if withB {
		b.ReportMetric(float64(d.mt.tenants[1].escalations), "B-escalations")
	}
}
