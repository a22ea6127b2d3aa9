package tcp

import (
	"cmp"
	"fmt"
	"io"
	"net/netip"
	"slices"
	"time"

	"github.com/persephone-go/psp/nic"
)

// Defaults for zero Config fields.
const (
	DefaultBuffers        = 4096
	DefaultBufSize        = 4 << 10
	DefaultMaxConns       = 1024
	DefaultMaxPipeline    = 256
	DefaultMaxRequest     = 4 << 20
	DefaultMaxOutput      = 64 << 20
	DefaultMemory         = 512 << 20
	DefaultIdleTimeout    = 5 * time.Minute
	DefaultPartialTimeout = 30 * time.Second
	DefaultBacklog        = 1024
)

// Config configures a TCP dataplane. Zero fields take the defaults; a
// Protocol is required.
type Config struct {
	// Addr is the TCP address to listen on ("127.0.0.1:6789"; port 0
	// picks a free port, see Dataplane.Addr).
	Addr string
	// Ports are further TCP ports to listen on, on Addr's IP (tenants on
	// their own ports); Buffer.DstPort says which one a request came to.
	Ports []uint16
	// Protocol cuts each connection's bytes into requests (required).
	Protocol nic.Protocol
	// Workers is the number of TX queues (default 1).
	Workers int
	// Buffers is the request buffer pool size (default DefaultBuffers): the
	// most requests held at once, received and not yet answered, over all
	// connections.
	Buffers int
	// ExtraBuffers are added to the pool but not to RequestBuffers (the
	// dispatcher's classifier lanes).
	ExtraBuffers int
	// BufSize is each pooled buffer's room (default DefaultBufSize): a
	// request and its reply in place. A longer request gets a buffer of
	// its own size, counted against Memory.
	BufSize int
	// MaxConns is the most connections open at once (default
	// DefaultMaxConns, lowered to fit the process's file descriptor
	// limit); the next one is sent the Protocol's TooManyConns and closed.
	MaxConns int
	// MaxPipeline is the most requests of one connection received and not
	// yet answered (default DefaultMaxPipeline); past it the connection is
	// not read until its replies catch up. Other connections are not
	// affected.
	MaxPipeline int
	// Chain hands out a request that must wait for the one before it on
	// its connection (a request that is not ReadOnly, or any request
	// after one) chained to that one (nic.Buffer.Next) when the
	// connection's running requests are that chain, instead of holding it
	// back until the one before is answered: the caller starts it when
	// the one before completes, and a connection's pipelined writes take
	// one receive instead of one each. Chained requests count against
	// Recv's burst. The caller must honour Buffer.Next; off by default.
	Chain bool
	// MaxRequest is the longest request accepted (default
	// DefaultMaxRequest); the Framer refuses longer ones in its protocol.
	MaxRequest int
	// MaxOutput is the most reply bytes buffered for one connection that
	// does not read them (default DefaultMaxOutput); past it the
	// connection is closed and counted.
	MaxOutput int
	// Memory bounds the bytes held for all connections: input not yet
	// framed, requests longer than BufSize and replies beyond the pool
	// (default DefaultMemory). Past it no connection is read until memory
	// is given back.
	Memory int64
	// IdleTimeout closes a connection that sends no byte and takes no
	// reply for this long (default DefaultIdleTimeout; negative: never).
	IdleTimeout time.Duration
	// PartialTimeout closes a connection that holds an incomplete request
	// for this long (default DefaultPartialTimeout; negative: never).
	PartialTimeout time.Duration
	// Backlog is the listen queue length (default DefaultBacklog).
	Backlog int
	// Log, when set, receives one line per event an operator should know
	// of (a burst of accept errors starting and ending); nil: silent.
	// Name starts those lines (default "tcp").
	Log  io.Writer
	Name string
}

// Validate reports the first invalid field of c.
func (c Config) Validate() error {
	switch {
	case c.Protocol == nil:
		return fmt.Errorf("tcp: no protocol (the application gives none: it cannot be served over TCP)")
	case c.Workers < 0 || c.Buffers < 0 || c.ExtraBuffers < 0 || c.BufSize < 0:
		return fmt.Errorf("tcp: workers %d, buffers %d, extra buffers %d, buffer size %d: negative", c.Workers, c.Buffers, c.ExtraBuffers, c.BufSize)
	case c.BufSize != 0 && c.BufSize < 64:
		return fmt.Errorf("tcp: buffer size %d is under 64 bytes", c.BufSize)
	case c.MaxConns < 0 || c.MaxPipeline < 0 || c.MaxRequest < 0 || c.MaxOutput < 0 || c.Memory < 0 || c.Backlog < 0:
		return fmt.Errorf("tcp: a negative bound (max conns %d, pipeline %d, request %d, output %d, memory %d, backlog %d)",
			c.MaxConns, c.MaxPipeline, c.MaxRequest, c.MaxOutput, c.Memory, c.Backlog)
	case c.MaxPipeline > 1<<16:
		return fmt.Errorf("tcp: max pipeline %d is over 65536", c.MaxPipeline)
	case slices.Contains(c.Ports, 0):
		return fmt.Errorf("tcp: port 0 cannot be served (give port numbers)")
	}
	if c.Addr != "" {
		if _, err := netip.ParseAddrPort(c.Addr); err != nil {
			return fmt.Errorf("tcp: address %q: %w (want IP:PORT)", c.Addr, err)
		}
	}
	d := c.withDefaults()
	if int64(d.MaxRequest) > d.Memory {
		return fmt.Errorf("tcp: max request %d is over the memory bound %d", d.MaxRequest, d.Memory)
	}
	return nil
}

// withDefaults returns c with zero fields set to their defaults.
func (c Config) withDefaults() Config {
	c.Addr = cmp.Or(c.Addr, "127.0.0.1:6789")
	c.Workers = cmp.Or(c.Workers, 1)
	c.Buffers = cmp.Or(c.Buffers, DefaultBuffers)
	c.BufSize = cmp.Or(c.BufSize, DefaultBufSize)
	c.MaxConns = cmp.Or(c.MaxConns, DefaultMaxConns)
	c.MaxPipeline = cmp.Or(c.MaxPipeline, DefaultMaxPipeline)
	c.MaxRequest = cmp.Or(c.MaxRequest, DefaultMaxRequest)
	c.MaxOutput = cmp.Or(c.MaxOutput, DefaultMaxOutput)
	c.Memory = cmp.Or(c.Memory, DefaultMemory)
	c.IdleTimeout = cmp.Or(c.IdleTimeout, DefaultIdleTimeout)
	c.PartialTimeout = cmp.Or(c.PartialTimeout, DefaultPartialTimeout)
	c.Backlog = cmp.Or(c.Backlog, DefaultBacklog)
	return c
}
