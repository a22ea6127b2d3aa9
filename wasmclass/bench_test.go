package wasmclass

import (
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/persephone-go/psp/app"
)

// exampleModule reads a committed example classifier, skipping the
// benchmark when it is absent.
func exampleModule(b *testing.B, path string) []byte {
	bin, err := os.ReadFile(filepath.Join("..", "examples", "classifiers", path))
	if err != nil {
		b.Skipf("example %s: %v", path, err)
	}
	return bin
}

// headerPayloads returns n 16-byte psp headers with types 1..11.
func headerPayloads(n int) [][]byte {
	ps := make([][]byte, n)
	for i := range ps {
		p := make([]byte, 16)
		binary.LittleEndian.PutUint32(p[4:], uint32(1+i%11))
		ps[i] = p
	}
	return ps
}

func respPayloads(n int) [][]byte {
	reqs := []string{
		"*2\r\n$3\r\nGET\r\n$3\r\nkey\r\n",
		"*3\r\n$3\r\nset\r\n$3\r\nkey\r\n$5\r\nvalue\r\n",
		"*2\r\n$4\r\nSCAN\r\n$1\r\n0\r\n",
		"*3\r\n$4\r\nEVAL\r\n$10\r\nreturn 1+1\r\n$1\r\n0\r\n",
		"zrangebyscore z 0 1\r\n",
	}
	ps := make([][]byte, n)
	for i := range ps {
		ps[i] = []byte(reqs[i%len(reqs)])
	}
	return ps
}

// BenchmarkFuelOverhead compares instrumented and uninstrumented modules,
// batch of 32: the fuel target is <= 10%.
func BenchmarkFuelOverhead(b *testing.B) {
	for _, bm := range []struct {
		name, path string
		payloads   [][]byte
	}{
		{"wat-pspheader", "wat/pspheader.wasm", headerPayloads(MaxBatch)},
		{"c-pspheader", "c/pspheader.wasm", headerPayloads(MaxBatch)},
		{"c-resp", "c/resp.wasm", respPayloads(MaxBatch)},
	} {
		for _, fuel := range []bool{false, true} {
			name := bm.name + "/nofuel"
			if fuel {
				name = bm.name + "/fuel"
			}
			b.Run(name, func(b *testing.B) {
				ctx := context.Background()
				m, err := Load(ctx, exampleModule(b, bm.path), Options{noFuel: !fuel})
				if err != nil {
					b.Fatal(err)
				}
				defer m.Close(ctx)
				i, err := m.NewInstance(ctx)
				if err != nil {
					b.Fatal(err)
				}
				defer i.Close(ctx)
				out := make([]uint32, len(bm.payloads))
				b.ReportAllocs()
				for b.Loop() {
					i.ClassifyBatch(bm.payloads, out)
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(bm.payloads)), "ns/packet")
				if f := i.Faults(); f.Total() != 0 || out[1] == 0 {
					b.Fatalf("faults %+v, out %v", f, out)
				}
			})
		}
	}
}

// BenchmarkClassify is the single-packet path.
func BenchmarkClassify(b *testing.B) {
	i := instance(b, load(b, "good", Options{}))
	p := []byte{2, 0, 0, 0}
	b.ReportAllocs()
	for b.Loop() {
		i.Classify(p)
	}
}

// BenchmarkCaller classifies batches of 32 packets through a Caller and
// reports ns per packet.
func BenchmarkCaller(b *testing.B) {
	h := newTestHost(b, HostSpec{Name: "a", Wasm: exampleModule(b, "wat/pspheader.wasm")})
	c, err := h.NewCaller()
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	ps := headerPayloads(MaxBatch)
	out := make([]app.Type, len(ps))
	c.ClassifyBatch(ps, out) // create the instance
	b.ReportAllocs()
	for b.Loop() {
		c.ClassifyBatch(ps, out)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(ps)), "ns/packet")
}

// BenchmarkFuelRatio interleaves an instrumented and an uninstrumented
// instance of the same module, 16 batches each in turn, and compares the
// fastest round of each: on a shared, noisy machine the minimum is the
// figure least disturbed by preemption. It reports the fuel overhead in %.
func BenchmarkFuelRatio(b *testing.B) {
	for _, bm := range []struct {
		name, path string
		payloads   [][]byte
	}{
		{"c-pspheader", "c/pspheader.wasm", headerPayloads(MaxBatch)},
		{"c-resp", "c/resp.wasm", respPayloads(MaxBatch)},
	} {
		b.Run(bm.name, func(b *testing.B) {
			ctx := context.Background()
			bin := exampleModule(b, bm.path)
			var insts [2]*Instance
			for k, noFuel := range []bool{true, false} {
				m, err := Load(ctx, bin, Options{noFuel: noFuel})
				if err != nil {
					b.Fatal(err)
				}
				defer m.Close(ctx)
				if insts[k], err = m.NewInstance(ctx); err != nil {
					b.Fatal(err)
				}
				defer insts[k].Close(ctx)
			}
			const rounds = 16
			out := make([]uint32, len(bm.payloads))
			best := [2]time.Duration{time.Hour, time.Hour}
			b.ReportAllocs()
			for b.Loop() {
				for k, inst := range insts {
					start := time.Now()
					for j := 0; j < rounds; j++ {
						inst.ClassifyBatch(bm.payloads, out)
					}
					best[k] = min(best[k], time.Since(start))
				}
			}
			packets := float64(rounds * len(bm.payloads))
			b.ReportMetric(float64(best[0].Nanoseconds())/packets, "ns/packet-nofuel")
			b.ReportMetric(float64(best[1].Nanoseconds())/packets, "ns/packet-fuel")
			b.ReportMetric(100*(float64(best[1])/float64(best[0])-1), "overhead-%")
		})
	}
}
