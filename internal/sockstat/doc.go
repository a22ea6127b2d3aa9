// Package sockstat reads what the kernel counts of a socket: the datagrams
// it dropped at the socket's receive queue (a full receive buffer, the
// drops column of /proc/net/udp), through getsockopt SO_MEMINFO; and
// what it dropped before any socket (BacklogDrops).
//
// # Concurrency
//
// A Drops is safe for concurrent use; Read allocates nothing.
package sockstat
