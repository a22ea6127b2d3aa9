package server

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/persephone-go/psp/dispatcher"
	"github.com/persephone-go/psp/nic"
	"github.com/persephone-go/psp/nic/dpdk"
	"github.com/persephone-go/psp/nic/memnic"
	"github.com/persephone-go/psp/nic/udp"
)

// laneBuffers is how many packets the tenants' classifier lanes may hold
// at once: a quarter of the buffers at most, 2048 with the defaults. The
// udp and memnic dataplanes get them on top of Buffers (ExtraBuffers);
// DPDK sizes its own pool, so there they come out of what it lends.
func laneBuffers(cfg Config) int {
	return max(min(dispatcher.DefaultLaneBuffers, cfg.Buffers/4), 1)
}

// requestBuffers returns what dp can lend to requests (0: no fixed pool).
func requestBuffers(dp nic.Dataplane) int {
	if bp, ok := dp.(nic.BufferPool); ok {
		return max(bp.RequestBuffers(), 0)
	}
	return 0
}

// openDataplane opens the configured dataplane and returns it with the
// address requests go to. It has one TX queue per worker and one more for
// the dispatcher's own ("overloaded") replies.
// ports are further UDP ports to receive on (tenants' own).
func openDataplane(cfg Config, ports []uint16) (nic.Dataplane, string, error) {
	switch cfg.Dataplane {
	case DataplaneMemory:
		ap := netip.MustParseAddrPort(cfg.Listen)
		dp := memnic.New(memnic.Config{Workers: cfg.Workers + 1, Buffers: cfg.Buffers, ExtraBuffers: laneBuffers(cfg), BufSize: cfg.BufSize, Port: ap.Port()})
		return dp, ap.String(), nil
	case DataplaneDPDK:
		return openDPDK(cfg, ports)
	default:
		return openUDP(cfg, ports)
	}
}

// openUDP opens the UDP-socket dataplane: a socket on the listen address,
// and one more per tenant port (fixed tenant sets route them by port too).
func openUDP(cfg Config, ports []uint16) (nic.Dataplane, string, error) {
	if ports == nil {
		ports = tenantPorts(cfg)
	}
	// Under spin-then-park the dispatcher waits for requests in the
	// kernel (see dispatcher.Spec.Procs).
	dp, err := udp.Open(udp.Config{Addr: cfg.Listen, Ports: ports, Workers: cfg.Workers + 1, Buffers: cfg.Buffers, ExtraBuffers: laneBuffers(cfg), BufSize: cfg.BufSize, Batch: cfg.Burst,
		KernelWait: cfg.Idle == dispatcher.IdleSpinThenPark})
	if err != nil {
		return nil, "", fmt.Errorf("server: dataplane: %w", err)
	}
	return dp, dp.Addr().String(), nil
}

// tenantPorts returns the tenants' ports other than the listen port.
func tenantPorts(cfg Config) []uint16 {
	ap := netip.MustParseAddrPort(cfg.Listen) // validated
	var extra []uint16
	for _, t := range cfg.Tenants {
		for _, p := range t.Ports {
			if p != ap.Port() && !slices.Contains(extra, p) {
				extra = append(extra, p)
			}
		}
	}
	return extra
}

// openDPDK opens the DPDK dataplane.
func openDPDK(cfg Config, ports []uint16) (nic.Dataplane, string, error) {
	ap := netip.MustParseAddrPort(cfg.Listen) // validated
	extra := ports
	if extra == nil {
		extra = tenantPorts(cfg)
	}
	dp, err := dpdk.Open(dpdk.Config{EAL: cfg.EAL, IP: ap.Addr(), Port: ap.Port(), ExtraPorts: extra,
		Workers: cfg.Workers + 1, BurstSize: cfg.Burst})
	if err != nil {
		return nil, "", fmt.Errorf("server: dataplane: %w", err)
	}
	return dp, ap.String(), nil
}
