package classifiers_test

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/persephone-go/psp/app"
	"github.com/persephone-go/psp/app/kv"
	"github.com/persephone-go/psp/app/redis"
	"github.com/persephone-go/psp/wire"
)

// BenchmarkClassifyBatch measures each example in batches of 32 packets;
// ns/packet is the figure to compare (the psp header classifier in C and
// WAT: <= 25 ns/packet).
func BenchmarkClassifyBatch(b *testing.B) {
	header := make([][]byte, 32)
	for i := range header {
		header[i] = headerPayload(uint32(i), uint32(1+i%2))
	}
	resp := respBenchPayloads()
	memcached := make([][]byte, 32)
	for i := range memcached {
		memcached[i] = []byte([]string{"get key\r\n", "set key 0 0 1\r\nx\r\n", "get a b c\r\n", "delete key\r\n"}[i%4])
	}
	for _, bm := range []struct {
		path     string
		payloads [][]byte
	}{
		{"c/pspheader.wasm", header},
		{"wat/pspheader.wasm", header},
		{"rust/pspheader.wasm", header},
		{"assemblyscript/pspheader.wasm", header},
		{"go/pspheader.wasm", header},
		{"c/random.wasm", header},
		{"c/kv.wasm", kvPayloads()},
		{"c/memcached.wasm", memcached},
		{"c/resp.wasm", resp},
		{"rust/resp.wasm", resp},
	} {
		b.Run(strings.TrimSuffix(strings.ReplaceAll(bm.path, "/", "_"), ".wasm"), func(b *testing.B) {
			m := load(b, filepath.Clean(bm.path))
			inst := newInstance(b, m)
			out := make([]uint32, len(bm.payloads))
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				inst.ClassifyBatch(bm.payloads, out)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(bm.payloads)), "ns/packet")
			if f := inst.Faults(); f.Total() != 0 {
				b.Fatalf("faults: %+v", f)
			}
		})
	}
}

// BenchmarkRESPNative is the Go counterpart of BenchmarkClassifyBatch's
// RESP classifiers (same payloads): app/redis's native classifier.
func BenchmarkRESPNative(b *testing.B) {
	payloads := respBenchPayloads()
	out := make([]app.Type, len(payloads))
	b.ReportAllocs()
	for b.Loop() {
		redis.Classifier{}.ClassifyBatch(payloads, out)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(payloads)), "ns/packet")
}

func respBenchPayloads() [][]byte {
	resp := make([][]byte, 32)
	for i := range resp {
		switch i % 4 {
		case 0, 1:
			resp[i] = respArray([]string{"GET", "SET"}[i%4], "key:"+strings.Repeat("x", i), "0")
		case 2:
			resp[i] = respArray("scan", "0", "COUNT", "10000")
		case 3:
			resp[i] = respArray("ZRANGE", "z", "0", "9", "WITHSCORES")
		}
	}
	return resp
}

// BenchmarkClassify measures one packet per call into the guest, for
// comparison with the batched calls of BenchmarkClassifyBatch.
func BenchmarkClassify(b *testing.B) {
	payload := headerPayload(1, 2)
	for _, path := range []string{"c/pspheader.wasm", "wat/pspheader.wasm", "c/resp.wasm"} {
		b.Run(strings.TrimSuffix(strings.ReplaceAll(path, "/", "_"), ".wasm"), func(b *testing.B) {
			inst := newInstance(b, load(b, path))
			b.ReportAllocs()
			for b.Loop() {
				inst.Classify(payload)
			}
		})
	}
}

// TestClassifyNoAlloc asserts that classifying, one packet or a batch,
// allocates nothing on the host, whatever the guest language.
func TestClassifyNoAlloc(t *testing.T) {
	payloads := make([][]byte, 32)
	for i := range payloads {
		payloads[i] = headerPayload(uint32(i), uint32(i%3))
	}
	out := make([]uint32, len(payloads))
	for _, path := range pspHeaderModules {
		t.Run(filepath.Dir(path), func(t *testing.T) {
			inst := newInstance(t, load(t, path))
			if n := steadyAllocs(func() { inst.ClassifyBatch(payloads, out) }); n != 0 {
				t.Errorf("ClassifyBatch: %v allocations per batch, want 0 (faults %+v)", n, inst.Faults())
			}
			if n := steadyAllocs(func() { inst.Classify(payloads[1]) }); n != 0 {
				t.Errorf("Classify: %v allocations per call, want 0 (faults %+v)", n, inst.Faults())
			}
		})
	}
}

// steadyAllocs returns f's allocations per call once the process is
// steady: testing.AllocsPerRun counts every goroutine's allocations, and a
// new instance builds its spare guest on a goroutine of its own (the Go
// guest's runtime start takes a while), so a measurement that overlaps it
// is taken again, for up to ten seconds. An allocation of f's own shows in
// every measurement.
func steadyAllocs(f func()) float64 {
	deadline := time.Now().Add(10 * time.Second)
	for {
		n := testing.AllocsPerRun(100, f)
		if n == 0 || time.Now().After(deadline) {
			return n
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func kvPayloads() [][]byte {
	payloads := make([][]byte, 32)
	for i := range payloads {
		r := kv.Request{ID: uint32(i), Op: wire.TypeGet, Key: kv.Key(i)}
		if i%2 == 1 {
			r.Op = wire.TypeScan
		}
		payloads[i] = make([]byte, wire.HeaderLen+len(r.Key))
		kv.Encode(payloads[i], r)
	}
	return payloads
}
