package redis

import (
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
// it waits on; a write command to one of them marks it ready and advances
// the epoch the dispatcher watches (app.Parker), which then runs the
// command again: it pops if the data is still there, or parks again. Its
// timeout is kept on the connection from the first run; the dispatcher
// runs it again at the latest when it passes, and it answers as
// redis-server does on a timeout. A connection that closes while blocked
// is marked ready too, so its request leaves the dispatcher.
//
// Clients blocked on a key are served in the order they parked, each
// trying its pop in turn; unlike redis-server, which hands a pushed
// element to the longest-waiting client before any other command runs, a
// client that was not blocked may pop it first.

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

// signal marks ready the connections waiting on any of keys and advances
// the epoch if it marked one. It costs an atomic load when nobody waits.
func (r *blockRegistry) signal(keys [][]byte) {
	if r.n.Load() == 0 {
		return
	}
	woke := false
	r.mu.Lock()
	for _, k := range keys {
		for _, cn := range r.waiting[string(k)] {
			cn.blockReady.Store(true)
			woke = true
		}
	}
	r.mu.Unlock()
	if woke {
		r.epoch.Add(1)
	}
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

// ParkEpoch implements app.Parker.
func (s *Server) ParkEpoch() uint64 { return s.blocked.epoch.Load() }

// Unpark implements app.Parker: a parked command runs again once a key it
// waits on was written or its connection closed.
func (s *Server) Unpark(b *nic.Buffer) bool {
	cn, ok := b.Session.(*Conn)
	return !ok || cn.blockReady.Load()
}

// signalWrites marks ready the connections blocked on the keys of the
// write command c ran (all its arguments for a command whose keys move).
func (c *ctx) signalWrites() {
	cmd := c.cmd
	if cmd.firstKey <= 0 {
		c.s.blocked.signal(c.argv[1:])
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
		c.s.blocked.signal(c.argv[cmd.firstKey : last+1])
		return
	}
	for i := cmd.firstKey; i <= last; i += cmd.step {
		c.s.blocked.signal(c.argv[i : i+1])
	}
}

// block runs a blocking command's pop: try pops and answers, or answers
// WRONGTYPE, reporting true, or reports false having answered nothing
// when none of keys holds data. Then the command blocks for timeout ms
// (0: no limit): its request parks, or, where a client may not block
// (inside EXEC, or a request that is no stream's), it answers at once as
// on a timeout (a null, an array's with nullArray).
func (c *ctx) block(keys [][]byte, timeout int64, nullArray bool, try func() bool) {
	cn := c.conn
	canPark := !c.inExec && cn != nil && c.o.r != nil
	if canPark && c.resumed {
		cn.blockReady.Store(false) // before the look: a write after it marks it again
	}
	if try() {
		if c.resumed {
			c.s.blocked.unregister(cn)
		}
		return
	}
	switch {
	case !canPark:
		c.timedOut(nullArray)
		return
	case !c.resumed:
		cn.blockReady.Store(false)
		c.s.blocked.register(cn, keys)
		if try() { // written between the look and the registration
			c.s.blocked.unregister(cn)
			return
		}
		if cn.closed.Load() || cn.peerClosed.Load() {
			// Gone before it registered: nothing would unpark it.
			c.s.blocked.unregister(cn)
			c.timedOut(nullArray)
			return
		}
		cn.blockDeadline = 0
		if timeout > 0 {
			cn.blockDeadline = c.now() + min(timeout, maxBlockMs)
		}
	case cn.closed.Load() || cn.peerClosed.Load() || (cn.blockDeadline != 0 && c.now() >= cn.blockDeadline):
		c.s.blocked.unregister(cn)
		c.timedOut(nullArray)
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

// timedOut answers a blocking command whose timeout passed: null (a null
// array for the pops).
func (c *ctx) timedOut(nullArray bool) {
	if nullArray {
		c.o.nullArray()
	} else {
		c.o.null()
	}
}
