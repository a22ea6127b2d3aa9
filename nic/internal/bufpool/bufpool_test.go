package bufpool

import (
	"runtime"
	"sync"
	"testing"

	"github.com/persephone-go/psp/nic"
)

func TestGetPutCounts(t *testing.T) {
	p := New(4, 64)
	var got []*nic.Buffer
	for i := 0; i < 4; i++ {
		b := p.Get()
		if b == nil {
			t.Fatalf("Get %d returned nil from a pool with free buffers", i)
		}
		if len(b.Data) != 64 || cap(b.Data) != 64 {
			t.Fatalf("buffer room len %d cap %d, want 64", len(b.Data), cap(b.Data))
		}
		got = append(got, b)
	}
	if p.Get() != nil || p.Free() != 0 {
		t.Fatalf("empty pool: Get non-nil or Free = %d", p.Free())
	}
	got[0].Len = 9
	got[0].Data = got[0].Data[:3] // a worker resliced it
	for _, b := range got {
		p.Put(b)
	}
	if p.Free() != 4 {
		t.Fatalf("Free = %d after returning everything, want 4", p.Free())
	}
	for i := 0; i < 4; i++ {
		b := p.Get()
		if b.Len != 0 || len(b.Data) != 64 {
			t.Fatalf("recycled buffer not reset: Len %d, len(Data) %d", b.Len, len(b.Data))
		}
	}
}

func TestBuffersDoNotOverlap(t *testing.T) {
	p := New(3, 8)
	a, b := p.Get(), p.Get()
	for i := range a.Data {
		a.Data[i] = 0xAA
	}
	for i := range b.Data {
		if b.Data[i] != 0 {
			t.Fatal("writing one buffer changed another")
		}
	}
}

func TestPutPanics(t *testing.T) {
	p := New(2, 8)
	other := New(2, 8)
	b := p.Get()
	p.Put(b)
	for name, f := range map[string]func(){
		"twice":   func() { p.Put(b) },
		"foreign": func() { p.Put(other.Get()) },
		"copy":    func() { c := *p.Get(); p.Put(&c) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Put %s did not panic", name)
				}
			}()
			f()
		}()
	}
}

func TestGetPutAllocateNothing(t *testing.T) {
	p := New(8, 64)
	if a := testing.AllocsPerRun(1000, func() { p.Put(p.Get()) }); a != 0 {
		t.Fatalf("Get+Put allocated %.1f times per run", a)
	}
}

// TestConcurrentGetPut has several goroutines take and return buffers and
// checks that no buffer is ever held by two goroutines at once.
func TestConcurrentGetPut(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	p := New(16, 8)
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(tag byte) {
			defer wg.Done()
			for i := 0; i < 20000; i++ {
				b := p.Get()
				if b == nil {
					runtime.Gosched()
					continue
				}
				b.Data[0] = tag
				runtime.Gosched()
				if b.Data[0] != tag {
					t.Errorf("buffer %d shared between goroutines", b.Index)
				}
				p.Put(b)
			}
		}(byte(g + 1))
	}
	wg.Wait()
	if p.Free() != 16 {
		t.Fatalf("Free = %d after all goroutines returned their buffers", p.Free())
	}
}

func BenchmarkGetPut(b *testing.B) {
	p := New(1024, 2048)
	b.ReportAllocs()
	for b.Loop() {
		p.Put(p.Get())
	}
}
