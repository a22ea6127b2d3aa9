package redis

// Transactions: MULTI queues a connection's commands, EXEC runs them all
// at once, as redis-server does. A queued command is checked as it
// arrives (an unknown command, a wrong number of arguments, a command
// refused while the dataset is past maxmemory: the error is its reply and
// EXEC then discards the transaction); EXEC runs the queue while every
// worker is held between two requests, so no other client's command runs
// in between. The framer keeps a transaction's commands in order: from a
// MULTI to its EXEC, none is read-only, so none runs beside another of its
// connection (Conn.Frame); a lock guards the state anyway, for a client
// that goes on after an EXEC shed under overload. WATCH (watch.go) makes
// EXEC answer the null array and run nothing when a watched key was
// modified.
//
// Queued arguments are copies, counted in the dataset's size (maxmemory)
// until EXEC, DISCARD or the connection's end frees them: past
// maxmemory, nothing more is queued. The dataplane may close a connection
// while its request runs: the count is then freed by whichever of the two
// comes last (Conn.queued, Conn.closed).

// multiState is a connection's transaction (Conn.multiMu).
type multiState struct {
	on    bool // between MULTI and EXEC or DISCARD
	dirty bool // a command was refused while queued: EXEC discards
	queue [][][]byte
	// denyOOM: a queued command may grow the dataset (EXEC is refused
	// past maxmemory then).
	denyOOM bool
}

// Commands a transaction runs at once instead of queueing them.
func runsInMulti(name string) bool {
	switch name {
	case "exec", "discard", "multi", "watch", "quit", "reset":
		return true
	}
	return false
}

// queueCost is what a queued command is counted for: its arguments and
// their slice headers.
func queueCost(argv [][]byte) int64 {
	n := int64(24 * len(argv))
	for _, a := range argv {
		n += int64(len(a))
	}
	return n
}

// transaction reports whether the connection has a transaction open, and
// whether it queued a command that may grow the dataset.
func (cn *Conn) transaction() (on, denyOOM bool) {
	if cn == nil || !cn.inMulti.Load() {
		return false, false
	}
	cn.multiMu.Lock()
	defer cn.multiMu.Unlock()
	return cn.multi.on, cn.multi.denyOOM
}

// enqueue copies the command into the connection's queue and answers
// QUEUED.
func (c *ctx) enqueue(cmd *command) {
	c.conn.multiMu.Lock()
	defer c.conn.multiMu.Unlock()
	m := &c.conn.multi
	if m.dirty || c.conn.casDirty.Load() {
		// An aborted transaction keeps nothing (redis-server's
		// queueMultiCommand): EXEC discards it anyway.
		c.o.writeString("+QUEUED\r\n")
		return
	}
	cost := queueCost(c.argv)
	size := 0
	for _, a := range c.argv {
		size += len(a)
	}
	buf := make([]byte, 0, size)
	argv := make([][]byte, len(c.argv))
	for i, a := range c.argv {
		start := len(buf)
		buf = append(buf, a...)
		argv[i] = buf[start:len(buf):len(buf)]
	}
	m.queue = append(m.queue, argv)
	m.denyOOM = m.denyOOM || cmd.flags&flagDenyOOM != 0
	c.conn.queued.Add(cost)
	c.s.db.used.Add(cost)
	if c.conn.closed.Load() {
		c.conn.releaseQueued()
	}
	c.o.writeString("+QUEUED\r\n")
}

// flagTransaction makes EXEC discard the connection's transaction, as
// redis-server does when it refuses a command while queueing.
func (c *ctx) flagTransaction() { c.conn.flagTransaction() }

func (cn *Conn) flagTransaction() {
	if cn == nil || !cn.inMulti.Load() {
		return
	}
	cn.multiMu.Lock()
	cn.multi.dirty = cn.multi.on
	cn.multiMu.Unlock()
}

// endTransaction ends the connection's transaction and returns it.
func (cn *Conn) endTransaction() multiState {
	cn.multiMu.Lock()
	m := cn.multi
	cn.multi = multiState{}
	cn.inMulti.Store(false)
	cn.multiMu.Unlock()
	return m
}

// discardTransaction ends the connection's transaction, frees its
// queue and forgets its watched keys (redis-server's discardTransaction).
func (cn *Conn) discardTransaction() {
	cn.endTransaction()
	cn.releaseQueued()
	cn.unwatch()
}

// releaseQueued takes the queued commands' size out of the dataset's.
func (cn *Conn) releaseQueued() {
	cn.srv.db.used.Add(-cn.queued.Swap(0))
}

func cmdMulti(c *ctx) {
	if c.conn == nil {
		c.o.err("MULTI needs a connection: a datagram is one command")
		return
	}
	if on, _ := c.conn.transaction(); on {
		c.o.err("MULTI calls can not be nested")
		return
	}
	c.conn.multiMu.Lock()
	c.conn.multi.on = true
	c.conn.inMulti.Store(true)
	c.conn.multiMu.Unlock()
	c.o.ok()
}

func cmdDiscard(c *ctx) {
	if on, _ := c.conn.transaction(); !on {
		c.o.err("DISCARD without MULTI")
		return
	}
	c.conn.discardTransaction()
	c.o.ok()
}

// cmdExec runs the queued commands, every other worker held between two
// requests meanwhile, and answers their replies in one array; or answers
// the null array and runs nothing when a watched key was modified.
func cmdExec(c *ctx) {
	if on, _ := c.conn.transaction(); !on {
		c.o.err("EXEC without MULTI")
		return
	}
	m := c.conn.endTransaction()
	defer c.conn.releaseQueued()
	if m.dirty {
		c.conn.unwatch()
		c.o.writeString("-EXECABORT Transaction discarded because of previous errors.\r\n")
		return
	}
	s := c.s
	s.holdWorkers(c.w)
	defer s.releaseWorkers(c.w)
	// Every other worker is between two requests: the writes that ran
	// before have marked the connection, and none runs until the
	// transaction is done.
	failed := c.conn.watchFailed(&c.clk)
	c.conn.unwatch()
	if failed {
		c.o.nullArray()
		return
	}
	c.o.arrayLen(len(m.queue))
	for _, argv := range m.queue {
		// Each was found and checked as it was queued.
		sub := ctx{s: s, w: c.w, conn: c.conn, argv: argv, clk: cmdClock{read: s.now}, o: c.o, inExec: true}
		cmd, _ := s.lookup(argv, &c.w.last)
		c.w.stats.commands.Add(1)
		s.call(&sub, cmd)
	}
	// The clients blocked on keys the transaction wrote are served on
	// what it left, before any other command runs.
	s.serveReady(c.w)
}

// holdWorkers waits until every worker but w is between two requests,
// and keeps them there until releaseWorkers. w holds its own lock (it is
// running a request); it lets it go first so that two workers running
// EXEC at once do not wait for each other.
func (s *Server) holdWorkers(w *worker) {
	w.mu.Unlock()
	s.execMu.Lock()
	for _, o := range s.workers {
		o.mu.Lock()
	}
}

func (s *Server) releaseWorkers(w *worker) {
	for _, o := range s.workers {
		if o != w {
			o.mu.Unlock()
		}
	}
	s.execMu.Unlock()
}
