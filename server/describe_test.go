package server

import (
	"fmt"
	"strings"
	"testing"
)

// TestStartupLineBounded: the startup line named every tenant with every
// port: 8,447 bytes for 130 one-port tenants, and up to 1,024 tenants of
// 1,024 ports each may run. It names 16 tenants, counts the others, and
// prints runs of ports as ranges.
func TestStartupLineBounded(t *testing.T) {
	mt := &tenantRegistry{live: map[string]*loadedTenant{}, nativeName: "native psp header"}
	for i := range 1024 {
		var ports []uint16
		for p := range 1024 {
			ports = append(ports, uint16(1024+p))
		}
		name := fmt.Sprintf("t%04d", i)
		mt.live[name] = &loadedTenant{cfg: Tenant{Name: name, Ports: ports}}
	}
	line := mt.describe()
	if len(line) > 2048 {
		t.Errorf("startup line of %d bytes, want at most 2048: %.200s", len(line), line)
	}
	for _, want := range []string{"tenant t0000=native psp header (ports 1024-2047)", "tenant t0015=", "and 1008 more (psp tenant list)"} {
		if !strings.Contains(line, want) {
			t.Errorf("startup line lacks %q: %.300s", want, line)
		}
	}
	if strings.Contains(line, "t0016=") {
		t.Errorf("startup line names a 17th tenant: %.300s", line)
	}
}
