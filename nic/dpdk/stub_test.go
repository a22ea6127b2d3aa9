//go:build !(linux && cgo && dpdk)

package dpdk

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/persephone-go/psp/nic"
)

func TestOpenWithoutDPDKSaysHowToBuild(t *testing.T) {
	d, err := Open(Config{IP: netip.MustParseAddr("10.0.0.2")})
	if d != nil || !errors.Is(err, nic.ErrNotSupported) {
		t.Fatalf("Open = %v, %v; want nil and an error wrapping nic.ErrNotSupported", d, err)
	}
	for _, want := range []string{"-tags dpdk", "libdpdk-dev"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	if Available {
		t.Fatal("Available is true in a build without DPDK")
	}
}
