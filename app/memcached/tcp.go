package memcached

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"sync"
)

// TCP limits.
const (
	// MaxConns is the most TCP connections served at once (memcached's -c
	// default); more are closed at once.
	MaxConns = 1024
	// maxGetLine bounds a retrieval command line (memcached's is unbounded).
	maxGetLine = 8 << 20
	tcpBufSize = 64 << 10
	// idleBufMax: a connection with no input pending gives back command and
	// reply buffers larger than this.
	idleBufMax = 256 << 10
)

// tcpState tracks the TCP listeners and connections of a Server.
type tcpState struct {
	mu     sync.Mutex
	lns    []net.Listener
	conns  map[net.Conn]struct{}
	wg     sync.WaitGroup
	closed bool
}

// ErrServerClosed is returned by ServeTCP after Close.
var ErrServerClosed = errors.New("memcached: server closed")

// ServeTCP serves memcached's text protocol over TCP on ln until ln fails
// or the Server is closed, one goroutine per connection, like memcached's
// TCP port. TCP requests are served beside the dispatcher (it receives
// only the dataplane's datagrams): they are not scheduled by DARC, and
// the emulated costs do not apply to them. It is the path for clients that
// read only over TCP (libmemcached's get does not run over UDP). Close
// closes ln and every connection.
func (s *Server) ServeTCP(ln net.Listener) error {
	t := &s.tcp
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		ln.Close()
		return ErrServerClosed
	}
	t.lns = append(t.lns, ln)
	if t.conns == nil {
		t.conns = map[net.Conn]struct{}{}
	}
	t.wg.Add(1)
	t.mu.Unlock()
	defer t.wg.Done()
	for {
		c, err := ln.Accept()
		if err != nil {
			t.mu.Lock()
			closed := t.closed
			t.mu.Unlock()
			if closed {
				return ErrServerClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return fmt.Errorf("memcached: accept: %w", err)
		}
		t.mu.Lock()
		if t.closed || len(t.conns) >= MaxConns {
			t.mu.Unlock()
			c.Close()
			continue
		}
		t.conns[c] = struct{}{}
		t.wg.Add(1)
		t.mu.Unlock()
		go func() {
			defer t.wg.Done()
			s.serveConn(c)
			t.mu.Lock()
			delete(t.conns, c)
			t.mu.Unlock()
			c.Close()
		}()
	}
}

// closeTCP closes the listeners and connections and waits for their
// goroutines.
func (s *Server) closeTCP() {
	t := &s.tcp
	t.mu.Lock()
	t.closed = true
	for _, ln := range t.lns {
		ln.Close()
	}
	for c := range t.conns {
		c.Close()
	}
	t.mu.Unlock()
	t.wg.Wait()
}

// serveConn serves one connection: it reads one command at a time (its
// line, and the data block of a storage command), runs it, and writes the
// responses, flushing when no more input is waiting.
func (s *Server) serveConn(c net.Conn) {
	ss := newSession(s, &s.tcpStats)
	defer ss.batch.Close()
	ss.out, ss.resps, ss.open, ss.head = ss.out[:0], ss.resps[:0], -1, true
	r := bufio.NewReaderSize(c, tcpBufSize)
	w := bufio.NewWriterSize(c, tcpBufSize)
	ss.stream = w
	var cmd []byte
	for {
		var err error
		cmd, err = readCommand(r, cmd[:0], s.cfg.MaxItemSize)
		if err != nil {
			w.Flush()
			return // the client went away, or memcached would close
		}
		a := ss.serveStream(cmd)
		if ss.swallow > 0 {
			if _, err := io.CopyN(io.Discard, r, ss.swallow); err != nil {
				ss.flush()
				w.Flush()
				return
			}
		}
		switch a {
		case closeConn:
			return
		case quit:
			w.Flush()
			return
		}
		// Like memcached, answer what is pending once the input read so
		// far is used up.
		if r.Buffered() == 0 {
			ss.flush()
			if err := w.Flush(); err != nil {
				return
			}
			// An idle connection does not keep the buffers of its
			// largest value.
			if cap(cmd) > idleBufMax {
				cmd = nil
			}
			if cap(ss.out) > idleBufMax {
				ss.out = make([]byte, 0, 4096)
			}
		}
	}
}

// errCloseConn: memcached closes a connection that sends more than 2048
// bytes without a line end, unless it is a retrieval command.
var errCloseConn = errors.New("memcached: line too long")

// readCommand appends the next command of the stream to dst: its line with
// the line end, and for a storage command whose value fits the item size
// limit, the value's data block.
func readCommand(r *bufio.Reader, dst []byte, maxItem int) ([]byte, error) {
	for {
		chunk, err := r.ReadSlice('\n')
		dst = append(dst, chunk...)
		if err == nil {
			break
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return dst, err
		}
		if len(dst) > maxLineScan && !largeGet(dst) || len(dst) > maxGetLine {
			return dst, errCloseConn
		}
	}
	need := storageDataLen(dst)
	if need < 0 || need > int64(maxItem)+2 {
		return dst, nil // no data block, or one the command refuses (skipped by the caller)
	}
	n := len(dst)
	dst = slices.Grow(dst, int(need))[:n+int(need)]
	if _, err := io.ReadFull(r, dst[n:]); err != nil {
		return dst, err
	}
	return dst, nil
}

// storageDataLen returns the length of the data block (value and CRLF)
// that follows a well-formed storage command line, or -1.
func storageDataLen(line []byte) int64 {
	line = bytes.TrimSuffix(line, []byte("\n"))
	if len(line) > 1 {
		line = bytes.TrimSuffix(line, []byte("\r"))
	}
	var t tokens
	tokenize(cstring(line), &t)
	if t.n < 2 {
		return -1
	}
	want := 6
	switch string(t.w[0]) {
	case "set", "add", "replace", "append", "prepend":
	case "cas":
		want = 7
	default:
		return -1
	}
	if t.n != want && t.n != want+1 || len(t.w[1]) > KeyMaxLength {
		return -1
	}
	_, ok1 := safeStrtoul(t.w[2])
	_, ok2 := safeStrtol(t.w[3])
	vlen, ok3 := safeStrtol(t.w[4])
	if !ok1 || !ok2 || !ok3 || vlen < 0 {
		return -1
	}
	if want == 7 {
		if _, ok := safeStrtoull(t.w[5]); !ok {
			return -1
		}
	}
	return int64(vlen) + 2
}

// serveStream runs one command of a TCP stream. Its responses stay pending
// until memcached would transmit them: after a retrieval command, at a quit
// or when the caller has no more input (flush); a get with a key too long
// discards them all, as over UDP.
func (s *session) serveStream(cmd []byte) after {
	s.now = s.app.clock()
	s.keys, s.cmds, s.swallow = 0, 0, 0
	nl := bytes.IndexByte(cmd, '\n')
	line, data := cmd[:nl], cmd[nl+1:]
	if len(line) > 1 && line[len(line)-1] == '\r' {
		line = line[:len(line)-1]
	}
	s.stats.commands.Add(1)
	a, _, ok := s.command(cstring(line), data)
	switch {
	case !ok || a == closeConn:
		s.cull()
		return closeConn
	case a == flushNext || a == quit:
		s.flush()
	}
	return a
}
