package memcached

import (
	"errors"
	"io"
	"os"
	"path"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/vfs"
)

// tableChunk is the size of the chunks a table in memory is written in.
const tableChunk = 64 << 10

// tableFS is the file system of a store in memory: vfs.NewMem, except that
// Pebble's tables (*.sst, nearly all it writes) are kept here as lists of
// chunks of tableChunk bytes. vfs.NewMem appends to one slice per file, so
// a table written in blocks was copied over and over as it grew (Go grows
// a large slice by a quarter at a time: about five times its size
// allocated and copied for each table, which was most of the CPU time of
// a flush or a compaction) and kept up to a quarter of it unused. Chunks
// are allocated once, and at most one chunk per table is not full.
//
// A table's name is also created in the file system beneath (empty), so
// that listing, locking and directories behave as they do there. Tables
// are written once, from the start, and read once written; writing at an
// offset or opening one for reading and writing is refused.
//
// Held counts the bytes of the chunks of every table that still has a
// name: what the store's tables hold in memory, whatever Pebble's metrics
// say (see storeLimit).
//
// It is safe for concurrent use, as Pebble uses it: a table may be read by
// many goroutines at once.
type tableFS struct {
	vfs.FS

	held   atomic.Int64
	mu     sync.Mutex
	tables map[string]*tableData // by cleaned name
}

func newTableFS() *tableFS {
	return &tableFS{FS: vfs.NewMem(), tables: make(map[string]*tableData)}
}

// tableData is a table's contents.
type tableData struct {
	fs     *tableFS
	names  int          // how many names it has (tableFS.mu)
	held   int64        // bytes of its chunks (tableFS.mu)
	mu     sync.RWMutex // then tableFS.mu, never the other way
	chunks [][]byte     // each tableChunk bytes long; the last may be shorter
	size   int64
}

// isTable reports whether name is one of Pebble's tables.
func isTable(name string) bool { return strings.HasSuffix(name, ".sst") }

// tableKey is name as a key of tableFS.tables: MemFS ignores leading
// slashes, and its root is "" (or ".").
func tableKey(name string) string {
	k := strings.TrimLeft(path.Clean(name), "/")
	if k == "." {
		return ""
	}
	return k
}

func (fs *tableFS) table(name string) *tableData {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.tables[tableKey(name)]
}

// Create implements vfs.FS.
func (fs *tableFS) Create(name string) (vfs.File, error) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	f, err := fs.FS.Create(name)
	if err != nil {
		return nil, err
	}
	if !isTable(name) {
		fs.unname(tableKey(name))
		return f, nil
	}
	d := &tableData{fs: fs}
	fs.name(tableKey(name), d)
	return &tableFile{File: f, d: d, write: true}, nil
}

// Open implements vfs.FS.
func (fs *tableFS) Open(name string, opts ...vfs.OpenOption) (vfs.File, error) {
	f, err := fs.FS.Open(name, opts...)
	if err != nil {
		return nil, err
	}
	d := fs.table(name)
	if d == nil {
		return f, nil
	}
	tf := &tableFile{File: f, d: d}
	for _, o := range opts {
		o.Apply(tf)
	}
	return tf, nil
}

// errTableRewrite is returned for a table opened for writing at an offset.
var errTableRewrite = errors.New("memcached: a table in memory is written once, from the start")

// OpenReadWrite implements vfs.FS: tables cannot be opened so.
func (fs *tableFS) OpenReadWrite(name string, opts ...vfs.OpenOption) (vfs.File, error) {
	if isTable(name) || fs.table(name) != nil {
		return nil, &os.PathError{Op: "open", Path: name, Err: errTableRewrite}
	}
	return fs.FS.OpenReadWrite(name, opts...)
}

// ReuseForWrite implements vfs.FS: tables cannot be reused so.
func (fs *tableFS) ReuseForWrite(oldname, newname string) (vfs.File, error) {
	if isTable(newname) || fs.table(oldname) != nil {
		return nil, &os.PathError{Op: "open", Path: newname, Err: errTableRewrite}
	}
	return fs.FS.ReuseForWrite(oldname, newname)
}

// Link implements vfs.FS: newname shares oldname's contents.
func (fs *tableFS) Link(oldname, newname string) error {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if err := fs.FS.Link(oldname, newname); err != nil {
		return err
	}
	if d := fs.tables[tableKey(oldname)]; d != nil {
		fs.name(tableKey(newname), d)
	}
	return nil
}

// Rename implements vfs.FS.
func (fs *tableFS) Rename(oldname, newname string) error {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if err := fs.FS.Rename(oldname, newname); err != nil {
		return err
	}
	if d := fs.tables[tableKey(oldname)]; d != nil {
		fs.name(tableKey(newname), d)
	} else {
		fs.unname(tableKey(newname))
	}
	fs.unname(tableKey(oldname))
	return nil
}

// Remove implements vfs.FS.
func (fs *tableFS) Remove(name string) error {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if err := fs.FS.Remove(name); err != nil {
		return err
	}
	fs.unname(tableKey(name))
	return nil
}

// RemoveAll implements vfs.FS.
func (fs *tableFS) RemoveAll(name string) error {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if err := fs.FS.RemoveAll(name); err != nil {
		return err
	}
	dir := tableKey(name)
	for k := range fs.tables {
		if dir == "" || k == dir || strings.HasPrefix(k, dir+"/") {
			fs.unname(k)
		}
	}
	return nil
}

// name gives d the name k, in place of what had it (fs.mu held).
func (fs *tableFS) name(k string, d *tableData) {
	if fs.tables[k] == d {
		return
	}
	fs.unname(k)
	fs.tables[k] = d
	d.names++
}

// unname takes the name k from its table, if it names one; a table left
// without a name no longer counts as held (fs.mu held).
func (fs *tableFS) unname(k string) {
	d := fs.tables[k]
	if d == nil {
		return
	}
	delete(fs.tables, k)
	if d.names--; d.names == 0 {
		fs.held.Add(-d.held)
	}
}

// Stat implements vfs.FS.
func (fs *tableFS) Stat(name string) (os.FileInfo, error) {
	info, err := fs.FS.Stat(name)
	if err != nil {
		return nil, err
	}
	if d := fs.table(name); d != nil {
		return tableInfo{FileInfo: info, size: d.len()}, nil
	}
	return info, nil
}

// tableInfo is a table's os.FileInfo: the file beneath is empty.
type tableInfo struct {
	os.FileInfo
	size int64
}

func (i tableInfo) Size() int64 { return i.size }

func (d *tableData) len() int64 {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return d.size
}

// tableFile is a table opened for writing (by Create) or reading. The
// embedded file is the empty one beneath, which it closes.
type tableFile struct {
	vfs.File
	d     *tableData
	write bool
	rpos  int64
}

// Write appends p to the table.
func (f *tableFile) Write(p []byte) (int, error) {
	if !f.write {
		return 0, errors.New("memcached: table not opened for writing")
	}
	d := f.d
	d.mu.Lock()
	defer d.mu.Unlock()
	n := len(p)
	for len(p) > 0 {
		last := len(d.chunks) - 1
		if last < 0 || len(d.chunks[last]) == tableChunk {
			d.chunks = append(d.chunks, make([]byte, 0, tableChunk))
			last++
			d.fs.mu.Lock()
			d.held += tableChunk
			if d.names > 0 {
				d.fs.held.Add(tableChunk)
			}
			d.fs.mu.Unlock()
		}
		c := d.chunks[last]
		k := min(len(p), tableChunk-len(c))
		d.chunks[last] = append(c, p[:k]...)
		p = p[k:]
	}
	d.size += int64(n)
	return n, nil
}

// WriteAt is refused: tables are written once, from the start.
func (f *tableFile) WriteAt([]byte, int64) (int, error) { return 0, errTableRewrite }

// ReadAt implements io.ReaderAt.
func (f *tableFile) ReadAt(p []byte, off int64) (int, error) {
	d := f.d
	d.mu.RLock()
	defer d.mu.RUnlock()
	if off < 0 {
		return 0, errors.New("memcached: table read at a negative offset")
	}
	n := 0
	for n < len(p) && off < d.size {
		c := d.chunks[off/tableChunk][off%tableChunk:]
		k := copy(p[n:], c)
		n += k
		off += int64(k)
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// Read implements io.Reader.
func (f *tableFile) Read(p []byte) (int, error) {
	n, err := f.ReadAt(p, f.rpos)
	f.rpos += int64(n)
	if err == io.EOF && n > 0 {
		err = nil
	}
	return n, err
}

// Stat implements vfs.File.
func (f *tableFile) Stat() (os.FileInfo, error) {
	info, err := f.File.Stat()
	if err != nil {
		return nil, err
	}
	return tableInfo{FileInfo: info, size: f.d.len()}, nil
}

// Sync, SyncData and SyncTo have nothing to do in memory.
func (f *tableFile) Sync() error                             { return nil }
func (f *tableFile) SyncData() error                         { return nil }
func (f *tableFile) SyncTo(int64) (fullSync bool, err error) { return false, nil }
