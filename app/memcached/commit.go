package memcached

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble"
)

// How a write reaches the store: apply checks that the store takes writes
// (writeHealth), waits for a turn (writeSlots), applies the batch without
// a sync, and with Config.Sync waits for the group sync that covers it: a
// syncer goroutine syncs the log once for every write applied before it
// began, so the workers writing at once share one sync (group commit).
// Without Config.Sync the same goroutine syncs the log every
// logSyncInterval while writes come.

// errWriteTimeout: a write waited longer than the write timeout for its
// turn or its sync.
var errWriteTimeout = errors.New("memcached: write timed out")

// writeSlots is how many workers of w may write at once: all but one, so
// that one is left for reads whatever a write waits for.
func writeSlots(w int) int { return max(w-1, 1) }

// writer is a session's part in the write path: when its write began
// (for the watchdog) and a timer for its waits.
type writer struct {
	since atomic.Int64 // unix ns; 0: not writing
	timer *time.Timer
}

func newWriter() *writer {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return &writer{timer: t}
}

// wait waits on c up to d (w's timer) and reports whether c was ready.
func (w *writer) wait(c <-chan struct{}, d time.Duration) bool {
	select {
	case <-c:
		return true
	default:
	}
	w.timer.Reset(d)
	defer w.timer.Stop()
	select {
	case <-c:
		return true
	case <-w.timer.C:
		return false
	}
}

// apply writes b to the store for w (see above). It returns errNotWriting
// at once when the store takes no writes, errWriteTimeout when its turn or
// its sync took longer than the write timeout (its changes may still be
// applied, and durable later), or Pebble's error.
func (s *store) apply(w *writer, b *pebble.Batch) error {
	h := &s.health
	if !h.ok.Load() {
		h.refused.Add(1)
		return fmt.Errorf("%w: %s", errNotWriting, h.why())
	}
	select {
	case s.slots <- struct{}{}:
	default:
		if !w.waitSlot(s) {
			h.timeout.Add(1)
			return errWriteTimeout
		}
	}
	w.since.Store(time.Now().UnixNano())
	err := s.db.Apply(b, pebble.NoSync)
	w.since.Store(0)
	<-s.slots
	if err != nil || s.syncer == nil {
		return err
	}
	if !s.syncWrites {
		s.syncer.dirty.Store(true)
		return nil
	}
	if !w.wait(s.syncer.request(), s.writeTimeout) {
		h.timeout.Add(1)
		return errWriteTimeout
	}
	return s.syncer.err()
}

// waitSlot waits up to the write timeout for a turn to write.
func (w *writer) waitSlot(s *store) bool {
	w.timer.Reset(s.writeTimeout)
	defer w.timer.Stop()
	select {
	case s.slots <- struct{}{}:
		return true
	case <-w.timer.C:
		return false
	}
}

// logSyncInterval is how often the log of a store on disk is synced while
// writes come, when writes do not wait for their sync (no Config.Sync):
// a kill -9 or a power loss loses at most the writes answered since the
// last sync.
const logSyncInterval = 100 * time.Millisecond

// groupSync syncs the store's log for the writes waiting on it, one sync
// for all those applied before it began; with an interval, also every
// interval after a write (dirty).
type groupSync struct {
	db    *pebble.DB
	every time.Duration
	dirty atomic.Bool  // a write was applied since the last sync
	since atomic.Int64 // unix ns the sync under way began; 0: none
	kick  chan struct{}
	stop  chan struct{}
	done  chan struct{}

	mu      sync.Mutex
	next    chan struct{} // closed when the sync after the current one ends
	lastErr error
	syncs   atomic.Uint64
}

func newGroupSync(db *pebble.DB, every time.Duration) *groupSync {
	g := &groupSync{db: db, every: every, kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}),
		next: make(chan struct{})}
	go g.run()
	return g
}

// request asks for a sync of what the caller applied and returns the
// channel closed once it is done.
func (g *groupSync) request() <-chan struct{} {
	g.mu.Lock()
	c := g.next
	g.mu.Unlock()
	select {
	case g.kick <- struct{}{}:
	default: // a sync is asked for already: it will cover this one
	}
	return c
}

// err is the error of the last sync.
func (g *groupSync) err() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.lastErr
}

func (g *groupSync) run() {
	defer close(g.done)
	var tick <-chan time.Time
	if g.every > 0 {
		t := time.NewTicker(g.every)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-g.kick:
		case <-tick:
			if !g.dirty.Swap(false) {
				continue
			}
		case <-g.stop:
			return
		}
		select {
		case <-g.stop: // a stop asked for with a sync: the stop first
			return
		default:
		}
		g.mu.Lock()
		round := g.next
		g.next = make(chan struct{})
		g.mu.Unlock()
		// Every write that took round was applied before: the log
		// record written now follows them all, and its sync covers them.
		g.since.Store(time.Now().UnixNano())
		err := syncLog(g.db)
		g.since.Store(0)
		g.syncs.Add(1)
		g.mu.Lock()
		g.lastErr = err
		g.mu.Unlock()
		close(round)
	}
}

// close stops the syncer; a sync under way ends first.
func (g *groupSync) close() {
	close(g.stop)
	<-g.done
}

// syncLog syncs db's log: every write applied before it is then on disk.
// A failed sync returns its error (DB.LogData with Sync would end the
// process on it).
func syncLog(db *pebble.DB) error {
	b := db.NewBatch()
	defer b.Close()
	if err := b.LogData(nil, nil); err != nil {
		return err
	}
	if err := db.ApplyNoSyncWait(b, pebble.Sync); err != nil {
		return err
	}
	return b.SyncWait()
}

// watch is the store's watchdog (see writeHealth): it runs until the store
// closes.
func (s *store) watch(dir string, writers func() []*writer) {
	defer close(s.watchDone)
	t := time.NewTicker(healthTick)
	defer t.Stop()
	for {
		free := int64(-1)
		if dir != "" {
			free = freeDiskSpace(dir)
		}
		oldest := int64(0)
		if s.syncWrites {
			oldest = s.syncer.since.Load() // the writes wait for this sync
		}
		for _, w := range writers() {
			if since := w.since.Load(); since != 0 && (oldest == 0 || since < oldest) {
				oldest = since
			}
		}
		s.health.judge(time.Now(), free, oldest, s.writeTimeout)
		select {
		case <-t.C:
		case <-s.watchStop:
			return
		}
	}
}
