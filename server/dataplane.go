package server

import (
	"cmp"
	"fmt"
	"io"
	"net/netip"
	"slices"
	"strings"

	"github.com/persephone-go/psp/dispatcher"
	"github.com/persephone-go/psp/nic"
	"github.com/persephone-go/psp/nic/dpdk"
	"github.com/persephone-go/psp/nic/join"
	"github.com/persephone-go/psp/nic/memnic"
	"github.com/persephone-go/psp/nic/tcp"
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
// addresses requests go to. It has one TX queue per worker and one more for
// the dispatcher's own ("overloaded") replies. ports are further ports to
// receive on (tenants' own); proto is the application's stream protocol
// (tcp:// addresses); log receives the dataplane's operator messages.
func openDataplane(cfg Config, ports []uint16, proto nic.Protocol, log io.Writer) (nic.Dataplane, string, error) {
	eps := cfg.endpoints()
	switch cfg.Dataplane {
	case DataplaneMemory:
		ap := eps[0].Addr
		dp := memnic.New(memnic.Config{Workers: cfg.Workers + 1, Buffers: cfg.Buffers, ExtraBuffers: laneBuffers(cfg), BufSize: cfg.BufSize, Port: ap.Port()})
		return dp, ap.String(), nil
	case DataplaneDPDK:
		return openDPDK(cfg, ports)
	}
	var dps []nic.Dataplane
	var addrs []string
	for _, e := range eps {
		var dp nic.Dataplane
		var addr string
		var err error
		if e.Transport == TransportTCP {
			dp, addr, err = openTCP(cfg, e.Addr, ports, proto, log)
		} else {
			dp, addr, err = openUDP(cfg, e.Addr, ports)
		}
		if err != nil {
			for _, d := range dps {
				d.Close()
			}
			return nil, "", err
		}
		dps = append(dps, dp)
		addrs = append(addrs, addr)
	}
	if len(dps) == 1 {
		return dps[0], addrs[0], nil
	}
	dp, err := joinDataplanes(dps)
	if err != nil {
		for _, d := range dps {
			d.Close()
		}
		return nil, "", err
	}
	return dp, strings.Join(addrs, ","), nil
}

// openUDP opens the UDP-socket dataplane: a socket on the listen address,
// and one more per tenant port (fixed tenant sets route them by port too).
func openUDP(cfg Config, ap netip.AddrPort, ports []uint16) (nic.Dataplane, string, error) {
	if ports == nil {
		ports = tenantPorts(cfg)
	}
	// Under spin-then-park the dispatcher waits for requests in the
	// kernel (see dispatcher.Spec.Procs).
	dp, err := udp.Open(udp.Config{Addr: ap.String(), Ports: ports, Workers: cfg.Workers + 1, Buffers: cfg.Buffers, ExtraBuffers: laneBuffers(cfg), BufSize: cfg.BufSize, Batch: cfg.Burst,
		KernelWait: cfg.Idle == dispatcher.IdleSpinThenPark})
	if err != nil {
		return nil, "", fmt.Errorf("server: dataplane: %w", err)
	}
	return dp, dp.Addr().String(), nil
}

// openTCP opens the TCP dataplane on ap and the tenants' ports, framing
// with proto.
func openTCP(cfg Config, ap netip.AddrPort, ports []uint16, proto nic.Protocol, log io.Writer) (nic.Dataplane, string, error) {
	if proto == nil {
		return nil, "", fmt.Errorf("%w: app %q has no stream protocol: it cannot be served over TCP", ErrConfig, cfg.App.Name)
	}
	if ports == nil {
		ports = tenantPorts(cfg)
	}
	dp, err := tcp.Open(cfg.tcpConfig(ap, ports, proto, log))
	if err != nil {
		return nil, "", fmt.Errorf("server: dataplane: %w", err)
	}
	return dp, TransportTCP + "://" + dp.Addr().String(), nil
}

// tcpConfig is the TCP dataplane's configuration.
func (c Config) tcpConfig(ap netip.AddrPort, ports []uint16, proto nic.Protocol, log io.Writer) tcp.Config {
	t := c.TCP
	tc := tcp.Config{Addr: ap.String(), Ports: ports, Protocol: proto, Workers: c.Workers + 1,
		Buffers: c.Buffers, ExtraBuffers: laneBuffers(c), BufSize: max(c.BufSize, tcp.DefaultBufSize),
		MaxConns: t.MaxConns, MaxPipeline: t.MaxPipeline, MaxRequest: t.MaxRequest, MaxOutput: t.MaxOutput,
		Memory: int64(t.Memory), IdleTimeout: t.IdleTimeout, PartialTimeout: t.PartialTimeout, Log: log, Name: "psp serve: tcp",
		Chain: true} // the dispatcher receives a request's chained one when it completes
	if c.App.Name == AppMemcached {
		m := c.App.Memcached
		tc.MaxConns = cmp.Or(tc.MaxConns, m.MaxConns)
		tc.IdleTimeout = cmp.Or(tc.IdleTimeout, m.IdleTimeout)
		// a whole value, its longest line and their line ends
		least := cmp.Or(m.MaxItemSize, DefaultMemcachedMaxItemSize) + cmp.Or(m.MaxLine, DefaultMemcachedMaxLine) + 4
		tc.MaxRequest = max(cmp.Or(tc.MaxRequest, tcp.DefaultMaxRequest), least)
	}
	// The connections get what the file-descriptor budget leaves them
	// (see fileBudget): a flood of them never takes the server's own
	// files or the admin endpoint's share.
	if b := openFiles(c); b.limit > 0 {
		tc.MaxConns = max(min(cmp.Or(tc.MaxConns, tcp.DefaultMaxConns), b.streams), 1)
	}
	return tc
}

// tenantPorts returns the tenants' ports other than the listen port.
func tenantPorts(cfg Config) []uint16 {
	listen := cfg.listenPort()
	var extra []uint16
	for _, t := range cfg.Tenants {
		for _, p := range t.Ports {
			if p != listen && !slices.Contains(extra, p) {
				extra = append(extra, p)
			}
		}
	}
	return extra
}

// openDPDK opens the DPDK dataplane.
func openDPDK(cfg Config, ports []uint16) (nic.Dataplane, string, error) {
	ap := cfg.endpoints()[0].Addr // validated: UDP
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

// joinDataplanes serves a TCP and a UDP dataplane as one.
func joinDataplanes(dps []nic.Dataplane) (nic.Dataplane, error) {
	var w *tcp.Dataplane
	var m *udp.Dataplane
	for _, dp := range dps {
		switch dp := dp.(type) {
		case *tcp.Dataplane:
			w = dp
		case *udp.Dataplane:
			m = dp
		}
	}
	if w == nil || m == nil {
		return nil, fmt.Errorf("server: dataplane: cannot join %d dataplanes", len(dps))
	}
	dp, err := join.New(w, m)
	if err != nil {
		return nil, fmt.Errorf("server: dataplane: %w", err)
	}
	return dp, nil
}

// tcpDataplane returns the server's TCP dataplane, if it has one.
func tcpDataplane(dp nic.Dataplane) (*tcp.Dataplane, bool) { return member[*tcp.Dataplane](dp) }

// member returns dp, or the member of a joined dp, that is a T: what one
// kind of dataplane says (its connections, its sockets' drops) is found
// whether it serves alone or joined with another.
func member[T any](dp nic.Dataplane) (T, bool) {
	if t, ok := dp.(T); ok {
		return t, true
	}
	if j, ok := dp.(*join.Dataplane); ok {
		for _, m := range j.Members() {
			if t, ok := m.(T); ok {
				return t, true
			}
		}
	}
	var zero T
	return zero, false
}
