package darc

import (
	"fmt"
	"testing"
)

// BenchmarkManyTypes: the burst of BenchmarkBurst (two busy types) under
// policies of 4, 1,024 and 65,535 types, then every type busy ("flat":
// one profile for all, so DARC puts them in one group).
func BenchmarkManyTypes(b *testing.B) {
	b.Run("burst", benchmarkBurstTypes)
	b.Run("flat", benchmarkFlatTypes)
}

func benchmarkBurstTypes(b *testing.B) {
	for _, types := range []int{4, 1024, 65535} {
		for _, name := range []string{NameCFCFS, NameDARC} {
			b.Run(fmt.Sprintf("%s/types=%d", name, types), func(b *testing.B) {
				cfg := cycleConfig()
				cfg.NumTypes = types
				cfg.Pool = 1 << 20
				cfg.QueueCapacity = 0
				p, err := New(name, cfg)
				if err != nil {
					b.Fatal(err)
				}
				out := make([]Assignment, 16)
				now := int64(0)
				for b.Loop() {
					now += 1000
					for i := range 32 {
						p.Enqueue(Request{Handle: uint64(i), Type: Type(1 + i&1)}, now)
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
			})
		}
	}
}

func benchmarkFlatTypes(b *testing.B) {
	for _, types := range []int{4, 1024, 65535} {
		b.Run(fmt.Sprintf("types=%d", types), func(b *testing.B) {
			cfg := cycleConfig()
			cfg.NumTypes = types
			cfg.Pool = 1 << 20
			cfg.Profile = nil
			for t := 1; t < types; t++ {
				cfg.Profile = append(cfg.Profile, TypeProfile{Type: Type(t), MeanNs: 1000, Ratio: 1})
			}
			p, err := New(NameDARC, cfg)
			if err != nil {
				b.Fatal(err)
			}
			out := make([]Assignment, 16)
			now := int64(0)
			k := 0
			for b.Loop() {
				now += 1000
				for i := range 32 {
					k++
					p.Enqueue(Request{Handle: uint64(i), Type: Type(1 + k%(types-1))}, now)
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
		})
	}
}
