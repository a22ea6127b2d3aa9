package boundedfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
)

// ErrTooLarge is wrapped by the errors for a file over its bound.
var ErrTooLarge = errors.New("file too large")

// ErrNotRegular is wrapped by the errors for a path that is not a
// regular file.
var ErrNotRegular = errors.New("not a regular file")

// Read returns the contents of the regular file at path, at most limit
// bytes.
func Read(path string, limit int64) ([]byte, error) {
	f, err := Open(path, limit)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// Open opens the regular file at path for reading at most limit bytes:
// reading past them fails with an error wrapping ErrTooLarge.
func Open(path string, limit int64) (io.ReadCloser, error) {
	f, err := openNonBlocking(path)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s: %w (%s)", path, ErrNotRegular, kind(fi.Mode()))
	}
	if fi.Size() > limit {
		f.Close()
		return nil, fmt.Errorf("%s: %d bytes: %w (at most %d)", path, fi.Size(), ErrTooLarge, limit)
	}
	return &bounded{f: f, path: path, left: limit, limit: limit}, nil
}

// bounded reads f up to limit bytes.
type bounded struct {
	f           *os.File
	path        string
	left, limit int64
}

func (b *bounded) Read(p []byte) (int, error) {
	if b.left <= 0 {
		// At the bound: end of file, unless the file grew past it.
		var one [1]byte
		if n, _ := b.f.Read(one[:]); n > 0 {
			return 0, fmt.Errorf("%s: grew past %d bytes while read: %w", b.path, b.limit, ErrTooLarge)
		}
		return 0, io.EOF
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.f.Read(p)
	b.left -= int64(n)
	return n, err
}

func (b *bounded) Close() error { return b.f.Close() }

// kind names what a non-regular file is.
func kind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a device"
	default:
		return "mode " + m.String()
	}
}
