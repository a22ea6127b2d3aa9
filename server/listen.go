package server

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/persephone-go/psp/nic/tcp"
)

// Defaults of the TCP bounds (Config.TCP).
const (
	DefaultTCPMaxConns       = tcp.DefaultMaxConns
	DefaultTCPMaxPipeline    = tcp.DefaultMaxPipeline
	DefaultTCPMaxRequest     = tcp.DefaultMaxRequest
	DefaultTCPMaxOutput      = tcp.DefaultMaxOutput
	DefaultTCPMemory         = tcp.DefaultMemory
	DefaultTCPIdleTimeout    = tcp.DefaultIdleTimeout
	DefaultTCPPartialTimeout = tcp.DefaultPartialTimeout
)

// Transports requests arrive over.
const (
	TransportUDP = "udp"
	TransportTCP = "tcp"
)

// Endpoint is one address requests arrive on, and how.
type Endpoint struct {
	Transport string
	Addr      netip.AddrPort
}

// String returns the endpoint as Config.Listen writes it.
func (e Endpoint) String() string { return e.Transport + "://" + e.Addr.String() }

// ParseListen parses a listen setting: addresses separated by commas, each
// "IP:PORT" (UDP), "udp://IP:PORT" or "tcp://IP:PORT", at most one of each
// transport.
func ParseListen(s string) ([]Endpoint, error) {
	var eps []Endpoint
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		tr, addr, found := strings.Cut(part, "://")
		if !found {
			tr, addr = TransportUDP, part
		}
		if tr != TransportUDP && tr != TransportTCP {
			return nil, fmt.Errorf("listen address %q: transport %q, want udp:// or tcp://", part, tr)
		}
		ap, err := netip.ParseAddrPort(addr)
		if err != nil {
			return nil, fmt.Errorf("listen address %q: %v (want [udp://|tcp://]IP:PORT, e.g. %s or tcp://%s)", part, err, DefaultListen, DefaultListen)
		}
		for _, e := range eps {
			if e.Transport == tr {
				return nil, fmt.Errorf("listen %q: two %s addresses (give one per transport)", s, tr)
			}
		}
		eps = append(eps, Endpoint{Transport: tr, Addr: ap})
	}
	return eps, nil
}

// endpoints returns the validated listen endpoints, with the memcached
// application's TCP address (App.Memcached.TCP) among them.
func (c Config) endpoints() []Endpoint {
	eps, err := ParseListen(c.Listen)
	if err != nil {
		panic("server: endpoints of an unvalidated config: " + err.Error())
	}
	if c.App.Name == AppMemcached && c.App.Memcached.TCP != "" {
		if ap, err := netip.ParseAddrPort(c.App.Memcached.TCP); err == nil {
			eps = append(eps, Endpoint{Transport: TransportTCP, Addr: ap})
		}
	}
	return eps
}

// listenPort is the port of the first listen address: the default
// tenant's.
func (c Config) listenPort() uint16 { return c.endpoints()[0].Addr.Port() }

// listenIP is the IP of the first listen address: tenants' own ports are
// opened on it.
func (c Config) listenIP() netip.Addr { return c.endpoints()[0].Addr.Addr() }

// transport returns the endpoint of transport tr, if any.
func (c Config) transport(tr string) (Endpoint, bool) {
	for _, e := range c.endpoints() {
		if e.Transport == tr {
			return e, true
		}
	}
	return Endpoint{}, false
}
