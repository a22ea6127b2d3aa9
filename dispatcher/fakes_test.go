package dispatcher

import (
	"errors"
	"net/netip"
	"sync"
	"time"

	"github.com/persephone-go/psp/app"
	"github.com/persephone-go/psp/darc"
	"github.com/persephone-go/psp/nic"
	"github.com/persephone-go/psp/wire"
)

// fakeDataplane is a minimal in-memory nic.Dataplane for the dispatcher's own
// tests: a pool of buffers, an inbox fed by inject, and the replies copied out.
type fakeDataplane struct {
	mu       sync.Mutex
	pool     []*nic.Buffer
	inbox    []*nic.Buffer
	replies  [][]byte
	released int
	total    int
	closed   bool
	notify   chan struct{}
	start    time.Time
	tx       []fakeTx
	keep     bool // keep reply payloads (off for benchmarks)
	sent     int
	lastSent time.Time // when the last reply was sent
	failTx   bool      // Send fails: sends nothing, returns the buffers to the pool
}

type fakeTx struct{ dp *fakeDataplane }

func newFakeDataplane(workers, buffers, size int) *fakeDataplane {
	dp := &fakeDataplane{notify: make(chan struct{}, 1), start: time.Now(), keep: true, total: buffers}
	for i := 0; i < buffers; i++ {
		dp.pool = append(dp.pool, &nic.Buffer{Data: make([]byte, size), Index: int32(i)})
	}
	for w := 0; w < workers; w++ {
		dp.tx = append(dp.tx, fakeTx{dp})
	}
	return dp
}

// inject queues a packet; it reports false when the pool is empty.
func (dp *fakeDataplane) inject(payload []byte, port uint16) bool {
	dp.mu.Lock()
	defer dp.mu.Unlock()
	if len(dp.pool) == 0 {
		return false
	}
	b := dp.pool[len(dp.pool)-1]
	dp.pool = dp.pool[:len(dp.pool)-1]
	n := copy(b.Data, payload)
	b.Len, b.WireLen, b.DstPort = n, len(payload), port
	b.Peer = netip.MustParseAddrPort("127.0.0.1:1234")
	dp.inbox = append(dp.inbox, b)
	select {
	case dp.notify <- struct{}{}:
	default:
	}
	return true
}

func (dp *fakeDataplane) Recv(bufs []*nic.Buffer, wait time.Duration) (int, error) {
	dp.mu.Lock()
	if dp.closed {
		dp.mu.Unlock()
		return 0, nic.ErrClosed
	}
	if len(dp.inbox) == 0 && wait > 0 {
		dp.mu.Unlock()
		t := time.NewTimer(wait)
		select {
		case <-dp.notify:
		case <-t.C:
		}
		t.Stop()
		dp.mu.Lock()
	}
	n := copy(bufs, dp.inbox)
	rest := copy(dp.inbox, dp.inbox[n:])
	clear(dp.inbox[rest:])
	dp.inbox = dp.inbox[:rest]
	now := dp.Now()
	for _, b := range bufs[:n] {
		b.RxTime = now
	}
	dp.mu.Unlock()
	return n, nil
}

func (dp *fakeDataplane) TxQueue(w int) nic.TxQueue {
	if w < 0 || w >= len(dp.tx) {
		return nil
	}
	return &dp.tx[w]
}

func (dp *fakeDataplane) Release(bufs ...*nic.Buffer) {
	dp.mu.Lock()
	dp.released += len(bufs)
	dp.pool = append(dp.pool, bufs...)
	dp.mu.Unlock()
}

func (dp *fakeDataplane) Now() int64 { return int64(time.Since(dp.start)) }

func (dp *fakeDataplane) Stats() nic.Stats {
	dp.mu.Lock()
	defer dp.mu.Unlock()
	return nic.Stats{TxPackets: uint64(dp.sent)}
}

func (dp *fakeDataplane) Close() error {
	dp.mu.Lock()
	dp.closed = true
	dp.mu.Unlock()
	return nil
}

func (t *fakeTx) Send(bufs []*nic.Buffer) (int, error) {
	dp := t.dp
	dp.mu.Lock()
	if dp.failTx {
		dp.pool = append(dp.pool, bufs...)
		dp.mu.Unlock()
		return 0, errors.New("fake: transmit failed")
	}
	for _, b := range bufs {
		if dp.keep {
			dp.replies = append(dp.replies, append([]byte(nil), b.Payload()...))
		}
		dp.sent++
		dp.pool = append(dp.pool, b)
	}
	dp.lastSent = time.Now()
	dp.mu.Unlock()
	return len(bufs), nil
}

func (dp *fakeDataplane) poolSize() int {
	dp.mu.Lock()
	defer dp.mu.Unlock()
	return len(dp.pool)
}

// lastReply returns when the last reply was sent.
func (dp *fakeDataplane) lastReply() time.Time {
	dp.mu.Lock()
	defer dp.mu.Unlock()
	return dp.lastSent
}

func (dp *fakeDataplane) replyCount() int {
	dp.mu.Lock()
	defer dp.mu.Unlock()
	return len(dp.replies)
}

// fakePolicy is a tiny c-FCFS over a bounded FIFO per type (capacity per
// type), enough to exercise the dispatcher without the real policies.
type fakePolicy struct {
	workers  int
	numTypes int
	capacity int
	fifo     []darc.Request // arrival order across types
	perType  []int
	busy     []bool
	enq      []int64
	dropped  []uint64
	services []int64 // service times reported by Complete, in order
}

func newFakePolicy(workers, numTypes, capacity int) *fakePolicy {
	return &fakePolicy{workers: workers, numTypes: numTypes, capacity: capacity,
		perType: make([]int, numTypes), busy: make([]bool, workers), dropped: make([]uint64, numTypes),
		fifo: make([]darc.Request, 0, numTypes*capacity), enq: make([]int64, 0, numTypes*capacity)}
}

func (p *fakePolicy) Enqueue(r darc.Request, now int64) darc.Verdict {
	if p.perType[r.Type] >= p.capacity {
		p.dropped[r.Type]++
		return darc.QueueFull
	}
	p.perType[r.Type]++
	p.fifo = append(p.fifo, r)
	p.enq = append(p.enq, now)
	return darc.Accepted
}

func (p *fakePolicy) Dispatch(now int64, out []darc.Assignment) int {
	n := 0
	for w := 0; w < p.workers && n < len(out) && len(p.fifo) > 0; w++ {
		if p.busy[w] {
			continue
		}
		r := p.fifo[0]
		out[n] = darc.Assignment{Worker: w, Request: r, Enqueued: p.enq[0]}
		n++
		k := copy(p.fifo, p.fifo[1:])
		p.fifo = p.fifo[:k]
		copy(p.enq, p.enq[1:])
		p.enq = p.enq[:k]
		p.perType[r.Type]--
		p.busy[w] = true
	}
	return n
}

func (p *fakePolicy) Complete(w int, typ darc.Type, service int64, now int64) {
	if !p.busy[w] {
		panic("fakePolicy: completion from an idle worker")
	}
	p.busy[w] = false
	if len(p.services) < 1<<16 {
		p.services = append(p.services, service)
	}
}

func (p *fakePolicy) Snapshot(s *darc.Snapshot) {
	s.Policy, s.Workers, s.Phase = "fake", p.workers, "fake"
	s.Types = s.Types[:0]
	for t := 0; t < p.numTypes; t++ {
		s.Types = append(s.Types, darc.TypeState{Type: darc.Type(t), Queued: p.perType[t], Dropped: p.dropped[t]})
	}
	s.Busy = append(s.Busy[:0], p.busy...)
}

func (p *fakePolicy) Name() string { return "fake" }

// header returns a psp request payload.
func header(id, typ, serviceNs uint32) []byte {
	b := make([]byte, wire.HeaderLen)
	wire.Header{ID: id, Type: typ, ServiceNs: serviceNs}.Encode(b)
	return b
}

// echo is an application that echoes the header, refusing type 3
// requests and panicking on type 4.
var echo = app.HandlerFunc(func(w int, typ darc.Type, b *nic.Buffer) bool {
	switch typ {
	case 3:
		return false
	case 4:
		panic("type 4")
	}
	if b.Len > wire.HeaderLen {
		b.Len = wire.HeaderLen
	}
	return true
})
