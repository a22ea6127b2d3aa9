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
// log that follows it, and the workers writing at once share syncs; without
// it, writes sync nothing.
func TestGroupCommit(t *testing.T) {
	for _, synced := range []bool{true, false} {
		t.Run(fmt.Sprintf("sync=%v", synced), func(t *testing.T) {
			fs := &syncCountFS{FS: vfs.Default, delay: 2 * time.Millisecond}
			srv := openServer(t, Config{Dir: t.TempDir(), Workers: 8, Sync: synced, fs: fs})
			exchange(srv, 0, "set first 0 0 1\r\n1\r\n") // reserves CAS ids: a sync either way
			// One command at a time: each answered after its own sync.
			for i, body := range []string{"set a 0 0 1\r\nA\r\n", "delete a\r\n", "add a 0 0 1\r\nB\r\n", "set n 0 0 1\r\n7\r\n", "incr n 1\r\n", "touch n 0\r\n", "flush_all\r\n"} {
				before := fs.syncs.Load()
				exchange(srv, 0, body)
				if synced != (fs.syncs.Load() > before) {
					t.Errorf("command %d (%q): log syncs %d -> %d", i, body, before, fs.syncs.Load())
				}
			}
			// Seven workers writing at once share their syncs.
			const writers, each = 7, 60
			before := fs.syncs.Load()
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
			if !synced && syncs != 0 {
				t.Errorf("%d syncs without Sync", syncs)
			}
		})
	}
}
