//go:build !linux

package tcp

import (
	"fmt"
	"net/netip"

	"github.com/persephone-go/psp/nic"
)

// Dataplane is the TCP dataplane; on this platform Open always fails.
type Dataplane struct{ nic.Dataplane }

// Open is not supported on this platform (it needs epoll): it returns an
// error wrapping nic.ErrNotSupported.
func Open(cfg Config) (*Dataplane, error) {
	return nil, fmt.Errorf("tcp: open %s: %w (the TCP dataplane needs Linux)", cfg.Addr, nic.ErrNotSupported)
}

// Addr returns the listening address.
func (d *Dataplane) Addr() netip.AddrPort { return netip.AddrPort{} }

// Config returns the configuration.
func (d *Dataplane) Config() Config { return Config{} }

// MaxConns returns the connection limit.
func (d *Dataplane) MaxConns() int { return 0 }

// ConnStats returns the connection counters.
func (d *Dataplane) ConnStats() ConnStats { return ConnStats{} }

// Conns lists the open connections.
func (d *Dataplane) Conns() []ConnInfo { return nil }

// FreeBuffers returns how many pool buffers are free.
func (d *Dataplane) FreeBuffers() int { return 0 }

// AllocReply returns nil: nothing is served on this platform.
func (d *Dataplane) AllocReply(*nic.Buffer) *nic.Buffer { return nil }

// Watch fails: nothing is served on this platform.
func (d *Dataplane) Watch(int) error { return nic.ErrNotSupported }

// Owns reports false: the dataplane has no buffers on this platform.
func (d *Dataplane) Owns(*nic.Buffer) bool { return false }

// WakeRecv does nothing on this platform.
func (d *Dataplane) WakeRecv() {}
