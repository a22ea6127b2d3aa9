package memcached

import (
	"bytes"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/persephone-go/psp/nic"
)

// memcached's text protocol over TCP: the Framer cuts a connection's
// stream into commands (a line, and a storage command's data block), each
// of which is one request the dispatcher schedules like a datagram. What
// memcached does with a connection's output between commands (it holds
// the responses of most commands and transmits them at a get, mn or quit,
// every reqsPerEvent commands, and when it waits for input; a get of a key
// too long discards what it holds) is said with the reply flags of package
// nic: ReplyHold, ReplyDiscardHeld, ReplyClose and Frame.Flush.

// smallValue: a data block longer than this is read into memory taken from
// Config.TCPMemory, shared by all connections, while it arrives.
const (
	smallValue = 16 << 10
	keepBuf    = 16 << 10
)

// msgTooManyConns answers a connection over the connection limit
// (memcached's line).
var msgTooManyConns = []byte("ERROR Too many open connections\r\n")

// Protocol implements nic.Protocol: memcached's text protocol for the TCP
// dataplane (nic/tcp), framed as memcached reads it.
func (s *Server) Protocol() nic.Protocol { return streamProtocol{s} }

type streamProtocol struct{ s *Server }

// NewConn implements nic.Protocol.
func (p streamProtocol) NewConn(id uint64, peer netip.AddrPort) nic.Framer {
	f := &framer{s: p.s, id: id, peer: peer}
	f.last.Store(time.Now().UnixNano())
	p.s.conns.add(f)
	return f
}

// TooManyConns implements nic.Protocol.
func (p streamProtocol) TooManyConns() []byte {
	p.s.guards.connsRefused.Add(1)
	return msgTooManyConns
}

// framer is one connection's memcached framer: it decides where each
// command ends, where memcached would transmit what it holds, and when
// memcached would give up on the connection.
type framer struct {
	s    *Server
	id   uint64
	peer netip.AddrPort
	// last is when its last command was framed (unix ns), busy whether a
	// worker serves one of them now: stats conns.
	last atomic.Int64
	busy atomic.Bool
	// served counts the commands framed since the input last ran out
	// (memcached's reads: it transmits every reqsPerEvent commands).
	served int
	// waited: the data block of the command at the head was waited for
	// (memcached transmits after a value read in part from the socket).
	waited bool
	// held is how many bytes of Config.TCPMemory the value at the head
	// holds while it arrives.
	held int64
	// skip is what is left of a refused value's data block, discarded
	// after its line; skipWaited: it did not all come with the line.
	skip       int
	skipWaited bool
	// done: quit was framed; nothing after it is run.
	done bool
}

// Frame implements nic.Framer.
func (f *framer) Frame(in []byte, max int) nic.Frame {
	if f.skip > 0 {
		// A refused value's data: memcached transmits what it holds once
		// it has read the last of it, if it had to wait for it.
		n := min(f.skip, len(in))
		if n == 0 {
			f.skipWaited = true
			return nic.Frame{Kind: nic.FrameMore}
		}
		f.skip -= n
		flush := f.skip == 0 && f.skipWaited
		f.skipWaited = f.skip > 0
		return nic.Frame{Kind: nic.FrameSkip, Len: n, Flush: flush}
	}
	if f.done {
		return nic.Frame{Kind: nic.FrameMore}
	}
	s := f.s
	nl := bytes.IndexByte(in, '\n')
	if nl < 0 {
		switch {
		case len(in) > maxLineScan && !largeGet(in):
			// memcached closes the connection, its responses not sent
			s.guards.longLines.Add(1)
			return nic.Frame{Kind: nic.FrameClose, DiscardHeld: true}
		case len(in) > s.cfg.MaxLine || len(in) >= max:
			return f.lineTooLong()
		}
		// It waits for the rest of the line, having transmitted what it
		// holds.
		f.served = 0
		return nic.Frame{Kind: nic.FrameMore, Flush: true}
	}
	lineLen := nl + 1
	if lineLen > s.cfg.MaxLine+2 && largeGet(in[:lineLen]) {
		return f.lineTooLong()
	}
	need := storageDataLen(in[:lineLen])
	switch {
	case need < 0:
		return f.command(lineLen, in)
	case need > int64(s.cfg.MaxItemSize)+2 || int64(lineLen)+need > int64(max):
		// Refused as too large: the line alone, then the data skipped.
		f.skip = int(need)
		return f.command(lineLen, in)
	case int64(len(in)-lineLen) >= need:
		f.release()
		return f.command(lineLen+int(need), in)
	}
	// The data block is not all there: wait for it, with memory for it.
	if need > smallValue && f.held == 0 {
		if !s.reserve(need) {
			s.guards.memRefused.Add(1)
			f.skip = int(need)
			return f.command(lineLen, in) // answered: out of memory
		}
		f.held = need
	}
	f.waited = true
	f.served = 0
	return nic.Frame{Kind: nic.FrameMore}
}

// command frames the next n bytes as one command.
func (f *framer) command(n int, in []byte) nic.Frame {
	f.served++
	y := yields(f.served)
	if y {
		f.s.conns.yields.Add(1)
	}
	f.last.Store(time.Now().UnixNano())
	flush := f.waited || y
	f.waited = false
	word := commandWord(in[:n])
	if string(word) == "quit" {
		f.done = true
	}
	return nic.Frame{Kind: nic.FrameRequest, Len: n, Flush: flush, ReadOnly: readOnly(word)}
}

// commandWord returns the first word of a command line.
func commandWord(line []byte) []byte {
	line = bytes.TrimLeft(line, " ")
	if i := bytes.IndexAny(line, " \r\n"); i >= 0 {
		line = line[:i]
	}
	return line
}

// readOnly reports whether a command changes nothing a later one could
// see: those may run at once (nic.Frame.ReadOnly).
func readOnly(word []byte) bool {
	switch string(word) {
	case "get", "gets", "bget", "version":
		return true
	}
	return false
}

// lineTooLong: a retrieval line over Config.MaxLine is answered and the
// connection closed, after what memcached holds is transmitted.
func (f *framer) lineTooLong() nic.Frame {
	f.s.guards.longLines.Add(1)
	return nic.Frame{Kind: nic.FrameClose, Reply: append(append([]byte(nil), msgLineTooLong...), crlf...)}
}

// release gives back the memory of the value at the head.
func (f *framer) release() {
	f.s.release(f.held)
	f.held = 0
}

// ConnClosed gives back what the connection held (nic/tcp calls it once
// the connection is closed).
func (f *framer) ConnClosed() {
	f.release()
	f.s.conns.remove(f)
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

// serveStream runs one command cut from a TCP stream (b holds its line and
// its data block) and answers in b, longer replies through r. The reply's
// flags say what memcached does with its output after the command: hold
// it (most commands), transmit it (a get, mn), discard what it held (a
// get of a key too long), close (quit, a command memcached closes on).
func (s *Server) serveStream(ss *session, b *nic.Buffer, r streamSender) bool {
	cmd := b.Payload()
	ss.now = s.clock()
	ss.out, ss.resps, ss.open, ss.head = ss.out[:0], ss.resps[:0], -1, true
	ss.keys, ss.cmds, ss.swallow, ss.culled = 0, 1, 0, false
	ss.reply.reset(b, r)
	ss.stream = &ss.reply
	defer func() { ss.stream = nil }()
	nl := bytes.IndexByte(cmd, '\n')
	if nl < 0 {
		return false // not a command the framer cuts
	}
	line, data := cmd[:nl], cmd[nl+1:]
	if len(line) > 1 && line[len(line)-1] == '\r' {
		line = line[:len(line)-1]
	}
	// A storage command without its data block: the framer refused the
	// value (too large, or no memory to read it).
	if need := storageDataLen(cmd[:nl+1]); need >= 0 && int64(len(data)) < need {
		ss.dataRefused = true
	}
	ss.stats.commands.Add(1)
	a, _, ok := ss.command(cstring(line), data)
	ss.dataRefused = false
	var flags nic.Flags
	switch {
	case !ok || a == closeConn:
		ss.cull()
		flags = nic.ReplyDiscardHeld | nic.ReplyClose
	case a == quit:
		flags = nic.ReplyClose
	case a == flushNext:
	default:
		flags = nic.ReplyHold
	}
	if ss.culled {
		flags |= nic.ReplyDiscardHeld
	}
	ss.flush()
	b.Flags = flags
	return ss.reply.finish()
}

// streamSender sends the leading parts of a long reply (app.Reply).
type streamSender interface {
	Send(p []byte) error
	Room() int
}

// streamReply collects a TCP command's responses: they are built apart
// from the request (whose keys and value they would overwrite), sent in
// parts of a buffer's room as they grow (a get of many values never piles
// up), and the last part copied into the request's buffer.
type streamReply struct {
	b    *nic.Buffer
	r    streamSender
	buf  []byte
	lost bool // a part could not be sent: the reply is cut
}

func (w *streamReply) reset(b *nic.Buffer, r streamSender) {
	w.b, w.r, w.lost = b, r, false
	w.buf = w.buf[:0]
	if cap(w.buf) > keepBuf {
		w.buf = nil
	}
}

// Write implements io.Writer; it never fails (a part that cannot be sent
// cuts the reply, and the connection is then closed).
func (w *streamReply) Write(p []byte) (int, error) {
	room := len(w.b.Data)
	for len(p) > 0 {
		if len(w.buf) == room {
			if w.lost || w.r == nil || w.r.Send(w.buf) != nil {
				w.lost = true
			}
			w.buf = w.buf[:0]
		}
		k := min(room-len(w.buf), len(p))
		w.buf = append(w.buf, p[:k]...)
		p = p[k:]
	}
	return len(p), nil
}

// finish puts the reply's last part in the request's buffer.
func (w *streamReply) finish() bool {
	if w.lost {
		// Part of the reply is missing: a client would read the rest as
		// the next reply. Close instead.
		w.b.Flags = nic.ReplyClose | nic.ReplyDiscardHeld
		w.b.Len = 0
		return true
	}
	w.b.Len = copy(w.b.Data, w.buf)
	return true
}
