package darc

import (
	"fmt"
	"testing"
)

// BenchmarkManyTypes: the burst of BenchmarkBurst (two busy types) under
// policies of 4, 1,024 and 65,535 types, then every type busy ("flat":
// one profile for all, so DARC puts them in one group).
func BenchmarkManyTypes(b *testing.B) {
	for _, types := range []int{4, 1024, 65535} {
		cfg := cycleConfig()
		cfg.NumTypes, cfg.Pool = types, 1<<20
		for _, name := range []string{NameCFCFS, NameDARC} {
			b.Run(fmt.Sprintf("burst/%s/types=%d", name, types), func(b *testing.B) {
				runBursts(b, newPolicyB(b, name, cfg), func(i int) Type { return Type(1 + i&1) })
			})
		}
		flat := cfg
		flat.Profile = nil
		for t := 1; t < types; t++ {
			flat.Profile = append(flat.Profile, TypeProfile{Type: Type(t), MeanNs: 1000, Ratio: 1})
		}
		b.Run(fmt.Sprintf("flat/types=%d", types), func(b *testing.B) {
			runBursts(b, newPolicyB(b, NameDARC, flat), func(i int) Type { return Type(1 + i%(types-1)) })
		})
	}
}

func newPolicyB(b *testing.B, name string, cfg Config) Policy {
	p, err := New(name, cfg)
	if err != nil {
		b.Fatal(err)
	}
	return p
}

// runBursts enqueues 32 requests, of types typeOf(k) for the k-th request
// of the run, then dispatches and completes them on 16 workers, b.N times:
// the dispatcher's batched pattern. It reports ns/request.
func runBursts(b *testing.B, p Policy, typeOf func(k int) Type) {
	out := make([]Assignment, 16)
	now, k := int64(0), 0
	b.ReportAllocs()
	for b.Loop() {
		now += 1000
		for i := range 32 {
			p.Enqueue(Request{Handle: uint64(i), Type: typeOf(k)}, now)
			k++
		}
		for {
			n := p.Dispatch(now, out)
			if n == 0 {
				break
			}
			for _, a := range out[:n] {
				p.Complete(a.Worker, a.Request.Type, 1000, now)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*32), "ns/request")
}
