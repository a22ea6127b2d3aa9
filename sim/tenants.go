package sim

import (
	"fmt"
	"math"
	"slices"

	"github.com/persephone-go/psp/darc"
	"github.com/persephone-go/psp/report"
	"github.com/persephone-go/psp/workload"
)

// Tenant is one tenant of a simulated multi-tenant server (Config.Tenants):
// its own workload, offered at its own rate, classified into its own types
// (local type ids are the workload's wire ids, as the psp-header
// classifier gives them) and scheduled by its own DARC within its share,
// as psp serve's tenants are.
type Tenant struct {
	Name     string
	Workload workload.Workload
	// Load is the load the tenant offers as a fraction of the whole
	// server's capacity for its workload: rate = Load x Workers / its mean
	// service time. Ignored when Rate > 0. Config.Load multiplies it.
	Load float64
	// Rate is the tenant's offered rate in requests per second (on the
	// dilated scale); overrides Load.
	Rate float64
	// Share is the tenant's part of the workers and of the pool (Workers,
	// Weight, MaxWorkers, Buffers, MaxBuffers, per-type Guarantees,
	// Budgets, Deadlines); Name, NumTypes, TypeNames and Profile are set by
	// the simulator.
	Share darc.TenantConfig
}

// tenantTypes maps the merged workload of a multi-tenant run to the
// tenants: merged type index -> darc's global type, the tenant, the index
// in the tenant's workload.
type tenantTypes struct {
	darcType []darc.Type
	tenant   []int32
	local    []int32
}

// mergeTenants fills c.Workload with every tenant's types ("tenant/type"),
// each type's share weighted by its tenant's rate (the superposition of
// the tenants' Poisson processes is one Poisson process whose requests
// come from tenant k with probability rate_k / total), and c.Rate with the
// total. c.Workers is set; tenant workloads are already dilated.
func (c *Config) mergeTenants() {
	if c.merged {
		return
	}
	c.merged = true
	scale := c.Load
	if scale <= 0 {
		scale = 1
	}
	merged := workload.Workload{Name: "tenants"}
	c.Tenants = slices.Clone(c.Tenants)
	total := 0.0
	for i := range c.Tenants {
		t := &c.Tenants[i]
		if t.Rate <= 0 && len(t.Workload.Types) > 0 {
			t.Rate = t.Workload.RateForLoad(t.Load, c.Workers)
		}
		t.Rate *= scale
		total += t.Rate
	}
	id := uint32(0)
	for _, t := range c.Tenants {
		for _, ty := range t.Workload.Types {
			id++
			share := 0.0
			if total > 0 {
				share = ty.Share * t.Rate / total
			}
			merged.Types = append(merged.Types, workload.TypeSpec{Name: t.Name + "/" + ty.Name, ID: id, Share: share, Service: ty.Service})
		}
	}
	c.Workload = merged
	c.Rate = total
	if total > 0 && len(merged.Types) > 0 {
		c.Load = merged.LoadForRate(total, c.Workers)
	}
}

// validateTenants checks the tenants of c (before defaults).
func (c Config) validateTenants() error {
	if isPreemptive(c.Policy) || (c.Policy != "" && c.Policy != darc.NameDARC && c.Policy != darc.NameDARCStatic) {
		return fmt.Errorf("%w: tenants are simulated with policies %s and %s, not %s", ErrInvalidConfig, darc.NameDARC, darc.NameDARCStatic, c.Policy)
	}
	names := map[string]bool{}
	for i, t := range c.Tenants {
		if err := workload.CheckName(t.Name); err != nil {
			return fmt.Errorf("%w: tenant %d: %w", ErrInvalidConfig, i, err)
		}
		switch {
		case t.Name == "":
			return fmt.Errorf("%w: tenant %d has no name", ErrInvalidConfig, i)
		case names[t.Name]:
			return fmt.Errorf("%w: tenant %q listed twice", ErrInvalidConfig, t.Name)
		case !(t.Rate > 0) && !(t.Load > 0):
			return fmt.Errorf("%w: tenant %q: load = %g, want > 0 (or give a rate)", ErrInvalidConfig, t.Name, t.Load)
		case math.IsInf(t.Load, 0) || math.IsInf(t.Rate, 0):
			return fmt.Errorf("%w: tenant %q: infinite load or rate", ErrInvalidConfig, t.Name)
		}
		names[t.Name] = true
		w := t.Workload
		if err := w.Validate(); err != nil {
			return fmt.Errorf("%w: tenant %q: %w", ErrInvalidConfig, t.Name, err)
		}
		for _, ty := range w.Types {
			if ty.ID >= 1<<16 {
				return fmt.Errorf("%w: tenant %q: type %s has id %d (at most 65535)", ErrInvalidConfig, t.Name, ty.Name, ty.ID)
			}
		}
	}
	return nil
}

// validateMerged validates the workload mergeTenants built (c has its
// defaults). Its type names ("tenant/type") may be longer than a workload
// file's (workload.MaxNameLen): the tenants' and their types' names were
// checked by validateTenants, so the merged names are checked for
// uniqueness here and the rest on a copy with short names.
func (c *Config) validateMerged() error {
	m := c.Workload
	m.Types = slices.Clone(m.Types)
	seen := map[string]bool{}
	for i, t := range m.Types {
		if seen[t.Name] {
			return fmt.Errorf("%w: tenants: two types are named %q (tenant/type)", ErrInvalidConfig, t.Name)
		}
		seen[t.Name] = true
		m.Types[i].Name = fmt.Sprint(i + 1)
	}
	if err := m.Validate(); err != nil {
		return fmt.Errorf("%w: tenants: %w", ErrInvalidConfig, err)
	}
	return nil
}

// tenantsDarc fills d.Tenants for the run's tenants and returns the type
// map: each tenant's local types are its workload's wire ids.
func (c *Config) tenantsDarc(d *darc.Config) tenantTypes {
	var tt tenantTypes
	base := darc.Type(1)
	for k, t := range c.Tenants {
		n := 1
		for _, ty := range t.Workload.Types {
			n = max(n, int(ty.ID)+1)
		}
		tc := t.Share
		tc.Name, tc.NumTypes = t.Name, n
		tc.TypeNames = make([]string, n)
		tc.TypeNames[0] = "UNKNOWN"
		for i, ty := range t.Workload.Types {
			tc.TypeNames[ty.ID] = ty.Name
			tt.darcType = append(tt.darcType, base+darc.Type(ty.ID))
			tt.tenant = append(tt.tenant, int32(k))
			tt.local = append(tt.local, int32(i))
		}
		if c.Policy == darc.NameDARCStatic && len(tc.Profile) == 0 {
			tc.Profile = nominalProfile(&t.Workload)
			for j := range tc.Profile {
				tc.Profile[j].Type = darc.Type(t.Workload.Types[j].ID)
			}
		}
		d.Tenants = append(d.Tenants, tc)
		base += darc.Type(n)
	}
	return tt
}

// tenantRun holds the per-tenant measurements of a multi-tenant run.
type tenantRun struct {
	types                       tenantTypes
	rec                         []*report.Recorder
	arrived, completed, dropped []uint64
}

func newTenantRun(cfg *Config, tt tenantTypes) *tenantRun {
	n := len(cfg.Tenants)
	tr := &tenantRun{types: tt, arrived: make([]uint64, n), completed: make([]uint64, n), dropped: make([]uint64, n)}
	for _, t := range cfg.Tenants {
		ids := make([]uint32, len(t.Workload.Types))
		for i, ty := range t.Workload.Types {
			ids[i] = ty.ID
		}
		tr.rec = append(tr.rec, report.NewRecorder(t.Workload.TypeNames(), ids))
	}
	return tr
}

// points builds one point per tenant, beside the whole server's p.
func (tr *tenantRun) points(c *Config, p *report.Point, window float64) []report.Point {
	out := make([]report.Point, len(c.Tenants))
	for k, t := range c.Tenants {
		tp := report.Point{
			Source: p.Source, Policy: p.Policy, Workload: t.Workload.Name, Tenant: t.Name, Workers: p.Workers,
			Load: t.Workload.LoadForRate(t.Rate, c.Workers), OfferedRate: t.Rate, DurationSec: p.DurationSec,
			MeanIdleWorkers: math.NaN(), WastedWorkers: math.NaN(), Seed: p.Seed,
		}
		if window > 0 {
			tp.AchievedRate = float64(tr.completed[k]) / window * 1e9
		}
		growth := float64(tr.arrived[k]) - float64(tr.dropped[k]) - float64(tr.completed[k])
		tp.Sustained = tr.dropped[k] == 0 && growth <= max(0.001*float64(tr.arrived[k]), float64(c.Workers))
		tr.rec[k].Fill(&tp)
		out[k] = tp
	}
	return out
}
