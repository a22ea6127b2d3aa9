package memcached

import (
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
	// conn_parse_cmd); otherwise it waits for input (conn_waiting).
	Busy bool
	// Idle is the time since its last request.
	Idle time.Duration
}

// connCounts returns the connection figures: Config.Connections', or the
// TCP service's (ServeTCP) without it.
func (s *Server) connCounts() ConnCounts {
	if f := s.cfg.Connections; f != nil {
		return f()
	}
	g := &s.guards
	return ConnCounts{Current: g.conns.Load(), Total: g.accepted.Load(), Rejected: g.connsRefused.Load(),
		Yields: g.yields.Load(), Max: s.cfg.MaxConns}
}

// eachConn calls fn with every connection and listener:
// Config.ListConnections', or the TCP service's without it.
func (s *Server) eachConn(fn func(ConnInfo) bool) {
	if f := s.cfg.ListConnections; f != nil {
		f(fn)
		return
	}
	s.tcpConns(fn)
}
