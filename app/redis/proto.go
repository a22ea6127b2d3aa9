package redis

import (
	"bytes"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/persephone-go/psp/nic"
)

// Protocol limits, redis-server's.
const (
	// inlineMax is the longest inline command line, and the longest run
	// of a multibulk request's count lines without a line end
	// (PROTO_INLINE_MAX_SIZE).
	inlineMax = 64 << 10
	// inlineReach is where an inline line's end must come before:
	// redis-server reads a connection 16 KiB at a time (PROTO_IOBUF_LEN)
	// and refuses an inline request as soon as it holds more than
	// inlineMax bytes without a line end, so that it never reaches a line
	// end at this offset or later, however fast the line arrives.
	inlineReach = inlineMax + 16<<10
	// DefaultMaxBulk is the longest argument accepted by default
	// (proto-max-bulk-len).
	DefaultMaxBulk = 512 << 20
	// minArgLen is the shortest a multibulk argument can be: "$0\r\n\r\n".
	minArgLen = 6
)

// Replies of the framer, redis-server's protocol errors. Each closes the
// connection after it is sent, as redis-server closes it.
var (
	errTooBigInline    = []byte("-ERR Protocol error: too big inline request\r\n")
	errUnbalanced      = []byte("-ERR Protocol error: unbalanced quotes in request\r\n")
	errTooBigMbulk     = []byte("-ERR Protocol error: too big mbulk count string\r\n")
	errInvalidMbulk    = []byte("-ERR Protocol error: invalid multibulk length\r\n")
	errTooBigBulkCount = []byte("-ERR Protocol error: too big bulk count string\r\n")
	errInvalidBulk     = []byte("-ERR Protocol error: invalid bulk length\r\n")
	errTooManyClients  = []byte("-ERR max number of clients reached\r\n")
)

// NewConn implements nic.Protocol: the framer, and session, of a new
// connection; id is the connection's CLIENT ID.
func (s *Server) NewConn(id uint64, peer netip.AddrPort) nic.Framer {
	s.connsOpened.Add(1)
	c := &Conn{srv: s, id: id, peer: peer, created: s.clock()}
	s.conns.Store(id, c)
	return c
}

// TooManyConns implements nic.Protocol: redis-server's answer to a
// connection over maxclients.
func (s *Server) TooManyConns() []byte { return errTooManyClients }

// Conn is one connection's framer and session. Frame runs on the stream
// dataplane's receive goroutine; the commands of the connection read and
// set its state (its name, CLIENT SETINFO's library) from the workers,
// under mu.
type Conn struct {
	srv     *Server
	id      uint64
	peer    netip.AddrPort
	created int64       // unix ms
	mb      mbState     // the receive goroutine's alone
	last    lastCommand // the receive goroutine's alone: readOnly's

	// resp3: the connection speaks RESP3 (HELLO 3, until HELLO 2 or
	// RESET).
	resp3 atomic.Bool
	// lastCmd is the command it ran last (CLIENT LIST's cmd=).
	lastCmd atomic.Pointer[command]
	// reply: CLIENT REPLY's state, replyOff, replySkip and
	// replySkipNext bits (0: every reply is sent).
	reply atomic.Uint32

	mu      sync.Mutex
	name    string
	libName string
	libVer  string

	// The connection's transaction (multi.go): inMulti mirrors multi.on
	// for the commands' check, which takes no lock when it is false.
	multiMu sync.Mutex
	multi   multiState
	inMulti atomic.Bool
	queued  atomic.Int64 // the bytes its queued commands are counted for
	closed  atomic.Bool
	// peerClosed: the client sent its last byte (PeerClosed).
	peerClosed atomic.Bool

	// Blocking (blocking.go): the keys a parked command waits on (under
	// the server's blockRegistry.mu), whether it should run again, and
	// its deadline (unix ms, 0: none; read and set by the one command of
	// the connection that runs at a time). blockMu is held by its
	// blocking command while it looks and registers, and by a write
	// serving it; under it, what it waits to do and the answer a write
	// kept for it.
	blockKeys     []string
	blockReady    atomic.Bool
	blockDeadline int64
	blockMu       sync.Mutex
	blockOp       blockOp
	blockAnswer   []byte
	blockAnswered bool
	// Pub/sub (pubsub.go): the dataplane's pusher (nil: it cannot push);
	// the channels and patterns the connection listens to (under the
	// server's pubsubRegistry.mu), and how many (subs, read without the
	// lock by every command for RESP2's subscribed context).
	pusher      nic.Pusher
	subChannels map[string]struct{}
	subPatterns []string
	subs        atomic.Int64
	// framedMulti: the framer cut a MULTI and not yet its EXEC, DISCARD
	// or RESET (the receive goroutine's alone).
	framedMulti bool

	// WATCH (watch.go): the keys the connection watches (under
	// watchMu), and whether one was modified since (redis-server's
	// CLIENT_DIRTY_CAS).
	watchMu  sync.Mutex
	watches  []*watch
	casDirty atomic.Bool
}

// ConnClosed is called by the dataplane once the connection is closed
// (a request of it may still be running): the commands a transaction
// left queued are no longer counted, and its watched keys are
// forgotten.
func (c *Conn) ConnClosed() {
	c.closed.Store(true)
	c.releaseQueued()
	c.unwatch()
	c.srv.blocked.closed(c)
	c.srv.pubsub.leave(c)
	c.srv.connsClosed.Add(1)
	c.srv.conns.Delete(c.id)
}

// PeerClosed is called by the dataplane when the client has sent its
// last byte: a blocking command of the connection that is parked is
// answered at once (as on a timeout), so the connection can close.
// redis-server frees such a client without answering.
func (c *Conn) PeerClosed() {
	c.peerClosed.Store(true)
	c.srv.blocked.closed(c)
	c.srv.pubsub.leave(c)
}

// ID returns the connection's id (CLIENT ID).
func (c *Conn) ID() uint64 { return c.id }

// CLIENT REPLY's state bits (Conn.reply): OFF; SKIP, the running
// command's reply is not sent; SKIP asked, the next command's is not.
const (
	replyOff uint32 = 1 << iota
	replySkip
	replySkipNext
)

// silenced reports whether the command about to run is answered
// nothing (CLIENT REPLY OFF, or SKIP before it).
func (c *Conn) silenced() bool { return c.reply.Load()&(replyOff|replySkip) != 0 }

// commandDone moves CLIENT REPLY SKIP on after a command, as
// redis-server's resetClient: the skipped command's SKIP ends, and a
// SKIP asked applies to the next command.
func (c *Conn) commandDone() {
	if m := c.reply.Load(); m&(replySkip|replySkipNext) != 0 {
		n := m &^ (replySkip | replySkipNext)
		if m&replySkipNext != 0 {
			n |= replySkip
		}
		c.reply.Store(n)
	}
}

// Frame implements nic.Framer: it cuts the head of a connection's input
// as redis-server's processInputBuffer does, a multibulk request when the
// input starts with '*', an inline command otherwise, and answers the
// protocol errors redis-server answers, with its words, closing the
// connection after them as it does. Requests longer than max are refused
// as soon as their length is known, with redis-server's error for an
// argument or a request too long ("invalid bulk length", "invalid
// multibulk length"), where redis-server (whose limits are 512 MB per
// argument and 1 GB per connection's input) would read on.
func (c *Conn) Frame(in []byte, max int) nic.Frame {
	if len(in) == 0 {
		c.mb = mbState{}
		return nic.Frame{Kind: nic.FrameMore, Flush: true}
	}
	var f nic.Frame
	if in[0] == '*' {
		f = frameMultibulk(in, max, int(c.srv.maxBulk.Load()), &c.mb)
	} else {
		c.mb = mbState{}
		f = frameInline(in, max)
	}
	switch f.Kind {
	case nic.FrameRequest:
		var cmd *command // the request's command, when batch found it
		if in[0] == '*' && !c.srv.cfg.NoBatch {
			f.Len, cmd = c.batch(in, f.Len, max)
		}
		if cmd == nil {
			cmd = c.srv.frameCommand(in[:f.Len], &c.last)
		}
		// A transaction's commands run in their order: none is
		// read-only from its MULTI to its end.
		switch {
		case cmd == nil:
		case cmd.fullname == "multi":
			c.framedMulti = true
		case cmd.fullname == "exec" || cmd.fullname == "discard" || cmd.fullname == "reset":
			c.framedMulti = false
		}
		f.ReadOnly = cmd != nil && cmd.flags&flagReadonly != 0 && !c.framedMulti
	case nic.FrameMore:
		f.Flush = true // the input ran out: what is held goes now
	}
	return f
}

// Batches: a run of the same short command read together (a pipeline of
// GETs, of SETs) is one request, up to batchCommands commands and
// batchBytes bytes, which the handler runs one after the other. The
// dispatcher's work per request (queueing, scheduling, stage records, the
// buffer) is then paid once for the run instead of once per command;
// DARC profiles the run as one request of the command's type, whose
// demand, requests times service, is the commands' own. Only commands
// that touch one key with a few arguments are batched (command.batchArgs):
// a batch costs what batchCommands of them cost one by one.
const (
	batchCommands = 16
	batchBytes    = 1 << 10
)

// batch returns the length of the request in[:n] (a multibulk request)
// and the requests after it that batch with it: complete multibulk
// requests of the same command, named with the same bytes, each with at
// most the command's batchArgs arguments. It also returns the command of
// in[:n] (nil when it is none).
func (c *Conn) batch(in []byte, n, max int) (int, *command) {
	limit := min(max, batchBytes)
	name, cmd := c.srv.commandHead(in[:n], &c.last)
	if cmd == nil || !batchable(in[:n], cmd) || n >= limit {
		return n, cmd
	}
	for k := 1; k < batchCommands && n < len(in) && in[n] == '*'; k++ {
		var st mbState
		f := frameMultibulk(in[n:], limit-n, int(c.srv.maxBulk.Load()), &st)
		if f.Kind != nic.FrameRequest {
			break
		}
		next := in[n : n+f.Len]
		if nextName, _ := c.srv.commandHead(next, nil); string(nextName) != string(name) || !batchable(next, cmd) {
			break
		}
		n += f.Len
	}
	return n, cmd
}

// commandHead returns the name of the multibulk request req's command
// and, given last, the command it names (nil when none, or req is not
// a multibulk request with a name).
func (s *Server) commandHead(req []byte, last *lastCommand) ([]byte, *command) {
	_, pos, ok := lengthAt(req, 1)
	if !ok || pos >= len(req) || req[pos] != '$' {
		return nil, nil
	}
	n, pos, ok := lengthAt(req, pos+1)
	if !ok || n < 1 || int64(pos)+n > int64(len(req)) {
		return nil, nil
	}
	name := req[pos : pos+int(n)]
	if last == nil {
		return name, nil
	}
	return name, last.find(s.cmds, name)
}

// batchable reports whether the multibulk request req of command cmd has
// at most cmd's batchArgs arguments.
func batchable(req []byte, cmd *command) bool {
	argc, _, ok := lengthAt(req, 1)
	return ok && argc >= 1 && argc <= int64(cmd.batchArgs)
}

// frameCommand returns the request's command (nil when its name is not
// whole or unknown), for the framer to tell whether it is read-only, one
// that changes nothing a later command of its connection could see (GET,
// SCAN, ...): the dataplane may run such commands in a row at once, while
// every other one runs alone, in its connection's order, as Redis runs
// them.
func (s *Server) frameCommand(req []byte, last *lastCommand) *command {
	var name []byte
	if req[0] == '*' {
		i := bytes.IndexByte(req, '\n') + 1 // after the count line
		if i <= 0 || i >= len(req) || req[i] != '$' {
			return nil
		}
		j := bytes.IndexByte(req[i:], '\r')
		if j < 0 {
			return nil
		}
		n, ok := string2ll(req[i+1 : i+j])
		start := i + j + 2
		if !ok || n < 0 || int64(start)+n > int64(len(req)) {
			return nil
		}
		name = req[start : start+int(n)]
	} else {
		i := 0
		for i < len(req) && isSpace(req[i]) {
			i++
		}
		j := i
		for j < len(req) && !isSpace(req[j]) && req[j] != '"' && req[j] != '\'' {
			j++
		}
		if j == len(req) || !isSpace(req[j]) {
			return nil // quoted, or no line end: leave it in order
		}
		name = req[i:j]
	}
	return last.find(s.cmds, name)
}

// lineEnd returns the index of the first c in p, or -1 when there is none
// before the first NUL byte (redis-server searches its query buffer with
// strchr, which stops there).
func lineEnd(p []byte, c byte) int {
	i := bytes.IndexByte(p, c)
	if i < 0 {
		return -1
	}
	if bytes.IndexByte(p[:i], 0) >= 0 {
		return -1
	}
	return i
}

func closeWith(reply []byte) nic.Frame { return nic.Frame{Kind: nic.FrameClose, Reply: reply} }

// frameInline frames an inline command: a line ending in \n (or \r\n),
// split into arguments as redis-server's sdssplitargs splits it. An empty
// line is skipped without a reply.
func frameInline(in []byte, max int) nic.Frame {
	nl := lineEnd(in, '\n')
	if nl < 0 {
		if len(in) > inlineMax || len(in) >= max {
			return closeWith(errTooBigInline)
		}
		return nic.Frame{Kind: nic.FrameMore}
	}
	if nl+1 > max || nl >= inlineReach {
		return closeWith(errTooBigInline)
	}
	line := in[:nl]
	if len(line) > 0 && line[len(line)-1] == '\r' {
		line = line[:len(line)-1]
	}
	argc, ok := splitArgs(line)
	switch {
	case !ok:
		return closeWith(errUnbalanced)
	case argc == 0:
		return nic.Frame{Kind: nic.FrameSkip, Len: nl + 1}
	}
	return nic.Frame{Kind: nic.FrameRequest, Len: nl + 1}
}

// mbState is where framing a multibulk request stopped for want of input:
// the offset of the next argument and how many are left (pos 0: at the
// start). A long request arriving in many reads is parsed once, not from
// its start at every read.
type mbState struct {
	pos  int
	left int64
}

// frameMultibulk frames a multibulk request: *<count>\r\n followed by
// count arguments $<len>\r\n<len bytes>\r\n. As in redis-server, the byte
// after each \r is taken for a \n without being read, and so are the two
// bytes after an argument's data. A count of 0 or less is skipped without
// a reply.
func frameMultibulk(in []byte, max, maxBulk int, st *mbState) nic.Frame {
	pos, count := st.pos, st.left
	if pos == 0 || pos > len(in) {
		cr := lineEnd(in, '\r')
		if cr < 0 {
			if len(in) > inlineMax {
				return closeWith(errTooBigMbulk)
			}
			return more(len(in), max, errTooBigMbulk)
		}
		if cr > len(in)-2 {
			return more(len(in), max, errTooBigMbulk)
		}
		if cr >= inlineReach {
			return closeWith(errTooBigMbulk)
		}
		n, ok := string2ll(in[1:cr])
		if !ok || n > 1<<31-1 {
			return closeWith(errInvalidMbulk)
		}
		pos, count = cr+2, n
		if count <= 0 {
			return nic.Frame{Kind: nic.FrameSkip, Len: pos}
		}
		if int64(pos)+count*minArgLen > int64(max) {
			return closeWith(errInvalidMbulk)
		}
	}
	*st = mbState{}
	for ; count > 0; count-- {
		n, cr, ok := shortLength(in, pos)
		if !ok {
			cr = lineEnd(in[pos:], '\r')
			if cr < 0 {
				if len(in)-pos > inlineMax {
					return closeWith(errTooBigBulkCount)
				}
				*st = mbState{pos, count}
				return more(len(in), max, errTooBigBulkCount)
			}
			if cr > len(in)-pos-2 {
				*st = mbState{pos, count}
				return more(len(in), max, errTooBigBulkCount)
			}
			if in[pos] != '$' {
				return closeWith(expectedDollar(in[pos]))
			}
			n, ok = string2ll(in[pos+1 : pos+cr])
		}
		if !ok || n < 0 || n > int64(maxBulk) {
			return closeWith(errInvalidBulk)
		}
		end := int64(pos+cr+2) + n + 2
		if end+(count-1)*minArgLen > int64(max) {
			return closeWith(errInvalidBulk)
		}
		if end > int64(len(in)) {
			*st = mbState{pos, count}
			return nic.Frame{Kind: nic.FrameMore}
		}
		pos = int(end)
	}
	return nic.Frame{Kind: nic.FrameRequest, Len: pos}
}

// shortLength reads the common argument head at in[pos:], "$" and a
// short number (shortNumber), then "\r" and one more byte, in one pass:
// it returns the length and the offset of the '\r' from pos, or false for
// any other head (which frameMultibulk then reads as redis-server does).
func shortLength(in []byte, pos int) (n int64, cr int, ok bool) {
	if pos >= len(in) || in[pos] != '$' {
		return 0, 0, false
	}
	n, j, ok := shortNumber(in, pos+1)
	if !ok || j+1 >= len(in) {
		return 0, 0, false
	}
	return n, j - pos, true
}

// more asks for more input, or refuses a head that has reached max bytes
// without being complete.
func more(have, max int, refusal []byte) nic.Frame {
	if have >= max {
		return closeWith(refusal)
	}
	return nic.Frame{Kind: nic.FrameMore}
}

// expectedDollar is redis-server's error for an argument that does not
// start with '$' (the byte is sent as it is, a line end as a space).
func expectedDollar(c byte) []byte {
	if c == '\r' || c == '\n' {
		c = ' '
	}
	b := append([]byte("-ERR Protocol error: expected '$', got '"), c)
	return append(b, "'\r\n"...)
}

// string2ll parses a decimal integer as redis-server's string2ll does: an
// optional '-', no leading zeros, no spaces, no '+', within int64.
func string2ll(p []byte) (int64, bool) {
	if len(p) == 0 || len(p) >= 21 {
		return 0, false
	}
	if len(p) == 1 && p[0] == '0' {
		return 0, true
	}
	neg := false
	if p[0] == '-' {
		neg = true
		p = p[1:]
		if len(p) == 0 {
			return 0, false
		}
	}
	if p[0] < '1' || p[0] > '9' {
		return 0, false
	}
	var v uint64
	for _, c := range p {
		if c < '0' || c > '9' {
			return 0, false
		}
		if v > (1<<64-1)/10 {
			return 0, false
		}
		v *= 10
		if v > 1<<64-1-uint64(c-'0') {
			return 0, false
		}
		v += uint64(c - '0')
	}
	if neg {
		if v > 1<<63 {
			return 0, false
		}
		return -int64(v), true
	}
	if v > 1<<63-1 {
		return 0, false
	}
	return int64(v), true
}

// appendInt appends v in decimal.
func appendInt(dst []byte, v int64) []byte { return strconv.AppendInt(dst, v, 10) }
