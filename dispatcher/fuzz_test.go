package dispatcher

import (
	"testing"

	"github.com/persephone-go/psp/nic"
	"github.com/persephone-go/psp/wire"
)

// FuzzReceivePath feeds arbitrary datagrams (the fuzz input split at 0xff
// bytes into up to 64 packets, some longer than a buffer) through the
// dispatcher's receive path with the native classifier: nothing may panic,
// every packet must be answered or dropped and counted, and no buffer may
// leak.
func FuzzReceivePath(f *testing.F) {
	f.Add(header(1, wire.TypeShort, 10))
	f.Add(append(append(header(1, wire.TypeShort, 10), 0xff), header(2, 99, 0)...))
	f.Add([]byte{0xff, 0xff, 1, 2, 3})
	f.Add(append(header(7, 0xffffffff, 0xffffffff), make([]byte, 200)...))
	f.Fuzz(func(t *testing.T, data []byte) {
		const workers, bufSize = 3, 64
		dp := newFakeDataplane(workers, 128, bufSize)
		dp.keep = false
		d, err := New(Spec{Workers: workers, MinPayload: wire.HeaderLen}, dp, HeaderClassifier{}, newFakePolicy(workers, HeaderNumTypes, 8), echo)
		if err != nil {
			t.Fatal(err)
		}
		start, packets := 0, 0
		for i := 0; i <= len(data) && packets < 64; i++ {
			if i == len(data) || data[i] == 0xff {
				if dp.inject(data[start:i], 1) {
					packets++
				}
				start = i + 1
			}
		}
		one := make([]*nic.Buffer, 1)
		for round := 0; round < 200 && (d.received < uint64(packets) || d.queued > 0 || d.busy > 0); round++ {
			d.step(0)
			for _, w := range d.workers {
				if tk, ok := w.in.Pop(); ok {
					outcome := outcomeAnswered
					one[0] = tk.buf
					if d.app.Handle(w.id, tk.typ, tk.buf) {
						w.tx.Send(one)
					} else {
						dp.Release(one...)
						outcome = outcomeApp
					}
					w.out.Push(completion{typ: tk.typ, start: 0, end: 1, outcome: outcome})
				}
			}
		}
		d.collect(dp.Now())
		if d.received != uint64(packets) {
			t.Fatalf("received %d of %d packets", d.received, packets)
		}
		if d.received != d.answered+d.drops.Total() || d.queued != 0 || d.busy != 0 {
			t.Fatalf("received %d != answered %d + drops %+v (queued %d busy %d)", d.received, d.answered, d.drops, d.queued, d.busy)
		}
		if got := dp.poolSize(); got != 128 {
			t.Fatalf("pool %d of 128 buffers after the run", got)
		}
	})
}
