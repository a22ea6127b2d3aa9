package redis

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/persephone-go/psp/nic"
)

// Blocked clients. A blocking command (BLPOP, BZPOPMIN, BLMOVE, ...) none
// of whose keys holds data parks its request (app.Reply.Park): the worker
// is free for other clients, the dispatcher keeps the request, and the
// connection's later commands wait behind it, as redis-server's blocked
// client reads nothing more. The connection is registered under each key
// it waits on, with what it waits to do (blockOp).
//
// A write command to one of those keys serves them once it is done (in a
// transaction, once EXEC is done), before its own reply leaves, as
// redis-server's handleClientsBlockedOnKeys does: key by key in the order
// they were written, each key's clients in the order they blocked, each
// popping from that key alone until it holds no data; a client blocked
// for another type than the key's is passed over, and a key a served
// BLMOVE pushes to is served in turn. The pop's answer is kept on the
// connection, which is marked ready; the epoch the dispatcher watches
// (app.Parker) advances, and the dispatcher runs the parked request
// again, which sends the kept answer. So no other command takes an
// element from the clients blocked for it, and a command that follows the
// write sees what they popped.
//
// The timeout is kept on the connection from the first run; the
// dispatcher runs the request again at the latest when it passes, and it
// answers as redis-server does on a timeout. A connection that closes
// while blocked is marked ready too, so its request leaves the
// dispatcher.

// blockKind is what a blocked command does once a key holds data.
type blockKind uint8

const (
	blockPop   blockKind = iota // BLPOP, BRPOP
	blockMove                   // BLMOVE, BRPOPLPUSH
	blockMpop                   // BLMPOP
	blockZpop                   // BZPOPMIN, BZPOPMAX
	blockZmpop                  // BZMPOP
)

// blockOp is a blocking command's pop: kept on its connection while it is
// blocked, so that a write can serve it.
type blockOp struct {
	kind    blockKind
	front   bool   // lists: pop the head (LEFT); BLMOVE: from the head
	toFront bool   // BLMOVE: push to the head
	max     bool   // sorted sets: pop the highest score
	count   int64  // BLMPOP, BZMPOP
	dst     []byte // BLMOVE's destination (the connection's copy once blocked)
}

// blockRegistry is the server's blocked connections, by key.
type blockRegistry struct {
	mu      sync.Mutex
	waiting map[string][]*Conn
	n       atomic.Int64  // connections registered
	epoch   atomic.Uint64 // advanced after marking connections ready
}

// register records cn as waiting on keys.
func (r *blockRegistry) register(cn *Conn, keys [][]byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if cn.blockKeys != nil {
		return
	}
	if r.waiting == nil {
		r.waiting = make(map[string][]*Conn)
	}
	cn.blockKeys = make([]string, 0, len(keys))
	for _, k := range keys {
		key := string(k)
		ws := r.waiting[key]
		if len(ws) > 0 && ws[len(ws)-1] == cn {
			continue // a key given twice
		}
		r.waiting[key] = append(ws, cn)
		cn.blockKeys = append(cn.blockKeys, key)
	}
	r.n.Add(1)
}

// unregister removes cn from the keys it waits on, if it does.
func (r *blockRegistry) unregister(cn *Conn) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.unregisterLocked(cn)
}

func (r *blockRegistry) unregisterLocked(cn *Conn) {
	if cn.blockKeys == nil {
		return
	}
	for _, key := range cn.blockKeys {
		ws := r.waiting[key]
		for i, w := range ws {
			if w == cn {
				ws = append(ws[:i], ws[i+1:]...)
				break
			}
		}
		if len(ws) == 0 {
			delete(r.waiting, key)
		} else {
			r.waiting[key] = ws
		}
	}
	cn.blockKeys = nil
	r.n.Add(-1)
}

// collect appends to w's ready keys those of keys some connection waits
// on, each once. It costs an atomic load when nobody waits.
func (r *blockRegistry) collect(w *worker, keys [][]byte) {
	if r.n.Load() == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, k := range keys {
		if len(r.waiting[string(k)]) > 0 {
			w.ready.add(k)
		}
	}
}

// waitersOf appends to ws the connections waiting on key, in the order
// they blocked.
func (r *blockRegistry) waitersOf(key []byte, ws []*Conn) []*Conn {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append(ws, r.waiting[string(key)]...)
}

// waitsOn reports whether cn is registered under key.
func (r *blockRegistry) waitsOn(cn *Conn, key []byte) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Contains(cn.blockKeys, string(key))
}

// closed is called when cn's connection closes or its client sends no
// more: a request of it that is parked must run again, to leave.
func (r *blockRegistry) closed(cn *Conn) {
	r.mu.Lock()
	blocked := cn.blockKeys != nil
	r.unregisterLocked(cn)
	r.mu.Unlock()
	if blocked {
		cn.blockReady.Store(true)
		r.epoch.Add(1)
	}
}

// readyKeys is a worker's keys written by the command it runs that
// blocked clients wait on, in the order written: copied into one buffer,
// both kept from one command to the next. A key is listed once among
// those not yet served (from next on): written again after its clients
// were served (a BLMOVE chain pushing back to it), it is listed again,
// as redis-server's signalKeyAsReady lists it again.
type readyKeys struct {
	buf  []byte
	ends []int
	next int
}

func (k *readyKeys) add(key []byte) {
	for i := k.next; i < len(k.ends); i++ {
		if string(k.key(i)) == string(key) {
			return
		}
	}
	k.buf = append(k.buf, key...)
	k.ends = append(k.ends, len(k.buf))
}

func (k *readyKeys) key(i int) []byte {
	start := 0
	if i > 0 {
		start = k.ends[i-1]
	}
	return k.buf[start:k.ends[i]]
}

func (k *readyKeys) reset() { k.buf, k.ends, k.next = k.buf[:0], k.ends[:0], 0 }

// ParkEpoch implements app.Parker.
func (s *Server) ParkEpoch() uint64 { return s.blocked.epoch.Load() }

// Unpark implements app.Parker: a parked command runs again once a write
// served it or its connection closed.
func (s *Server) Unpark(b *nic.Buffer) bool {
	cn, ok := b.Session.(*Conn)
	return !ok || cn.blockReady.Load()
}

// signalWrites notes the keys of the write command c ran (all its
// arguments for a command whose keys move) that blocked clients wait on:
// serveReady serves them.
func (c *ctx) signalWrites() {
	cmd := c.cmd
	if cmd.firstKey <= 0 {
		c.s.blocked.collect(c.w, c.argv[1:])
		return
	}
	last := cmd.lastKey
	if last < 0 {
		last += len(c.argv)
	}
	last = min(last, len(c.argv)-1)
	if last < cmd.firstKey {
		return
	}
	if cmd.step <= 1 {
		c.s.blocked.collect(c.w, c.argv[cmd.firstKey:last+1])
		return
	}
	for i := cmd.firstKey; i <= last; i += cmd.step {
		c.s.blocked.collect(c.w, c.argv[i:i+1])
	}
}

// serveReady serves the clients blocked on w's ready keys (see the top of
// this file), then forgets the keys. w runs the command that wrote them
// and holds no key.
func (s *Server) serveReady(w *worker) {
	for i := 0; i < len(w.ready.ends); i++ {
		key := w.ready.key(i)
		w.ready.next = i + 1
		w.waiters = s.blocked.waitersOf(key, w.waiters[:0])
		for _, cn := range w.waiters {
			if !s.serveBlocked(w, cn, key) && !s.holds(key) {
				break // emptied: nobody else can pop
			}
		}
		clear(w.waiters)
	}
	w.ready.reset()
}

// serveBlocked runs the pop cn is blocked for on key alone and, if it
// answered, keeps the answer for cn's parked request, unregisters cn and
// marks it ready; a BLMOVE's destination becomes a ready key. It reports
// whether cn was answered.
func (s *Server) serveBlocked(w *worker, cn *Conn, key []byte) bool {
	cn.blockMu.Lock()
	defer cn.blockMu.Unlock()
	if cn.blockAnswered || !s.blocked.waitsOn(cn, key) {
		return false // answered already, or timed out, or gone
	}
	op := &cn.blockOp
	sc := &w.serve
	*sc = ctx{s: s, w: w, conn: cn, clk: cmdClock{read: s.now}, o: &w.serveOut, waiting: true}
	w.serveReply.b = w.serveReply.b[:0]
	sc.o.reset(&w.serveReply, serveChunk)
	sc.o.resp3 = cn.resp3.Load()
	w.moveArgv = [3][]byte{nil, key, op.dst}
	sc.argv = w.moveArgv[:]
	if !sc.popFor(op, w.moveArgv[1:2]) {
		return false
	}
	cn.blockAnswer = append(append(cn.blockAnswer[:0], w.serveReply.b...), sc.o.buf...)
	cn.blockAnswered = true
	s.blocked.unregister(cn)
	cn.blockReady.Store(true)
	s.blocked.epoch.Add(1)
	if op.kind == blockMove {
		s.blocked.collect(w, w.moveArgv[2:3])
	}
	return true
}

// serveChunk is the chunk size of the answers serveBlocked keeps.
const serveChunk = 4096

// holds reports whether key exists.
func (s *Server) holds(key []byte) bool {
	sh, _ := s.db.shardOf(key)
	sh.mu.RLock()
	defer sh.mu.RUnlock()
	e := sh.m[string(key)]
	return e != nil && e.live(&cmdClock{read: s.now})
}

// keptReply is an app.Reply that keeps what is sent: the leading chunks
// of an answer serveBlocked keeps.
type keptReply struct{ b []byte }

func (k *keptReply) Send(p []byte) error  { k.b = append(k.b, p...); return nil }
func (k *keptReply) Room() int            { return serveChunk }
func (k *keptReply) NoReply()             {}
func (k *keptReply) Park(_ time.Duration) {}

// popFor runs op on keys: it pops and answers, or answers WRONGTYPE,
// reporting true, or reports false having answered nothing when none of
// keys holds data (of op's type, for a client that is blocked already:
// c.waiting).
func (c *ctx) popFor(op *blockOp, keys [][]byte) bool {
	switch op.kind {
	case blockPop:
		return c.bpop(keys, op.front)
	case blockMove:
		return c.lmove(op.front, op.toFront)
	case blockMpop:
		return c.lmpop(keys, op.front, op.count)
	case blockZpop:
		return c.bzpop(keys, op.max)
	default:
		return c.zmpop(keys, op.max, op.count)
	}
}

// block runs a blocking command's pop (op on keys, argv[1] and argv[2]
// for a move): it pops and answers, or answers WRONGTYPE, when a key
// holds data. Otherwise the command blocks for timeout ms (0: no limit):
// its request parks, or, where a client may not block (inside EXEC, or a
// request that is no stream's), it answers at once as on a timeout. Run
// again once parked, it sends the answer a write kept for it, or answers
// as on a timeout once that passed or its connection closed, or parks
// again.
func (c *ctx) block(keys [][]byte, timeout int64, op blockOp) {
	cn := c.conn
	if c.inExec || cn == nil || c.o.r == nil {
		if !c.popFor(&op, keys) {
			c.deniedBlocking(op.kind)
		}
		return
	}
	// A write serving cn takes blockMu: it waits while cn looks, registers
	// or decides to park.
	cn.blockMu.Lock()
	defer cn.blockMu.Unlock()
	if c.resumed {
		cn.blockReady.Store(false) // before the look: a write after it marks it again
		if cn.blockAnswered {
			c.o.write(cn.blockAnswer)
			cn.blockAnswered = false
			c.delivered = true
			return
		}
		// Blocked, it passes over a key of another type, as redis-server
		// serves a blocked client from a key of its type only.
		c.waiting = true
	}
	if c.popFor(&op, keys) {
		if c.resumed {
			c.s.blocked.unregister(cn)
		}
		return
	}
	switch {
	case !c.resumed:
		cn.blockReady.Store(false)
		cn.blockOp = op
		cn.blockOp.dst = append(cn.blockOp.dst[:0], op.dst...)
		c.s.blocked.register(cn, keys)
		if c.popFor(&op, keys) { // written between the look and the registration
			c.s.blocked.unregister(cn)
			return
		}
		if cn.closed.Load() || cn.peerClosed.Load() {
			// Gone before it registered: nothing would unpark it.
			c.s.blocked.unregister(cn)
			c.o.nullArray() // as on its timeout
			return
		}
		cn.blockDeadline = 0
		if timeout > 0 {
			cn.blockDeadline = c.now() + min(timeout, maxBlockMs)
		}
	case cn.closed.Load() || cn.peerClosed.Load() || (cn.blockDeadline != 0 && c.now() >= cn.blockDeadline):
		c.s.blocked.unregister(cn)
		c.o.nullArray() // as on its timeout
		return
	}
	var after time.Duration
	if cn.blockDeadline != 0 {
		after = time.Duration(cn.blockDeadline-c.now()) * time.Millisecond
	}
	c.parked = true
	c.o.r.Park(after)
}

// maxBlockMs bounds a blocking timeout (about 292 years: a longer one
// would overflow the deadline's time.Duration).
const maxBlockMs = int64(time.Duration(1<<63-1) / time.Millisecond / 2)

// deniedBlocking answers a blocking command that may not block and finds
// no data, as redis-server's commands do under CLIENT_DENY_BLOCKING: a
// null bulk for a move, a null array for the pops. Once blocked, every
// one of them answers a null array on its timeout, as redis-server's
// replyToBlockedClientTimedOut does.
func (c *ctx) deniedBlocking(k blockKind) {
	if k == blockMove {
		c.o.null()
	} else {
		c.o.nullArray()
	}
}

// cmdClientUnblock answers CLIENT UNBLOCK id [TIMEOUT|ERROR] as
// redis-server does: 1 when the client with that id was blocked, which
// then answers as on its timeout (TIMEOUT, the default) or the UNBLOCKED
// error (ERROR); 0 otherwise. The reason is checked before the id.
func cmdClientUnblock(c *ctx) {
	if len(c.argv) > 4 {
		c.o.errBytes(subcommandSyntaxError(c.argv))
		return
	}
	withErr := false
	if len(c.argv) == 4 {
		switch {
		case equalFold(c.argv[3], "timeout"):
		case equalFold(c.argv[3], "error"):
			withErr = true
		default:
			c.o.err("CLIENT UNBLOCK reason should be TIMEOUT or ERROR")
			return
		}
	}
	id, ok := c.intArg(2)
	if !ok {
		return
	}
	cn := c.s.blocked.find(id)
	if cn == nil || !c.s.unblock(cn, withErr) {
		c.o.writeString(czero)
		return
	}
	c.o.writeString(cone)
}

// find returns the blocked connection whose id is id, or nil.
func (r *blockRegistry) find(id int64) *Conn {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, ws := range r.waiting {
		for _, cn := range ws {
			if int64(cn.id) == id {
				return cn
			}
		}
	}
	return nil
}

// unblock answers cn, if it is still blocked and not answered, as on its
// timeout or with the UNBLOCKED error, as a write serves it; it reports
// whether it did.
func (s *Server) unblock(cn *Conn, withErr bool) bool {
	cn.blockMu.Lock()
	defer cn.blockMu.Unlock()
	s.blocked.mu.Lock()
	blocked := cn.blockKeys != nil
	s.blocked.mu.Unlock()
	if !blocked || cn.blockAnswered {
		return false
	}
	var o out
	o.reset(nil, 64)
	o.resp3 = cn.resp3.Load()
	if withErr {
		o.writeString("-UNBLOCKED client unblocked via CLIENT UNBLOCK\r\n")
	} else {
		o.nullArray() // as on its timeout (deniedBlocking)
	}
	cn.blockAnswer = append(cn.blockAnswer[:0], o.buf...)
	cn.blockAnswered = true
	s.blocked.unregister(cn)
	cn.blockReady.Store(true)
	s.blocked.epoch.Add(1)
	return true
}
