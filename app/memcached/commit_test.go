package memcached

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/vfs"
)

// syncCountFS counts the syncs of the store's log, each taking delay.
type syncCountFS struct {
	vfs.FS
	delay time.Duration
	syncs atomic.Int64
}

func (fs *syncCountFS) Create(name string) (vfs.File, error) {
	f, err := fs.FS.Create(name)
	if err != nil || !strings.HasSuffix(name, ".log") {
		return f, err
	}
	return &syncCountFile{File: f, fs: fs}, nil
}

func (fs *syncCountFS) ReuseForWrite(oldname, newname string) (vfs.File, error) {
	f, err := fs.FS.ReuseForWrite(oldname, newname)
	if err != nil {
		return f, err
	}
	return &syncCountFile{File: f, fs: fs}, nil
}

type syncCountFile struct {
	vfs.File
	fs *syncCountFS
}

func (f *syncCountFile) Sync() error {
	time.Sleep(f.fs.delay)
	f.fs.syncs.Add(1)
	return f.File.Sync()
}

func (f *syncCountFile) SyncData() error {
	time.Sleep(f.fs.delay)
	f.fs.syncs.Add(1)
	return f.File.SyncData()
}

// TestGroupCommit: with Sync every write is answered after a sync of the
// log that follows it, and the workers writing at once share syncs;
// without it, the log is synced once an interval while writes come, and
// not at all while none do.
func TestGroupCommit(t *testing.T) {
	for _, synced := range []bool{true, false} {
		t.Run(fmt.Sprintf("sync=%v", synced), func(t *testing.T) {
			fs := &syncCountFS{FS: vfs.Default, delay: 2 * time.Millisecond}
			// A long write timeout: a busy disk's sync must not refuse a set here.
			srv := openServer(t, Config{Dir: t.TempDir(), Workers: 8, Sync: synced, WriteTimeout: 30 * time.Second, fs: fs})
			exchange(srv, 0, "set first 0 0 1\r\n1\r\n") // reserves CAS ids: a sync either way
			// One command at a time: each answered after its own sync.
			for i, body := range []string{"set a 0 0 1\r\nA\r\n", "delete a\r\n", "add a 0 0 1\r\nB\r\n", "set n 0 0 1\r\n7\r\n", "incr n 1\r\n", "touch n 0\r\n", "flush_all\r\n"} {
				before := fs.syncs.Load()
				exchange(srv, 0, body)
				if synced && fs.syncs.Load() == before {
					t.Errorf("command %d (%q): log syncs %d -> %d", i, body, before, fs.syncs.Load())
				}
			}
			if !synced {
				written := fs.syncs.Load()
				time.Sleep(3 * logSyncInterval)
				before := fs.syncs.Load()
				if before == written {
					t.Errorf("no sync of the log %v after writes", 3*logSyncInterval)
				}
				time.Sleep(3 * logSyncInterval)
				if n := fs.syncs.Load(); n != before {
					t.Errorf("%d syncs of the log while no write came", n-before)
				}
			}
			// Seven workers writing at once share their syncs.
			const writers, each = 7, 60
			before := fs.syncs.Load()
			start := time.Now()
			var wg sync.WaitGroup
			for w := range writers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range each {
						if got := text(exchange(srv, w, fmt.Sprintf("set k%d.%d 0 0 3\r\nabc\r\n", w, i))); got != "STORED\r\n" {
							t.Errorf("worker %d set %d: %q", w, i, got)
							return
						}
					}
				}()
			}
			wg.Wait()
			syncs := fs.syncs.Load() - before
			t.Logf("%d sets from %d workers at once: %d syncs of the log", writers*each, writers, syncs)
			if synced && (syncs == 0 || syncs > writers*each/2) {
				t.Errorf("%d syncs for %d sets, want at most %d", syncs, writers*each, writers*each/2)
			}
			if most := int64(time.Since(start)/logSyncInterval) + 1; !synced && syncs > most {
				t.Errorf("%d syncs without Sync in %v, want at most %d", syncs, time.Since(start), most)
			}
		})
	}
}

// BenchmarkSetDurability: sets of 100 bytes from 8 workers at once on a
// store on disk, with writes synced before their answer (group commit)
// and without (the log synced every logSyncInterval): compare sets/s of
// the two in one run.
func BenchmarkSetDurability(b *testing.B) {
	value := strings.Repeat("v", 100)
	for _, synced := range []bool{false, true} {
		b.Run(fmt.Sprintf("sync=%v", synced), func(b *testing.B) {
			srv := openServer(b, Config{Dir: b.TempDir(), Workers: 9, Sync: synced, WriteTimeout: 30 * time.Second})
			var next atomic.Int32
			b.SetParallelism(4) // 8 goroutines on 2 cores: writers wait on syncs
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				w := int(next.Add(1) - 1)
				body := fmt.Sprintf("set k%d 0 0 %d\r\n%s\r\n", w, len(value), value)
				for pb.Next() {
					if got := text(exchange(srv, w, body)); got != "STORED\r\n" {
						b.Errorf("set: %q", got)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "sets/s")
		})
	}
}
