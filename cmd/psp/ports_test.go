package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/persephone-go/psp/server"
)

// TestPortListsCompact: a tenant may have 1,024 ports; psp tenant list
// and psp status printed each, which made every row of their tables 6,266
// characters wide. Runs of three or more consecutive ports print as a
// range, which --ports reads back.
func TestPortListsCompact(t *testing.T) {
	var wide []uint16
	for p := uint16(30000); p < 31024; p++ {
		wide = append(wide, p)
	}
	for _, tc := range []struct {
		ports []uint16
		want  string
	}{
		{wide, "30000-31023"},
		{[]uint16{7003, 7004}, "7003,7004"},
		{[]uint16{7001, 7002, 7003, 9000, 7005}, "7001-7003,9000,7005"},
		{[]uint16{65533, 65534, 65535}, "65533-65535"},
	} {
		got := server.FormatPorts(tc.ports)
		if got != tc.want {
			t.Errorf("FormatPorts(%d ports from %d) = %.40q, want %q", len(tc.ports), tc.ports[0], got, tc.want)
		}
		back, err := parsePorts(got)
		if err != nil || !slices.Equal(back, tc.ports) {
			t.Errorf("parsePorts(%.40q) = %d ports, %v; want the %d printed", got, len(back), err, len(tc.ports))
		}
	}
	for _, bad := range []string{"5-3", "0-2", "1-65536", "a-b", "7-"} {
		if _, err := parsePorts(bad); err == nil || !strings.Contains(err.Error(), "--ports") {
			t.Errorf("parsePorts(%q): %v, want an error naming --ports", bad, err)
		}
	}
}
