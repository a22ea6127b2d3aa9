//go:build !linux

package udp

import (
	"fmt"
	"net/netip"

	"github.com/persephone-go/psp/nic"
)

// Dataplane is the UDP dataplane; on this platform Open always fails.
type Dataplane struct{ nic.Dataplane }

// Open is not supported on this platform (it needs recvmmsg and sendmmsg):
// it returns an error wrapping nic.ErrNotSupported.
func Open(cfg Config) (*Dataplane, error) {
	return nil, fmt.Errorf("udp: open %s: %w (the UDP dataplane needs Linux)", cfg.Addr, nic.ErrNotSupported)
}

// Addr returns the bound address.
func (d *Dataplane) Addr() netip.AddrPort { return netip.AddrPort{} }

// FreeBuffers returns how many pool buffers are free.
func (d *Dataplane) FreeBuffers() int { return 0 }

// Config returns the configuration.
func (d *Dataplane) Config() Config { return Config{} }

// PortDrops is the kernel's count of datagrams dropped at one port's
// receive socket.
type PortDrops struct {
	Port  uint16 `json:"port"`
	Drops uint64 `json:"drops"`
}

// PortDrops returns nothing on this platform.
func (d *Dataplane) PortDrops() []PortDrops { return nil }

// AllocReply returns nil: nothing is served on this platform.
func (d *Dataplane) AllocReply(*nic.Buffer) *nic.Buffer { return nil }

// RecvFds returns nil: nothing is received on this platform.
func (d *Dataplane) RecvFds() []int { return nil }

// Owns reports false: the dataplane has no buffers on this platform.
func (d *Dataplane) Owns(*nic.Buffer) bool { return false }
