package bufpool

import (
	"runtime"
	"sync"
	"testing"

	"github.com/persephone-go/psp/nic"
	"github.com/puzpuzpuz/xsync/v4"
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
	for name, f := range map[string]func(){
		"twice": func() {
			p := New(2, 8)
			b := p.Get()
			p.Put(b)
			p.Put(b)
		},
		"foreign": func() { New(2, 8).Put(New(2, 8).Get()) },
		"copy": func() {
			p := New(2, 8)
			c := *p.Get()
			p.Put(&c)
		},
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

// TestLastInFirstOut checks that Get hands out the buffer put back last,
// so that a server answering one request at a time keeps reusing memory
// its caches hold.
func TestLastInFirstOut(t *testing.T) {
	p := New(64, 32)
	held := make([]*nic.Buffer, 0, 10)
	for range 10 {
		held = append(held, p.Get())
	}
	p.Put(held[3])
	p.Put(held[7])
	if b := p.Get(); b != held[7] {
		t.Fatalf("Get returned slot %d, want %d (the last one put back)", b.Index, held[7].Index)
	}
	if b := p.Get(); b != held[3] {
		t.Fatalf("Get returned slot %d, want %d", b.Index, held[3].Index)
	}
	// One request at a time: always the same buffer.
	first := p.Get()
	p.Put(first)
	for range 100 {
		b := p.Get()
		if b != first {
			t.Fatalf("lone Get/Put cycle moved from slot %d to %d", first.Index, b.Index)
		}
		p.Put(b)
	}
}

// TestConcurrentGetPutKeepsEveryBuffer has goroutines hold several buffers
// at once, returned in varying orders, and checks at the end that every
// buffer is free exactly once and can be taken again.
func TestConcurrentGetPutKeepsEveryBuffer(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	const n = 64
	p := New(n, 8)
	var wg sync.WaitGroup
	for g := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var held []*nic.Buffer
			for i := range 30000 {
				if b := p.Get(); b != nil {
					held = append(held, b)
				}
				if len(held) > (i+g)%7 {
					k := (i * 31) % len(held)
					p.Put(held[k])
					held = append(held[:k], held[k+1:]...)
				}
			}
			for _, b := range held {
				p.Put(b)
			}
		}()
	}
	wg.Wait()
	if p.Free() != n {
		t.Fatalf("Free = %d, want %d", p.Free(), n)
	}
	seen := make(map[int32]bool)
	for range n {
		b := p.Get()
		if b == nil {
			t.Fatalf("pool ran dry after %d Gets, want %d", len(seen), n)
		}
		if seen[b.Index] {
			t.Fatalf("slot %d handed out twice", b.Index)
		}
		seen[b.Index] = true
	}
	if p.Get() != nil {
		t.Fatal("Get returned a buffer beyond the pool's size")
	}
}

// fifoPool is the queue this pool used before it became a stack, kept as
// BenchmarkReuse's baseline: the buffer free longest comes out first.
type fifoPool struct {
	bufs    []nic.Buffer
	backing []byte
	size    int
	free    *xsync.MPMCQueue[*nic.Buffer]
}

func newFIFO(n, size int) *fifoPool {
	p := &fifoPool{bufs: make([]nic.Buffer, n), backing: make([]byte, n*size), size: size, free: xsync.NewMPMCQueue[*nic.Buffer](n)}
	for i := range p.bufs {
		p.bufs[i].Index = int32(i)
		p.bufs[i].Data = p.backing[i*size : (i+1)*size : (i+1)*size]
		p.free.TryEnqueue(&p.bufs[i])
	}
	return p
}

func (p *fifoPool) Get() *nic.Buffer {
	b, ok := p.free.TryDequeue()
	if !ok {
		return nil
	}
	*b = nic.Buffer{Data: p.backing[int(b.Index)*p.size : (int(b.Index)+1)*p.size], Index: b.Index}
	return b
}

func (p *fifoPool) Put(b *nic.Buffer) { p.free.TryEnqueue(b) }

type getPutter interface {
	Get() *nic.Buffer
	Put(*nic.Buffer)
}

// comparedPools returns the UDP dataplane's default pool (4096 buffers of
// 2 KB) as this package builds it and as the queue built it.
func comparedPools() []struct {
	name string
	p    getPutter
} {
	return []struct {
		name string
		p    getPutter
	}{
		{"stack", New(4096, 2048)},
		{"queue", newFIFO(4096, 2048)},
	}
}

// BenchmarkReuse is one request at a time through the UDP dataplane's
// default pool (4096 buffers of 2 KB): take a buffer, read a 1 KB request
// written into it, write a reply over it, give it back. The stack hands
// back the same warm buffer; the queue walks all 8 MB of the pool.
func BenchmarkReuse(b *testing.B) {
	for _, pool := range comparedPools() {
		b.Run(pool.name, func(b *testing.B) {
			var sum byte
			for b.Loop() {
				buf := pool.p.Get()
				for i := 0; i < 1024; i += 64 {
					sum += buf.Data[i]
				}
				for i := 0; i < 1024; i += 64 {
					buf.Data[i] = sum
				}
				pool.p.Put(buf)
			}
		})
	}
}

// BenchmarkGetPutParallel is Get and Put from every processor at once:
// the contended case, where the stack's single top and the queue's head and
// tail both bounce between cores.
func BenchmarkGetPutParallel(b *testing.B) {
	for _, pool := range comparedPools() {
		b.Run(pool.name, func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if buf := pool.p.Get(); buf != nil {
						pool.p.Put(buf)
					}
				}
			})
		})
	}
}
