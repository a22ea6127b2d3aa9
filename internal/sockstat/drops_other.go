//go:build !linux

package sockstat

import "syscall"

// Drops reads one socket's kernel drop counter; this platform has none.
type Drops struct{}

// Read reports that the platform does not count a socket's drops.
func (d *Drops) Read(raw syscall.RawConn) (n uint64, ok bool) { return 0, false }

// BacklogDrops reports that the platform does not count the drops before
// any socket.
func BacklogDrops() (n uint64, ok bool) { return 0, false }
