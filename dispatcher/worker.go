package dispatcher

import (
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/persephone-go/psp/app"
	"github.com/persephone-go/psp/darc"
	"github.com/persephone-go/psp/internal/affinity"
	"github.com/persephone-go/psp/internal/ring"
	"github.com/persephone-go/psp/nic"
)

// The workers: each runs on its own thread, takes the requests the
// dispatcher pushes to its ring, runs the application on each (run:
// handle, or handleMulti with the worker's reply), transmits the reply on
// its own TX queue, records where the request spent its time
// (stageRecorder) and sends its completion back.

// task is what the dispatcher pushes to a worker: the request and when it
// was accepted and dispatched (dataplane clock), for its stage times.
type task struct {
	buf                  *nic.Buffer
	typ                  darc.Type
	accepted, dispatched int64
}

// completion is what a worker sends back when it finishes a request.
type completion struct {
	typ        darc.Type
	start, end int64 // handler start and end, dataplane clock
	outcome    uint8
	// parked (outcomeParked): the request's buffer, now the dispatcher's,
	// and its time limit (ns, <= 0: none).
	parked    *nic.Buffer
	parkAfter int64
}

// Outcomes a worker reports in a completion.
const (
	outcomeAnswered   uint8 = iota
	outcomeApp              // the handler refused the request
	outcomeServiceCap       // the handler refused it: over its service cap
	outcomeTxError          // the reply was not transmitted
	outcomePanic            // the handler panicked
	outcomeShutdown         // the worker stopped before running it
	outcomeParked           // the handler parked it (app.Reply.Park)
)

// worker is one application worker's links.
type worker struct {
	id     int
	cpu    int
	in     *ring.SPSC[task]
	out    *ring.SPSC[completion]
	tx     nic.TxQueue
	parked atomic.Bool
	wake   chan struct{}
	stages *stageRecorder // written by the worker goroutine only
}

// startWorkers starts one goroutine per worker and waits until each has
// locked (and pinned) its thread.
func (d *Dispatcher) startWorkers(wg *sync.WaitGroup) error {
	ready := make(chan error, len(d.workers))
	for _, w := range d.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d.work(w, ready)
		}()
	}
	var first error
	for range d.workers {
		if err := <-ready; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// lockThread locks the calling goroutine to its OS thread, for good (the
// thread exits with the goroutine, so no other goroutine inherits its
// affinity or timer slack), when threads are pinned or busy-poll: the
// paper's one-thread-per-core model. Under spin-then-park without pinning
// the goroutines stay unlocked, and park and sleep through the Go
// scheduler rather than in system calls of their own: waking a parked
// locked goroutine hands its processor to its own thread (two thread
// wake-ups instead of one), and the runtime's monitor (sysmon) preempts,
// and takes the processor of, any goroutine it has not seen go through
// the scheduler for 10ms, which for a locked goroutine costs two thread
// switches each time and, with a thread per worker sleeping in futex or
// nanosleep, kept sysmon polling every 20µs (a sixth of a core).
func (d *Dispatcher) lockThread() {
	if len(d.spec.CPUs) == 0 && d.spec.Idle == IdleSpinThenPark {
		return
	}
	runtime.LockOSThread()
	lowerTimerSlack()
}

// work is worker w's goroutine body.
func (d *Dispatcher) work(w *worker, ready chan<- error) {
	d.lockThread()
	if w.cpu >= 0 {
		if err := affinity.Pin(w.cpu); err != nil {
			ready <- fmt.Errorf("dispatcher: pin worker %d to cpu %d: %w", w.id, w.cpu, err)
			return
		}
	}
	ready <- nil

	one := make([]*nic.Buffer, 1)
	run := d.newRunner(w.tx, w.stages, false)
	parking := d.spec.Idle == IdleSpinThenPark
	spin := int64(d.spec.Spin)
	var idleSince int64 = -1
	defer func() { w.stages.publish(d.dp.Now()) }()
	for {
		t, ok := w.in.Pop()
		if !ok {
			if d.stop.Load() {
				if w.in.Len() == 0 {
					return
				}
				continue
			}
			now := d.dp.Now()
			w.stages.maybePublish(now)
			if idleSince < 0 {
				idleSince = now
				continue
			}
			if !parking || now-idleSince < spin {
				continue
			}
			w.stages.publish(now)
			w.parked.Store(true)
			if w.in.Len() == 0 && !d.stop.Load() {
				select {
				case <-w.wake:
				case <-d.stopCh:
				}
			}
			w.parked.Store(false)
			idleSince = -1
			continue
		}
		idleSince = -1
		if d.stop.Load() { // the drain is over: do not start new work
			one[0] = t.buf
			d.dp.Release(one...)
			one[0] = nil
			for !w.out.Push(completion{typ: t.typ, outcome: outcomeShutdown}) {
				runtime.Gosched()
			}
			continue
		}
		c := d.run(run, w.id, w.tx, t, 0)
		for !w.out.Push(c) {
			runtime.Gosched() // cannot happen with one request per worker; be safe
		}
		if d.sleeping.Load() && d.sleeping.CompareAndSwap(true, false) {
			d.waker.WakeRecv()
		}
	}
}

// runner runs requests and records their stages: a worker goroutine's, or
// the dispatcher's for the requests it serves in place, which holds their
// replies until the end of the dispatch round (held, with their stamps)
// and sends them together.
type runner struct {
	one    []*nic.Buffer
	multi  app.MultiHandler
	reply  *reply // app.MultiHandler applications, and the dispatcher's runner
	stages *stageRecorder
	held   []heldRequest
}

// heldRequest is a request served in place whose reply waits for the end of
// the dispatch round.
type heldRequest struct {
	typ darc.Type
	st  stamps
}

func (d *Dispatcher) newRunner(tx nic.TxQueue, stages *stageRecorder, hold bool) *runner {
	r := &runner{one: make([]*nic.Buffer, 1), stages: stages}
	r.multi, _ = d.app.(app.MultiHandler)
	if r.multi != nil || hold {
		// A multi-datagram reply may take several slots: room for a
		// round's replies without a flush in the middle, in the common
		// case.
		room := d.spec.Burst
		if hold {
			room = 2 * max(d.spec.Burst, d.spec.Workers)
		}
		r.reply = newReply(d.dp, tx, room)
		r.reply.hold = hold
	}
	if hold {
		r.held = make([]heldRequest, 0, 2*max(d.spec.Burst, d.spec.Workers))
	}
	return r
}

// run runs t as worker w and transmits its reply on tx (or, holding,
// queues it); it records the request's stages (holding: once sent) and
// returns its completion. The handler starts at started, or when 0 at a
// clock read.
func (d *Dispatcher) run(r *runner, w int, tx nic.TxQueue, t task, started int64) completion {
	st := stamps{received: t.buf.RxTime, accepted: t.accepted, dispatched: t.dispatched, started: started}
	var outcome uint8
	switch {
	case r.reply != nil:
		if r.reply.tx != tx {
			r.reply.flush()
			r.reply.tx = tx
		}
		r.reply.reset(t.buf)
		var answer, panicked bool
		if st.started == 0 {
			st.started = d.dp.Now()
		}
		if r.multi != nil {
			answer, panicked = d.handleMulti(r.multi, w, t.typ, t.buf, r.reply)
			st.finished = d.dp.Now()
			if r.reply.parked(answer, panicked) {
				// Parked: not a reply, not a drop (park.go); without an
				// app.Parker nothing would run it again.
				if d.parker != nil {
					r.reply.req = nil
					r.stages.record(int(t.typ), &st)
					return completion{typ: t.typ, start: st.started, end: st.finished, outcome: outcomeParked,
						parked: t.buf, parkAfter: r.reply.parkAfter}
				}
				answer = false
			}
			outcome = multiOutcome(r.reply, answer, panicked)
		} else {
			outcome = d.handle(w, t.typ, t.buf)
			st.finished = d.dp.Now()
			r.reply.finish(outcome == outcomeAnswered)
		}
	default:
		if st.started == 0 {
			st.started = d.dp.Now()
		}
		outcome = d.handle(w, t.typ, t.buf)
		st.finished = d.dp.Now()
		r.one[0] = t.buf
		if outcome == outcomeAnswered {
			if n, _ := tx.Send(r.one); n != 1 {
				outcome = outcomeTxError
			}
		} else {
			d.dp.Release(r.one...)
		}
		r.one[0] = nil
	}
	switch {
	case r.held != nil && outcome == outcomeAnswered:
		r.held = append(r.held, heldRequest{typ: t.typ, st: st})
		if len(r.held) == cap(r.held) {
			d.flushInPlace()
		}
	default:
		if outcome == outcomeAnswered {
			st.sent = d.dp.Now()
		}
		r.stages.record(int(t.typ), &st)
	}
	return completion{typ: t.typ, start: st.started, end: st.finished, outcome: outcome}
}

// handle runs the application and returns the outcome, turning a panic
// into a dropped request so a bad request or an application bug cannot
// bring the server down.
func (d *Dispatcher) handle(w int, typ darc.Type, b *nic.Buffer) (outcome uint8) {
	defer func() {
		if recover() != nil {
			outcome = outcomePanic
		}
	}()
	if d.serve != nil {
		switch d.serve.Serve(w, typ, b) {
		case app.Answer:
			return outcomeAnswered
		case app.RefuseOverCap:
			return outcomeServiceCap
		default:
			return outcomeApp
		}
	}
	if d.app.Handle(w, typ, b) {
		return outcomeAnswered
	}
	return outcomeApp
}

// handleMulti is handle for an app.MultiHandler.
func (d *Dispatcher) handleMulti(m app.MultiHandler, w int, typ darc.Type, b *nic.Buffer, r *reply) (answer, panicked bool) {
	defer func() {
		if recover() != nil {
			answer, panicked = false, true
		}
	}()
	return m.HandleMulti(w, typ, b, r), false
}

// multiOutcome transmits (or releases) an app.MultiHandler's reply and returns
// the request's outcome.
func multiOutcome(r *reply, answer, panicked bool) uint8 {
	if panicked {
		r.discard()
		return outcomePanic
	}
	served := r.sent > 0 || r.noReply
	if !r.finish(answer) {
		return outcomeTxError
	}
	if !answer && !served {
		return outcomeApp
	}
	return outcomeAnswered
}

// reply is a worker's app.Reply: it queues the leading datagrams of a
// multi-datagram reply and transmits them in batches on the worker's TX
// queue, the request's buffer last.
type reply struct {
	req     *nic.Buffer
	room    int                // Room for req
	alloc   nic.ReplyAllocator // nil: the dataplane cannot allocate
	roomer  replyRoomer        // nil: reply buffers are as long as requests'
	dp      nic.Dataplane
	tx      nic.TxQueue
	pending []*nic.Buffer // queued, not yet transmitted; at most cap
	sent    int           // datagrams accepted by Send for this request
	txFail  bool          // a transmission failed
	noReply bool          // served without a reply
	park    bool          // the handler parked the request (Park)
	// parkAfter is Park's time limit, ns (<= 0: none).
	parkAfter int64
	// hold keeps a finished request's datagrams queued for the next
	// flush (the dispatcher's, for the requests it serves in place: one
	// sendmmsg per dispatch round instead of one per request); failed
	// counts the datagrams flushes could not send since it was last
	// cleared, which the dispatcher settles after its flush.
	hold   bool
	failed int
}

// replyRoomer is a dataplane whose reply buffers can hold less than the
// request they answer: nic/tcp gives a request longer than its pooled
// buffers a buffer of the request's own length, and its replies pooled
// ones.
type replyRoomer interface {
	// ReplyRoom is the room of the buffers AllocReply returns for req.
	ReplyRoom(req *nic.Buffer) int
}

// newReply returns worker w's Reply, flushing every batch datagrams.
func newReply(dp nic.Dataplane, tx nic.TxQueue, batch int) *reply {
	alloc, _ := dp.(nic.ReplyAllocator)
	roomer, _ := dp.(replyRoomer)
	return &reply{alloc: alloc, roomer: roomer, dp: dp, tx: tx, pending: make([]*nic.Buffer, 0, max(batch, 1))}
}

// reset prepares r for the request in req.
func (r *reply) reset(req *nic.Buffer) {
	r.req, r.sent, r.txFail, r.noReply, r.park, r.parkAfter = req, 0, false, false, false, 0
	r.room = len(req.Data)
	if r.roomer != nil {
		r.room = min(r.room, r.roomer.ReplyRoom(req))
	}
}

// NoReply implements app.Reply: the request counts as answered, not as
// dropped, when the handler returns false.
func (r *reply) NoReply() { r.noReply = true }

// Park implements app.Reply: the request is parked (park.go) when the
// handler returns false having sent nothing.
func (r *reply) Park(after time.Duration) { r.park, r.parkAfter = true, int64(after) }

// parked reports whether the request the handler returned from (answer,
// panicked) is parked: Park called, nothing answered or sent.
func (r *reply) parked(answer, panicked bool) bool {
	return r.park && !answer && !panicked && r.sent == 0 && !r.noReply
}

// Send implements app.Reply. Queued datagrams are transmitted in batches on
// the worker's TX queue, and the rest, with the request's buffer last, when
// the handler returns; earlier datagrams stay queued when Send fails.
func (r *reply) Send(p []byte) error {
	if r.alloc == nil {
		return app.ErrNoReplyBuffer
	}
	if len(p) > r.room {
		return app.ErrReplyTooLong
	}
	if len(r.pending) == cap(r.pending) {
		r.flush()
	}
	b := r.alloc.AllocReply(r.req)
	if b == nil {
		return app.ErrNoReplyBuffer
	}
	if len(p) > len(b.Data) {
		r.dp.Release(b)
		return app.ErrReplyTooLong
	}
	b.Len = copy(b.Data, p)
	r.pending = append(r.pending, b)
	r.sent++
	return nil
}

// Room implements app.Reply: the payload room of the buffers Send fills,
// at most the request's.
func (r *reply) Room() int { return r.room }

// Sent returns how many datagrams Send accepted for the current request.
func (r *reply) Sent() int { return r.sent }

// flush transmits the queued datagrams.
func (r *reply) flush() {
	if len(r.pending) == 0 {
		return
	}
	if n, _ := r.tx.Send(r.pending); n != len(r.pending) {
		r.txFail = true
		r.failed += len(r.pending) - max(n, 0)
	}
	clear(r.pending)
	r.pending = r.pending[:0]
}

// finish transmits what is queued, then the request's buffer when answer is
// set (otherwise it releases it). It reports whether every datagram went out;
// with hold set it queues them instead and reports true (the flush that
// sends them settles failures).
func (r *reply) finish(answer bool) bool {
	if r.hold {
		if answer {
			if len(r.pending) == cap(r.pending) {
				r.flush()
			}
			r.pending = append(r.pending, r.req)
		} else {
			r.dp.Release(r.req)
		}
		r.req = nil
		return true
	}
	if answer {
		if len(r.pending) == cap(r.pending) {
			r.flush()
		}
		r.pending = append(r.pending, r.req)
		r.flush()
	} else {
		r.flush()
		r.dp.Release(r.req)
	}
	r.req = nil
	return !r.txFail
}

// discard releases what is queued and the request's buffer (the handler
// panicked).
func (r *reply) discard() {
	r.dp.Release(r.pending...)
	clear(r.pending)
	r.pending = r.pending[:0]
	r.dp.Release(r.req)
	r.req = nil
}

// stamps are a request's timestamps (ns, dataplane clock); a zero sent means
// no reply left (the application refused it, panicked, or transmission
// failed): only the stages up to service are recorded then.
type stamps struct {
	received, accepted, dispatched, started, finished, sent int64
}

// stageRecorder is one worker's stage histograms. The worker records into
// plain per-type histograms (a few ns per request) and publishes them into
// atomic copies that other goroutines read (Dispatcher.Stages): at most
// every publishEvery while it works, and whenever it goes idle, so that a
// request's stages are visible before the worker waits for its next
// request, and at most publishEvery after it finished otherwise.
// Publishing a type costs about a microsecond; atomic adds on every record
// would cost ~100ns per request (BenchmarkStageRecord).
//
// The type space grows when a multi-tenant dispatcher adds a tenant: the
// worker then extends its own tables on the first request of a new type,
// and replaces the table of published copies (by type, set once per type)
// with a longer one, so that readers never see it change under them.
//
// When a removed tenant is retired its type ids go to a tenant added later,
// so their histograms must start from zero: the dispatcher asks for it
// (reset), the recorder's owner drops them before it records again
// (applyResets), and readers leave out the types of a reset not applied
// yet.
type stageRecorder struct {
	local       []*TypeStages             // by type, allocated on first use
	shared      atomic.Pointer[[]*shared] // by type, published copies; copy on write
	dirty       []uint32                  // types recorded since the last publish
	isDirty     []bool
	lastPublish int64

	resetMu  sync.Mutex
	resets   [][2]int // type ranges [lo, hi) to drop, under resetMu
	resetGen atomic.Uint64
	applied  uint64 // the owner's: the resetGen it applied
}

func newStageRecorder(numTypes int) *stageRecorder {
	r := &stageRecorder{
		local:   make([]*TypeStages, numTypes),
		isDirty: make([]bool, numTypes),
	}
	tab := make([]*shared, numTypes)
	r.shared.Store(&tab)
	return r
}

// record adds one request of type t.
func (r *stageRecorder) record(t int, s *stamps) {
	if r.resetGen.Load() != r.applied {
		r.applyResets()
	}
	var h *TypeStages
	if t < len(r.local) {
		h = r.local[t]
	}
	if h == nil {
		h = r.first(t)
	}
	h[StageReceive].record(s.accepted - s.received)
	h[StageQueueing].record(s.dispatched - s.accepted)
	h[StageHandoff].record(s.started - s.dispatched)
	h[StageService].record(s.finished - s.started)
	if s.sent != 0 {
		h[StageTransmit].record(s.sent - s.finished)
		h[StageLatency].record(s.sent - s.received)
	}
	if !r.isDirty[t] {
		r.isDirty[t] = true
		r.dirty = append(r.dirty, uint32(t))
	}
}

// first sets up type t on its first request, growing the tables when t
// is a type added since the worker started.
func (r *stageRecorder) first(t int) *TypeStages {
	if t >= len(r.local) {
		n := max(t+1, 2*len(r.local))
		r.local = append(r.local, make([]*TypeStages, n-len(r.local))...)
		r.isDirty = append(r.isDirty, make([]bool, n-len(r.isDirty))...)
	}
	h := new(TypeStages)
	r.local[t] = h
	old := *r.shared.Load()
	tab := make([]*shared, max(len(old), t+1))
	copy(tab, old)
	tab[t] = new(shared)
	r.shared.Store(&tab)
	return h
}

// shared is the published copy of one type's stage histograms.
type shared [NumStages]struct {
	buckets [NumBuckets]atomic.Uint64
	sum     atomic.Uint64
}

// publishEvery bounds how stale a busy worker's published stages are.
const publishEvery = int64(1e6) // 1ms

// maybePublish publishes when the last publication is publishEvery old.
func (r *stageRecorder) maybePublish(now int64) {
	if len(r.dirty) > 0 && now-r.lastPublish >= publishEvery {
		r.publish(now)
	}
}

// publish copies the types recorded since the last publication into their
// shared copies.
func (r *stageRecorder) publish(now int64) {
	tab := *r.shared.Load()
	for _, t := range r.dirty {
		h, p := r.local[t], tab[t]
		for s := range h {
			for i, v := range h[s].Buckets {
				if v != 0 {
					p[s].buckets[i].Store(v)
				}
			}
			p[s].sum.Store(h[s].SumNs)
		}
		r.isDirty[t] = false
	}
	r.dirty = r.dirty[:0]
	r.lastPublish = now
}

// addTo adds the published histograms of type t to h; it reports whether
// this worker ran a request of type t.
func (r *stageRecorder) addTo(t int, h *TypeStages) bool {
	tab := *r.shared.Load()
	if t >= len(tab) || tab[t] == nil {
		return false
	}
	p := tab[t]
	for s := range p {
		var n uint64
		for i := range p[s].buckets {
			v := p[s].buckets[i].Load()
			h[s].Buckets[i] += v
			n += v
		}
		h[s].Count += n
		h[s].SumNs += p[s].sum.Load()
	}
	return true
}

// reset asks the recorder's owner to drop types lo..hi-1 (a retired
// tenant's) before it records again. Safe from any goroutine.
func (r *stageRecorder) reset(lo, hi int) {
	r.resetMu.Lock()
	r.resets = append(r.resets, [2]int{lo, hi})
	r.resetGen.Add(1)
	r.resetMu.Unlock()
}

// applyResets drops the types of the resets asked for (the owner's
// goroutine).
func (r *stageRecorder) applyResets() {
	r.resetMu.Lock()
	defer r.resetMu.Unlock()
	r.applied = r.resetGen.Load()
	if len(r.resets) == 0 {
		return
	}
	old := *r.shared.Load()
	tab := slices.Clone(old)
	for _, rg := range r.resets {
		for t := rg[0]; t < rg[1]; t++ {
			if t < len(r.local) {
				r.local[t] = nil
				r.isDirty[t] = false
			}
			if t < len(tab) {
				tab[t] = nil
			}
		}
	}
	r.dirty = slices.DeleteFunc(r.dirty, func(t uint32) bool { return r.local[t] == nil })
	r.shared.Store(&tab)
	r.resets = r.resets[:0]
}

// pendingResets returns the type ranges whose reset the owner has not
// applied yet (readers leave them out).
func (r *stageRecorder) pendingResets() [][2]int {
	r.resetMu.Lock()
	defer r.resetMu.Unlock()
	return slices.Clone(r.resets)
}

// inRanges reports whether t is in one of the ranges [lo, hi).
func inRanges(rs [][2]int, t int) bool {
	for _, r := range rs {
		if t >= r[0] && t < r[1] {
			return true
		}
	}
	return false
}

// stopWorkers tells the workers to finish and waits for them, at most
// stopGrace: a worker still in its handler then is left to finish on its
// own (its request is counted as a shutdown drop by abandonRunning), so a
// handler that never returns cannot hold the shutdown. Requests still in a
// worker's ring are not run: the worker releases them as shutdown drops.
func (d *Dispatcher) stopWorkers(wg *sync.WaitGroup) {
	d.stop.Store(true)
	close(d.stopCh)
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	t := time.NewTimer(stopGrace)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	}
}
