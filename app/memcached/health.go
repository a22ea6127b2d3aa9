package memcached

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble"
	"github.com/cockroachdb/pebble/vfs"
)

// A store on disk can fail to write: the disk fills, a device fails, a
// write stalls. Pebble takes an error of its write-ahead log or manifest
// for fatal (it panics or exits) and retries a failed flush at once, over
// and over, while its writers wait for room without bound. The store keeps
// those from its workers:
//
//   - Its file system (diskFS) retries a failed write or sync of the log
//     and the manifest (never handing Pebble the error) until it succeeds
//     or the store closes, and slows the retries of a flush or compaction
//     whose table could not be written.
//   - A watchdog (writeHealth.watch) decides every healthTick whether the
//     store takes writes: not when the disk's free space is below
//     diskReserve (above it again with half as much to spare), a write of
//     the log or manifest is being retried, a flush or compaction failed
//     in the last failedFor, Pebble stalls its writers, or a write has run
//     longer than the write timeout.
//   - A write that the store does not take is answered at once, "SERVER_ERROR
//     out of memory storing object", and counted (store_writes_refused, store_write_timeouts);
//     reads go on. At most all workers but one write at once (writeSlots),
//     so one is left for reads whatever a write waits for; a write that
//     waits longer than the write timeout for its turn, or for its sync
//     (Config.Sync), is answered the same way. A write already in Pebble
//     when its log cannot be written may wait there until it can (Pebble
//     cannot drop a write of its log): one per writing worker at most.
//   - The store takes writes again as soon as nothing holds it: space came
//     back, the retried write went through, the flush succeeded.

// Write health's bounds.
const (
	// healthTick is how often the watchdog looks at the store.
	healthTick = 20 * time.Millisecond
	// diskReserve is the free space under which a store on disk stops
	// taking writes: what a flush of its memtables and the log need to
	// go on.
	diskReserve = 16 << 20
	// failedFor is how long a failed flush or compaction keeps the store
	// from taking writes (Pebble retries it at once: a success ends it).
	failedFor = time.Second
	// retryFrom and retryTo bound the pause between two tries of a failed
	// write of the log, the manifest or a table.
	retryFrom = 10 * time.Millisecond
	retryTo   = time.Second
	// DefaultWriteTimeout bounds a write's wait for its turn and its sync.
	DefaultWriteTimeout = time.Second
)

// errNotWriting: the store takes no writes now (see writeHealth).
var errNotWriting = errors.New("memcached: store not taking writes")

// writeHealth is what the watchdog knows of a store's writes. Its fields
// are read by the workers on every write, set by the watchdog, Pebble's
// event listener and diskFS.
type writeHealth struct {
	ok     atomic.Bool // the store takes writes
	reason atomic.Pointer[string]

	lowSpace  atomic.Bool
	retrying  atomic.Int32 // log or manifest writes being retried
	fatal     atomic.Pointer[error]
	failedAt  atomic.Int64 // unix ns of the last failed flush or compaction
	stallFrom atomic.Int64 // unix ns Pebble began to stall writers; 0: none
	closing   atomic.Bool

	refused atomic.Uint64 // writes answered at once, the store not writing
	timeout atomic.Uint64 // writes that waited past the write timeout
	errors  atomic.Uint64 // failed writes and syncs of the files, tables included

	mu   sync.Mutex
	last error // the last file error, for the reason
}

// why says why the store takes no writes ("" when it does).
func (h *writeHealth) why() string {
	if p := h.reason.Load(); p != nil {
		return *p
	}
	return ""
}

// fileError records a failed write or sync of a store file.
func (h *writeHealth) fileError(err error) {
	h.errors.Add(1)
	h.mu.Lock()
	h.last = err
	h.mu.Unlock()
}

// eventListener tells h what Pebble does: failed flushes and compactions,
// write stalls.
func (h *writeHealth) eventListener() *pebble.EventListener {
	return &pebble.EventListener{
		BackgroundError: func(err error) {
			h.failedAt.Store(time.Now().UnixNano())
			h.fileError(err)
		},
		FlushEnd: func(info pebble.FlushInfo) {
			if info.Err == nil {
				h.failedAt.Store(0)
			}
		},
		CompactionEnd: func(info pebble.CompactionInfo) {
			if info.Err == nil {
				h.failedAt.Store(0)
			}
		},
		WriteStallBegin: func(pebble.WriteStallBeginInfo) { h.stallFrom.Store(time.Now().UnixNano()) },
		WriteStallEnd:   func() { h.stallFrom.Store(0) },
	}
}

// judge decides whether the store takes writes, now: free is the disk's
// free space (< 0: unknown), oldest the start (unix ns) of the oldest
// write running (0: none), timeout the write timeout.
func (h *writeHealth) judge(now time.Time, free int64, oldest int64, timeout time.Duration) {
	switch {
	case free >= 0 && free < diskReserve:
		h.lowSpace.Store(true)
	case free >= diskReserve+diskReserve/2 || free < 0:
		h.lowSpace.Store(false)
	}
	var why string
	switch {
	case h.fatal.Load() != nil:
		why = fmt.Sprintf("the write-ahead log failed (%v): restart the server", *h.fatal.Load())
	case h.lowSpace.Load():
		why = fmt.Sprintf("the disk is full (%d bytes free, %d needed)", max(free, 0), diskReserve)
	case h.retrying.Load() > 0:
		why = "a write of the log or manifest is being retried (" + h.lastError() + ")"
	case h.failedAt.Load() != 0 && now.Sub(time.Unix(0, h.failedAt.Load())) < failedFor:
		why = "a flush or compaction failed (" + h.lastError() + ")"
	case h.stallFrom.Load() != 0 && now.Sub(time.Unix(0, h.stallFrom.Load())) > timeout:
		why = "the store stalls its writes (flushes and compactions behind)"
	case oldest != 0 && now.Sub(time.Unix(0, oldest)) > timeout:
		why = "a write, or a sync of the log writes wait for, has run longer than the write timeout"
	}
	if why == "" {
		h.reason.Store(nil)
		h.ok.Store(true)
		return
	}
	h.ok.Store(false)
	if cur := h.reason.Load(); cur == nil || *cur != why {
		h.reason.Store(&why)
	}
}

// settle waits up to d for the writes of the log and manifest being
// retried to go through (not after an error that needs a restart).
func (h *writeHealth) settle(d time.Duration) {
	for end := time.Now().Add(d); h.retrying.Load() > 0 && h.fatal.Load() == nil && time.Now().Before(end); {
		time.Sleep(healthTick)
	}
}

func (h *writeHealth) lastError() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.last == nil {
		return "no error"
	}
	return h.last.Error()
}

// diskFS is the file system of a store on disk: vfs.Default, with its
// files' write errors recorded in h, and those of the write-ahead log and
// the manifest (every file but the tables) retried rather than returned.
type diskFS struct {
	vfs.FS
	h *writeHealth
}

func isRetried(name string) bool { return !strings.HasSuffix(name, ".sst") }

// wrap watches f, a file being written.
func (fs diskFS) wrap(name string, f vfs.File, err error) (vfs.File, error) {
	if err != nil {
		fs.h.fileError(err)
		return nil, err
	}
	return &diskFile{File: f, h: fs.h, retried: isRetried(name)}, nil
}

// Create implements vfs.FS. A table is created only after a pause while
// the last flush or compaction failed (Pebble retries them at once).
func (fs diskFS) Create(name string) (vfs.File, error) {
	if !isRetried(name) && fs.h.failedAt.Load() != 0 && !fs.h.closing.Load() {
		time.Sleep(retryTo / 4)
	}
	f, err := fs.FS.Create(name)
	return fs.wrap(name, f, err)
}

// ReuseForWrite implements vfs.FS (a recycled log).
func (fs diskFS) ReuseForWrite(oldname, newname string) (vfs.File, error) {
	f, err := fs.FS.ReuseForWrite(oldname, newname)
	return fs.wrap(newname, f, err)
}

// OpenReadWrite implements vfs.FS.
func (fs diskFS) OpenReadWrite(name string, opts ...vfs.OpenOption) (vfs.File, error) {
	f, err := fs.FS.OpenReadWrite(name, opts...)
	return fs.wrap(name, f, err)
}

// diskFile is a file of a store on disk being written.
type diskFile struct {
	vfs.File
	h       *writeHealth
	retried bool
}

// retry runs op until it succeeds, recording its errors: once for a
// table (its error is returned), until success or the store closes for
// the log and the manifest. An error that is not a want of space stops
// the store's writes until a restart: a sync that failed may have lost
// what it was to write, which no later success brings back.
func (f *diskFile) retry(op func() error) error {
	err := op()
	if err == nil || !f.retried {
		if err != nil {
			f.h.fileError(err)
		}
		return err
	}
	f.h.retrying.Add(1)
	defer f.h.retrying.Add(-1)
	pause := retryFrom
	for err != nil {
		f.h.fileError(err)
		if !errors.Is(err, syscall.ENOSPC) && !errors.Is(err, syscall.EDQUOT) {
			f.h.fatal.CompareAndSwap(nil, &err)
		}
		if f.h.closing.Load() {
			return err
		}
		time.Sleep(pause)
		pause = min(2*pause, retryTo)
		if f.h.fatal.Load() == nil {
			err = op()
		}
	}
	return nil
}

// Write implements io.Writer: a short write is resumed where it stopped.
func (f *diskFile) Write(p []byte) (int, error) {
	done := 0
	err := f.retry(func() error {
		n, err := f.File.Write(p[done:])
		done += n
		if err == nil && done < len(p) {
			err = io.ErrShortWrite
		}
		return err
	})
	return done, err
}

// Sync implements vfs.File.
func (f *diskFile) Sync() error { return f.retry(f.File.Sync) }

// SyncData implements vfs.File.
func (f *diskFile) SyncData() error { return f.retry(f.File.SyncData) }

// Preallocate implements vfs.File.
func (f *diskFile) Preallocate(off, n int64) error {
	err := f.File.Preallocate(off, n)
	if err != nil && !errors.Is(err, syscall.EOPNOTSUPP) {
		f.h.fileError(err)
	}
	return err
}
