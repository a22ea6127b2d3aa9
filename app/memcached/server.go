package memcached

import (
	"errors"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/vfs"

	"github.com/persephone-go/psp/app"
	"github.com/persephone-go/psp/app/emulate"
	"github.com/persephone-go/psp/nic"
)

// Defaults of Config.
const (
	DefaultMaxItemSize    = 1 << 20 // memcached's -I default
	DefaultCostPerCommand = time.Microsecond
	DefaultCostPerKey     = time.Microsecond
	minItemSize           = 1024
	maxItemSize           = 1 << 30

	// DefaultUDPReplyRatio and DefaultUDPReplyFloor bound the bytes one
	// UDP request may cause to be sent to 100 times its own bytes, or 16
	// KiB (12 datagrams) for a smaller request: see Config.UDPReplyRatio.
	DefaultUDPReplyRatio = 100
	DefaultUDPReplyFloor = 16 << 10
	// DefaultMaxConns is memcached's -c default.
	DefaultMaxConns = 1024
	// DefaultMaxLine bounds a TCP retrieval command line: the longest
	// datagram memcached (and psp) take over UDP.
	DefaultMaxLine = 64 << 10
	// DefaultIdleTimeout closes a TCP connection that sends no complete
	// command (or does not read its replies) for this long.
	DefaultIdleTimeout = 5 * time.Minute
	// DefaultTCPMemory bounds the values being read over all TCP
	// connections at once (memcached's -m default).
	DefaultTCPMemory = 64 << 20
	// DefaultStoreMemory bounds what the store holds.
	DefaultStoreMemory = 1 << 30
	// MinStoreMemory is the least Config.StoreMemory: its memtables (a
	// 16th of the bound each, at least 4 MiB) and what a compaction
	// writes before it deletes what it rewrote must fit well within it.
	MinStoreMemory = 128 << 20
	// DefaultReadCache is Config.ReadCache's default for an unbounded
	// store.
	DefaultReadCache = 64 << 20
	maxStoreMemory   = 1 << 50

	maxUDPReplyRatio = 1 << 20
	maxUDPReplyFloor = 64 << 20
	maxIdleTimeout   = 24 * time.Hour
	minIdleTimeout   = 100 * time.Millisecond
	minWriteTimeout  = 10 * time.Millisecond
	maxWriteTimeout  = time.Minute
)

// MinBufSize is the smallest packet buffer the application accepts: a
// reply datagram is up to UDPMaxPayload bytes and is built in the
// request's buffer.
const MinBufSize = UDPMaxPayload

// ErrConfig wraps every configuration error.
var ErrConfig = errors.New("memcached: invalid config")

// Config configures a Server. The zero value is an in-memory store serving
// one worker.
type Config struct {
	// Dir is the Pebble directory; empty: in memory (lost at exit). What is
	// stored in a directory is there after a restart.
	Dir string
	// Sync syncs every write to disk before answering it (with Dir), one
	// sync for the writes of all workers waiting at once: an answered
	// write survives a kill -9 and a power loss. Without it, the log is
	// synced every logSyncInterval while writes come, and a kill -9 or a
	// power loss loses the writes answered since (see Durability in the
	// package doc).
	Sync bool
	// MaxOpenFiles bounds the store's files open at once (with Dir: its
	// tables, kept open to be read, and its log); 0: Pebble's default,
	// 1,000. Fewer make a read of a table not open cost an open.
	MaxOpenFiles int
	// MaxItemSize is memcached's item size limit (-I): key, value and
	// memcached's per-item overhead. Default 1 MiB; at most half of a
	// bounded StoreMemory, as memcached refuses -I above half of -m.
	MaxItemSize int
	// Workers is the number of dispatcher workers that call the handler.
	// Default 1.
	Workers int
	// Emulate, when its Dilation is set, adds an emulated service time to
	// every request (see Emulation).
	Emulate Emulation

	// UDPReplyRatio and UDPReplyFloor bound the bytes (datagrams, headers
	// included) one UDP request may cause to be sent: UDPReplyRatio times
	// the request's own bytes (frame header included), or UDPReplyFloor
	// when that is more. A reply that would go past the bound is cut after
	// its last whole response object and ends with "SERVER_ERROR reply too
	// large for UDP"; the rest of the request is not run. Defaults
	// DefaultUDPReplyRatio and DefaultUDPReplyFloor; a negative ratio:
	// unbounded, as memcached (a reflection amplifier).
	UDPReplyRatio int
	UDPReplyFloor int
	// MaxConns is the most TCP connections served at once; more are
	// answered "ERROR Too many open connections" and closed, as by
	// memcached. Default DefaultMaxConns.
	MaxConns int
	// MaxLine is the longest retrieval command line (get, gets, gat, gats
	// of many keys) taken over TCP; a longer one is answered "CLIENT_ERROR
	// line too long" and the connection closed. Other lines are bounded
	// at 2048 bytes, as by memcached. Default DefaultMaxLine.
	MaxLine int
	// IdleTimeout closes a TCP connection that does not complete a command
	// (or take its replies) within it. Default DefaultIdleTimeout.
	IdleTimeout time.Duration
	// TCPMemory bounds the bytes of values being read by all TCP
	// connections at once; a storage command past it is answered
	// "SERVER_ERROR out of memory storing object" (its data skipped), as
	// by memcached when its memory is full. Default DefaultTCPMemory.
	TCPMemory int
	// StoreMemory bounds the bytes the store holds (Pebble's tables and
	// memtables, in memory, or on disk with Dir, and the item index kept
	// in memory). Its items and their index entries take at most half of
	// it: past that, a store first deletes the least recently used items
	// (expired and flushed ones count as reclaimed, live ones as evicted),
	// as memcached evicts within -m, or, with DisableEvictions, is refused
	// "SERVER_ERROR out of memory storing object" (memcached -M). The
	// other half holds what overwritten, deleted and evicted items leave
	// until Pebble compacts it (the store asks for a compaction when it
	// holds seven eighths of the bound; a store that holds all of it waits
	// for the compaction before it refuses: a second, or up to ten while
	// a compaction runs), and the
	// memtables (in memory a 16th of the bound each, from 4 to 64 MiB; on
	// disk Pebble's 4 MiB), one of which may take the store past the bound
	// once. Default DefaultStoreMemory; negative: unbounded.
	StoreMemory int64
	// ReadCache bounds the bytes of values the item index keeps beside the
	// store, written through on every store, so that a get of a cached
	// item skips the store's lookup (its memtable skiplist and tables).
	// It is memory on top of StoreMemory. Default a StoreMemory's eighth
	// (DefaultReadCache when the store is unbounded); negative: none.
	ReadCache int64
	// Connections and ListConnections, when set, report the stream
	// dataplane's connections for stats (curr_connections and the rest)
	// and stats conns (with its listeners); without them, the
	// connections the application's framers saw are reported (no
	// listeners, MaxConns as the limit).
	// They are called on a worker's goroutine and must be safe for
	// concurrent use.
	Connections     func() ConnCounts
	ListConnections func(yield func(ConnInfo) bool)

	// WriteTimeout bounds a write's wait for its turn and, with Sync, for
	// its sync: a write waiting longer is answered "SERVER_ERROR out of
	// memory storing object" (its change may still be applied, and
	// durable later), and the store takes no writes while one runs
	// longer. Default DefaultWriteTimeout.
	WriteTimeout time.Duration

	// fs is the file system beneath a store on disk (tests inject
	// faults); nil: the operating system's.
	fs vfs.FS

	// DisableEvictions refuses a store past the item budget ("SERVER_ERROR
	// out of memory storing object"), as memcached -M, instead of first
	// deleting the least recently used items.
	DisableEvictions bool
}

// Emulation adds an emulated cost to every request, so that experiments
// with many workers on a machine with few cores see service times in
// proportion to the work: after serving a request for real, the worker
// sleeps Dilation x (CostPerCommand x commands + CostPerKey x keys read or
// written). A multi-get of 100 keys then costs about 50 times a get.
type Emulation struct {
	// Dilation multiplies the nominal costs; 0 disables the emulation.
	Dilation float64
	// CostPerCommand and CostPerKey are the nominal costs (defaults 1µs).
	CostPerCommand time.Duration
	CostPerKey     time.Duration
	// SpinTail: see emulate.Config.
	SpinTail time.Duration
}

// Validate reports the first problem with c.
func (c Config) Validate() error {
	c = c.withDefaults()
	switch {
	case c.MaxItemSize < minItemSize || c.MaxItemSize > maxItemSize:
		return fmt.Errorf("%w: max item size %d, want %d..%d", ErrConfig, c.MaxItemSize, minItemSize, maxItemSize)
	case c.Workers < 1 || c.Workers > 1<<16:
		return fmt.Errorf("%w: workers %d, want 1..65536", ErrConfig, c.Workers)
	case c.Emulate.Dilation < 0 || c.Emulate.CostPerCommand < 0 || c.Emulate.CostPerKey < 0:
		return fmt.Errorf("%w: emulation %+v: want non-negative dilation and costs", ErrConfig, c.Emulate)
	case c.UDPReplyRatio > maxUDPReplyRatio:
		return fmt.Errorf("%w: udp reply ratio %d, want 1..%d (negative: unbounded)", ErrConfig, c.UDPReplyRatio, maxUDPReplyRatio)
	case c.UDPReplyFloor < UDPMaxPayload || c.UDPReplyFloor > maxUDPReplyFloor:
		return fmt.Errorf("%w: udp reply floor %d, want %d..%d", ErrConfig, c.UDPReplyFloor, UDPMaxPayload, maxUDPReplyFloor)
	case c.MaxConns < 1 || c.MaxConns > 1<<20:
		return fmt.Errorf("%w: max conns %d, want 1..%d", ErrConfig, c.MaxConns, 1<<20)
	case c.MaxLine < maxLineScan || c.MaxLine > maxItemSize:
		return fmt.Errorf("%w: max line %d, want %d..%d", ErrConfig, c.MaxLine, maxLineScan, maxItemSize)
	case c.IdleTimeout < minIdleTimeout || c.IdleTimeout > maxIdleTimeout:
		return fmt.Errorf("%w: idle timeout %v, want %v..%v", ErrConfig, c.IdleTimeout, minIdleTimeout, maxIdleTimeout)
	case c.TCPMemory < 0 || c.TCPMemory > 1<<40:
		return fmt.Errorf("%w: tcp memory %d, want 1..%d", ErrConfig, c.TCPMemory, int64(1)<<40)
	case c.ReadCache > maxStoreMemory:
		return fmt.Errorf("%w: read cache %d, want at most %d (negative: none)", ErrConfig, c.ReadCache, int64(maxStoreMemory))
	case c.StoreMemory > 0 && (c.StoreMemory < MinStoreMemory || c.StoreMemory > maxStoreMemory):
		return fmt.Errorf("%w: store memory %d, want %d..%d (negative: unbounded)", ErrConfig, c.StoreMemory, MinStoreMemory, int64(maxStoreMemory))
	case c.WriteTimeout < minWriteTimeout || c.WriteTimeout > maxWriteTimeout:
		return fmt.Errorf("%w: write timeout %v, want %v..%v", ErrConfig, c.WriteTimeout, minWriteTimeout, maxWriteTimeout)
	case c.Sync && c.Dir == "":
		return fmt.Errorf("%w: sync needs a data directory (a store in memory has nothing to sync)", ErrConfig)
	case c.StoreMemory > 0 && int64(c.MaxItemSize) > c.StoreMemory/2:
		// memcached: "Cannot set item size limit higher than 1/2 of
		// memory max."
		return fmt.Errorf("%w: max item size %d is more than half the store memory %d (as memcached, which refuses -I above half of -m)", ErrConfig, c.MaxItemSize, c.StoreMemory)
	}
	return nil
}

// HeapBound returns the most bytes of Go heap the store holds at once
// when its tables are in memory (Dir empty) and bounded: its bound, half
// as much again for what a compaction writes before it deletes the
// tables it rewrote and for what may pass the bound (see storeLimit), and
// half for the item index (within the items' half of the bound), and the
// read cache (ReadCache). ok is false for a store on disk, whose tables
// are not in the heap, and for an unbounded one. Pebble's memtables are
// allocated outside the Go heap; the values TCP connections are reading
// (TCPMemory) are not counted.
func (c Config) HeapBound() (n int64, ok bool) {
	c = c.withDefaults()
	if c.Dir != "" || c.StoreMemory < 0 {
		return 0, false
	}
	return 2*c.StoreMemory + max(c.ReadCache, 0), true
}

func (c Config) withDefaults() Config {
	if c.MaxItemSize == 0 {
		c.MaxItemSize = DefaultMaxItemSize
	}
	if c.Workers == 0 {
		c.Workers = 1
	}
	if c.UDPReplyRatio == 0 {
		c.UDPReplyRatio = DefaultUDPReplyRatio
	}
	if c.UDPReplyFloor == 0 {
		c.UDPReplyFloor = DefaultUDPReplyFloor
	}
	if c.MaxConns == 0 {
		c.MaxConns = DefaultMaxConns
	}
	if c.MaxLine == 0 {
		c.MaxLine = DefaultMaxLine
	}
	if c.IdleTimeout == 0 {
		c.IdleTimeout = DefaultIdleTimeout
	}
	if c.TCPMemory == 0 {
		c.TCPMemory = DefaultTCPMemory
	}
	if c.StoreMemory == 0 {
		c.StoreMemory = DefaultStoreMemory
	}
	if c.ReadCache == 0 {
		c.ReadCache = DefaultReadCache
		if c.StoreMemory > 0 {
			c.ReadCache = c.StoreMemory / 8
		}
	}
	if c.WriteTimeout == 0 {
		c.WriteTimeout = DefaultWriteTimeout
	}
	if c.fs == nil {
		c.fs = vfs.Default
	}
	if c.Emulate.Dilation > 0 {
		if c.Emulate.CostPerCommand == 0 {
			c.Emulate.CostPerCommand = DefaultCostPerCommand
		}
		if c.Emulate.CostPerKey == 0 {
			c.Emulate.CostPerKey = DefaultCostPerKey
		}
	}
	return c
}

// Server is the memcached application: an app.MultiHandler (the
// dispatcher gives it an app.Reply for replies of several datagrams) serving
// memcached's text protocol over UDP from a Pebble store, and a
// app.OverloadReplier (see ReplyOverloaded). Open it before the
// dispatcher starts and Close it after the dispatcher has stopped.
type Server struct {
	cfg      Config
	st       *store
	sessions []*session
	sleeper  *emulate.Sleeper
	started  time.Time
	clock    func() int64 // unix seconds; tests move it
	guards   guards
	prefixes prefixStats // stats detail
	conns    connTable   // the stream dataplane's connections, as the framers see them
}

// Open opens the store and returns the application.
func Open(cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	st, err := openStore(cfg)
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, st: st, started: time.Now(), clock: unixNow}
	if cfg.Emulate.Dilation > 0 {
		s.sleeper, err = emulate.NewSleeper(emulate.Config{Dilation: cfg.Emulate.Dilation, SpinTail: cfg.Emulate.SpinTail})
		if err != nil {
			st.close()
			return nil, fmt.Errorf("%w: %w", ErrConfig, err)
		}
	}
	for range cfg.Workers {
		s.sessions = append(s.sessions, newSession(s, new(counters)))
	}
	return s, nil
}

// Config returns the configuration with defaults applied.
func (s *Server) Config() Config { return s.cfg }

// Close closes the store. The dispatcher's workers must have stopped.
func (s *Server) Close() error {
	for _, ss := range s.sessions {
		ss.batch.Close()
	}
	if err := s.st.close(); err != nil {
		return fmt.Errorf("memcached: close: %w", err)
	}
	return nil
}

// Handle implements app.Handler for dispatchers that cannot send
// more than one datagram per request: a reply longer than one datagram
// loses every datagram but the last.
func (s *Server) Handle(w int, typ app.Type, b *nic.Buffer) bool {
	return s.HandleMulti(w, typ, b, nil)
}

// HandleMulti implements app.MultiHandler: it runs the commands of
// one UDP request and answers with memcached's datagrams, the last one in
// b. Requests of 8 bytes or less and requests announcing more than one
// datagram get no reply, as from memcached, and count as dropped; requests
// that ask for no reply (noreply) count as answered.
func (s *Server) HandleMulti(w int, _ app.Type, b *nic.Buffer, r app.Reply) bool {
	if w < 0 || w >= len(s.sessions) || len(b.Data) < MinBufSize {
		return false
	}
	if b.Flags&nic.FromStream != 0 {
		ss := s.sessions[w]
		var send streamSender
		if r != nil {
			send = r
		}
		f, _ := b.Session.(*framer)
		if f != nil {
			f.busy.Store(true)
		}
		ok := s.serveStream(ss, b, send)
		if f != nil {
			f.busy.Store(false)
		}
		s.emulate(ss)
		return ok
	}
	p := b.Payload()
	h, ok := ParseFrameHeader(p)
	if !ok || len(p) == UDPHeaderLen || h.Total != 1 {
		return false
	}
	ss := s.sessions[w]
	if r != nil {
		ss.dg.reset(h.RequestID, r)
	} else {
		ss.dg.reset(h.RequestID, nil)
	}
	ss.dg.limit = s.udpLimit(len(p))
	ss.serve(p[UDPHeaderLen:])
	if ss.dg.cut {
		ss.dg.cutLine()
		s.guards.udpCut.Add(1)
	}
	s.emulate(ss)
	if ss.dg.lost > 0 {
		ss.stats.lostDatagrams.Add(uint64(ss.dg.lost))
	}
	if ss.dg.n == 0 {
		if r != nil {
			r.NoReply() // served: noreply commands answer nothing
		}
		return false
	}
	b.Len = copy(b.Data, ss.dg.held[:ss.dg.n])
	return true
}

// emulate sleeps the emulated cost of what ss just served (Config.Emulate).
func (s *Server) emulate(ss *session) {
	if s.sleeper != nil {
		e := &s.cfg.Emulate
		cost := e.CostPerCommand*time.Duration(ss.cmds) + e.CostPerKey*time.Duration(ss.keys)
		s.sleeper.Wait(cost)
	}
}

func unixNow() int64 { return time.Now().Unix() }

// udpLimit is the most bytes a UDP request of n bytes (its frame header
// included) may cause to be sent; 0: unbounded.
func (s *Server) udpLimit(n int) int {
	if s.cfg.UDPReplyRatio < 0 {
		return 0
	}
	return max(s.cfg.UDPReplyFloor, n*s.cfg.UDPReplyRatio)
}

// fits reports whether an item of this key, flags and value length is
// within the item size limit, sized the way memcached sizes it.
func (s *Server) fits(keyLen int, flags uint32, valueLen int) bool {
	n := itemOverhead + keyLen + valueLen
	if flags != 0 {
		n += 4
	}
	return n <= s.cfg.MaxItemSize
}

// sumStats adds up every worker's counters.
func (s *Server) sumStats() total {
	var t total
	for _, ss := range s.sessions {
		t.add(ss.stats)
	}
	return t
}

func (s *Server) resetStats() {
	for _, ss := range s.sessions {
		ss.stats.reset()
	}
	s.st.ix.resetStats()
	s.prefixes.clear()
}
