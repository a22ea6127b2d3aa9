package dispatcher

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/persephone-go/psp/app"
	"github.com/persephone-go/psp/darc"
	"github.com/persephone-go/psp/nic"
	"github.com/persephone-go/psp/nic/memnic"
	"github.com/persephone-go/psp/wasmclass"
	"github.com/persephone-go/psp/wire"
)

// benchHeaders is a High Bimodal mix for the generator.
var benchHeaders = []wire.Header{{Type: wire.TypeShort, ServiceNs: 1000}, {Type: wire.TypeLong, ServiceNs: 100000}}

// wasmClassifier loads the example C psp-header classifier.
func wasmClassifier(tb testing.TB) app.Classifier {
	tb.Helper()
	host, caller := hostCaller(tb, wasmclass.HostSpec{Name: "psp", Wasm: readExample(tb, "c", "pspheader.wasm")})
	if n := host.NumTypes(); n != HeaderNumTypes {
		tb.Fatalf("wasm psp-header classifier has %d types, want %d", n, HeaderNumTypes)
	}
	return caller
}

// BenchmarkDispatcherStep measures the dispatcher core alone: per packet,
// receive from the in-memory generator, classify (in a batch), enqueue in
// the policy, dispatch, push to a worker ring, and collect the completion.
// The benchmark goroutine plays the workers inline (pop, send, complete), so
// the figure is one core's dispatcher throughput; compare with the paper's
// 7 Mpps (ns/op is per packet).
//
// Policy "server" is what psp serve runs for one classifier under darc:
// darc.Tenants with the classifier as its default tenant.
func BenchmarkDispatcherStep(b *testing.B) {
	for _, cls := range []string{"native", "wasm"} {
		for _, policy := range []string{"darc", "cfcfs", "server"} {
			b.Run(cls+"/"+policy, func(b *testing.B) {
				var c app.Classifier = HeaderClassifier{}
				if cls == "wasm" {
					c = wasmClassifier(b)
				}
				benchStep(b, c, policy)
			})
		}
	}
}

func benchStep(b *testing.B, cls app.Classifier, policyName string) {
	const workers = 32 // one burst's worth: every received packet finds an idle worker
	mcfg := memnic.Config{Workers: workers, Buffers: 1024, Generator: &memnic.Generator{Headers: benchHeaders}}
	if policyName == "server" {
		mcfg.ExtraBuffers = 256 // the lanes' own, as psp serve gives them
	}
	dp := memnic.New(mcfg)
	defer dp.Close()
	// Budgets over the dataplane's pool and automatic deadlines, as psp
	// serve runs it.
	var policy darc.Policy
	var err error
	spec := Spec{Workers: workers, Burst: 32}
	if policyName == "server" {
		spec.LaneBuffers = mcfg.ExtraBuffers
		policy, err = darc.NewTenants(darc.NameDARC, darc.Config{Workers: workers, MinSamples: 1000, Pool: dp.RequestBuffers(),
			Tenants: []darc.TenantConfig{{Name: DefaultTenant, Default: true, NumTypes: HeaderNumTypes}}})
		spec.Tenants = []TenantSpec{{Name: DefaultTenant, Classifier: cls, Isolation: IsolateInline}}
	} else {
		policy, err = darc.New(policyName, darc.Config{Workers: workers, NumTypes: HeaderNumTypes, MinSamples: 1000, Pool: dp.RequestBuffers()})
	}
	if err != nil {
		b.Fatal(err)
	}
	d, err := New(spec, dp, cls, policy, echo)
	if err != nil {
		b.Fatal(err)
	}
	one := make([]*nic.Buffer, 1)
	service := [HeaderNumTypes]int64{wire.TypeShort: 1000, wire.TypeLong: 100000}
	playWorkers := func() {
		for _, w := range d.workers {
			if t, ok := w.in.Pop(); ok {
				one[0] = t.buf
				w.tx.Send(one)
				w.out.Push(completion{typ: t.typ, start: 0, end: service[t.typ]})
			}
		}
	}
	// Warm up past DARC's startup phase.
	for d.received < 5000 {
		d.step(0)
		playWorkers()
	}
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	base := d.received
	for d.received-base < uint64(b.N) {
		d.step(0)
		playWorkers()
	}
	el := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(d.received-base)/el.Seconds()/1e6, "Mpps")
	if d.drops.Total() != 0 {
		b.Fatalf("drops %+v", d.drops)
	}
	if policyName != "cfcfs" {
		var s darc.Snapshot
		policy.Snapshot(&s)
		if s.Phase != "darc" {
			b.Fatalf("DARC still in phase %q", s.Phase)
		}
	}
}

// BenchmarkPipeline runs the whole pipeline (Run, with worker goroutines
// doing no work) on the in-memory generator and reports answered packets per
// second. On a 2-core machine the dispatcher and the workers share cores, so
// this is far below BenchmarkDispatcherStep.
func BenchmarkPipeline(b *testing.B) {
	for _, idle := range []string{IdleSpinThenPark, IdleBusyPoll} {
		b.Run(idle, func(b *testing.B) {
			const workers = 1 // with the dispatcher, one thread per core on 2 cores
			dp := memnic.New(memnic.Config{Workers: workers, Buffers: 4096,
				Generator: &memnic.Generator{Headers: benchHeaders, Count: uint64(b.N)}})
			defer dp.Close()
			policy, err := darc.New("cfcfs", darc.Config{Workers: workers, NumTypes: HeaderNumTypes})
			if err != nil {
				b.Fatal(err)
			}
			d, err := New(Spec{Workers: workers, Idle: idle}, dp, HeaderClassifier{}, policy, echo)
			if err != nil {
				b.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			b.ResetTimer()
			start := time.Now()
			go func() { done <- d.Run(ctx) }()
			for {
				s := d.Stats()
				if s.Answered+s.Dropped >= uint64(b.N) {
					break
				}
				time.Sleep(time.Millisecond)
			}
			el := time.Since(start)
			b.StopTimer()
			cancel()
			if err := <-done; err != nil {
				b.Fatal(err)
			}
			s := d.Stats()
			b.ReportMetric(float64(s.Answered)/el.Seconds()/1e6, "answered-Mpps")
			b.ReportMetric(float64(s.Dropped), "dropped")
		})
	}
}

// TestPipelineStepNoAlloc checks the per-burst step allocates nothing with
// the real policies, the in-memory dataplane and both classifiers.
func TestPipelineStepNoAlloc(t *testing.T) {
	for _, cls := range []string{"native", "wasm"} {
		for _, policyName := range []string{"darc", "cfcfs", "dfcfs", "fp"} {
			t.Run(cls+"/"+policyName, func(t *testing.T) {
				var c app.Classifier = HeaderClassifier{}
				if cls == "wasm" {
					c = wasmClassifier(t)
				}
				const workers = 32
				mcfg := memnic.Config{Workers: workers, Buffers: 1024, Generator: &memnic.Generator{Headers: benchHeaders}}
				if policyName == "server" {
					mcfg.ExtraBuffers = 256 // the lanes' own, as psp serve gives them
				}
				dp := memnic.New(mcfg)
				defer dp.Close()
				policy, err := darc.New(policyName, darc.Config{Workers: workers, NumTypes: HeaderNumTypes, MinSamples: 500, Pool: dp.RequestBuffers()})
				if err != nil {
					t.Fatal(err)
				}
				d, err := New(Spec{Workers: workers}, dp, c, policy, echo)
				if err != nil {
					t.Fatal(err)
				}
				one := make([]*nic.Buffer, 1)
				service := [HeaderNumTypes]int64{wire.TypeShort: 1000, wire.TypeLong: 100000}
				burst := func() {
					d.step(0)
					for _, w := range d.workers {
						if tk, ok := w.in.Pop(); ok {
							one[0] = tk.buf
							w.tx.Send(one)
							w.out.Push(completion{typ: tk.typ, end: service[tk.typ]})
						}
					}
				}
				for i := 0; i < 200; i++ { // past DARC's startup phase
					burst()
				}
				if a := testing.AllocsPerRun(200, burst); a != 0 {
					t.Errorf("a burst allocates %.2f times, want 0", a)
				}
				if d.drops.Total() != 0 {
					t.Errorf("drops %+v", d.drops)
				}
			})
		}
	}
}

// BenchmarkPublish: one stats publish, the dispatcher's pass over every
// type, with 4 and 65,535 types (a classifier may declare that many), none
// of them having seen a request but the header types.
func BenchmarkPublish(b *testing.B) {
	for _, types := range []int{4, 65535} {
		b.Run(fmt.Sprintf("types=%d", types), func(b *testing.B) {
			dp := memnic.New(memnic.Config{Workers: 2, Buffers: 1 << 20})
			defer dp.Close()
			policy, err := darc.New(darc.NameDARC, darc.Config{Workers: 2, NumTypes: types, MinSamples: 1000, Pool: dp.RequestBuffers()})
			if err != nil {
				b.Fatal(err)
			}
			d, err := New(Spec{Workers: 2}, dp, HeaderClassifier{}, policy, echo)
			if err != nil {
				b.Fatal(err)
			}
			now := int64(0)
			for b.Loop() {
				now += int64(time.Millisecond)
				d.publish(now)
			}
		})
	}
}

// TestStatsEveryFollowsTypes: publishes come every stats interval with few
// types and further apart with many (65,535: each publish took 10-15 ms).
func TestStatsEveryFollowsTypes(t *testing.T) {
	for _, tc := range []struct {
		types, buffers int
		want           time.Duration
	}{{4, 1 << 10, DefaultStatsInterval}, {4000, 1 << 16, DefaultStatsInterval}, {65536, 1 << 20, 65536 * statsPerType}} {
		dp := memnic.New(memnic.Config{Workers: 2, Buffers: tc.buffers})
		policy, err := darc.New(darc.NameDARC, darc.Config{Workers: 2, NumTypes: tc.types, Pool: dp.RequestBuffers()})
		if err != nil {
			t.Fatal(err)
		}
		d, err := New(Spec{Workers: 2}, dp, HeaderClassifier{}, policy, echo)
		if err != nil {
			t.Fatal(err)
		}
		if got := d.statsEvery(); got != tc.want {
			t.Errorf("%d types: a publish every %v, want %v", tc.types, got, tc.want)
		}
		dp.Close()
	}
}
