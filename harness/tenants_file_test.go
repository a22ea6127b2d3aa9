package harness

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLoadTenantsBounds: a tenants file is read into the simulator's
// tenants, and a load or rate that is negative, not a number or beyond
// what a run can offer is refused naming the tenant.
func TestLoadTenantsBounds(t *testing.T) {
	dir := t.TempDir()
	write := func(body string) string {
		path := filepath.Join(dir, "tenants.yaml")
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	tenants, err := LoadTenants(write("tenants:\n  - name: a\n    workload: high-bimodal\n    load: 0.5\n  - name: b\n    workload: high-bimodal\n    rate: 1000\n"))
	if err != nil || len(tenants) != 2 || tenants[0].Load != 0.5 || tenants[1].Rate != 1000 {
		t.Fatalf("LoadTenants = %+v, %v", tenants, err)
	}
	for _, bad := range []string{"load: -1", "load: 1e300", "load: .nan", "rate: -5", "rate: .inf", "rate: 1e12"} {
		_, err := LoadTenants(write("tenants:\n  - name: a\n    workload: high-bimodal\n    " + bad + "\n"))
		if err == nil || !strings.Contains(err.Error(), "tenant a") {
			t.Errorf("%s: %v, want a refusal naming tenant a", bad, err)
		}
	}
}
