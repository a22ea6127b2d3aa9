package dpdk

import (
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/persephone-go/psp/wire"
)

func TestConfigDefaults(t *testing.T) {
	c := Config{IP: netip.MustParseAddr("10.0.0.2")}.withDefaults()
	err := c.validate()
	if err != nil {
		t.Fatal(err)
	}
	if c.Port != wire.DefaultPort || c.Workers != 1 || c.BurstSize != 32 || c.RxDescriptors != 1024 || c.TxDescriptors != 1024 {
		t.Fatalf("defaults: %+v", c)
	}
	if !slices.Equal(c.EAL, DefaultEAL) {
		t.Fatalf("EAL %q, want %q", c.EAL, DefaultEAL)
	}
	for _, want := range []string{"--no-huge", "--no-pci", "--no-shconf", "--no-telemetry"} {
		if !slices.Contains(DefaultEAL, want) {
			t.Errorf("DefaultEAL lacks %s", want)
		}
	}
	// An IPv4-mapped IPv6 address is an IPv4 address.
	if err := (Config{IP: netip.MustParseAddr("::ffff:10.0.0.2")}).withDefaults().validate(); err != nil {
		t.Fatal(err)
	}
}

func TestConfigRejects(t *testing.T) {
	ip := netip.MustParseAddr("10.0.0.2")
	for name, c := range map[string]Config{
		"no ip":         {},
		"ipv6":          {IP: netip.MustParseAddr("fd00::1")},
		"unspecified":   {IP: netip.MustParseAddr("0.0.0.0")},
		"multicast":     {IP: netip.MustParseAddr("224.0.0.1")},
		"workers":       {IP: ip, Workers: -1},
		"many workers":  {IP: ip, Workers: MaxWorkers + 1},
		"burst":         {IP: ip, BurstSize: MaxBurstSize + 1},
		"pool":          {IP: ip, PoolSize: -1},
		"descriptors":   {IP: ip, RxDescriptors: -5},
		"port 0":        {IP: ip, ExtraPorts: []uint16{0}},
		"nul in eal":    {IP: ip, EAL: []string{"-l\x000"}},
		"nul in device": {IP: ip, Device: "net_ring0\x00"},
	} {
		err := c.withDefaults().validate()
		if !errors.Is(err, ErrConfig) {
			t.Errorf("%s: %v, want ErrConfig", name, err)
		} else if !strings.HasPrefix(err.Error(), "dpdk: ") {
			t.Errorf("%s: error %q lacks the package prefix", name, err)
		}
	}
}

func TestDropReasonNames(t *testing.T) {
	seen := map[string]bool{}
	for r := range NumDropReasons {
		s := r.String()
		if s == "" || seen[s] {
			t.Fatalf("reason %d: name %q empty or duplicate", r, s)
		}
		seen[s] = true
	}
	if s := DropReason(99).String(); !strings.Contains(s, "99") {
		t.Fatalf("out-of-range reason: %q", s)
	}
	var ps PortStats
	ps.Drops[DropOtherIP], ps.Drops[DropRunt] = 3, 4
	if ps.Dropped() != 7 {
		t.Fatalf("Dropped = %d", ps.Dropped())
	}
}
