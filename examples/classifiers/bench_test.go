package classifiers_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/persephone-go/psp/app/kv"
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

// nativeRESP is resp.c's parser in Go, for BenchmarkRESPNative: the bar the
// Wasm classifier is measured against (within 3x).
type nativeRESP map[string]uint32

func newNativeRESP() nativeRESP {
	m := make(nativeRESP, len(respNames))
	for i, n := range respNames[1:] {
		m[n] = uint32(i + 1)
	}
	return m
}

func (m nativeRESP) classify(p []byte) uint32 {
	var name []byte
	if len(p) > 0 && p[0] == '*' {
		i := 1
		count, ok := respNumber(p, &i)
		if !ok || count < 1 || i >= len(p) || p[i] != '$' {
			return 0
		}
		i++
		n, ok := respNumber(p, &i)
		if !ok || n < 1 || n > 16 || i+n > len(p) {
			return 0
		}
		name = p[i : i+n]
	} else {
		n := 0
		for n < len(p) && n <= 16 && p[n] != ' ' && p[n] != '\r' && p[n] != '\n' {
			n++
		}
		name = p[:n]
	}
	if len(name) == 0 || len(name) > 16 {
		return 0
	}
	var buf [16]byte
	for i, c := range name {
		if 'a' <= c && c <= 'z' {
			c -= 'a' - 'A'
		}
		buf[i] = c
	}
	return m[string(buf[:len(name)])]
}

func respNumber(p []byte, i *int) (int, bool) {
	j, v := *i, 0
	for j < len(p) && '0' <= p[j] && p[j] <= '9' && v < 1e8 {
		v = v*10 + int(p[j]-'0')
		j++
	}
	if j == *i || j+2 > len(p) || p[j] != '\r' || p[j+1] != '\n' {
		return 0, false
	}
	*i = j + 2
	return v, true
}

func TestNativeRESPAgrees(t *testing.T) {
	m := newNativeRESP()
	for _, r := range respRequests(t) {
		if got := m.classify(r.payload); got != r.want {
			t.Errorf("native %s: %d, want %d", r.name, got, r.want)
		}
	}
}

// BenchmarkRESPNative is the Go counterpart of
// BenchmarkClassifyBatch/c_resp (same payloads).
func BenchmarkRESPNative(b *testing.B) {
	m := newNativeRESP()
	payloads := respBenchPayloads()
	out := make([]uint32, len(payloads))
	b.ReportAllocs()
	for b.Loop() {
		for i, p := range payloads {
			out[i] = m.classify(p)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(payloads)), "ns/packet")
}

func respBenchPayloads() [][]byte {
	resp := make([][]byte, 32)
	for i := range resp {
		resp[i] = respArray([]string{"GET", "SET", "scan", "EVAL"}[i%4], "key:"+strings.Repeat("x", i), "0")
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
			if n := testing.AllocsPerRun(100, func() { inst.ClassifyBatch(payloads, out) }); n != 0 {
				t.Errorf("ClassifyBatch: %v allocations per batch, want 0", n)
			}
			if n := testing.AllocsPerRun(100, func() { inst.Classify(payloads[1]) }); n != 0 {
				t.Errorf("Classify: %v allocations per call, want 0", n)
			}
		})
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
