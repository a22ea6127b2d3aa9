package redis

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/persephone-go/psp/app"
	"github.com/persephone-go/psp/nic"
)

// Config configures a Server. The zero value serves one worker with no
// memory limit.
type Config struct {
	// Workers is how many workers call the handler at once (their index
	// selects per-worker state). Default 1.
	Workers int
	// MaxMemory bounds the dataset's estimated size in bytes: past it,
	// commands that may grow the dataset are refused with redis-server's
	// noeviction error. 0: no limit.
	MaxMemory int64
	// MaxBulk is the longest argument accepted (redis-server's
	// proto-max-bulk-len) and the longest string a command may build.
	// Default DefaultMaxBulk.
	MaxBulk int
	// Port is the port INFO reports (tcp_port).
	Port int
	// NoBatch frames every command as a request of its own (see
	// Conn.batch).
	NoBatch bool
	// Now returns the time; nil: time.Now.
	Now func() time.Time
}

// Errors returned by Open.
var ErrConfig = errors.New("redis: invalid configuration")

// Server is the Redis-protocol application: a nic.Protocol for a stream
// dataplane, and the dispatcher's handler of the requests it frames.
type Server struct {
	cfg Config
	// maxMemory and maxBulk are Config.MaxMemory and Config.MaxBulk, or
	// lower (CONFIG SET).
	maxMemory atomic.Int64
	maxBulk   atomic.Int64
	config    *configState
	db        *store
	cmds      map[string]*command
	byName    []*command // sorted, for COMMAND
	workers   []*worker
	now       func() time.Time
	started   time.Time
	// streamNodeEntries and streamNodeBytes are stream-node-max-entries
	// and stream-node-max-bytes (CONFIG SET): where XADD starts a new
	// node, and XADD's and XTRIM's default LIMIT with ~.
	streamNodeEntries atomic.Int64
	streamNodeBytes   atomic.Int64

	// statsOrder: the commands and subcommands by command.id.
	statsOrder []*command

	connsOpened atomic.Uint64
	connsClosed atomic.Uint64
	conns       sync.Map // id -> *Conn, the open connections (CLIENT LIST)
	expired     atomic.Int64
	// statsBase is where INFO's Stats section counts from: the counters
	// as CONFIG RESETSTAT found them (the monitoring counters, Counters,
	// are never reset).
	statsMu   sync.Mutex
	statsBase infoStats

	// execMu orders EXECs (holdWorkers).
	execMu sync.Mutex
	// blocked: the connections whose blocking command is parked.
	blocked blockRegistry
	pubsub  pubsubRegistry

	stop chan struct{}
	done sync.WaitGroup
}

// worker is one worker's state.
type worker struct {
	// mu is held while the worker runs a request: EXEC takes every
	// worker's (holdWorkers).
	mu    sync.Mutex
	c     ctx
	req   request
	o     out
	ss    shardSet
	keys  [][]byte
	names []string // KEYS and SCAN: names collected (keyList)
	rng   *rand.Rand
	last  lastCommand // run's
	// pubBufs: PUBLISH's message, in RESP2 and in RESP3.
	pubBufs [2][]byte
	stats   workerStats
	// cmdStats: each command's counts (by command.id), for INFO
	// commandstats.
	cmdStats []cmdStat
	// Serving blocked clients (blocking.go): the keys written that they
	// wait on, one key's clients, and the context, reply and arguments
	// of their pops.
	ready      readyKeys
	waiters    []*Conn
	serve      ctx
	serveOut   out
	serveReply keptReply
	moveArgv   [3][]byte
}

// workerStats are a worker's counters (read by INFO from any worker).
type workerStats struct {
	commands atomic.Uint64
	hits     atomic.Uint64
	misses   atomic.Uint64
	errors   atomic.Uint64
	oom      atomic.Uint64
	cut      atomic.Uint64
	_        [32]byte
}

// Open returns a Server with an empty keyspace, and starts its expiry
// sweeper (Close stops it).
func Open(cfg Config) (*Server, error) {
	switch {
	case cfg.Workers < 0:
		return nil, fmt.Errorf("%w: %d workers", ErrConfig, cfg.Workers)
	case cfg.MaxMemory < 0:
		return nil, fmt.Errorf("%w: maxmemory %d", ErrConfig, cfg.MaxMemory)
	case cfg.MaxBulk < 0:
		return nil, fmt.Errorf("%w: max bulk %d", ErrConfig, cfg.MaxBulk)
	}
	if cfg.Workers == 0 {
		cfg.Workers = 1
	}
	if cfg.MaxBulk == 0 {
		cfg.MaxBulk = DefaultMaxBulk
	}
	s := &Server{cfg: cfg, config: newConfigState(), db: newStore(), now: cfg.Now, stop: make(chan struct{})}
	s.maxMemory.Store(cfg.MaxMemory)
	s.maxBulk.Store(int64(cfg.MaxBulk))
	s.streamNodeEntries.Store(streamNodeMaxEntries)
	s.streamNodeBytes.Store(streamNodeMaxBytes)
	if s.now == nil {
		s.now = time.Now
	}
	s.started = s.now()
	s.cmds, s.byName = commandTable()
	s.statsOrder = statsOrder(s.byName)
	s.workers = make([]*worker, cfg.Workers)
	for i := range s.workers {
		s.workers[i] = &worker{rng: rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64())), cmdStats: make([]cmdStat, len(s.statsOrder))}
	}
	s.done.Add(1)
	go s.sweep()
	return s, nil
}

// Close stops the expiry sweeper. Call it once the workers have stopped.
func (s *Server) Close() error {
	select {
	case <-s.stop:
	default:
		close(s.stop)
	}
	s.done.Wait()
	return nil
}

// infoStats are the counters INFO's Stats section shows.
type infoStats struct {
	connections, commands, hits, misses, oom uint64
	expired                                  int64
}

// totals returns the counters since the server started.
func (s *Server) totals() infoStats {
	st := infoStats{connections: s.connsOpened.Load(), expired: s.expired.Load()}
	for _, w := range s.workers {
		st.commands += w.stats.commands.Load()
		st.hits += w.stats.hits.Load()
		st.misses += w.stats.misses.Load()
		st.oom += w.stats.oom.Load()
	}
	return st
}

// infoStats returns the counters since the last CONFIG RESETSTAT.
func (s *Server) infoStats() infoStats {
	s.statsMu.Lock()
	defer s.statsMu.Unlock()
	st, base := s.totals(), s.statsBase
	return infoStats{connections: st.connections - base.connections, commands: st.commands - base.commands,
		hits: st.hits - base.hits, misses: st.misses - base.misses, oom: st.oom - base.oom, expired: st.expired - base.expired}
}

// resetStats makes INFO's Stats section count from now, and its
// Commandstats from 0.
func (s *Server) resetStats() {
	s.statsMu.Lock()
	s.statsBase = s.totals()
	s.statsMu.Unlock()
	for _, w := range s.workers {
		for i := range w.cmdStats {
			st := &w.cmdStats[i]
			st.calls.Store(0)
			st.failed.Store(0)
			st.rejected.Store(0)
		}
	}
}

// cmdStat is a command's counts on a worker: the times it ran, those
// it answered an error, and those it was refused before it ran (wrong
// number of arguments, maxmemory, RESP2's subscribed context).
type cmdStat struct {
	calls, failed, rejected atomic.Uint64
}

// overMaxMemory reports whether the dataset is past maxmemory.
func (s *Server) overMaxMemory() bool {
	mm := s.maxMemory.Load()
	return mm > 0 && s.db.used.Load() > mm
}

// clock returns the time in unix milliseconds.
func (s *Server) clock() int64 { return s.now().UnixMilli() }

// sweep deletes expired keys in the background, a slice of the shards
// every tick, as redis-server's active expiry does: keys that expire and
// are never read again do not hold memory for long.
func (s *Server) sweep() {
	defer s.done.Done()
	const perTick = numShards / 16
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	next := 0
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		s.expired.Add(int64(s.db.expireSome(next, perTick, &cmdClock{read: s.now})))
		next = (next + perTick) % numShards
	}
}

// Handle implements app.Handler: a reply that does not fit the
// request's buffer is cut (see HandleMulti).
func (s *Server) Handle(w int, typ app.Type, b *nic.Buffer) bool {
	return s.HandleMulti(w, typ, b, nil)
}

// HandleMulti implements app.MultiHandler: it runs the command in b
// (one request as Frame cut it) on worker w and writes its reply, the
// leading part through r in chunks of r.Room() bytes, the rest in b. A
// reply that cannot be sent whole is cut and the connection closed after
// it (ReplyClose).
func (s *Server) HandleMulti(w int, _ app.Type, b *nic.Buffer, r app.Reply) bool {
	if w < 0 || w >= len(s.workers) || b.Len <= 0 || b.Len > len(b.Data) {
		return false
	}
	wk := s.workers[w]
	room := len(b.Data)
	if r != nil {
		room = min(r.Room(), room)
	}
	wk.o.reset(r, room)
	p := b.Payload()
	n, ok := wk.req.parse(p)
	if !ok {
		return false
	}
	conn, _ := b.Session.(*Conn)
	wk.o.resp3 = conn != nil && conn.resp3.Load()
	c := &wk.c
	var flags nic.Flags
	wk.mu.Lock()
	defer wk.mu.Unlock()
	for {
		*c = ctx{s: s, w: wk, conn: conn, argv: wk.req.argv, clk: cmdClock{read: s.now}, o: &wk.o, resumed: b.Flags&nic.Resumed != 0}
		if conn != nil && conn.silenced() {
			wk.o.silence(true)
		}
		s.run(c)
		if c.parked {
			// A blocking command waits (blocking.go): nothing is
			// answered yet. It is never batched with others.
			return false
		}
		if wk.o.silent {
			wk.o.silence(false)
		}
		if conn != nil {
			conn.commandDone()
		}
		flags |= c.replyFlags
		p = p[n:]
		// A stream's request may be a batch of commands (Conn.batch); a
		// datagram is one command.
		if len(p) == 0 || b.Flags&nic.FromStream == 0 || wk.o.failed || flags&nic.ReplyClose != 0 {
			break
		}
		if n, ok = wk.req.parse(p); !ok {
			break
		}
	}
	if wk.o.failed {
		wk.stats.cut.Add(1)
		b.Len = 0
		b.Flags |= nic.ReplyClose
		return true
	}
	b.Len = copy(b.Data, wk.o.buf)
	b.Flags |= flags
	if b.Flags&nic.ReplyClose == 0 {
		// As redis-server, which writes a client's replies once it has
		// run every command of what it read: held until the framer
		// finds the input used up (Frame.Flush), then sent in one write.
		b.Flags |= nic.ReplyHold
	}
	return true
}

// ReplyOverloaded implements app.OverloadReplier: a command the
// dispatcher sheds unserved is answered with BusyReply, in its place among
// the connection's replies; nothing of it runs, and a transaction it was
// to join is discarded at EXEC. A batch of commands
// (Conn.batch) gets one BusyReply for each. It reads only the commands'
// heads, and allocates nothing unless a batch's replies do not fit its
// buffer (a buffer size under batchCommands BusyReplies).
func (s *Server) ReplyOverloaded(_ app.Type, b *nic.Buffer) bool {
	if cn, ok := b.Session.(*Conn); ok {
		// A command shed while a transaction is queued is not in the
		// queue: EXEC must not run the rest without it.
		cn.flagTransaction()
	}
	k := 1
	if b.Flags&nic.FromStream != 0 {
		k = max(countCommands(b.Payload()), 1)
	}
	need := k * len(BusyReply)
	if len(b.Data) < need {
		if k == 1 {
			return false
		}
		b.Data = make([]byte, need)
	}
	b.Len = 0
	for range k {
		b.Len += copy(b.Data[b.Len:], BusyReply)
	}
	return true
}

// countCommands counts the whole multibulk requests at the head of p, one
// after the other (an inline command counts one).
func countCommands(p []byte) int {
	if len(p) == 0 || p[0] != '*' {
		return 1
	}
	k := 0
	for len(p) > 0 && p[0] == '*' {
		argc, pos, ok := lengthAt(p, 1)
		if !ok || argc < 1 {
			break
		}
		for ; argc > 0; argc-- {
			var n int64
			if pos >= len(p) || p[pos] != '$' {
				return k
			}
			n, pos, ok = lengthAt(p, pos+1)
			if !ok || n < 0 || int64(pos)+n+2 > int64(len(p)) {
				return k
			}
			pos += int(n) + 2
		}
		k++
		p = p[pos:]
	}
	return k
}

// BusyReply answers a command the server shed without running it (its
// type over its budget or past its queue deadline): a Redis error, so
// clients raise it for that command alone and keep the connection, whose
// code says the server is busy and the command may be tried again.
const BusyReply = "-BUSY server overloaded: command not executed, try again later\r\n"
