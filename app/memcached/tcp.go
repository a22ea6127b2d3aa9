package memcached

import (
	"bufio"
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// TCP buffers. A connection holds a reader and a writer of tcpBufSize
// (memcached's read buffer is 16 KiB), a command buffer that grows to the
// longest line (Config.MaxLine) and a value being read, and a small reply
// buffer (a get's values go to the writer as they are), and a Pebble batch
// dropped after a command that wrote a large value. Values of more than
// smallValue bytes are read into memory taken from Config.TCPMemory,
// shared by all connections, and given back once the command has run;
// command and reply buffers and batches grown past keepBuf are dropped
// after the command.
const (
	tcpBufSize = 16 << 10
	smallValue = 16 << 10
	keepBuf    = 16 << 10
)

// msgTooManyConns answers a connection over Config.MaxConns (memcached's
// line).
var msgTooManyConns = []byte("ERROR Too many open connections\r\n")

// tcpState tracks the TCP listeners and connections of a Server.
type tcpState struct {
	mu     sync.Mutex
	lns    []net.Listener
	conns  map[net.Conn]*tcpConn
	nextID uint64
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
	s.guards.accepted.Add(1) // memcached counts its listeners
	if t.conns == nil {
		t.conns = map[net.Conn]*tcpConn{}
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
		if t.closed || len(t.conns) >= s.cfg.MaxConns {
			closed := t.closed
			t.mu.Unlock()
			if !closed {
				s.guards.connsRefused.Add(1)
				c.SetWriteDeadline(time.Now().Add(time.Second))
				c.Write(msgTooManyConns)
			}
			c.Close()
			continue
		}
		tc := &tcpConn{id: t.nextID}
		tc.last.Store(time.Now().UnixNano())
		t.conns[c] = tc
		t.nextID++
		s.guards.conns.Add(1)
		s.guards.accepted.Add(1)
		t.wg.Add(1)
		t.mu.Unlock()
		go func() {
			defer t.wg.Done()
			s.serveConn(c, tc)
			t.mu.Lock()
			delete(t.conns, c)
			s.guards.conns.Add(-1)
			t.mu.Unlock()
			c.Close()
		}()
	}
}

// tcpConn is what stats conns shows of a TCP connection.
type tcpConn struct {
	id   uint64
	last atomic.Int64 // unix ns of its last command
	busy atomic.Bool  // a command runs
}

// tcpConns calls fn with every TCP listener and connection of ServeTCP.
func (s *Server) tcpConns(fn func(ConnInfo) bool) {
	t := &s.tcp
	var out []ConnInfo
	t.mu.Lock()
	for i, ln := range t.lns {
		out = append(out, ConnInfo{ID: uint64(i), Listener: true, Addr: "tcp:" + ln.Addr().String()})
	}
	for c, tc := range t.conns {
		out = append(out, ConnInfo{ID: uint64(len(t.lns)) + tc.id, Addr: "tcp:" + c.RemoteAddr().String(),
			Local: "tcp:" + c.LocalAddr().String(), Idle: time.Since(time.Unix(0, tc.last.Load())), Busy: tc.busy.Load()})
	}
	t.mu.Unlock()
	slices.SortFunc(out, func(a, b ConnInfo) int { return cmp.Compare(a.ID, b.ID) })
	for _, c := range out {
		if !fn(c) {
			return
		}
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
// responses, flushing when no more input is waiting. A command (and the
// replies before it) must complete within Config.IdleTimeout of the moment
// the connection had no input left.
func (s *Server) serveConn(c net.Conn, tc *tcpConn) {
	ss := newSession(s, &s.tcpStats)
	defer func() { ss.batch.Close() }() // the batch in use at the end (see below)
	ss.out, ss.resps, ss.open, ss.head = ss.out[:0], ss.resps[:0], -1, true
	r := bufio.NewReaderSize(c, tcpBufSize)
	w := bufio.NewWriterSize(c, tcpBufSize)
	ss.stream = w
	var cmd []byte
	held := int64(0) // bytes of Config.TCPMemory this connection holds
	defer func() { s.release(held) }()
	var set time.Time // when the deadline was last set
	served := 0       // commands since memcached's last read (see yields)
	for {
		// The deadline is renewed before a read may wait, and every
		// quarter of the timeout while the input is pipelined.
		if now := time.Now(); r.Buffered() == 0 || now.Sub(set) > s.cfg.IdleTimeout/4 {
			c.SetDeadline(now.Add(s.cfg.IdleTimeout))
			set = now
		}
		var err error
		var refused, drained bool
		cmd, held, refused, drained, err = s.readCommand(r, w, cmd[:0])
		if err != nil {
			var ne net.Error
			switch {
			case errors.Is(err, errLineTooLong):
				s.guards.longLines.Add(1)
				ss.flush() // what the commands before it answered
				w.Write(msgLineTooLong)
				w.Write(crlf)
			case errors.Is(err, errCloseConn):
				s.guards.longLines.Add(1)
			case errors.As(err, &ne) && ne.Timeout():
				s.guards.timeouts.Add(1)
				return
			}
			w.Flush()
			return // the client went away, or memcached would close
		}
		ss.dataRefused = refused
		tc.last.Store(time.Now().UnixNano())
		tc.busy.Store(true)
		a := ss.serveStream(cmd)
		tc.busy.Store(false)
		ss.dataRefused = false
		if ss.swallow > 0 {
			if int64(r.Buffered()) < ss.swallow {
				w.Flush() // what was transmitted goes before the wait
				drained = true
			}
			if _, err := io.CopyN(io.Discard, r, ss.swallow); err != nil {
				ss.flush()
				w.Flush()
				return
			}
		}
		// The value's memory goes back at once, and a buffer grown past
		// keepBuf is not kept.
		s.release(held)
		held = 0
		if cap(cmd) > keepBuf {
			cmd = nil
		}
		if cap(ss.out) > keepBuf {
			ss.out = make([]byte, 0, 4096)
		}
		if ss.batch.Len() > keepBuf {
			// The batch keeps a copy of the last value written (a set, an
			// append, a gat of a large item): not while the connection
			// waits.
			ss.batch.Close()
			ss.batch = s.st.db.NewBatch()
		}
		switch a {
		case closeConn:
			return
		case quit:
			w.Flush()
			return
		}
		// Like memcached, answer what is pending once the input read so
		// far is used up (as after a data block read in part from the
		// connection: memcached reads no further than its end) or ends in
		// part of a line it waits for, and every reqsPerEvent commands.
		served++
		if yields(served) {
			s.guards.yields.Add(1)
			ss.flush()
		}
		if r.Buffered() == 0 || drained || partialLine(r) {
			served = 0
			ss.flush()
			if err := w.Flush(); err != nil {
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() {
					s.guards.timeouts.Add(1)
				}
				return
			}
		}
	}
}

// errCloseConn: memcached closes a connection that sends more than 2048
// bytes without a line end, unless it is a retrieval command.
var errCloseConn = errors.New("memcached: line too long")

// errLineTooLong: a retrieval command line longer than Config.MaxLine.
var errLineTooLong = errors.New("memcached: retrieval line too long")

// partialLine reports whether r holds only part of a line, one memcached
// waits for the rest of: at most maxLineScan bytes, or a get's (it closes
// the connection on any other, its responses not sent).
func partialLine(r *bufio.Reader) bool {
	b, _ := r.Peek(r.Buffered())
	return bytes.IndexByte(b, '\n') < 0 && (len(b) <= maxLineScan || largeGet(b))
}

// readCommand appends the next command of the stream to dst: its line with
// the line end, and for a storage command whose value fits the item size
// limit, the value's data block. What w holds (responses memcached has
// transmitted: those of a get or mn) is written before a wait for the data
// block; drained reports such a wait. A value of more than smallValue bytes
// takes its bytes from Config.TCPMemory (held, to be released once the
// command has run); when they are not there, the data block is left unread
// and refused returned (the command refuses the value and the caller skips
// it).
func (s *Server) readCommand(r *bufio.Reader, w *bufio.Writer, dst []byte) (_ []byte, held int64, refused, drained bool, _ error) {
	for {
		chunk, err := r.ReadSlice('\n')
		dst = append(dst, chunk...)
		if err == nil {
			if len(dst) > s.cfg.MaxLine+2 && largeGet(dst) {
				return dst, 0, false, false, errLineTooLong
			}
			break
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return dst, 0, false, false, err
		}
		if len(dst) > maxLineScan && !largeGet(dst) {
			return dst, 0, false, false, errCloseConn
		}
		if len(dst) > s.cfg.MaxLine {
			return dst, 0, false, false, errLineTooLong
		}
	}
	need := storageDataLen(dst)
	if need < 0 || need > int64(s.cfg.MaxItemSize)+2 {
		return dst, 0, false, false, nil // no data block, or one the command refuses (skipped by the caller)
	}
	if need > smallValue {
		if !s.reserve(need) {
			s.guards.memRefused.Add(1)
			return dst, 0, true, false, nil
		}
		held = need
	}
	if int64(r.Buffered()) < need {
		w.Flush()
		drained = true
	}
	n := len(dst)
	dst = slices.Grow(dst, int(need))[:n+int(need)]
	if _, err := io.ReadFull(r, dst[n:]); err != nil {
		return dst, held, false, drained, err
	}
	return dst, held, false, drained, nil
}

// reserve takes n bytes of Config.TCPMemory, if they are there.
func (s *Server) reserve(n int64) bool {
	g := &s.guards
	if g.memHeld.Add(n) > int64(s.cfg.TCPMemory) {
		g.memHeld.Add(-n)
		return false
	}
	return true
}

// release gives back n bytes of Config.TCPMemory.
func (s *Server) release(n int64) {
	if n > 0 {
		s.guards.memHeld.Add(-n)
	}
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
