package dispatcher

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/persephone-go/psp/app"
	"github.com/persephone-go/psp/darc"
	"github.com/persephone-go/psp/internal/ring"
	"github.com/persephone-go/psp/nic"
)

// DefaultLaneCapacity is how many of a tenant's packets may wait for, or be
// in, its classifier at once (Spec.LaneCapacity): eight bursts. Past it the
// tenant's packets are dropped for reason "classifier_busy".
const DefaultLaneCapacity = 256

// classified is a packet a lane classified, with its tenant-local type.
type classified struct {
	buf *nic.Buffer
	typ darc.Type
}

// lane runs one tenant's classifier on a goroutine of its own, so that a
// classifier that is slow, or traps, delays its own tenant's packets and
// no one else's. The dispatcher pushes the tenant's packets on in; the lane
// classifies them in batches and pushes them back on out with their
// (tenant-local) types. The dispatcher never has more than the ring's
// capacity in flight on a lane, so out never overflows.
type lane struct {
	cls      app.Classifier
	burst    int
	in       *ring.SPSC[*nic.Buffer]
	out      *ring.SPSC[classified]
	limit    int // most packets in flight
	inflight int // dispatcher goroutine only: pushed and not yet back
	parked   atomic.Bool
	wake     chan struct{}
	stop     atomic.Bool
	stopCh   chan struct{}
	done     chan struct{}
	spin     int64
	parking  bool
	now      func() int64
	// Calls counts classifier calls (batches); busyNs sums their time.
	calls  atomic.Uint64
	busyNs atomic.Uint64

	release  func() // TenantSpec.Release
	released sync.Once

	// clean counts consecutive calls that neither faulted nor took longer
	// than inlineLimit (IsolateAuto's way back inline).
	clean       atomic.Uint64
	inlineLimit int64
	faults      faultCounter
}

// releaseOnce calls the tenant's Release, once.
func (l *lane) releaseOnce() {
	if l.release != nil {
		l.released.Do(l.release)
	}
}

func newLane(cls app.Classifier, capacity, burst int, spec Spec, now func() int64) *lane {
	return &lane{
		cls:    cls,
		burst:  burst,
		in:     ring.New[*nic.Buffer](capacity),
		out:    ring.New[classified](capacity),
		limit:  capacity,
		wake:   make(chan struct{}, 1),
		stopCh: make(chan struct{}),
		done:   make(chan struct{}),
		spin:   int64(spec.Spin),
		// A lane parks once idle for Spec.Spin under either idle
		// strategy: under busy-poll a spinning lane per Wasm tenant would
		// be a thread the server's budget (a core per worker and the
		// dispatcher) does not count, and a lane is only busy while its
		// tenant misbehaves.
		parking: true,
		now:     now,
	}
}

// push hands b to the lane (dispatcher goroutine); false when the lane is
// full.
func (l *lane) push(b *nic.Buffer) bool {
	if l.inflight >= l.limit || !l.in.Push(b) {
		return false
	}
	l.inflight++
	return true
}

// kick wakes the lane if it parked.
func (l *lane) kick() {
	if l.parked.Load() {
		select {
		case l.wake <- struct{}{}:
		default:
		}
	}
}

// start runs the lane's goroutine; wg tracks it.
func (l *lane) start(wg *sync.WaitGroup, lock func()) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(l.done)
		defer l.releaseOnce()
		lock()
		l.run()
	}()
}

// halt tells the lane to stop once it has classified what it holds (a
// classifier call in progress finishes: its fuel and time limit bound it).
func (l *lane) halt() {
	if !l.stop.Swap(true) {
		close(l.stopCh)
	}
}

// run is the lane's goroutine body: classify what arrives, in batches.
func (l *lane) run() {
	bufs := make([]*nic.Buffer, l.burst)
	payloads := make([][]byte, l.burst)
	types := make([]darc.Type, l.burst)
	var idleSince int64 = -1
	for {
		n := 0
		for n < l.burst {
			b, ok := l.in.Pop()
			if !ok {
				break
			}
			bufs[n] = b
			payloads[n] = b.Payload()
			n++
		}
		if n == 0 {
			if l.stop.Load() {
				return
			}
			if !l.parking {
				continue
			}
			now := l.now()
			if idleSince < 0 {
				idleSince = now
				continue
			}
			if now-idleSince < l.spin {
				continue
			}
			l.parked.Store(true)
			if l.in.Len() == 0 && !l.stop.Load() {
				select {
				case <-l.wake:
				case <-l.stopCh:
				}
			}
			l.parked.Store(false)
			idleSince = -1
			continue
		}
		idleSince = -1
		var before uint64
		if l.faults != nil {
			before = l.faults.FaultTotal()
		}
		start := l.now()
		l.classify(payloads[:n], types[:n])
		dt := l.now() - start
		l.busyNs.Add(uint64(max(dt, 0)))
		l.calls.Add(1)
		if dt > l.inlineLimit || (l.faults != nil && l.faults.FaultTotal() != before) {
			l.clean.Store(0)
		} else {
			l.clean.Add(1)
		}
		for i := range n {
			for !l.out.Push(classified{buf: bufs[i], typ: types[i]}) {
				runtime.Gosched() // cannot happen: in flight <= capacity
			}
			bufs[i], payloads[i] = nil, nil
		}
	}
}

// classify runs the classifier, a panic sending the batch to UNKNOWN.
func (l *lane) classify(payloads [][]byte, types []darc.Type) {
	defer func() {
		if recover() != nil {
			clear(types)
		}
	}()
	l.cls.ClassifyBatch(payloads, types)
}

// startLanes starts every lane (Run).
func (d *Dispatcher) startLanes() {
	for _, t := range d.mt.tenants {
		if t.lane != nil && !t.removed {
			t.lane.start(&d.mt.lanes, d.lockThread)
		}
	}
}

// stopLanes stops the lanes once the drain is over and drops what they
// still hold as shutdown drops.
func (d *Dispatcher) stopLanes() {
	mt := d.mt
	for _, t := range mt.tenants {
		switch {
		case t.lane != nil:
			t.lane.halt()
		case !t.removed && t.spec.Release != nil:
			t.spec.Release()
		}
	}
	done := make(chan struct{})
	go func() { mt.lanes.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(stopGrace):
	}
	for _, t := range mt.tenants {
		l := t.lane
		if l == nil {
			continue
		}
		select {
		case <-l.done:
		default:
			continue // still classifying: its packets are counted below, not released
		}
		c := &d.counters[t.base]
		for {
			cl, ok := l.out.Pop()
			if !ok {
				break
			}
			d.dropLane(l, c, cl.buf)
		}
		for {
			b, ok := l.in.Pop()
			if !ok {
				break
			}
			d.dropLane(l, c, b)
		}
	}
	// Packets of lanes still in a classifier call: counted, not released
	// (the lane still reads them).
	for _, t := range mt.tenants {
		if l := t.lane; l != nil && l.inflight > 0 {
			c := &d.counters[t.base]
			c.received += uint64(l.inflight)
			c.drops.Shutdown += uint64(l.inflight)
			d.drops.Shutdown += uint64(l.inflight)
			mt.classifying -= l.inflight
			l.inflight = 0
		}
	}
	d.flush()
}

func (d *Dispatcher) dropLane(l *lane, c *typeCounters, b *nic.Buffer) {
	l.inflight--
	d.mt.classifying--
	c.received++
	c.drops.Shutdown++
	d.drops.Shutdown++
	d.release = append(d.release, b)
	if len(d.release) >= d.spec.Burst {
		d.flush()
	}
}
