package darc

import (
	"fmt"
	"strings"
	"testing"
)

// TestDefaultTenantFillsTheTypeSpace: the default tenant's UNKNOWN is the
// policy's type 0, so a classifier of the ABI's largest type count
// (65,536) fits the type space. It was refused, with "65536 types, and
// the tenants' type space holds 65536 in all", as if its UNKNOWN took an
// id of its own (psp serve --classifier of a 65,536-type module). A tenant
// that does not fit is told the room left.
func TestDefaultTenantFillsTheTypeSpace(t *testing.T) {
	cfg := Config{Workers: 2, QueueCapacity: 1, MinSamples: 50}
	if _, err := NewTenants(NameDARC, Config{Workers: 2, QueueCapacity: 1, MinSamples: 50,
		Tenants: []TenantConfig{{Name: "default", Default: true, NumTypes: maxTypes}}}); err != nil {
		t.Errorf("default tenant of %d types: %v", maxTypes, err)
	}
	shared := cfg
	shared.Tenants = []TenantConfig{{Name: "default", Default: true, NumTypes: maxTypes}}
	if _, err := NewShared(NameCFCFS, shared); err != nil {
		t.Errorf("shared, default tenant of %d types: %v", maxTypes, err)
	}

	p, err := NewTenants(NameDARC, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.AddTenant(TenantConfig{Name: "a", NumTypes: 1000}); err != nil {
		t.Fatal(err)
	}
	_, err = p.AddTenant(TenantConfig{Name: "b", NumTypes: maxTypes})
	if err == nil || !strings.Contains(err.Error(), "room for 64535 more") {
		t.Errorf("a tenant past the type space: %v, want the room left (64535)", err)
	}
}

// TestTypeSpaceChurnOfMixedSizes: tenants of different type counts come
// and go (each removed and retired before the next is added). A retired
// range was reused only by a tenant that fitted it whole, and neighbouring
// free ranges stayed apart, so tenants of 2, 3, 4, ... types each took new
// ids: the type space was full after about 360 of them, with no tenant
// live. Free ranges now merge with their neighbours.
func TestTypeSpaceChurnOfMixedSizes(t *testing.T) {
	p, err := NewTenants(NameDARC, Config{Workers: 2, QueueCapacity: 1, MinSamples: 50})
	if err != nil {
		t.Fatal(err)
	}
	for n := 2; n <= 600; n++ {
		name := fmt.Sprintf("t%d", n)
		base, err := p.AddTenant(TenantConfig{Name: name, NumTypes: n})
		if err != nil {
			t.Fatalf("tenant of %d types, none live: %v", n, err)
		}
		if err := p.RemoveTenant(name); err != nil {
			t.Fatal(err)
		}
		if err := p.Retire(base); err != nil {
			t.Fatal(err)
		}
	}
	if got := p.NumTypes(); got > 2*600+1 {
		t.Errorf("type ids in use after the churn: %d, want at most %d", got, 2*600+1)
	}
}
