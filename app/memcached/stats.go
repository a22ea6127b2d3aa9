package memcached

import (
	"os"
	"strconv"
	"sync/atomic"
	"time"
)

// counters are one worker's command counters (memcached's thread stats).
// The worker adds to its own; "stats" sums every worker's, hence atomics.
type counters struct {
	commands      atomic.Uint64
	getCmds       atomic.Uint64
	getHits       atomic.Uint64
	getMisses     atomic.Uint64
	setCmds       atomic.Uint64
	touchCmds     atomic.Uint64
	touchHits     atomic.Uint64
	touchMisses   atomic.Uint64
	deleteHits    atomic.Uint64
	deleteMisses  atomic.Uint64
	incrHits      atomic.Uint64
	incrMisses    atomic.Uint64
	decrHits      atomic.Uint64
	decrMisses    atomic.Uint64
	casHits       atomic.Uint64
	casMisses     atomic.Uint64
	casBadval     atomic.Uint64
	flushCmds     atomic.Uint64
	storeErrors   atomic.Uint64
	lostDatagrams atomic.Uint64
	storeTooLarge atomic.Uint64
	storeNoMemory atomic.Uint64
	totalItems    atomic.Uint64
	getFlushed    atomic.Uint64
	getExpired    atomic.Uint64
}

// guards count what the server's bounds refused (Config.UDPReplyRatio,
// MaxConns, MaxLine, IdleTimeout, TCPMemory). Unlike the counters, stats
// reset leaves them: they are exported as monotonic metrics (Counters).
type guards struct {
	udpCut       atomic.Uint64 // UDP replies cut at their byte limit
	connsRefused atomic.Uint64 // TCP connections over MaxConns
	longLines    atomic.Uint64 // TCP connections closed for a long line
	memRefused   atomic.Uint64 // values refused for want of TCPMemory
	memHeld      atomic.Int64  // bytes of TCPMemory held
}

// Counter is one of the application's own figures, for the server's
// metrics and status.
type Counter struct {
	// Name is a Prometheus metric name without the server's prefix.
	Name string
	Help string
	// Gauge: the value goes up and down; otherwise it only grows.
	Gauge bool
	Value float64
}

// Counters returns what the server's bounds refused and the TCP
// connections and memory in use, in a fixed order.
func (s *Server) Counters() []Counter {
	g := &s.guards
	h := &s.st.health
	taking := 0.0
	if h.ok.Load() {
		taking = 1
	}
	return []Counter{
		{Name: "memcached_udp_replies_cut_total", Help: "UDP replies cut at their byte limit (udp reply ratio x the request's bytes) and ended with SERVER_ERROR.", Value: float64(g.udpCut.Load())},
		{Name: "memcached_tcp_connections_refused_total", Help: "TCP connections refused over the connection cap.", Value: float64(g.connsRefused.Load())},
		{Name: "memcached_tcp_long_lines_total", Help: "TCP connections closed for a command line over its bound (2048 bytes, or the max line for a get).", Value: float64(g.longLines.Load())},
		{Name: "memcached_tcp_memory_refusals_total", Help: "Values refused over TCP (SERVER_ERROR out of memory storing object) because the connections' read memory was in use.", Value: float64(g.memRefused.Load())},
		{Name: "memcached_tcp_read_memory_bytes", Help: "Bytes of values being read over TCP, out of the tcp memory bound.", Gauge: true, Value: float64(g.memHeld.Load())},
		{Name: "memcached_store_full_refusals_total", Help: "Storage commands refused (SERVER_ERROR out of memory storing object) because the store held its memory bound.", Value: float64(s.st.lim.refused.Load())},
		{Name: "memcached_store_writes_refused_total", Help: "Writes answered at once (SERVER_ERROR out of memory storing object) while the store took no writes: a full disk, a failed write of its files, a stall.", Value: float64(h.refused.Load())},
		{Name: "memcached_store_write_timeouts_total", Help: "Writes answered SERVER_ERROR after waiting past the write timeout for their turn or their sync.", Value: float64(h.timeout.Load())},
		{Name: "memcached_store_file_errors_total", Help: "Failed writes and syncs of the store's files (log, manifest, tables), retried or not.", Value: float64(h.errors.Load())},
		{Name: "memcached_store_taking_writes", Help: "1 while the store takes writes, 0 while it answers them SERVER_ERROR (a full disk, a failed write, a stall).", Gauge: true, Value: taking},
		{Name: "memcached_store_bytes", Help: "Bytes the store held when last measured (its tables and memtables), out of the store memory bound.", Gauge: true, Value: float64(s.st.lim.used.Load())},
	}
}

// total is a plain sum of counters.
type total struct {
	commands      uint64
	getCmds       uint64
	getHits       uint64
	getMisses     uint64
	setCmds       uint64
	touchCmds     uint64
	touchHits     uint64
	touchMisses   uint64
	deleteHits    uint64
	deleteMisses  uint64
	incrHits      uint64
	incrMisses    uint64
	decrHits      uint64
	decrMisses    uint64
	casHits       uint64
	casMisses     uint64
	casBadval     uint64
	flushCmds     uint64
	storeErrors   uint64
	lostDatagrams uint64
	storeTooLarge uint64
	storeNoMemory uint64
	totalItems    uint64
	getFlushed    uint64
	getExpired    uint64
}

func (t *total) add(c *counters) {
	t.commands += c.commands.Load()
	t.getCmds += c.getCmds.Load()
	t.getHits += c.getHits.Load()
	t.getMisses += c.getMisses.Load()
	t.setCmds += c.setCmds.Load()
	t.touchCmds += c.touchCmds.Load()
	t.touchHits += c.touchHits.Load()
	t.touchMisses += c.touchMisses.Load()
	t.deleteHits += c.deleteHits.Load()
	t.deleteMisses += c.deleteMisses.Load()
	t.incrHits += c.incrHits.Load()
	t.incrMisses += c.incrMisses.Load()
	t.decrHits += c.decrHits.Load()
	t.decrMisses += c.decrMisses.Load()
	t.casHits += c.casHits.Load()
	t.casMisses += c.casMisses.Load()
	t.casBadval += c.casBadval.Load()
	t.flushCmds += c.flushCmds.Load()
	t.storeErrors += c.storeErrors.Load()
	t.lostDatagrams += c.lostDatagrams.Load()
	t.storeTooLarge += c.storeTooLarge.Load()
	t.storeNoMemory += c.storeNoMemory.Load()
	t.totalItems += c.totalItems.Load()
	t.getFlushed += c.getFlushed.Load()
	t.getExpired += c.getExpired.Load()
}

func (c *counters) reset() {
	c.commands.Store(0)
	c.getCmds.Store(0)
	c.getHits.Store(0)
	c.getMisses.Store(0)
	c.setCmds.Store(0)
	c.touchCmds.Store(0)
	c.touchHits.Store(0)
	c.touchMisses.Store(0)
	c.deleteHits.Store(0)
	c.deleteMisses.Store(0)
	c.incrHits.Store(0)
	c.incrMisses.Store(0)
	c.decrHits.Store(0)
	c.decrMisses.Store(0)
	c.casHits.Store(0)
	c.casMisses.Store(0)
	c.casBadval.Store(0)
	c.flushCmds.Store(0)
	c.storeErrors.Store(0)
	c.lostDatagrams.Store(0)
	c.storeTooLarge.Store(0)
	c.storeNoMemory.Store(0)
	c.totalItems.Store(0)
	c.getFlushed.Store(0)
	c.getExpired.Store(0)
}

// statsCommand runs "stats" and its sub-commands (memcached's
// process_stat). What psp has is reported: no slab allocator (stats slabs
// and sizes are empty), one LRU per slab class without HOT, WARM and COLD
// segments (stats items).
func (s *session) statsCommand() {
	t := &s.tok
	switch {
	case t.n == 2:
		s.writeStats()
	case string(t.w[1]) == "reset":
		s.app.resetStats()
		s.outString(msgReset)
	case string(t.w[1]) == "detail":
		s.statsDetail(t.word(2))
	case string(t.w[1]) == "settings":
		s.out = s.out[:s.open]
		cc := s.app.connCounts()
		s.stat("maxbytes", s.st.limitBytes())
		s.stat("maxconns", uint64(cc.Max))
		s.statString("evictions", onOff(s.st.evict))
		s.stat("num_threads", uint64(len(s.app.sessions)))
		s.statString("detail_enabled", yesNo(s.app.prefixes.enabled.Load()))
		s.stat("reqs_per_event", reqsPerEvent)
		s.statString("cas_enabled", "yes")
		s.stat("item_size_max", uint64(s.app.cfg.MaxItemSize))
		s.out = append(s.out, endLine...)
	case string(t.w[1]) == "items":
		s.out = s.out[:s.open]
		s.st.ix.eachClass(s.now, func(c classStats) {
			s.classStat(c.class, "number", uint64(c.number))
			s.classStat(c.class, "age", uint64(max(c.age, 0)))
			s.classStat(c.class, "mem_requested", uint64(c.requested))
			s.classStat(c.class, "evicted", c.evicted)
			s.classStat(c.class, "evicted_nonzero", c.evictedNonzero)
			s.classStat(c.class, "evicted_time", uint64(max(c.evictedTime, 0)))
			s.classStat(c.class, "outofmemory", c.outOfMemory)
			s.classStat(c.class, "reclaimed", c.reclaimed)
			s.classStat(c.class, "expired_unfetched", c.expiredUnfetched)
			s.classStat(c.class, "evicted_unfetched", c.evictedUnfetched)
		})
		s.out = append(s.out, endLine...)
	case string(t.w[1]) == "conns":
		s.out = s.out[:s.open]
		s.app.eachConn(func(c ConnInfo) bool {
			s.connStat(c.ID, "addr", c.Addr)
			if !c.Listener && c.Local != "" {
				s.connStat(c.ID, "listen_addr", c.Local)
			}
			switch {
			case c.Listener:
				s.connStat(c.ID, "state", "conn_listening")
			case c.Busy:
				s.connStat(c.ID, "state", "conn_parse_cmd")
			default:
				s.connStat(c.ID, "state", "conn_read")
			}
			s.out = append(s.out, "STAT "...)
			s.out = strconv.AppendUint(s.out, c.ID, 10)
			s.out = append(s.out, ":secs_since_last_cmd "...)
			s.out = strconv.AppendInt(s.out, int64(c.Idle/time.Second), 10)
			s.out = append(s.out, crlf...)
			return true
		})
		s.out = append(s.out, endLine...)
	case string(t.w[1]) == "slabs", string(t.w[1]) == "sizes":
		s.outString([]byte("END"))
	default:
		s.outString(msgError)
	}
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func (s *session) stat(name string, v uint64) {
	s.out = append(s.out, "STAT "...)
	s.out = append(s.out, name...)
	s.out = append(s.out, ' ')
	s.out = strconv.AppendUint(s.out, v, 10)
	s.out = append(s.out, crlf...)
}

func (s *session) statString(name, v string) {
	s.out = append(s.out, "STAT "...)
	s.out = append(s.out, name...)
	s.out = append(s.out, ' ')
	s.out = append(s.out, v...)
	s.out = append(s.out, crlf...)
}

// classStat writes "STAT items:<class>:<name> <v>".
func (s *session) classStat(class int, name string, v uint64) {
	s.out = append(s.out, "STAT items:"...)
	s.out = strconv.AppendInt(s.out, int64(class), 10)
	s.out = append(s.out, ':')
	s.out = append(s.out, name...)
	s.out = append(s.out, ' ')
	s.out = strconv.AppendUint(s.out, v, 10)
	s.out = append(s.out, crlf...)
}

// connStat writes "STAT <id>:<name> <v>".
func (s *session) connStat(id uint64, name, v string) {
	s.out = append(s.out, "STAT "...)
	s.out = strconv.AppendUint(s.out, id, 10)
	s.out = append(s.out, ':')
	s.out = append(s.out, name...)
	s.out = append(s.out, ' ')
	s.out = append(s.out, v...)
	s.out = append(s.out, crlf...)
}

// writeStats writes the general statistics, in memcached's order, psp's
// own last, and END.
func (s *session) writeStats() {
	c := s.app.sumStats()
	cc := s.app.connCounts()
	it := s.st.ix.totals()
	user, system := processCPU()
	s.out = s.out[:s.open]
	s.stat("pid", uint64(os.Getpid()))
	s.stat("uptime", uint64(time.Since(s.app.started).Seconds()))
	s.stat("time", uint64(s.now))
	s.statString("version", Version)
	s.stat("pointer_size", 64)
	s.rusage("rusage_user", user)
	s.rusage("rusage_system", system)
	s.stat("max_connections", uint64(cc.Max))
	s.stat("curr_connections", uint64(max(cc.Current, 0)))
	s.stat("total_connections", cc.Total)
	s.stat("rejected_connections", cc.Rejected)
	s.stat("cmd_get", c.getCmds)
	s.stat("cmd_set", c.setCmds)
	s.stat("cmd_flush", c.flushCmds)
	s.stat("cmd_touch", c.touchCmds)
	s.stat("get_hits", c.getHits)
	s.stat("get_misses", c.getMisses)
	s.stat("get_expired", c.getExpired)
	s.stat("get_flushed", c.getFlushed)
	s.stat("delete_misses", c.deleteMisses)
	s.stat("delete_hits", c.deleteHits)
	s.stat("incr_misses", c.incrMisses)
	s.stat("incr_hits", c.incrHits)
	s.stat("decr_misses", c.decrMisses)
	s.stat("decr_hits", c.decrHits)
	s.stat("cas_misses", c.casMisses)
	s.stat("cas_hits", c.casHits)
	s.stat("cas_badval", c.casBadval)
	s.stat("touch_hits", c.touchHits)
	s.stat("touch_misses", c.touchMisses)
	s.stat("store_too_large", c.storeTooLarge)
	s.stat("store_no_memory", c.storeNoMemory)
	s.stat("limit_maxbytes", s.st.limitBytes())
	s.stat("threads", uint64(len(s.app.sessions)))
	s.stat("conn_yields", cc.Yields)
	s.stat("bytes", uint64(max(s.st.ix.requested(), 0)))
	s.stat("curr_items", uint64(max(s.st.ix.items.Load(), 0)))
	s.stat("total_items", c.totalItems)
	s.stat("expired_unfetched", it.expiredUnfetched)
	s.stat("evicted_unfetched", it.evictedUnfetched)
	s.stat("evictions", it.evicted)
	s.stat("reclaimed", it.reclaimed)
	s.stat("store_errors", c.storeErrors)
	h := &s.st.health
	s.stat("store_writes_refused", h.refused.Load())
	s.stat("store_write_timeouts", h.timeout.Load())
	s.stat("store_file_errors", h.errors.Load())
	s.stat("udp_datagrams_lost", c.lostDatagrams)
	s.stat("udp_replies_cut", s.app.guards.udpCut.Load())
	if s.st.lim.limit > 0 {
		// What Pebble held at its last reading (see storeLimit); an
		// unbounded store is not measured.
		s.stat("store_bytes", uint64(max(s.st.lim.used.Load(), 0)))
	}
	s.out = append(s.out, endLine...)
}

// rusage writes a CPU time as memcached does: seconds and microseconds.
func (s *session) rusage(name string, t time.Duration) {
	s.out = append(s.out, "STAT "...)
	s.out = append(s.out, name...)
	s.out = append(s.out, ' ')
	s.out = strconv.AppendInt(s.out, int64(t/time.Second), 10)
	s.out = append(s.out, '.')
	usec := int64(t % time.Second / time.Microsecond)
	for d := int64(100000); d > 0; d /= 10 { // microseconds, six digits
		s.out = append(s.out, byte('0'+usec/d%10))
	}
	s.out = append(s.out, crlf...)
}
