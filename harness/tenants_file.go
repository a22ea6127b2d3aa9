package harness

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"go.yaml.in/yaml/v3"

	"github.com/persephone-go/psp/darc"
	"github.com/persephone-go/psp/internal/boundedfile"
	"github.com/persephone-go/psp/sim"
	"github.com/persephone-go/psp/workload"
)

// The largest load (as --loads allows) and rate a tenant may offer.
const (
	maxTenantLoad = 10
	maxTenantRate = 1e9
)

// TenantLoad is one tenant of a tenants file (psp sim --tenants): its
// workload, the load it offers and its share, as psp serve's tenants
// config gives it.
type TenantLoad struct {
	Name string `yaml:"name"`
	// Workload is a built-in workload's name or a workload file (relative
	// to the tenants file), or a workload written inline.
	Workload yaml.Node `yaml:"workload"`
	// Load is the load the tenant offers, as a fraction of the whole
	// server's capacity for its workload; Rate its requests per second
	// instead.
	Load float64 `yaml:"load,omitempty"`
	Rate float64 `yaml:"rate,omitempty"`
	// The tenant's share, as in psp serve's config.
	Workers    int     `yaml:"workers,omitempty"`
	Weight     float64 `yaml:"weight,omitempty"`
	MaxWorkers int     `yaml:"max_workers,omitempty"`
	Buffers    int     `yaml:"buffers,omitempty"`
	MaxBuffers int     `yaml:"max_buffers,omitempty"`
}

// maxTenantsFile bounds a tenants file.
const maxTenantsFile = 16 << 20

// LoadTenants reads a tenants file: YAML with a list "tenants" of
// TenantLoad (unknown keys are errors), as the simulator's tenants.
func LoadTenants(path string) ([]sim.Tenant, error) {
	data, err := boundedfile.Read(path, maxTenantsFile)
	if err != nil {
		return nil, fmt.Errorf("tenants: %w", err)
	}
	var f struct {
		Tenants []TenantLoad `yaml:"tenants"`
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		if errors.Is(err, io.EOF) {
			err = errors.New("empty file")
		}
		return nil, fmt.Errorf("tenants %s: %w", path, err)
	}
	if len(f.Tenants) == 0 {
		return nil, fmt.Errorf("tenants %s: no tenants (want a list \"tenants\" of name, workload, load, share)", path)
	}
	var out []sim.Tenant
	for i, tl := range f.Tenants {
		w, err := tenantWorkload(&tl.Workload, filepath.Dir(path))
		if err != nil {
			return nil, fmt.Errorf("tenants %s: tenant %d (%s): %w", path, i, tl.Name, err)
		}
		if !(tl.Load >= 0 && tl.Load <= maxTenantLoad) || !(tl.Rate >= 0 && tl.Rate <= maxTenantRate) {
			return nil, fmt.Errorf("tenants %s: tenant %s: load %v, rate %v: want a load in 0..%v and a rate in 0..%g requests/s", path, tl.Name, tl.Load, tl.Rate, float64(maxTenantLoad), float64(maxTenantRate))
		}
		out = append(out, sim.Tenant{Name: tl.Name, Workload: w, Load: tl.Load, Rate: tl.Rate,
			Share: darc.TenantConfig{Workers: tl.Workers, Weight: tl.Weight, MaxWorkers: tl.MaxWorkers, Buffers: tl.Buffers, MaxBuffers: tl.MaxBuffers}})
	}
	return out, nil
}

// tenantWorkload reads a tenant's workload: a name or file, or inline.
func tenantWorkload(n *yaml.Node, dir string) (workload.Workload, error) {
	switch n.Kind {
	case yaml.ScalarNode:
		ref := n.Value
		if _, err := workload.Builtin(ref); err != nil && !filepath.IsAbs(ref) {
			if _, serr := os.Stat(filepath.Join(dir, ref)); serr == nil {
				ref = filepath.Join(dir, ref)
			}
		}
		return workload.Parse(ref)
	case yaml.MappingNode:
		var w workload.Workload
		if err := n.Decode(&w); err != nil {
			return w, fmt.Errorf("workload: %w", err)
		}
		if err := w.Validate(); err != nil {
			return w, err
		}
		return w, nil
	}
	return workload.Workload{}, errors.New("workload: want a built-in workload's name, a workload file or a workload")
}
