//go:build !(linux && cgo && dpdk)

package dpdk

import (
	"fmt"
	"time"

	"github.com/persephone-go/psp/nic"
)

// Available reports whether this build has the DPDK dataplane.
const Available = false

// Dataplane is the DPDK dataplane. This build does not include it: Open
// always fails.
type Dataplane struct{}

var _ nic.Dataplane = (*Dataplane)(nil)

// Open fails with an error wrapping nic.ErrNotSupported: this binary was
// built without the dpdk build tag (or without cgo, or not for Linux).
func Open(cfg Config) (*Dataplane, error) {
	return nil, fmt.Errorf("dpdk: open: %w (this psp was built without DPDK: install libdpdk-dev and pkg-config, then build with CGO_ENABLED=1 go build -tags dpdk)", nic.ErrNotSupported)
}

// Recv fails: see Open.
func (*Dataplane) Recv([]*nic.Buffer, time.Duration) (int, error) { return 0, nic.ErrNotSupported }

// TxQueue returns nil: see Open.
func (*Dataplane) TxQueue(int) nic.TxQueue { return nil }

// RequestBuffers returns 0: see Open.
func (*Dataplane) RequestBuffers() int { return 0 }

// Release does nothing: see Open.
func (*Dataplane) Release(...*nic.Buffer) {}

// Now returns 0: see Open.
func (*Dataplane) Now() int64 { return 0 }

// Stats returns zero counters: see Open.
func (*Dataplane) Stats() nic.Stats { return nic.Stats{} }

// PortStats returns zero counters: see Open.
func (*Dataplane) PortStats() PortStats { return PortStats{} }

// Close does nothing: see Open.
func (*Dataplane) Close() error { return nil }
