// Package tcp is psp's TCP dataplane: it accepts connections, reads them,
// and cuts each connection's byte stream into requests with the
// application's nic.Protocol, so that every request then travels the
// pipeline exactly as a datagram does (classified, queued by the policy,
// served by a worker).
//
// Replies leave a connection in the order of its requests: a reply that is
// ready before an earlier one of the same connection waits for it, and
// replies that are ready together leave in one write. Requests of different
// connections never wait for each other. A client that pipelines a long
// request before a short one on one connection gets the short one's reply
// after the long one's, as with any in-order protocol.
//
// # Concurrency
//
// Recv runs on one goroutine (the dispatcher's): it waits in epoll_wait,
// accepts, reads and frames. Each TX queue belongs to one worker, which
// writes its replies to the connection itself (a non-blocking sendmsg
// under the connection's lock); what the socket does not take is copied
// aside and sent when the connection is writable again. Send returns every
// buffer to the pool before it returns. Only the Recv goroutine closes
// connections; other goroutines ask it to.
//
// # Bounds
//
// Every bound is a Config field, counted in ConnStats when it acts: the
// number of connections, the requests of one connection not yet answered
// (past it the connection is not read), the longest request, the reply
// bytes held for a client that does not read them, the memory of all
// connections, a partial request held too long, an idle connection.
//
// The DPDK dataplane has no TCP: psp does not run a user-space TCP stack.
package tcp
