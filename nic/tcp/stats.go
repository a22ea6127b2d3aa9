package tcp

import (
	"net/netip"
	"sync/atomic"
)

// ConnStats are a TCP dataplane's connection counters since it was
// opened.
type ConnStats struct {
	// Current is the number of connections open now; Max the limit.
	Current int64 `json:"current"`
	Max     int64 `json:"max"`
	// Accepted counts connections accepted and served; Rejected those
	// closed at once because MaxConns were open.
	Accepted uint64 `json:"accepted"`
	Rejected uint64 `json:"rejected"`
	// AcceptErrors counts failed accepts the dataplane retried after a
	// pause (out of file descriptors or kernel memory, a connection
	// aborted before it was accepted).
	AcceptErrors uint64 `json:"accept_errors"`
	// Closed counts closed connections by reason.
	Closed CloseReasons `json:"closed"`
	// PipelinePauses counts the times a connection was not read because
	// MaxPipeline of its requests were unanswered; MemoryPauses the
	// times reading stopped because Memory was used up.
	PipelinePauses uint64 `json:"pipeline_pauses"`
	MemoryPauses   uint64 `json:"memory_pauses"`
	// RepliesDropped counts replies of connections closed before they
	// could be sent (the requests were served; the client was gone).
	RepliesDropped uint64 `json:"replies_dropped"`
	// RequestsDropped counts requests of closed connections dropped before
	// they ran (queued behind an earlier request of theirs).
	RequestsDropped uint64 `json:"requests_dropped"`
	// Pushes counts the pushes (nic.Pusher) taken for sending;
	// PushesRefused those refused, their connection closed or closing,
	// or closed by the push for its output bound.
	Pushes        uint64 `json:"pushes"`
	PushesRefused uint64 `json:"pushes_refused"`
	// BytesIn and BytesOut are the bytes read from and written to
	// connections; MemoryUsed the bytes held now against Config.Memory.
	BytesIn    uint64 `json:"bytes_in"`
	BytesOut   uint64 `json:"bytes_out"`
	MemoryUsed int64  `json:"memory_used"`
}

// CloseReasons counts closed connections by why they were closed.
type CloseReasons struct {
	// Peer: the client closed (or shut down its side of) the connection.
	Peer uint64 `json:"peer"`
	// Reset: reading or writing failed (a reset, a broken pipe).
	Reset uint64 `json:"reset"`
	// Protocol: the framer closed it (a protocol error) or the application
	// answered with a closing reply (quit).
	Protocol uint64 `json:"protocol"`
	// RequestTooLong: a request longer than MaxRequest.
	RequestTooLong uint64 `json:"request_too_long"`
	// OutputLimit: more than MaxOutput reply bytes waited for a client
	// that did not read them.
	OutputLimit uint64 `json:"output_limit"`
	// Partial: an incomplete request held for PartialTimeout (slowloris).
	Partial uint64 `json:"partial_timeout"`
	// Idle: no byte in and no reply out for IdleTimeout.
	Idle uint64 `json:"idle"`
	// Shutdown: open when the dataplane closed.
	Shutdown uint64 `json:"shutdown"`
}

// Each returns the reasons and their counts, in a fixed order, for
// metrics.
func (r CloseReasons) Each(yield func(reason string, n uint64)) {
	yield("peer", r.Peer)
	yield("reset", r.Reset)
	yield("protocol", r.Protocol)
	yield("request_too_long", r.RequestTooLong)
	yield("output_limit", r.OutputLimit)
	yield("partial_timeout", r.Partial)
	yield("idle", r.Idle)
	yield("shutdown", r.Shutdown)
}

// closeReason indexes counters.closed.
type closeReason uint8

const (
	closePeer closeReason = iota
	closeReset
	closeProtocol
	closeTooLong
	closeOutput
	closePartial
	closeIdle
	closeShutdown
	numCloseReasons
)

// counters are the live counters behind ConnStats.
type counters struct {
	current, accepted, rejected, acceptErrors atomic.Int64
	closed                                    [numCloseReasons]atomic.Uint64
	pipelinePauses, memoryPauses              atomic.Uint64
	repliesDropped, bytesIn, bytesOut         atomic.Uint64
	requestsDropped                           atomic.Uint64
	rxRequests, txReplies, txErrors           atomic.Uint64
	rxNoBuffer                                atomic.Uint64
	pushes, pushesRefused                     atomic.Uint64
}

func (c *counters) snapshot(max int, mem int64) ConnStats {
	cl := &c.closed
	return ConnStats{
		Current: c.current.Load(), Max: int64(max),
		Accepted: uint64(c.accepted.Load()), Rejected: uint64(c.rejected.Load()), AcceptErrors: uint64(c.acceptErrors.Load()),
		Closed: CloseReasons{Peer: cl[closePeer].Load(), Reset: cl[closeReset].Load(), Protocol: cl[closeProtocol].Load(),
			RequestTooLong: cl[closeTooLong].Load(), OutputLimit: cl[closeOutput].Load(), Partial: cl[closePartial].Load(),
			Idle: cl[closeIdle].Load(), Shutdown: cl[closeShutdown].Load()},
		PipelinePauses: c.pipelinePauses.Load(), MemoryPauses: c.memoryPauses.Load(),
		RepliesDropped: c.repliesDropped.Load(), RequestsDropped: c.requestsDropped.Load(), BytesIn: c.bytesIn.Load(), BytesOut: c.bytesOut.Load(), MemoryUsed: mem,
		Pushes: c.pushes.Load(), PushesRefused: c.pushesRefused.Load(),
	}
}

// ConnInfo describes one open connection (memcached's `stats conns`).
type ConnInfo struct {
	ID    uint64
	Peer  netip.AddrPort
	Local netip.AddrPort
	// Since and LastActive are on the dataplane's clock (Dataplane.Now).
	Since, LastActive int64
	// Outstanding is the number of its requests not yet answered.
	Outstanding int
}
