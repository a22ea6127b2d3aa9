// Package dpdk is psp's DPDK dataplane: a nic.Dataplane over one DPDK 22.11
// port, through a small cgo binding of its own (Debian's libdpdk-dev, found
// with pkg-config).
//
// It is built only with the dpdk build tag on Linux with cgo:
//
//	go build -tags dpdk ./cmd/psp
//
// Without the tag, Open returns an error wrapping nic.ErrNotSupported that
// says how to build it, and nothing in the build needs cgo or DPDK.
//
// It carries UDP only: psp runs no user-space TCP stack, and requests over
// TCP go through the kernel's (package nic/tcp); the server refuses a
// tcp:// listen address with this dataplane.
//
// # Packet path
//
// The C half (psp_dpdk.c) does the per-packet work, one call per burst:
// Recv polls the RX queue(s), answers ARP requests for Config.IP from the
// net worker's own TX queue, accepts IPv4/UDP datagrams to Config.Port (and
// Config.ExtraPorts) after checking lengths and checksums, and drops and
// counts everything else by reason (PortStats.Drops). A worker's Send
// rewrites each request's mbuf into its reply in place (addresses swapped
// towards Buffer.Peer, source port Buffer.DstPort, TTL, lengths, IPv4 and
// UDP checksums recomputed) and transmits the burst on the worker's own TX
// queue.
//
// # Zero copy and the cgo boundary
//
// Buffers are mbufs: Buffer.Ref is the mbuf's address and Buffer.Data a
// slice over the UDP payload room inside it (bounded by the MTU), so a
// request travels from the NIC to the worker and back without a copy. Data
// is valid until the buffer is sent or released; Send and Release clear it.
// Each mbuf carries its pool index in its private area, which picks its
// nic.Buffer: there is no free list on the Go side. No Go pointer is passed
// into C: descriptors and mbuf addresses (as uintptr_t) live in C-allocated
// arrays that Go reads and writes through unsafe.Slice views.
//
// # Threads and concurrency
//
// The EAL initialises once per process, on a goroutine locked to its OS
// thread for good (the EAL's main lcore), with the first Open's Config.EAL;
// device hot-plug and port set-up and tear-down run on that thread too.
// Recv may be called only by the net worker; each TX queue only by its
// worker; Release, Stats, PortStats and Close by any goroutine. The mempool
// has no per-lcore cache: Go goroutines are not EAL lcores.
//
// The net worker gets one RX queue (on net_ring and net_tap, which pair RX
// queue i with TX queue i, one per TX queue, all polled). There is one TX
// queue per worker plus one for the net worker (ARP replies); when the
// device has fewer queues (net_tap: three for workers), workers share them
// under a lock.
//
// # Who closes what
//
// The caller closes the Dataplane after the dispatcher has stopped. Close
// stops and closes the port and removes a device created from
// Config.Device; pending Recv calls return nic.ErrClosed. The buffer pool
// is freed when the last buffer handed out comes back: buffers sent or
// released after Close are returned to the pool without being transmitted.
// The EAL itself stays up until the process exits.
//
// See README.md for running on a real NIC (hugepages, vfio-pci, EAL
// arguments).
package dpdk
