package memnic

import (
	"math"
	"net/netip"
	"sync/atomic"

	"github.com/persephone-go/psp/nic"
	"github.com/persephone-go/psp/wire"
)

// generator synthesises request packets; its methods run on the net worker
// (inside Recv), except that emitted is read by Generated.
type generator struct {
	headers  []wire.Header
	template []byte // Size bytes: header room then zeros
	peer     netip.AddrPort
	rate     float64 // packets per ns; 0 = unpaced
	count    uint64  // 0 = unlimited
	backlog  uint64  // most arrivals kept waiting for buffers
	startNs  int64   // first Recv; -1 until then
	emitted  atomic.Uint64
	seq      uint64 // packets produced or dropped
	nextType int
}

func newGenerator(g Generator, buffers int) *generator {
	if len(g.Headers) == 0 {
		g.Headers = []wire.Header{{Type: wire.TypeShort, ServiceNs: 1000}}
	}
	if g.Size == 0 {
		g.Size = wire.HeaderLen
	}
	if !g.Peer.IsValid() {
		g.Peer = defaultPeer
	}
	return &generator{
		headers:  append([]wire.Header(nil), g.Headers...),
		template: make([]byte, g.Size),
		peer:     g.Peer,
		rate:     g.Rate / 1e9,
		count:    g.Count,
		backlog:  uint64(buffers),
		startNs:  -1,
	}
}

// due returns how many arrivals are due at now and not yet produced.
func (g *generator) due(now int64) uint64 {
	limit := uint64(math.MaxUint64)
	if g.count > 0 {
		limit = g.count
	}
	if g.rate > 0 {
		if g.startNs < 0 {
			g.startNs = now
		}
		if arrived := uint64(float64(now-g.startNs)*g.rate) + 1; arrived < limit {
			limit = arrived
		}
	}
	if g.seq >= limit {
		return 0
	}
	return limit - g.seq
}

// nextDue returns the ns from now until the next arrival (MaxInt64 when the
// generator is finished, 0 when one is due).
func (g *generator) nextDue(now int64) int64 {
	if g.count > 0 && g.seq >= g.count {
		return math.MaxInt64
	}
	if g.rate == 0 || g.startNs < 0 {
		return 0
	}
	at := g.startNs + int64(float64(g.seq)/g.rate)
	if at <= now {
		return 0
	}
	return at - now
}

// generate fills bufs with due packets and returns how many.
func (g *generator) generate(d *Dataplane, bufs []*nic.Buffer, now int64) int {
	due := g.due(now)
	if due == 0 {
		return 0
	}
	if g.rate > 0 && due > g.backlog { // arrivals the "NIC ring" could not hold
		lost := due - g.backlog
		g.seq += lost
		d.rxDropped.Add(lost)
		due = g.backlog
	}
	n := 0
	for uint64(n) < due && n < len(bufs) {
		b := d.pool.Get()
		if b == nil {
			d.rxNoBuffer.Add(1)
			break
		}
		h := g.headers[g.nextType]
		if g.nextType++; g.nextType == len(g.headers) {
			g.nextType = 0
		}
		g.seq++
		h.ID = uint32(g.seq)
		copy(b.Data, g.template)
		h.Encode(b.Data)
		b.Len = len(g.template)
		b.WireLen = b.Len
		b.Peer = g.peer
		b.DstPort = d.cfg.Port
		b.RxTime = now
		bufs[n] = b
		n++
	}
	if n > 0 {
		g.emitted.Add(uint64(n))
	}
	return n
}
