package sim

import (
	"testing"
	"time"

	"github.com/persephone-go/psp/darc"
	"github.com/persephone-go/psp/report"
	"github.com/persephone-go/psp/workload"
)

func builtinW(t *testing.T, name string) workload.Workload {
	t.Helper()
	w, err := workload.Builtin(name)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// only returns w's type name alone.
func only(t *testing.T, w workload.Workload, name string) workload.Workload {
	t.Helper()
	out := workload.Workload{Name: w.Name + "-" + name}
	for _, ty := range w.Types {
		if ty.Name == name {
			ty.Share = 1
			out.Types = append(out.Types, ty)
		}
	}
	return out
}

func tenantPoint(t *testing.T, p report.Point, name string) report.Point {
	t.Helper()
	for _, tp := range p.Tenants {
		if tp.Tenant == name {
			return tp
		}
	}
	t.Fatalf("no tenant %q in %+v", name, p.Tenants)
	return report.Point{}
}

// TestTenantsNoisyNeighbour: b offers three times its share (4 workers)
// of cheap requests; a, at a load its share of 10 workers carries, keeps
// its tail within 20% of what it has with b idle, and b gets more than its
// share (the idle workers a lends).
func TestTenantsNoisyNeighbour(t *testing.T) {
	hb := builtinW(t, "high-bimodal")
	short := only(t, hb, "SHORT")
	a := Tenant{Name: "a", Workload: hb, Load: 0.15, Share: darc.TenantConfig{Workers: 10}}
	run := func(bLoad float64) (report.Point, report.Point) {
		cfg := Config{Workers: 14, Duration: 100 * time.Millisecond, Seed: 3, Darc: darc.Config{Pool: 8160},
			Tenants: []Tenant{a, {Name: "b", Workload: short, Load: bLoad, Share: darc.TenantConfig{Workers: 4}}}}
		p, err := Run(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return tenantPoint(t, p, "a"), tenantPoint(t, p, "b")
	}
	aAlone, _ := run(0.001)
	// b's share: 4 workers of 1 us requests, 4 M/s; three times that is
	// 12 M/s, a load of 0.857 of the 14 workers.
	aNoisy, b := run(3 * 4.0 / 14)
	t.Logf("a: p99.9 slowdown %.3g alone, %.3g beside b; b: %.3g M/s offered, %.3g M/s achieved",
		aAlone.Overall.P999Slowdown, aNoisy.Overall.P999Slowdown, b.OfferedRate/1e6, b.AchievedRate/1e6)
	if aNoisy.Overall.P999Slowdown > 1.2*aAlone.Overall.P999Slowdown || !aNoisy.Sustained {
		t.Errorf("a's p99.9 slowdown %.3g beside b, %.3g alone (sustained %v)", aNoisy.Overall.P999Slowdown, aAlone.Overall.P999Slowdown, aNoisy.Sustained)
	}
	if b.AchievedRate < 4.5e6 || b.Overall.Dropped == 0 {
		t.Errorf("b achieved %.3g M/s (its share is 4 M/s), dropped %d", b.AchievedRate/1e6, b.Overall.Dropped)
	}
}

// TestTenantsBorrowedDelayBound: b floods LONG requests (100 us) far over
// its share; a's requests wait at most one of b's service times, the
// worker b borrowed coming back (a's own load is too low to queue).
func TestTenantsBorrowedDelayBound(t *testing.T) {
	hb := builtinW(t, "high-bimodal")
	cfg := Config{Workers: 14, Duration: 500 * time.Millisecond, Seed: 5, Darc: darc.Config{Pool: 8160},
		Tenants: []Tenant{
			{Name: "a", Workload: hb, Load: 0.02, Share: darc.TenantConfig{Workers: 7}},
			{Name: "b", Workload: only(t, hb, "LONG"), Load: 2, Share: darc.TenantConfig{Workers: 7}},
		}}
	for _, lendAll := range []bool{false, true} {
		cfg.Darc.LendAll = lendAll
		p, err := Run(cfg)
		if err != nil {
			t.Fatal(err)
		}
		a, b := tenantPoint(t, p, "a"), tenantPoint(t, p, "b")
		if b.AchievedRate < 1.1*7/100e-6 {
			t.Errorf("LendAll %v: b achieved %.0f/s, no more than its share", lendAll, b.AchievedRate)
		}
		for _, ty := range a.Types {
			service := ty.Name == "SHORT"
			bound := int64(100_000)
			if service {
				bound += 1000
			} else {
				bound += 100_000
			}
			t.Logf("LendAll %v: a %s: max latency %v (bound %v)", lendAll, ty.Name, time.Duration(ty.MaxLatency), time.Duration(bound))
			if ty.MaxLatency > bound+2000 {
				t.Errorf("LendAll %v: a's %s waited %v, more than one of b's service times", lendAll, ty.Name, time.Duration(ty.MaxLatency))
			}
			if !lendAll && service && ty.P999Latency > 2000 {
				t.Errorf("a's SHORT p99.9 latency %v: its reserved workers were lent", time.Duration(ty.P999Latency))
			}
		}
	}
}

// TestTenantsSumUp: the tenants' points add up to the server's.
func TestTenantsSumUp(t *testing.T) {
	hb := builtinW(t, "high-bimodal")
	cfg := Config{Workers: 8, Duration: 200 * time.Millisecond, Seed: 1, Load: 2,
		Tenants: []Tenant{
			{Name: "a", Workload: hb, Load: 0.2},
			{Name: "b", Workload: builtinW(t, "tpcc"), Load: 0.2, Share: darc.TenantConfig{Weight: 3}},
		}}
	p, err := Run(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Tenants) != 2 || len(p.Types) != 7 || p.Types[2].Name != "b/Payment" {
		t.Fatalf("point: %d tenants, types %v", len(p.Tenants), p.Types)
	}
	var count, dropped uint64
	rate := 0.0
	for _, tp := range p.Tenants {
		count += tp.Overall.Count
		dropped += tp.Overall.Dropped
		rate += tp.OfferedRate
		if tp.Load < 0.39 || tp.Load > 0.41 {
			t.Errorf("tenant %s load %.3g, want 0.4 (0.2 x the config's 2)", tp.Tenant, tp.Load)
		}
	}
	if count != p.Overall.Count || dropped != p.Overall.Dropped || rate != p.OfferedRate {
		t.Errorf("tenants: %d answered, %d dropped, %.0f/s offered; server %d, %d, %.0f/s", count, dropped, rate, p.Overall.Count, p.Overall.Dropped, p.OfferedRate)
	}
	if _, err := Run(Config{Policy: "cfcfs", Workers: 4, Tenants: cfg.Tenants}); err == nil {
		t.Error("tenants simulated under cfcfs")
	}
}
