// Package udp is psp's default dataplane: batched UDP sockets, no root
// needed.
//
// The net worker receives with recvmmsg on one socket bound to
// Config.Addr, into buffers from a fixed pool; each worker transmits with
// sendmmsg on its own file descriptor, and every buffer goes back to the
// pool after transmission. Nothing is allocated per packet.
//
// # Transmit descriptors
//
// Replies must come from the server's address, so every worker sends through
// the receive socket itself, each through its own dup(2) of its descriptor:
// one socket, one address, no receive path anywhere else, and each worker has
// its own Go poller lock (a single shared descriptor would serialise all
// workers' writes on it). The alternative the design started from, one
// socket per worker bound to the same port with SO_REUSEPORT, loses
// requests: the kernel spreads incoming datagrams over every socket in a
// reuseport group, and shutdown(SHUT_RD) on an unconnected UDP socket fails
// with ENOTCONN and does not take it out of the group, so transmit-only
// sockets receive requests nobody reads. TestNoRequestLostWithManyWorkers
// checks the chosen design.
//
// # Several ports
//
// Tenants may have UDP ports of their own (Config.Ports, AddPort,
// RemovePort). A UDP socket binds one port, so each port has its own
// socket on Addr's IP: with more than one, Recv asks epoll(7) which sockets
// are readable (one call, waiting at most its wait for the first packet)
// and reads each with recvmmsg into the next free slots, starting with a
// different socket at every call so that no port starves another;
// Buffer.DstPort says which port a packet came to. Every transmit queue
// holds a descriptor of each port's socket and sends a reply from the port
// its request came to: clients on connected sockets accept no other. With
// one port nothing of this runs. Raw or packet sockets would see every
// port on one descriptor but need privileges psp does not want to require.
//
// # Why not x/net's ReadBatch
//
// golang.org/x/net/ipv4's ReadBatch returns each sender as a freshly
// allocated *net.UDPAddr (two allocations per packet), so this package calls
// recvmmsg and sendmmsg itself through the sockets' syscall.RawConn, with
// preallocated message headers and netip.AddrPort peers. The Go poller still
// does the waiting: a bounded Recv is a read deadline, and Close wakes it.
// BenchmarkReadBatchXNet keeps the comparison.
//
// # Receive timestamps and waiting in the kernel
//
// The socket has SO_TIMESTAMPNS: each buffer's RxTime is when the kernel
// received the datagram (converted to the dataplane's clock), so a request's
// time waiting for the net worker to read it is measured
// (dispatcher.StageReceive). With Config.KernelWait a waiting Recv blocks
// its thread in ppoll(2) on the socket and an eventfd instead of the Go
// poller: the kernel then wakes the dispatcher's thread directly when a
// datagram arrives, and WakeRecv (a worker that completes a request while
// requests wait) ends the wait from any goroutine.
//
// # Concurrency and closing
//
// Recv is for the net worker goroutine only; TxQueue(w).Send for worker w's
// goroutine only; Release, Stats, FreeBuffers and Close are safe from any
// goroutine. Close closes every descriptor: pending and later Recv calls
// return nic.ErrClosed, and Send returns its buffers to the pool and reports
// nic.ErrClosed, so stop receiving and drain the workers before closing.
// IPv6 peers' zones (link-local scope ids) are not kept.
package udp
