package darc

import (
	"errors"
	"testing"
)

// TestSharedLayout: a fixed tenant set on c-FCFS lays its types out as
// Tenants does (the default at 0, plain names; the others after it, named
// tenant/type), places per-type limits at the tenant's range, refuses
// shares and changes of the set, and accepts an update without a share.
func TestSharedLayout(t *testing.T) {
	p, err := NewShared(NameCFCFS, Config{Workers: 2, Pool: 1000, Tenants: []TenantConfig{
		{Name: "d", Default: true, NumTypes: 3, TypeNames: []string{"", "GET"}},
		{Name: "b", NumTypes: 2, Budgets: []int{0, 40}, Deadlines: []int64{0, 5e6}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	var s Snapshot
	p.Snapshot(&s)
	names := []string{"UNKNOWN", "GET", "type2", "b/UNKNOWN", "b/type1"}
	if len(s.Types) != len(names) || p.NumTypes() != len(names) {
		t.Fatalf("%d types, want %v", len(s.Types), names)
	}
	for i, n := range names {
		if s.Types[i].Name != n {
			t.Errorf("type %d: %q, want %q", i, s.Types[i].Name, n)
		}
	}
	if b, _ := p.Base("b"); b != 3 || s.Types[4].Budget != 40 || s.Types[4].DeadlineNs != 5e6 {
		t.Errorf("b at %d, its type1 budget %d deadline %d", b, s.Types[4].Budget, s.Types[4].DeadlineNs)
	}
	if len(s.Tenants) != 2 || s.Tenants[1].Name != "b" || s.Tenants[1].Base != 3 {
		t.Errorf("tenants %+v", s.Tenants)
	}
	if _, err := p.AddTenant(TenantConfig{Name: "c", NumTypes: 2}); !errors.Is(err, ErrFixedTenants) {
		t.Errorf("add: %v", err)
	}
	if err := p.RemoveTenant("b"); !errors.Is(err, ErrFixedTenants) {
		t.Errorf("remove: %v", err)
	}
	if err := p.UpdateTenant(TenantConfig{Name: "b", NumTypes: 2, Weight: 2}); !errors.Is(err, ErrFixedTenants) {
		t.Errorf("update with a share: %v", err)
	}
	if err := p.UpdateTenant(TenantConfig{Name: "b", NumTypes: 2}); err != nil {
		t.Errorf("update without a share: %v", err)
	}
	if err := p.UpdateTenant(TenantConfig{Name: "x", NumTypes: 2}); !errors.Is(err, ErrUnknownTenant) {
		t.Errorf("update of nobody: %v", err)
	}
	for name, tcs := range map[string][]TenantConfig{
		"a share":           {{Name: "a", NumTypes: 2, Workers: 1}},
		"default not first": {{Name: "a", NumTypes: 2}, {Name: "d", NumTypes: 2, Default: true}},
		"listed twice":      {{Name: "a", NumTypes: 2}, {Name: "a", NumTypes: 2}},
		"no types":          {{Name: "a"}},
		"no name":           {{NumTypes: 2}},
	} {
		if _, err := NewShared(NameFP, Config{Workers: 2, Tenants: tcs}); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := NewShared(NameDARC, Config{Workers: 2, Tenants: []TenantConfig{{Name: "a", NumTypes: 2}}}); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("darc through NewShared: %v", err)
	}
}
