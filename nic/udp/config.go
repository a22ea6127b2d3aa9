package udp

import (
	"cmp"
	"fmt"
	"slices"
)

// Defaults for zero Config fields.
const (
	DefaultBuffers    = 4096
	DefaultBufSize    = 2048
	DefaultBatch      = 32
	DefaultReadBuffer = 4 << 20
)

// DefaultAddr is the listen address of a zero Config: the prototype's port
// (wire.DefaultPort) on every interface.
const DefaultAddr = ":6789"

// Config configures a UDP dataplane. The zero value listens on DefaultAddr
// with one worker.
type Config struct {
	// Addr is the UDP address to listen on ("127.0.0.1:6789"; ":0" picks a
	// free port, see Dataplane.Addr). Default DefaultAddr.
	Addr string
	// Ports are further UDP ports to receive on, on Addr's IP, each with a
	// socket of its own (tenants on their own ports); Buffer.DstPort tells
	// them apart and replies leave from the port their request came to.
	// Dataplane.AddPort and RemovePort change them while running.
	Ports []uint16
	// Workers is the number of TX queues (default 1).
	Workers int
	// Buffers is the packet buffer pool size (default DefaultBuffers).
	Buffers int
	// ExtraBuffers are added to the pool but not to RequestBuffers: buffers
	// the caller holds beside those it counts against RequestBuffers (the
	// dispatcher's classifier lanes). Default 0.
	ExtraBuffers int
	// BufSize is each buffer's payload room in bytes (default
	// DefaultBufSize); longer datagrams are truncated and counted.
	BufSize int
	// Batch is the most datagrams one recvmmsg or sendmmsg call moves
	// (default DefaultBatch).
	Batch int
	// ReadBuffer is the receive socket's SO_RCVBUF in bytes (default
	// DefaultReadBuffer; the kernel caps it at net.core.rmem_max).
	ReadBuffer int
	// KernelWait makes a waiting Recv block its calling thread in ppoll(2)
	// instead of parking its goroutine in Go's network poller. A caller
	// locked to its thread (the dispatcher) is then woken by the kernel
	// directly when a datagram arrives: one thread wake-up instead of two
	// (the poller's thread, then the locked one), and no timer. The thread
	// holds its Go processor while it waits, so the process needs a spare
	// one (GOMAXPROCS) for everything else; Close waits for a pending Recv
	// to time out.
	KernelWait bool
}

// Validate reports the first invalid field of c.
func (c Config) Validate() error {
	switch {
	case c.Workers < 0:
		return fmt.Errorf("udp: workers %d is negative", c.Workers)
	case c.Buffers < 0 || c.ExtraBuffers < 0:
		return fmt.Errorf("udp: buffers %d, extra buffers %d: negative", c.Buffers, c.ExtraBuffers)
	case c.BufSize < 0 || c.BufSize > 65535:
		return fmt.Errorf("udp: buffer size %d is outside 1..65535", c.BufSize)
	case c.Batch < 0 || c.Batch > 1024:
		return fmt.Errorf("udp: batch %d is outside 1..1024", c.Batch)
	case c.ReadBuffer < 0:
		return fmt.Errorf("udp: read buffer %d is negative", c.ReadBuffer)
	case slices.Contains(c.Ports, 0):
		return fmt.Errorf("udp: port 0 cannot be served (give port numbers)")
	}
	if d := c.withDefaults(); d.Buffers < d.Batch {
		return fmt.Errorf("udp: %d buffers cannot fill a batch of %d (use more buffers or a smaller batch)", d.Buffers, d.Batch)
	}
	return nil
}

// withDefaults returns c with zero fields set to their defaults.
func (c Config) withDefaults() Config {
	c.Addr = cmp.Or(c.Addr, DefaultAddr)
	c.Workers = cmp.Or(c.Workers, 1)
	c.Buffers = cmp.Or(c.Buffers, DefaultBuffers)
	c.BufSize = cmp.Or(c.BufSize, DefaultBufSize)
	c.Batch = cmp.Or(c.Batch, DefaultBatch)
	c.ReadBuffer = cmp.Or(c.ReadBuffer, DefaultReadBuffer)
	return c
}
