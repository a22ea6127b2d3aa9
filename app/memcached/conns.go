package memcached

import (
	"cmp"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// ConnCounts are a stream dataplane's connection figures, as memcached's
// stats name them. The server's stream dataplane fills them (see
// Config.Connections); the application has no connections of its own.
type ConnCounts struct {
	// Current is the connections open (curr_connections).
	Current int64
	// Total is the connections accepted since the start, and the
	// listeners, as memcached counts its listening sockets
	// (total_connections).
	Total uint64
	// Rejected is the connections refused over the limit
	// (rejected_connections).
	Rejected uint64
	// Yields is how often a connection with more requests pending let
	// others go first after reqsPerEvent of them (conn_yields).
	Yields uint64
	// Max is the connection limit (max_connections, maxconns).
	Max int
}

// ConnInfo is one connection or listener, for stats conns.
type ConnInfo struct {
	// ID names the connection (memcached prints its file descriptor).
	ID uint64
	// Listener is a listening socket, not a connection.
	Listener bool
	// Addr is the peer's address (a listener's own), and Local the
	// listener's address of a connection, in memcached's form:
	// "tcp:127.0.0.1:11211".
	Addr, Local string
	// Busy: a request of the connection is being served (memcached's
	// conn_parse_cmd); otherwise it waits for input (conn_read).
	Busy bool
	// Idle is the time since its last request.
	Idle time.Duration
}

// connTable is the application's own view of the stream dataplane's
// connections: every framer (NewConn) until its connection closes
// (ConnClosed), what yielded, and what was refused.
type connTable struct {
	mu     sync.Mutex
	open   map[uint64]*framer
	total  atomic.Uint64
	yields atomic.Uint64
}

func (t *connTable) add(f *framer) {
	t.mu.Lock()
	if t.open == nil {
		t.open = make(map[uint64]*framer)
	}
	t.open[f.id] = f
	t.mu.Unlock()
	t.total.Add(1)
}

func (t *connTable) remove(f *framer) {
	t.mu.Lock()
	delete(t.open, f.id)
	t.mu.Unlock()
}

// connCounts returns the connection figures: Config.Connections', or the
// framers' count without it.
func (s *Server) connCounts() ConnCounts {
	if f := s.cfg.Connections; f != nil {
		return f()
	}
	t := &s.conns
	t.mu.Lock()
	open := len(t.open)
	t.mu.Unlock()
	return ConnCounts{Current: int64(open), Total: t.total.Load(), Rejected: s.guards.connsRefused.Load(),
		Yields: t.yields.Load(), Max: s.cfg.MaxConns}
}

// eachConn calls fn with every connection and listener:
// Config.ListConnections', or the framers' connections without it (no
// listeners: the framers do not see them), in the order they opened.
func (s *Server) eachConn(fn func(ConnInfo) bool) {
	if f := s.cfg.ListConnections; f != nil {
		f(fn)
		return
	}
	t := &s.conns
	t.mu.Lock()
	out := make([]ConnInfo, 0, len(t.open))
	now := time.Now()
	for _, f := range t.open {
		out = append(out, ConnInfo{ID: f.id, Addr: "tcp:" + f.peer.String(), Busy: f.busy.Load(),
			Idle: now.Sub(time.Unix(0, f.last.Load()))})
	}
	t.mu.Unlock()
	slices.SortFunc(out, func(a, b ConnInfo) int { return cmp.Compare(a.ID, b.ID) })
	for _, c := range out {
		if !fn(c) {
			return
		}
	}
}
