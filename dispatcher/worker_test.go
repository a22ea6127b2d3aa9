package dispatcher

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/persephone-go/psp/app"
	"github.com/persephone-go/psp/darc"
	"github.com/persephone-go/psp/nic"
	"github.com/persephone-go/psp/nic/memnic"
	"github.com/persephone-go/psp/wire"
)

// splitter answers a request with as many datagrams as its header's service
// field says: "id/i" for i = 0..n-1, the last one in the request's buffer.
// Service 1000 panics after sending two datagrams; 2000 sends two and
// returns false; 3000 asks for a datagram longer than a buffer; 4000
// answers nothing, on purpose; 5000 answers nothing and is dropped.
type splitter struct{ scratch [][64]byte }

func (s *splitter) Handle(w int, typ darc.Type, b *nic.Buffer) bool {
	panic("Handle called on an app.MultiHandler")
}

func (s *splitter) HandleMulti(w int, typ darc.Type, b *nic.Buffer, r app.Reply) bool {
	h, _ := wire.Decode(b.Payload())
	n := int(h.ServiceNs)
	switch n {
	case 1000, 2000:
		for i := range 2 {
			if err := r.Send(fmt.Appendf(s.scratch[w][:0], "%d/%d", h.ID, i)); err != nil {
				panic(err)
			}
		}
		if n == 1000 {
			panic("handler bug")
		}
		return false
	case 3000:
		if err := r.Send(make([]byte, r.Room()+1)); err != app.ErrReplyTooLong {
			panic(fmt.Sprintf("oversized datagram: %v", err))
		}
		n = 1
	case 4000:
		r.NoReply()
		return false
	case 5000:
		return false
	}
	for i := range n - 1 {
		if err := r.Send(fmt.Appendf(s.scratch[w][:0], "%d/%d", h.ID, i)); err != nil {
			return false
		}
	}
	b.Len = copy(b.Data, fmt.Appendf(s.scratch[w][:0], "%d/%d", h.ID, n-1))
	return true
}

func TestMultiHandlerRepliesInOrder(t *testing.T) {
	const workers, buffers = 2, 64
	dp := memnic.New(memnic.Config{Workers: workers, Buffers: buffers, BufSize: 64, ReplyQueue: 4096})
	d, err := New(Spec{Workers: workers, Burst: 4, MinPayload: wire.HeaderLen, StatsInterval: time.Millisecond},
		dp, HeaderClassifier{}, newFakePolicy(workers, HeaderNumTypes, 1024), &splitter{scratch: make([][64]byte, workers)})
	if err != nil {
		t.Fatal(err)
	}
	stop := run(t, d)
	peer := netip.MustParseAddrPort("10.1.2.3:4000")
	// Replies of 1, 3 and 40 datagrams (40 > the burst of 4: sent in
	// several batches; 40 < the pool, so no request starves).
	sizes := map[uint32]int{1: 1, 2: 3, 3: 40, 4: 1000, 5: 2000, 6: 3000, 7: 4000, 8: 5000}
	for id := uint32(1); id <= 8; id++ {
		for !dp.Inject(header(id, wire.TypeShort, uint32(sizes[id])), peer) {
			time.Sleep(time.Millisecond)
		}
		// One at a time: the order of datagrams within a reply is checked.
		want := sizes[id]
		switch want {
		case 1000:
			// The two datagrams queued before the panic (fewer than a
			// batch: not yet transmitted) are released, not sent.
			waitFor(t, "panic", func() bool { return d.Stats().Drops.Panic == 1 })
			want = 0
		case 2000:
			want = 2
		case 3000:
			want = 1
		case 4000, 5000:
			want = 0
			waitFor(t, "served", func() bool { return d.Stats().Received == uint64(id) && d.Stats().InFlight == 0 })
		}
		for i := 0; i < want; i++ {
			select {
			case rep := <-dp.Replies():
				wantP := fmt.Sprintf("%d/%d", id, i)
				if string(rep.Payload) != wantP || rep.Peer != peer {
					t.Fatalf("request %d datagram %d: %q to %v, want %q to %v", id, i, rep.Payload, rep.Peer, wantP, peer)
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("request %d: %d of %d datagrams", id, i, want)
			}
		}
	}
	waitFor(t, "idle", func() bool { s := d.Stats(); return s.InFlight == 0 && s.Received == 8 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	select {
	case rep := <-dp.Replies():
		t.Errorf("stray datagram %q", rep.Payload)
	default:
	}
	s := d.Stats()
	checkAccounting(t, s)
	if s.Answered != 6 || s.Drops.Panic != 1 || s.Drops.App != 1 {
		t.Errorf("answered %d, panics %d, app drops %d; want 6 (including the one that sent its datagrams and no final one, and the silent one), 1 and 1", s.Answered, s.Drops.Panic, s.Drops.App)
	}
	if free := dp.FreeBuffers(); free != buffers {
		t.Errorf("%d of %d buffers free after shutdown (leak)", free, buffers)
	}
}

// TestReplyWithoutAllocator: a dataplane that cannot hand out buffers makes
// Send fail cleanly; the handler's final datagram still goes out.
func TestReplyWithoutAllocator(t *testing.T) {
	dp := newFakeDataplane(1, 8, 64)
	r := newReply(dp, dp.TxQueue(0), 4)
	bufs := make([]*nic.Buffer, 1)
	dp.inject(header(1, 1, 0), 1)
	if n, _ := dp.Recv(bufs, time.Second); n != 1 {
		t.Fatal("no packet")
	}
	r.reset(bufs[0])
	if err := r.Send([]byte("x")); err != app.ErrNoReplyBuffer {
		t.Fatalf("Send without an allocator: %v, want app.ErrNoReplyBuffer", err)
	}
	if !r.finish(true) || dp.replyCount() != 1 {
		t.Fatalf("final datagram not sent (replies %d)", dp.replyCount())
	}
}

// TestReplySendNoAlloc: queuing and transmitting extra datagrams allocates
// nothing.
func TestReplySendNoAlloc(t *testing.T) {
	dp := memnic.New(memnic.Config{Buffers: 64, BufSize: 128, DiscardReplies: true})
	r := newReply(dp, dp.TxQueue(0), 8)
	peer := netip.MustParseAddrPort("10.1.2.3:4000")
	req := make([]byte, wire.HeaderLen)
	binary.LittleEndian.PutUint32(req[4:], 1)
	bufs := make([]*nic.Buffer, 1)
	payload := make([]byte, 100)
	allocs := testing.AllocsPerRun(100, func() {
		dp.Inject(req, peer)
		if n, _ := dp.Recv(bufs, time.Second); n != 1 {
			panic("no packet")
		}
		r.reset(bufs[0])
		for range 20 {
			if err := r.Send(payload); err != nil {
				panic(err)
			}
		}
		r.finish(true)
	})
	if allocs != 0 {
		t.Errorf("%.1f allocations per 21-datagram reply, want 0", allocs)
	}
	if free := dp.FreeBuffers(); free != 64 {
		t.Errorf("%d of 64 buffers free (leak)", free)
	}
}
