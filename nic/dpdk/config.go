package dpdk

import (
	"cmp"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/persephone-go/psp/wire"
)

// DefaultEAL are the EAL arguments used when Config.EAL is nil: two lcores,
// no hugepages (512 MiB of ordinary memory), no PCI scan, no shared runtime
// directory (several DPDK processes may run side by side) and no telemetry
// socket. They suit virtual devices (Config.Device); a real NIC wants
// hugepages and its PCI address (see the package README).
var DefaultEAL = []string{"-l", "0-1", "--no-huge", "-m", "512", "--no-pci", "--no-shconf", "--no-telemetry", "--log-level=notice"}

// Defaults applied to zero Config fields.
const (
	DefaultWorkers       = 1
	DefaultBurstSize     = 32
	DefaultRxDescriptors = 1024
	DefaultTxDescriptors = 1024
	// MaxBurstSize bounds Config.BurstSize.
	MaxBurstSize = 512
	// MaxWorkers bounds Config.Workers (one TX queue each, plus the net
	// worker's).
	MaxWorkers = 1023
)

// Config says which DPDK port to drive and how. The zero value of every
// field but IP is a working default.
type Config struct {
	// EAL are the arguments for rte_eal_init, without the program name.
	// Nil means DefaultEAL. The EAL initialises once per process: the first
	// Open's arguments stay in force, and a later Open must pass nil or the
	// same arguments.
	EAL []string
	// Device, when set, is a virtual device created for this dataplane and
	// removed by Close, in EAL --vdev syntax: "net_tap0,iface=psp0",
	// "net_ring0", "net_null0". Its port is used and PortID is ignored.
	Device string
	// PortID is the DPDK port to use when Device is empty: a NIC bound to
	// vfio-pci, or a --vdev given in EAL. Default 0.
	PortID uint16
	// IP is the IPv4 address the dataplane owns: it answers ARP for it and
	// accepts UDP datagrams sent to it. Required.
	IP netip.Addr
	// Port is the UDP port requests arrive on (default wire.DefaultPort,
	// 6789).
	Port uint16
	// ExtraPorts are further UDP ports to accept (tenants on their own
	// ports); Buffer.DstPort tells them apart.
	ExtraPorts []uint16
	// Workers is the number of application workers, each with its own TX
	// queue (default 1).
	Workers int
	// PoolSize is the number of packet buffers (mbufs). Zero sizes the pool
	// from the descriptor rings: at least 8191.
	PoolSize int
	// BurstSize is the most packets Recv returns and Send transmits per
	// call into C (default 32, at most MaxBurstSize).
	BurstSize int
	// RxDescriptors and TxDescriptors size each device queue (default 1024;
	// the driver may adjust them).
	RxDescriptors, TxDescriptors int
}

// Errors returned by Open.
var (
	// ErrConfig is wrapped by every configuration error.
	ErrConfig = errors.New("dpdk: invalid config")
	// ErrEAL is wrapped when the EAL cannot be (or was not) initialised.
	ErrEAL = errors.New("dpdk: eal")
)

// withDefaults returns c with zero fields replaced by their defaults.
func (c Config) withDefaults() Config {
	if c.EAL == nil {
		c.EAL = slices.Clone(DefaultEAL)
	}
	c.Port = cmp.Or(c.Port, wire.DefaultPort)
	c.Workers = cmp.Or(c.Workers, DefaultWorkers)
	c.BurstSize = cmp.Or(c.BurstSize, DefaultBurstSize)
	c.RxDescriptors = cmp.Or(c.RxDescriptors, DefaultRxDescriptors)
	c.TxDescriptors = cmp.Or(c.TxDescriptors, DefaultTxDescriptors)
	return c
}

func (c Config) validate() error {
	switch {
	case !c.IP.IsValid():
		return fmt.Errorf("%w: IP is required (the IPv4 address the dataplane answers for)", ErrConfig)
	case !c.IP.Unmap().Is4():
		return fmt.Errorf("%w: IP %s is not IPv4", ErrConfig, c.IP)
	case c.IP.Unmap().IsUnspecified() || c.IP.Unmap().IsMulticast():
		return fmt.Errorf("%w: IP %s cannot be owned by a host", ErrConfig, c.IP)
	case c.Workers < 1 || c.Workers > MaxWorkers:
		return fmt.Errorf("%w: workers %d out of range 1..%d", ErrConfig, c.Workers, MaxWorkers)
	case c.BurstSize < 1 || c.BurstSize > MaxBurstSize:
		return fmt.Errorf("%w: burst size %d out of range 1..%d", ErrConfig, c.BurstSize, MaxBurstSize)
	case c.PoolSize < 0 || c.PoolSize > 1<<24:
		return fmt.Errorf("%w: pool size %d out of range 0..%d", ErrConfig, c.PoolSize, 1<<24)
	case c.RxDescriptors < 1 || c.RxDescriptors > 1<<15 || c.TxDescriptors < 1 || c.TxDescriptors > 1<<15:
		return fmt.Errorf("%w: descriptors rx %d tx %d out of range 1..%d", ErrConfig, c.RxDescriptors, c.TxDescriptors, 1<<15)
	case strings.ContainsRune(c.Device, 0):
		return fmt.Errorf("%w: device %q contains a NUL byte", ErrConfig, c.Device)
	}
	if slices.Contains(c.ExtraPorts, 0) {
		return fmt.Errorf("%w: UDP port 0 cannot be served", ErrConfig)
	}
	for _, a := range c.EAL {
		if strings.ContainsRune(a, 0) {
			return fmt.Errorf("%w: EAL argument %q contains a NUL byte", ErrConfig, a)
		}
	}
	return nil
}

// DropReason says why the receive path dropped a packet.
type DropReason int

// Drop reasons, in the order of DropStats.
const (
	DropRunt        DropReason = iota // shorter than the headers it announces
	DropUnsupported                   // multi-segment or foreign buffer
	DropOtherMAC                      // unicast frame for another MAC address
	DropNotIPv4                       // neither IPv4 nor ARP
	DropARPIgnored                    // ARP other than a request for our address
	DropBadIPv4                       // bad IPv4 version, lengths or checksum
	DropFragment                      // IPv4 fragment
	DropOtherIP                       // IPv4 for another address
	DropNotUDP                        // IPv4 but not UDP
	DropBadUDP                        // bad UDP length or checksum
	DropOtherPort                     // UDP to a port not served
	NumDropReasons
)

var dropReasonNames = [NumDropReasons]string{
	"runt", "unsupported", "other-mac", "not-ipv4", "arp-ignored", "bad-ipv4",
	"fragment", "other-ip", "not-udp", "bad-udp", "other-port",
}

// String returns the reason's short name, as used in metrics.
func (r DropReason) String() string {
	if r < 0 || r >= NumDropReasons {
		return fmt.Sprintf("drop-reason-%d", int(r))
	}
	return dropReasonNames[r]
}

// PortStats are the DPDK dataplane's own counters, beyond nic.Stats.
type PortStats struct {
	// Polled is the number of packets taken from the device.
	Polled uint64
	// Delivered is the number of UDP requests handed to Recv's caller.
	Delivered uint64
	// Drops counts dropped packets by reason.
	Drops [NumDropReasons]uint64
	// DeviceDrops counts packets the device dropped before the dataplane
	// saw them (RX ring full, no buffer, receive errors).
	DeviceDrops uint64
	// ARPReplies is the number of ARP replies transmitted; ARPErrors the
	// replies the device refused.
	ARPReplies, ARPErrors uint64
	// PoolInUse is the number of buffers out of the pool now (held by the
	// device, the net worker, workers or queues).
	PoolInUse uint64
	// PoolSize is the pool's capacity.
	PoolSize uint64
	// NoBuffer counts the device's failed buffer allocations (rx_nombuf):
	// the pool was empty when a packet arrived (they are in DeviceDrops
	// too).
	NoBuffer uint64
}

// Dropped is the sum of Drops and DeviceDrops.
func (s PortStats) Dropped() uint64 {
	n := s.DeviceDrops
	for _, d := range s.Drops {
		n += d
	}
	return n
}
