package sim

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/persephone-go/psp/workload"
)

// TestTenantNames: a tenant's name is checked as a workload's names are,
// and the merged names (tenant/type) may be longer than one of them.
func TestTenantNames(t *testing.T) {
	long := strings.Repeat("t", workload.MaxNameLen)
	w := workload.Workload{Name: "w", Types: []workload.TypeSpec{{Name: strings.Repeat("N", workload.MaxNameLen), ID: 1, Share: 1,
		Service: workload.Dist{Kind: workload.Fixed, Value: workload.Duration(time.Microsecond)}}}}
	c := Config{Workers: 4, Duration: 5 * time.Millisecond, Tenants: []Tenant{{Name: long, Workload: w, Load: 0.5}}}
	if err := c.Validate(); err != nil {
		t.Errorf("tenant and type names of %d bytes: %v", workload.MaxNameLen, err)
	}
	for name, want := range map[string]string{long + "t": "name of 65 bytes", "a\x1b[2J": "control"} {
		c.Tenants[0].Name = name
		if err := c.Validate(); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), want) {
			t.Errorf("tenant %q: %v, want an error mentioning %q", name, err, want)
		}
	}
}
