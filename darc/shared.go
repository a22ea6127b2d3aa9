package darc

import (
	"errors"
	"fmt"
	"slices"
)

// This file holds the tenants of the policies without tenant shares
// (c-FCFS, d-FCFS, FP). Those policies schedule requests by type alone:
// there is no per-tenant queue or worker share to give a tenant, so their
// tenants share one policy. Each tenant has a range of its type space, laid
// out as Tenants lays out its tenants' (a default tenant at type 0, the
// others after it, named "tenant/type"), and the set is fixed when the
// policy is built: a tenant cannot be added or removed while it runs,
// because the policy's queues and budgets were sized for the types it was
// built with, and giving a newcomer a share of them would need the shares
// these policies do not have. DARC and DARC-static, which have them, are
// the policies for tenants that come and go.

// ErrFixedTenants is returned by a Shared policy's AddTenant,
// RemoveTenant and UpdateTenant (of a share): its tenants are fixed.
var ErrFixedTenants = errors.New("the policy has no tenant shares, so its tenants are fixed when it starts (use policy darc or darc-static to add, change or remove tenants)")

// Shared is a fixed set of tenants on one policy without tenant shares;
// see the comment at the top of shared.go. Its Policy methods are the
// policy's.
type Shared struct {
	Policy
	tenants  []sharedTenant
	numTypes int
}

type sharedTenant struct {
	name     string
	base     Type
	numTypes int
}

// NewShared builds the policy called name for the tenants of cfg: one
// type space holding each tenant's range, with the tenants' per-type
// limits, names and profiles; Config's own type fields must be unset, and
// a tenant's share fields (Workers, Weight, MaxWorkers, Buffers,
// MaxBuffers, StaticReserved) are refused: the policy has no shares.
func NewShared(name string, cfg Config) (*Shared, error) {
	if name == NameDARC || name == NameDARCStatic {
		return nil, fmt.Errorf("darc: new shared %s: %w: %s has tenant shares (use NewTenants)", name, ErrInvalidConfig, name)
	}
	if cfg.NumTypes != 0 || len(cfg.TypeNames) > 0 || len(cfg.Profile) > 0 || len(cfg.Budgets) > 0 || len(cfg.Guarantees) > 0 || len(cfg.Deadlines) > 0 {
		return nil, fmt.Errorf("darc: new %s: %w: with tenants, types and their limits belong to the tenants", name, ErrInvalidConfig)
	}
	tcs := cfg.Tenants
	cfg.Tenants = nil
	layout, err := sharedLayout(name, tcs)
	if err != nil {
		return nil, err
	}
	cfg.NumTypes = layout.numTypes
	cfg.TypeNames = make([]string, cfg.NumTypes)
	cfg.TypeNames[0] = "UNKNOWN"
	for i, tc := range tcs {
		t := layout.tenants[i]
		names := Config{TypeNames: tc.TypeNames}
		for l := range tc.NumTypes {
			n := names.typeName(l)
			if !tc.Default {
				n = tc.Name + "/" + n
			}
			cfg.TypeNames[int(t.base)+l] = n
		}
		place(&cfg.Budgets, tc.Budgets, t.base, cfg.NumTypes)
		place(&cfg.Guarantees, tc.Guarantees, t.base, cfg.NumTypes)
		place(&cfg.Deadlines, tc.Deadlines, t.base, cfg.NumTypes)
		place(&cfg.Profile, tc.Profile, t.base, cfg.NumTypes)
	}
	p, err := New(name, cfg)
	if err != nil {
		return nil, err
	}
	layout.Policy = p
	return layout, nil
}

// place copies a tenant's per-type values into the policy's, from base;
// the policy's slice (n types) is made on the first value.
func place[T any](dst *[]T, src []T, base Type, n int) {
	if len(src) == 0 {
		return
	}
	if *dst == nil {
		*dst = make([]T, n)
	}
	copy((*dst)[base:], src)
}

// ShareTenant puts one policy without tenants under a default tenant
// called name (its whole type space): the one-tenant case of Shared.
func ShareTenant(p Policy, name string) (*Shared, error) {
	var s Snapshot
	p.Snapshot(&s)
	if name == "" || len(s.Types) < 1 {
		return nil, fmt.Errorf("darc: share %s: %w: a tenant name and at least one type", p.Name(), ErrInvalidConfig)
	}
	return &Shared{Policy: p, numTypes: len(s.Types), tenants: []sharedTenant{{name: name, numTypes: len(s.Types)}}}, nil
}

// sharedLayout checks a fixed tenant set and lays out its type space.
func sharedLayout(name string, tcs []TenantConfig) (*Shared, error) {
	s := &Shared{numTypes: 1}
	for i, tc := range tcs {
		bad := func(format string, args ...any) error {
			return fmt.Errorf("darc: new %s: %w: tenant %q: "+format, append([]any{name, ErrInvalidConfig, tc.Name}, args...)...)
		}
		room := maxTypes - s.numTypes
		if tc.Default && i == 0 {
			room++ // its UNKNOWN is the policy's type 0
		}
		switch {
		case tc.Name == "":
			return nil, fmt.Errorf("darc: new %s: %w: a tenant has no name", name, ErrInvalidConfig)
		case tc.NumTypes < 1:
			return nil, bad("numtypes = %d (at least 1: its UNKNOWN)", tc.NumTypes)
		case tc.NumTypes > room:
			return nil, bad("%d types, and the type space (%d ids in all) has room for %d more", tc.NumTypes, maxTypes, room)
		case len(tc.TypeNames) > tc.NumTypes:
			return nil, bad("%d type names for %d types", len(tc.TypeNames), tc.NumTypes)
		case len(tc.Budgets) > tc.NumTypes || len(tc.Guarantees) > tc.NumTypes || len(tc.Deadlines) > tc.NumTypes || len(tc.Profile) > tc.NumTypes:
			return nil, bad("more per-type limits or profiles than its %d types", tc.NumTypes)
		case tc.Workers != 0 || tc.Weight != 0 || tc.MaxWorkers != 0 || tc.Buffers != 0 || tc.MaxBuffers != 0 || tc.StaticReserved != 0:
			return nil, bad("a share (workers, weight, max workers, buffers): policy %s has no tenant shares (use darc or darc-static)", name)
		case tc.Default && i > 0:
			return nil, bad("only the first tenant can be the default (the one owning type 0)")
		case slices.ContainsFunc(tcs[:i], func(o TenantConfig) bool { return o.Name == tc.Name }):
			return nil, bad("listed twice")
		}
		t := sharedTenant{name: tc.Name, base: Type(s.numTypes), numTypes: tc.NumTypes}
		if tc.Default {
			t.base = 0
			s.numTypes--
		}
		s.numTypes += tc.NumTypes
		s.tenants = append(s.tenants, t)
	}
	return s, nil
}

// Base returns the global id of a tenant's local type 0.
func (s *Shared) Base(name string) (Type, bool) {
	for _, t := range s.tenants {
		if t.name == name {
			return t.base, true
		}
	}
	return 0, false
}

// NumTypes returns the size of the type space.
func (s *Shared) NumTypes() int { return s.numTypes }

// AddTenant fails with ErrFixedTenants.
func (s *Shared) AddTenant(tc TenantConfig) (Type, error) {
	return 0, fmt.Errorf("darc: add tenant %q to %s: %w", tc.Name, s.Name(), ErrFixedTenants)
}

// RemoveTenant fails with ErrFixedTenants (ErrUnknownTenant for a name
// it does not have).
func (s *Shared) RemoveTenant(name string) error {
	if _, ok := s.Base(name); !ok {
		return fmt.Errorf("darc: remove tenant %q: %w", name, ErrUnknownTenant)
	}
	return fmt.Errorf("darc: remove tenant %q from %s: %w", name, s.Name(), ErrFixedTenants)
}

// UpdateTenant accepts a tenant's config without a share (nothing of the
// policy changes: a server changes the tenant's ports, which the policy
// does not know; per-type limits stay as the policy was built) and
// refuses a share with ErrFixedTenants.
func (s *Shared) UpdateTenant(tc TenantConfig) error {
	k := slices.IndexFunc(s.tenants, func(t sharedTenant) bool { return t.name == tc.Name })
	if k < 0 {
		return fmt.Errorf("darc: update tenant %q: %w", tc.Name, ErrUnknownTenant)
	}
	if t := s.tenants[k]; tc.NumTypes != t.numTypes {
		return fmt.Errorf("darc: update tenant %q: %w: %d types, it has %d (types cannot change)", tc.Name, ErrInvalidConfig, tc.NumTypes, t.numTypes)
	}
	if tc.Workers != 0 || tc.Weight != 0 || tc.MaxWorkers != 0 || tc.Buffers != 0 || tc.MaxBuffers != 0 || tc.StaticReserved != 0 {
		return fmt.Errorf("darc: update tenant %q of %s: %w", tc.Name, s.Name(), ErrFixedTenants)
	}
	return nil
}

// Snapshot implements Policy: the policy's, with one TenantState per
// tenant (no shares: no home workers; a tenant's queued requests).
func (s *Shared) Snapshot(snap *Snapshot) {
	s.Policy.Snapshot(snap)
	snap.Tenants = resize(snap.Tenants, len(s.tenants))
	for k, t := range s.tenants {
		ts := TenantState{Name: t.name, Base: t.base, NumTypes: t.numTypes, Phase: snap.Phase, Home: snap.Tenants[k].Home[:0]}
		for l := range t.numTypes {
			if i := int(t.base) + l; i < len(snap.Types) {
				ts.Queued += snap.Types[i].Queued
			}
		}
		snap.Tenants[k] = ts
	}
}
