package server

import (
	"fmt"

	"github.com/persephone-go/psp/internal/accept"
)

// File descriptors. Go raises the soft RLIMIT_NOFILE to one below the
// hard limit at start; the server divides what that allows: a reserve for
// its own files (the dataplane's sockets and each transmit queue's
// duplicates of them, the store's tables, logs, module files and compile
// children), a cap on the admin endpoint's connections (and on those of
// one client address among them), and the rest for the connections of a
// stream dataplane. A flood of connections to one listener then ends in
// refused connections on that listener, never in "too many open files"
// anywhere else.
type fileBudget struct {
	limit     uint64 // the soft RLIMIT_NOFILE (0: unknown, no caps)
	reserved  int    // for the server's own files
	admin     int    // admin HTTP connections open at once
	perSource int    // of them, from one client address (loopback: no bound)
	store     int    // of the reserve, the store's files (its MaxOpenFiles), when on disk
	streams   int    // stream dataplane connections open at once
}

// Reserve terms: a base for the process (standard streams, epoll and
// event descriptors, the audit log, module and token files, a compile
// child's pipes), per transmit queue and port (the UDP dataplane dup(2)s
// each port's socket for every queue; tenants add ports at run time, so
// at least reservePorts are counted), and, when a store lives on disk,
// the files Pebble may keep open (its MaxOpenFiles, set to match): a
// storeFilesShare of what is left, within minStoreFiles and Pebble's
// default, maxStoreFiles.
const (
	reserveBase     = 128
	reservePorts    = 4
	maxStoreFiles   = 1000
	minStoreFiles   = 64
	storeFilesShare = 4
	minAdminConns   = 8
	maxAdminConns   = 256
	adminConnsShare = 16 // the admin endpoint may hold 1/adminConnsShare of what is left, within the bounds above
	// One client address may hold 1/adminSourceShare of the admin
	// connections, at least minAdminPerSource: holding them all (idle,
	// reconnecting as each times out) would shut the operator out.
	adminSourceShare  = 4
	minAdminPerSource = 4
)

// planFiles divides limit for cfg.
func planFiles(cfg Config, limit uint64) fileBudget {
	b := fileBudget{limit: limit}
	if limit == 0 {
		return b
	}
	ports := 1 // the listen port
	for _, t := range cfg.Tenants {
		ports += len(t.Ports)
	}
	ports = max(ports, reservePorts)
	b.reserved = reserveBase + (cfg.Workers+2)*ports
	if cfg.App.Memcached.Dir != "" || cfg.App.KV.Dir != "" {
		b.store = min(max((int(min(limit, 1<<30))-b.reserved)/storeFilesShare, minStoreFiles), maxStoreFiles)
		b.reserved += b.store
	}
	free := int(min(limit, 1<<30)) - b.reserved
	b.admin = min(max(free/adminConnsShare, minAdminConns), maxAdminConns)
	b.perSource = max(b.admin/adminSourceShare, minAdminPerSource)
	b.streams = max(free-b.admin, 0)
	return b
}

// String is the budget as the startup line says it.
func (b fileBudget) String() string {
	if b.limit == 0 {
		return "file descriptors: no limit known, connections uncapped"
	}
	s := fmt.Sprintf("file descriptors %d (RLIMIT_NOFILE): %d kept for the server's own files", b.limit, b.reserved)
	if b.store > 0 {
		s += fmt.Sprintf(" (%d of them the store's)", b.store)
	}
	s += fmt.Sprintf(", admin connections at most %d (%d from one address)", b.admin, b.perSource)
	if b.streams < b.admin {
		s += fmt.Sprintf(" (warning: %d left for connections to the dataplane: raise the hard limit, ulimit -Hn)", b.streams)
	}
	return s
}

// openFiles reads RLIMIT_NOFILE and plans the server's descriptors.
func openFiles(cfg Config) fileBudget {
	soft, _, err := accept.FileLimit()
	if err != nil {
		return fileBudget{}
	}
	return planFiles(cfg, soft)
}
