package memnic

import (
	"cmp"
	"context"
	"fmt"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/persephone-go/psp/nic"
	"github.com/persephone-go/psp/nic/internal/bufpool"
	"github.com/persephone-go/psp/wire"
	"github.com/puzpuzpuz/xsync/v4"
)

// Defaults for zero Config fields.
const (
	DefaultBuffers    = 4096
	DefaultBufSize    = 2048
	DefaultReplyQueue = 4096
)

// noBufferPoll is how long a waiting Recv sleeps when the generator has
// packets due but the pool is empty (buffer returns do not wake it).
const noBufferPoll = int64(20 * time.Microsecond)

// defaultPeer is the source address of generated packets and of Feed's
// packets when none is given (TEST-NET-1, never routable).
var defaultPeer = netip.AddrPortFrom(netip.AddrFrom4([4]byte{192, 0, 2, 1}), 40000)

// Config configures a Dataplane. The zero value is a usable single-worker
// dataplane fed by injection.
type Config struct {
	// Workers is the number of TX queues (default 1).
	Workers int
	// Buffers is the pool size (default DefaultBuffers).
	Buffers int
	// ExtraBuffers are added to the pool but not to RequestBuffers: buffers
	// the caller holds beside those it counts against RequestBuffers (the
	// dispatcher's classifier lanes). Default 0.
	ExtraBuffers int
	// BufSize is each buffer's payload room in bytes (default
	// DefaultBufSize); longer payloads are truncated and counted.
	BufSize int
	// Port is the destination port stamped on injected and generated packets
	// (default wire.DefaultPort).
	Port uint16
	// Generator, when set, makes Recv synthesise request packets.
	Generator *Generator
	// OnReply, when set, is called by TxQueue.Send in the worker's goroutine
	// for every reply, before the buffer returns to the pool; it must not
	// keep b.
	OnReply func(worker int, b *nic.Buffer)
	// DiscardReplies counts replies without storing them. Generator mode
	// always discards (unless OnReply is set).
	DiscardReplies bool
	// ReplyQueue is the capacity of the Replies channel (default
	// DefaultReplyQueue).
	ReplyQueue int
}

// Generator describes the packets Recv synthesises in generator mode.
type Generator struct {
	// Headers are used in turn, cycling; each packet's ID is replaced by a
	// running sequence number starting at 1. Repeat entries to weight a mix.
	// Default: one TypeShort header with a 1 µs service time.
	Headers []wire.Header
	// Size is the payload length (default and minimum wire.HeaderLen); bytes
	// after the header are zero.
	Size int
	// Rate is the arrival rate in packets per second on the dataplane's
	// clock, counted from the first Recv; 0 means every Recv fills its whole
	// burst. At a fixed rate, arrivals that find no free buffer wait, like
	// packets in a NIC's ring, up to a pool's worth; more are dropped and
	// counted in Stats.RxDropped.
	Rate float64
	// Count stops generation after this many packets (0: unlimited).
	Count uint64
	// Peer is the packets' source address (default 192.0.2.1:40000, in
	// TEST-NET-1).
	Peer netip.AddrPort
}

// Reply is a copy of one transmitted reply.
type Reply struct {
	Payload []byte
	Peer    netip.AddrPort
	Worker  int
	RxTime  int64 // when the request was received (dataplane clock)
	TxTime  int64 // when the reply was sent (dataplane clock)
}

// Validate reports the first invalid field of c.
func (c Config) Validate() error {
	switch {
	case c.Workers < 0:
		return fmt.Errorf("memnic: workers %d is negative", c.Workers)
	case c.Buffers < 0 || c.ExtraBuffers < 0:
		return fmt.Errorf("memnic: buffers %d, extra buffers %d: negative", c.Buffers, c.ExtraBuffers)
	case c.BufSize < 0:
		return fmt.Errorf("memnic: buffer size %d is negative", c.BufSize)
	case c.ReplyQueue < 0:
		return fmt.Errorf("memnic: reply queue %d is negative", c.ReplyQueue)
	}
	if g := c.Generator; g != nil {
		bufSize := c.withDefaults().BufSize
		switch {
		case g.Size != 0 && g.Size < wire.HeaderLen:
			return fmt.Errorf("memnic: generator size %d is shorter than the %d-byte psp header", g.Size, wire.HeaderLen)
		case g.Size > bufSize:
			return fmt.Errorf("memnic: generator size %d exceeds the buffer size %d", g.Size, bufSize)
		case g.Rate < 0:
			return fmt.Errorf("memnic: generator rate %g is negative", g.Rate)
		}
	}
	return nil
}

// withDefaults returns c with zero fields set to their defaults.
func (c Config) withDefaults() Config {
	c.Workers = cmp.Or(c.Workers, 1)
	c.Buffers = cmp.Or(c.Buffers, DefaultBuffers)
	c.BufSize = cmp.Or(c.BufSize, DefaultBufSize)
	c.Port = cmp.Or(c.Port, wire.DefaultPort)
	c.ReplyQueue = cmp.Or(c.ReplyQueue, DefaultReplyQueue)
	return c
}

// Dataplane is an in-memory nic.Dataplane.
type Dataplane struct {
	cfg   Config
	pool  *bufpool.Pool
	start time.Time

	rxq     *xsync.MPMCQueue[*nic.Buffer] // injected packets, oldest first
	waiting atomic.Bool                   // Recv is about to block on wake
	wake    chan struct{}                 // capacity 1
	timer   *time.Timer                   // Recv's bounded wait (net worker only)

	closed    atomic.Bool
	done      chan struct{}
	closeOnce sync.Once

	gen *generator // nil unless generator mode

	rxPackets   atomic.Uint64
	rxDropped   atomic.Uint64
	rxTruncated atomic.Uint64
	rxNoBuffer  atomic.Uint64

	tx             []txQueue
	replies        chan Reply
	repliesDropped atomic.Uint64
}

var _ nic.Dataplane = (*Dataplane)(nil)

// New returns a dataplane for cfg. It panics with a descriptive error if cfg
// is invalid (see Config.Validate).
func New(cfg Config) *Dataplane {
	if err := cfg.Validate(); err != nil {
		panic(err)
	}
	cfg = cfg.withDefaults()
	d := &Dataplane{
		cfg:     cfg,
		pool:    bufpool.New(cfg.Buffers+cfg.ExtraBuffers, cfg.BufSize),
		start:   time.Now(),
		rxq:     xsync.NewMPMCQueue[*nic.Buffer](cfg.Buffers + cfg.ExtraBuffers),
		wake:    make(chan struct{}, 1),
		timer:   time.NewTimer(time.Hour),
		done:    make(chan struct{}),
		tx:      make([]txQueue, cfg.Workers),
		replies: make(chan Reply, cfg.ReplyQueue),
	}
	d.timer.Stop()
	for w := range d.tx {
		d.tx[w] = txQueue{dp: d, worker: w}
	}
	if cfg.Generator != nil {
		d.gen = newGenerator(*cfg.Generator, cfg.Buffers)
	}
	return d
}

// Config returns the configuration with defaults filled in.
func (d *Dataplane) Config() Config { return d.cfg }

// Now returns nanoseconds since the dataplane was created (monotonic).
func (d *Dataplane) Now() int64 { return int64(time.Since(d.start)) }

// Inject queues one packet from peer to Config.Port. It reports false, and
// counts a drop, when no buffer is free or the dataplane is closed.
func (d *Dataplane) Inject(payload []byte, peer netip.AddrPort) bool {
	return d.InjectPort(payload, peer, d.cfg.Port)
}

// AddPort does nothing: the in-memory dataplane delivers packets to every
// port (InjectPort). It lets servers add tenants with ports of their own.
func (d *Dataplane) AddPort(uint16) error { return nil }

// RemovePort does nothing; see AddPort.
func (d *Dataplane) RemovePort(uint16) error { return nil }

// InjectPort queues one packet from peer to port; see Inject.
func (d *Dataplane) InjectPort(payload []byte, peer netip.AddrPort, port uint16) bool {
	if !d.enqueue(payload, peer, port) {
		return false
	}
	d.notify()
	return true
}

// InjectBatch queues packets from peer to Config.Port and returns how many
// were queued; it stops at the first one that finds no free buffer (that one
// is counted as dropped).
func (d *Dataplane) InjectBatch(payloads [][]byte, peer netip.AddrPort) int {
	n := 0
	for _, p := range payloads {
		if !d.enqueue(p, peer, d.cfg.Port) {
			break
		}
		n++
	}
	if n > 0 {
		d.notify()
	}
	return n
}

func (d *Dataplane) enqueue(payload []byte, peer netip.AddrPort, port uint16) bool {
	if d.closed.Load() {
		return false
	}
	b := d.pool.Get()
	if b == nil {
		d.rxDropped.Add(1)
		d.rxNoBuffer.Add(1)
		return false
	}
	b.Len = copy(b.Data, payload)
	b.WireLen = len(payload)
	b.Peer = peer
	b.DstPort = port
	// The queue has room for every buffer: TryEnqueue fails only while
	// racing another injector.
	for !d.rxq.TryEnqueue(b) {
		runtime.Gosched()
	}
	return true
}

// notify wakes Recv if it is blocked (or about to block) waiting for packets.
func (d *Dataplane) notify() {
	if d.waiting.Load() {
		select {
		case d.wake <- struct{}{}:
		default:
		}
	}
}

// Feed injects count packets (0: until ctx is done) at rate packets per
// second (0: as fast as possible), calling next for each payload and peer; a
// zero peer means 192.0.2.1:40000. It runs in the caller's goroutine and returns
// how many packets were queued and dropped. Drops (no free buffer) are not
// retried: the arrivals are open-loop, like a real client's.
func (d *Dataplane) Feed(ctx context.Context, rate float64, count int, next func(seq int) ([]byte, netip.AddrPort)) (sent, dropped int) {
	start := time.Now()
	for seq := 0; count == 0 || seq < count; seq++ {
		if seq%64 == 0 && ctx.Err() != nil {
			break
		}
		if rate > 0 {
			due := start.Add(time.Duration(float64(seq) / rate * 1e9))
			if wait := time.Until(due); wait > 0 {
				if wait > time.Millisecond {
					select {
					case <-ctx.Done():
						return sent, dropped
					case <-time.After(wait):
					}
				} else {
					for time.Now().Before(due) {
						runtime.Gosched()
					}
				}
			}
		}
		payload, peer := next(seq)
		if !peer.IsValid() {
			peer = defaultPeer
		}
		if d.enqueue(payload, peer, d.cfg.Port) {
			sent++
			d.notify()
		} else {
			if d.closed.Load() {
				break
			}
			dropped++
		}
	}
	return sent, dropped
}

// Recv implements nic.Dataplane.
func (d *Dataplane) Recv(bufs []*nic.Buffer, wait time.Duration) (int, error) {
	if d.closed.Load() {
		return 0, nic.ErrClosed
	}
	if len(bufs) == 0 {
		return 0, nil
	}
	now := d.Now()
	if n := d.fill(bufs, now); n > 0 || wait <= 0 {
		return n, nil
	}
	deadline := now + int64(wait)
	for {
		d.waiting.Store(true)
		now = d.Now()
		if n := d.fill(bufs, now); n > 0 {
			d.waiting.Store(false)
			return n, nil
		}
		sleep := deadline - now
		if d.gen != nil {
			next := d.gen.nextDue(now)
			if next == 0 { // due but no free buffer: poll for returns
				next = noBufferPoll
			}
			sleep = min(sleep, next)
		}
		if sleep <= 0 {
			d.waiting.Store(false)
			return 0, nil
		}
		d.timer.Reset(time.Duration(sleep))
		select {
		case <-d.wake:
		case <-d.timer.C:
		case <-d.done:
			d.timer.Stop()
			d.waiting.Store(false)
			return 0, nic.ErrClosed
		}
		d.timer.Stop()
		d.waiting.Store(false)
	}
}

// fill moves queued and generated packets into bufs.
func (d *Dataplane) fill(bufs []*nic.Buffer, now int64) int {
	n := 0
	truncated := 0
	for n < len(bufs) {
		b, ok := d.rxq.TryDequeue()
		if !ok {
			break
		}
		b.RxTime = now
		if b.WireLen > b.Len {
			truncated++
		}
		bufs[n] = b
		n++
	}
	if d.gen != nil && n < len(bufs) {
		n += d.gen.generate(d, bufs[n:], now)
	}
	if n > 0 {
		d.rxPackets.Add(uint64(n))
	}
	if truncated > 0 {
		d.rxTruncated.Add(uint64(truncated))
	}
	return n
}

// TxQueue implements nic.Dataplane.
func (d *Dataplane) TxQueue(w int) nic.TxQueue {
	if w < 0 || w >= len(d.tx) {
		return nil
	}
	return &d.tx[w]
}

// RequestBuffers implements nic.BufferPool: the pool minus a quarter kept
// for packets waiting to be received (as a NIC keeps its descriptor ring).
func (d *Dataplane) RequestBuffers() int { return d.cfg.Buffers - d.cfg.Buffers/4 }

// ExtraBuffers returns Config.ExtraBuffers: pool buffers beyond
// RequestBuffers.
func (d *Dataplane) ExtraBuffers() int { return d.cfg.ExtraBuffers }

// AllocReply implements nic.ReplyAllocator: a free pool buffer addressed to
// req's peer, or nil when the pool is empty.
func (d *Dataplane) AllocReply(req *nic.Buffer) *nic.Buffer {
	b := d.pool.Get()
	if b == nil {
		return nil
	}
	b.Peer, b.DstPort, b.RxTime = req.Peer, req.DstPort, req.RxTime
	return b
}

// Release implements nic.Dataplane.
func (d *Dataplane) Release(bufs ...*nic.Buffer) {
	for _, b := range bufs {
		d.pool.Put(b)
	}
}

// Stats implements nic.Dataplane.
func (d *Dataplane) Stats() nic.Stats {
	s := nic.Stats{
		RxPackets:   d.rxPackets.Load(),
		RxDropped:   d.rxDropped.Load(),
		RxTruncated: d.rxTruncated.Load(),
		RxNoBuffer:  d.rxNoBuffer.Load(),
	}
	for w := range d.tx {
		s.TxPackets += d.tx[w].sent.Load()
	}
	return s
}

// Replies returns the channel of reply copies (see Config).
func (d *Dataplane) Replies() <-chan Reply { return d.replies }

// RepliesDropped returns how many reply copies found the Replies channel
// full.
func (d *Dataplane) RepliesDropped() uint64 { return d.repliesDropped.Load() }

// Replied returns how many replies the TX queues have sent in total.
func (d *Dataplane) Replied() uint64 { return d.Stats().TxPackets }

// Generated returns how many packets the generator has produced.
func (d *Dataplane) Generated() uint64 {
	if d.gen == nil {
		return 0
	}
	return d.gen.emitted.Load()
}

// FreeBuffers returns how many pool buffers are free (a snapshot; it scans
// the pool).
func (d *Dataplane) FreeBuffers() int { return d.pool.Free() }

// Close implements nic.Dataplane. Packets still queued for Recv are dropped
// (counted) and their buffers returned to the pool.
func (d *Dataplane) Close() error {
	d.closeOnce.Do(func() {
		d.closed.Store(true)
		close(d.done)
		for {
			b, ok := d.rxq.TryDequeue()
			if !ok {
				break
			}
			d.rxDropped.Add(1)
			d.pool.Put(b)
		}
	})
	return nil
}

// txQueue is one worker's TX queue; padded so that workers' counters do not
// share a cache line.
type txQueue struct {
	dp     *Dataplane
	worker int
	sent   atomic.Uint64
	_      [104]byte
}

// Send implements nic.TxQueue.
func (q *txQueue) Send(bufs []*nic.Buffer) (int, error) {
	d := q.dp
	keep := d.cfg.OnReply == nil && !d.cfg.DiscardReplies && d.gen == nil
	var now int64
	if keep {
		now = d.Now()
	}
	for _, b := range bufs {
		switch {
		case d.cfg.OnReply != nil:
			d.cfg.OnReply(q.worker, b)
		case keep:
			r := Reply{Payload: append([]byte(nil), b.Payload()...), Peer: b.Peer, Worker: q.worker, RxTime: b.RxTime, TxTime: now}
			select {
			case d.replies <- r:
			default:
				d.repliesDropped.Add(1)
			}
		}
		d.pool.Put(b)
	}
	q.sent.Add(uint64(len(bufs)))
	return len(bufs), nil
}
