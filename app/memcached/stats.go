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
	return []Counter{
		{Name: "memcached_udp_replies_cut_total", Help: "UDP replies cut at their byte limit (udp reply ratio x the request's bytes) and ended with SERVER_ERROR.", Value: float64(g.udpCut.Load())},
		{Name: "memcached_tcp_connections_refused_total", Help: "TCP connections refused over the connection cap.", Value: float64(g.connsRefused.Load())},
		{Name: "memcached_tcp_long_lines_total", Help: "TCP connections closed for a command line over its bound (2048 bytes, or the max line for a get).", Value: float64(g.longLines.Load())},
		{Name: "memcached_tcp_memory_refusals_total", Help: "Values refused over TCP (SERVER_ERROR out of memory storing object) because the connections' read memory was in use.", Value: float64(g.memRefused.Load())},
		{Name: "memcached_tcp_read_memory_bytes", Help: "Bytes of values being read over TCP, out of the tcp memory bound.", Gauge: true, Value: float64(g.memHeld.Load())},
		{Name: "memcached_store_full_refusals_total", Help: "Storage commands refused (SERVER_ERROR out of memory storing object) because the store held its memory bound.", Value: float64(s.st.lim.refused.Load())},
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
}

// statsCommand runs "stats" and its sub-commands (memcached's
// process_stat). Only what psp has is reported: no slab classes, LRU or
// connection table.
func (s *session) statsCommand() {
	t := &s.tok
	switch {
	case t.n == 2:
		s.writeStats()
	case string(t.w[1]) == "reset":
		s.app.resetStats()
		s.outString(msgReset)
	case string(t.w[1]) == "detail":
		switch string(t.word(2)) {
		case "on", "off":
			s.outString(msgOK)
		case "dump":
			s.outString([]byte("END"))
		default:
			s.outString(msgStatsDetailUse)
		}
	case string(t.w[1]) == "settings":
		s.out = s.out[:s.open]
		s.stat("maxbytes", s.st.limitBytes())
		s.stat("item_size_max", uint64(s.app.cfg.MaxItemSize))
		s.stat("num_threads", uint64(len(s.app.sessions)))
		s.statString("evictions", "off")
		s.statString("cas_enabled", "yes")
		s.out = append(s.out, endLine...)
	case string(t.w[1]) == "items", string(t.w[1]) == "slabs", string(t.w[1]) == "sizes", string(t.w[1]) == "conns":
		s.outString([]byte("END"))
	default:
		s.outString(msgError)
	}
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

// writeStats writes the general statistics and END.
func (s *session) writeStats() {
	c := s.app.sumStats()
	s.out = s.out[:s.open]
	s.stat("pid", uint64(os.Getpid()))
	s.stat("uptime", uint64(time.Since(s.app.started).Seconds()))
	s.stat("time", uint64(s.now))
	s.statString("version", Version)
	s.stat("pointer_size", 64)
	s.stat("threads", uint64(len(s.app.sessions)))
	s.stat("cmd_get", c.getCmds)
	s.stat("cmd_set", c.setCmds)
	s.stat("cmd_flush", c.flushCmds)
	s.stat("cmd_touch", c.touchCmds)
	s.stat("get_hits", c.getHits)
	s.stat("get_misses", c.getMisses)
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
	s.stat("store_errors", c.storeErrors)
	s.stat("udp_datagrams_lost", c.lostDatagrams)
	s.stat("udp_replies_cut", s.app.guards.udpCut.Load())
	s.stat("limit_maxbytes", s.st.limitBytes())
	if s.st.lim.limit > 0 {
		// The store's size at its last reading (see storeLimit); an
		// unbounded store is not measured.
		s.stat("bytes", uint64(max(s.st.lim.used.Load(), 0)))
	}
	s.out = append(s.out, endLine...)
}
