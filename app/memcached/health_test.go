package memcached

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/vfs"
	"golang.org/x/sys/unix"

	"github.com/persephone-go/psp/internal/testenv"
)

// faultFS injects faults into a store's files: an error for every write
// of the log (logErr) or every table created (tableErr), or writes of the
// log that block until released (stall).
type faultFS struct {
	vfs.FS
	logErr   atomic.Pointer[error]
	tableErr atomic.Pointer[error]
	stall    atomic.Pointer[chan struct{}]
}

func (fs *faultFS) Create(name string) (vfs.File, error) {
	if p := fs.tableErr.Load(); p != nil && strings.HasSuffix(name, ".sst") {
		return nil, *p
	}
	f, err := fs.FS.Create(name)
	return &faultFile{File: f, fs: fs, log: strings.HasSuffix(name, ".log")}, err
}

func (fs *faultFS) ReuseForWrite(oldname, newname string) (vfs.File, error) {
	f, err := fs.FS.ReuseForWrite(oldname, newname)
	return &faultFile{File: f, fs: fs, log: true}, err
}

type faultFile struct {
	vfs.File
	fs  *faultFS
	log bool
}

func (f *faultFile) Write(p []byte) (int, error) {
	if f.log {
		if c := f.fs.stall.Load(); c != nil {
			<-*c
		}
		if e := f.fs.logErr.Load(); e != nil {
			return 0, *e
		}
	}
	return f.File.Write(p)
}

func (f *faultFile) Sync() error {
	if f.log {
		if e := f.fs.logErr.Load(); e != nil {
			return *e
		}
	}
	return f.File.Sync()
}

// timed runs body on worker w and returns its reply and how long it took.
func timed(srv *Server, w int, body string) (string, time.Duration) {
	start := time.Now()
	got := text(exchange(srv, w, body))
	return got, time.Since(start)
}

const refused = "SERVER_ERROR out of memory storing object\r\n"

// checkRefusesWrites: every kind of write is answered refused within
// bound, reads are answered, and stats count the refusals.
func checkRefusesWrites(t *testing.T, srv *Server, w int, bound time.Duration) {
	t.Helper()
	for _, c := range []struct{ body, want string }{
		{"set new 0 0 3\r\nabc\r\n", refused},
		{"add new2 0 0 3\r\nabc\r\n", refused},
		{"append a 0 0 1\r\nx\r\n", refused},
		{"prepend a 0 0 1\r\nx\r\n", refused},
		{"incr n 1\r\n", refused},
		{"touch a 100\r\n", refused},
		{"delete b\r\n", refused},
		{"flush_all 3600\r\n", refused},
		{"get a n\r\n", "VALUE a 0 1\r\nA\r\nVALUE n 0 1\r\n5\r\nEND\r\n"},
		{"version\r\n", "VERSION " + Version + "\r\n"},
	} {
		got, took := timed(srv, w, c.body)
		if got != c.want || took > bound {
			t.Errorf("%q: %q in %v, want %q within %v", c.body, got, took, c.want, bound)
		}
	}
	stats := text(exchange(srv, w, "stats\r\n"))
	if strings.Contains(stats, "STAT store_writes_refused 0\r\n") && strings.Contains(stats, "STAT store_write_timeouts 0\r\n") {
		t.Errorf("no write refusal counted")
	}
}

// waitWrites waits up to 10 s for the store to take writes again.
func waitWrites(t *testing.T, srv *Server, w int) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		got, _ := timed(srv, w, "set after 0 0 1\r\nz\r\n")
		if got == "STORED\r\n" {
			return time.Since(start)
		}
		if time.Since(start) > 10*time.Second {
			t.Fatalf("writes still refused 10 s after the fault ended: %q (%s)", got, srv.st.health.why())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func preloadFew(t *testing.T, srv *Server) {
	t.Helper()
	expect(t, srv, "set a 0 0 1\r\nA\r\nset b 0 0 1\r\nB\r\nset n 0 0 1\r\n5\r\n", "STORED\r\nSTORED\r\nSTORED\r\n")
}

// TestLogWriteErrors: a write of the log fails (EIO): no worker waits on
// it past the write timeout, every later write is answered at once, reads
// go on, and the store says it needs a restart (a failed sync may have
// lost what it was to write). A full disk for the log (ENOSPC) ends when
// space comes back: the log's write is retried and writes go on.
func TestLogWriteErrors(t *testing.T) {
	for _, c := range []struct {
		err     error
		recover bool
	}{{syscall.EIO, false}, {syscall.ENOSPC, true}} {
		t.Run(c.err.Error(), func(t *testing.T) {
			fs := &faultFS{FS: vfs.Default}
			srv, err := Open(Config{Dir: t.TempDir(), Workers: 2, WriteTimeout: 200 * time.Millisecond, Sync: true, fs: fs})
			if err != nil {
				t.Fatal(err)
			}
			closed := false
			t.Cleanup(func() {
				if !closed {
					srv.Close()
				}
			})
			preloadFew(t, srv)
			fs.logErr.Store(&c.err)
			got, took := timed(srv, 0, "set first 0 0 1\r\nX\r\n")
			if got != refused || took > time.Second {
				t.Errorf("set when the log fails: %q in %v", got, took)
			}
			time.Sleep(3 * healthTick)
			checkRefusesWrites(t, srv, 1, 100*time.Millisecond)
			fs.logErr.Store(nil)
			if !c.recover {
				time.Sleep(10 * healthTick)
				if got, _ := timed(srv, 1, "set c 0 0 1\r\nz\r\n"); got != refused || !strings.Contains(srv.st.health.why(), "restart") {
					t.Errorf("after an I/O error on the log: %q (%s), want writes refused until a restart", got, srv.st.health.why())
				}
				// The log's lost write is said at close.
				closed = true
				if err := srv.Close(); !errors.Is(err, c.err) {
					t.Errorf("close after an I/O error on the log: %v, want %v", err, c.err)
				}
				return
			}
			t.Logf("writes taken again %v after space came back", waitWrites(t, srv, 1))
			closed = true
			if err := srv.Close(); err != nil {
				t.Errorf("close once space came back: %v", err)
			}
		})
	}
}

// TestFlushErrors: a flush cannot write its table (ENOSPC, EIO): writes
// are refused while it fails, but for one waiting in the store for room
// (Pebble holds a write while its memtables are full), reads go on, and
// writes are taken again once a flush succeeds.
func TestFlushErrors(t *testing.T) {
	for _, e := range []error{syscall.ENOSPC, syscall.EIO} {
		t.Run(e.Error(), func(t *testing.T) {
			fs := &faultFS{FS: vfs.Default}
			srv := openServer(t, Config{Dir: t.TempDir(), Workers: 2, WriteTimeout: 200 * time.Millisecond, fs: fs})
			preloadFew(t, srv)
			fs.tableErr.Store(&e)
			// Fill a memtable or two: its flush fails.
			// The store may refuse a set before the flush fails (a slow
			// sync of the log on a busy disk): the sets go on until one
			// is refused after a flush failed.
			sets := setsUntil(srv, "k", 60000, 2000, func() bool { return srv.st.health.errors.Load() > 0 })
			select {
			case <-sets.done:
			case <-time.After(30 * time.Second):
				t.Fatal("no flush failed in 30 s")
			}
			if sets.stored == 2000 {
				t.Fatal("2000 sets stored, none refused")
			}
			checkRefusesWrites(t, srv, 1, 100*time.Millisecond)
			fs.tableErr.Store(nil)
			sets.wait(t, "a flush fails")
			t.Logf("%d sets of 60 kB stored, %d slow; writes taken again %v after tables could be written",
				sets.stored, sets.slow, waitWrites(t, srv, 1))
		})
	}
}

// TestWriteStall: writes of the log hang: the write under way is answered
// after the write timeout, later ones at once, reads go on on the other
// worker, and once the log writes again the store takes writes.
func TestWriteStall(t *testing.T) {
	for _, synced := range []bool{false, true} {
		t.Run(fmt.Sprintf("sync=%v", synced), func(t *testing.T) {
			fs := &faultFS{FS: vfs.Default}
			srv := openServer(t, Config{Dir: t.TempDir(), Workers: 2, WriteTimeout: 300 * time.Millisecond, Sync: synced, fs: fs})
			preloadFew(t, srv)
			release := make(chan struct{})
			fs.stall.Store(&release)
			released := sync.OnceFunc(func() { close(release); fs.stall.Store(nil) })
			t.Cleanup(released) // before the server closes, even on a failure
			// Writes pile up behind the hung log: each is answered.
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				value := strings.Repeat("w", 40000)
				for i := 0; i < 60; i++ {
					got, took := timed(srv, 0, fmt.Sprintf("set s%d 0 0 %d\r\n%s\r\n", i, len(value), value))
					if got != "STORED\r\n" && got != refused {
						t.Errorf("set %d while the log hangs: %q", i, got)
					}
					if took > 3*time.Second {
						t.Errorf("set %d while the log hangs took %v", i, took)
						return
					}
				}
			}()
			deadline := time.Now().Add(10 * time.Second)
			for srv.st.health.ok.Load() && time.Now().Before(deadline) {
				time.Sleep(healthTick)
			}
			if srv.st.health.ok.Load() {
				t.Fatal("the store still takes writes 10 s into a hung log")
			}
			checkRefusesWrites(t, srv, 1, 100*time.Millisecond)
			released()
			wg.Wait()
			t.Logf("writes taken again %v after the log wrote again", waitWrites(t, srv, 1))
		})
	}
}

// TestDiskFull: a store on a small tmpfs that another file fills, then
// its own sets: writes are refused (counted) within the write timeout, but
// for the one under way when the log's write failed, which waits for space
// (Pebble cannot drop a write of its log); reads go on on the other
// worker; once space is freed the store takes writes again.
func TestDiskFull(t *testing.T) {
	dir := mountTmpfs(t, 128<<20)
	srv := openServer(t, Config{Dir: filepath.Join(dir, "store"), Workers: 2, WriteTimeout: 500 * time.Millisecond, StoreMemory: -1})
	t.Cleanup(func() {
		if t.Failed() {
			filepath.Walk(dir, func(path string, info os.FileInfo, err error) error {
				if err == nil && !info.IsDir() {
					t.Logf("%s: %d bytes", path, info.Size())
				}
				return nil
			})
		}
	})
	preloadFew(t, srv)
	for _, c := range []struct {
		what   string
		filler func(path string)
	}{
		{"another file fills the disk", func(path string) { fillDisk(t, path) }},
		// A file leaves the store a few MiB above the reserve: its own
		// sets fill those, and once the file is removed it has room to
		// compact all it holds.
		{"the store's own sets fill the disk", func(path string) { writeFile(t, path, int(freeSpace(t, dir))-diskReserve-4<<20) }},
	} {
		filler := filepath.Join(dir, "filler")
		c.filler(filler)
		sets := setsUntilRefused(srv, c.what[:3], 100<<10, 2000)
		waitRefusing(t, srv, sets, c.what)
		checkRefusesWrites(t, srv, 1, 100*time.Millisecond)
		why := srv.st.health.why()
		os.Remove(filler)
		sets.wait(t, c.what)
		t.Logf("%s: %d sets of 100 KiB stored, %d slow; then %s; writes taken again %v after space was freed",
			c.what, sets.stored, sets.slow, why, waitWrites(t, srv, 1))
	}
}

// setRun is the outcome of setsUntilRefused, ready once done is closed.
type setRun struct {
	done         chan struct{}
	stored, slow int
}

// setsUntilRefused sends sets of size bytes on worker 0 in the background
// until one is refused or max are stored.
func setsUntilRefused(srv *Server, prefix string, size, max int) *setRun {
	return setsUntil(srv, prefix, size, max, func() bool { return true })
}

// setsUntil is setsUntilRefused, but a set refused before fault() holds
// does not end the sets.
func setsUntil(srv *Server, prefix string, size, max int, fault func() bool) *setRun {
	r := &setRun{done: make(chan struct{})}
	value := randomValue(size, 3)
	go func() {
		defer close(r.done)
		for i := range max {
			got, took := timed(srv, 0, fmt.Sprintf("set %s%d 0 0 %d\r\n%s\r\n", prefix, i, len(value), value))
			if took > 2*time.Second {
				r.slow++
			}
			if got != "STORED\r\n" && fault() {
				return
			}
			if got == "STORED\r\n" {
				r.stored++
			}
		}
	}()
	return r
}

// freeSpace is the bytes free on dir's file system.
func freeSpace(t *testing.T, dir string) int64 {
	t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return int64(st.Bavail) * int64(st.Bsize)
}

// waitRefusing waits up to 30 s for the store to stop taking writes
// while sets go on, and a few watchdog ticks more.
func waitRefusing(t *testing.T, srv *Server, sets *setRun, what string) {
	t.Helper()
	for end := time.Now().Add(30 * time.Second); srv.st.health.ok.Load(); time.Sleep(healthTick) {
		select {
		case <-sets.done:
			t.Fatalf("%s: %d sets stored, none refused", what, sets.stored)
		default:
		}
		if time.Now().After(end) {
			t.Fatalf("%s: writes still taken after 30 s", what)
		}
	}
	time.Sleep(3 * healthTick)
}

// wait waits up to 10 s for the sets to end once the fault ended: at most
// the one under way when it began took longer than 2 s.
func (r *setRun) wait(t *testing.T, what string) {
	t.Helper()
	select {
	case <-r.done:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: a set still waits 10 s after the fault ended", what)
	}
	if r.slow > 1 {
		t.Errorf("%s: %d sets took longer than 2 s, want at most the one under way", what, r.slow)
	}
}

// writeFile writes n bytes to path.
func writeFile(t *testing.T, path string, n int) {
	t.Helper()
	if err := os.WriteFile(path, []byte(randomValue(n, 5)), 0o600); err != nil {
		t.Fatal(err)
	}
}

// mountTmpfs mounts a tmpfs of size bytes for the test (root only).
func mountTmpfs(t *testing.T, size int) string {
	t.Helper()
	if os.Geteuid() != 0 {
		testenv.Skip(t, "mounting a tmpfs needs root")
	}
	dir := t.TempDir()
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%d", size), "tmpfs", dir).CombinedOutput()
	if err != nil {
		testenv.Skip(t, "mount -t tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	return dir
}

// fillDisk writes path until its file system is full.
func fillDisk(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := []byte(randomValue(1<<20, 9))
	for {
		if _, err := f.Write(chunk); err != nil {
			break
		}
	}
	for {
		if _, err := f.Write(chunk[:4096]); err != nil {
			return
		}
	}
}

// TestStripeHeldByStuckWrite: a write held in the store (here: one that
// holds its key's stripe lock and has run past the write timeout) keeps
// no other worker's command on the same stripe waiting once the store
// stops taking writes: set, incr, delete, touch are answered refused, gat
// a miss, and once the write ends they run again.
func TestStripeHeldByStuckWrite(t *testing.T) {
	srv := openServer(t, Config{Dir: t.TempDir(), Workers: 2, WriteTimeout: 100 * time.Millisecond})
	expect(t, srv, "set held 0 0 1\r\nH\r\n", "STORED\r\n")
	// Keys in the stripe of "held".
	var same []string
	for i := 0; len(same) < 5; i++ {
		if k := fmt.Sprintf("k%d", i); srv.st.stripeIndex([]byte(k)) == srv.st.stripeIndex([]byte("held")) {
			same = append(same, k)
		}
	}
	expect(t, srv, "set "+same[0]+" 0 0 1\r\n7\r\n", "STORED\r\n")
	m := srv.st.stripe([]byte("held"))
	m.Lock()
	stuck := srv.sessions[0].w
	stuck.since.Store(time.Now().UnixNano())
	for _, c := range []struct{ body, want string }{
		{"set " + same[1] + " 0 0 1\r\nx\r\n", refused},
		{"incr " + same[0] + " 1\r\n", refused},
		{"delete " + same[0] + "\r\n", refused},
		{"touch " + same[0] + " 10\r\n", refused},
		{"gat 10 " + same[0] + "\r\n", "END\r\n"},
		{"get " + same[0] + "\r\n", "VALUE " + same[0] + " 0 1\r\n7\r\nEND\r\n"},
	} {
		got, took := timed(srv, 1, c.body)
		if got != c.want || took > 2*time.Second {
			t.Errorf("%q while its stripe is held: %q in %v, want %q", c.body, got, took, c.want)
		}
	}
	stuck.since.Store(0)
	m.Unlock()
	waitWrites(t, srv, 1)
	expect(t, srv, "incr "+same[0]+" 1\r\n", "8\r\n")
}
