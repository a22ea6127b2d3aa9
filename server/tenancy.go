package server

import (
	"cmp"
	"context"
	"fmt"
	"strings"

	"github.com/persephone-go/psp/darc"
	"github.com/persephone-go/psp/dispatcher"
)

// openCredentials loads the operator's and the configured tenants' tokens
// and opens the audit log.
func (s *Server) openCredentials(cfg Config) error {
	s.creds = newCredentials()
	sum, ok, err := loadToken(cfg.Admin.TokenFile, cfg.Admin.TokenSHA256)
	if err != nil {
		return fmt.Errorf("server: admin token: %w", err)
	}
	if ok {
		s.creds.setOperator(sum)
	}
	sum, ok, err = loadToken(cfg.Admin.ReadTokenFile, cfg.Admin.ReadTokenSHA256)
	if err != nil {
		return fmt.Errorf("server: admin read token: %w", err)
	}
	if ok {
		if err := s.creds.unique(sum, ""); err != nil {
			return fmt.Errorf("%w: admin read token: %w", ErrConfig, err)
		}
		s.creds.setReader(sum)
	}
	for _, t := range cfg.Tenants {
		sum, ok, err := loadToken(t.TokenFile, t.TokenSHA256)
		if err != nil {
			return fmt.Errorf("server: tenant %q token: %w", t.Name, err)
		}
		if ok {
			if err := s.creds.unique(sum, ""); err != nil {
				return fmt.Errorf("%w: tenant %q token: %w", ErrConfig, t.Name, err)
			}
		}
		s.creds.setTenant(t.Name, sum, ok)
	}
	changes, refusals := s.log, s.log
	if path := cfg.Admin.AuditLog; path != "" {
		max := cmp.Or(cfg.Admin.AuditLogMaxBytes, DefaultAuditLogMaxBytes)
		f, err := openRotatingFile(path, max)
		if err != nil {
			return fmt.Errorf("server: audit log: %w", err)
		}
		s.auditFiles = append(s.auditFiles, f)
		r, err := openRotatingFile(path+refusalsSuffix, max)
		if err != nil {
			return fmt.Errorf("server: audit log of refusals: %w", err)
		}
		s.auditFiles = append(s.auditFiles, r)
		changes, refusals = f, r
	}
	s.audit = newAudit(changes, refusals, refusalInterval)
	return nil
}

// openTenants builds the server's tenants (Config.Tenants, or the default
// tenant of Config.Classifier or of the native classifier), the dataplane
// on every tenant's port, the policy (darc and darc-static: each tenant's
// share of the workers and of the pool less what the classifier lanes may
// hold; the other policies: one policy the tenants share) and the
// dispatcher.
func (s *Server) openTenants(ctx context.Context, cfg Config, opts Options) error {
	ts, err := newTenantRegistry(ctx, s, cfg, s.app, opts.Classifiers)
	if err != nil {
		return err
	}
	s.tenants = ts
	s.describeTenants = ts.describe()
	if s.dp, s.addr, err = openDataplane(cfg, ts.ports(cfg.listenPort()), s.app.Stream, s.log); err != nil {
		return err
	}
	lanes := 0
	pool := requestBuffers(s.dp)
	if pool > 0 {
		// The lanes hold packets beside the policy, in buffers the
		// dataplane was given for them, or, with DPDK, out of its pool.
		lanes = laneBuffers(cfg)
		if cfg.Dataplane == DataplaneDPDK {
			lanes = min(lanes, pool/4)
			pool -= lanes
		}
	}
	pcfg := cfg.basePolicyConfig(pool)
	ts.pool = pool > 0
	tcs, dts, err := ts.policyTenants(cfg)
	if err != nil {
		return err
	}
	if err := checkTypeOverrides(cfg, ts); err != nil {
		return err
	}
	pcfg.Tenants = tcs
	var policy darc.Policy
	if cfg.shares() {
		policy, err = darc.NewTenants(cfg.Policy, pcfg) // tenants may come later
	} else {
		policy, err = darc.NewShared(cfg.Policy, pcfg)
	}
	if err != nil {
		return fmt.Errorf("server: policy: %w", err)
	}
	spec := cfg.dispatcherSpec(nil, s.app.MinPayload)
	spec.Tenants = dts
	spec.LaneBuffers = lanes
	if s.disp, err = dispatcher.New(spec, s.dp, nil, policy, s.app.Handler); err != nil {
		return fmt.Errorf("server: %w", err)
	}
	return nil
}

// checkTypeOverrides refuses per-type overrides that name no tenant's
// type.
func checkTypeOverrides(cfg Config, ts *tenantRegistry) error {
	var all []string
	for name := range cfg.Types {
		found := false
		for _, lt := range ts.live {
			for l := range lt.numTypes {
				if lt.typeName(l) == name {
					found = true
				}
			}
		}
		if found {
			continue
		}
		if all == nil {
			for _, lt := range ts.configured(cfg) {
				for l := range lt.numTypes {
					all = append(all, lt.typeName(l))
				}
			}
		}
		return fmt.Errorf("%w: types: no request type named %q (the tenants' types, as psp status shows them: %s)", ErrConfig, name, strings.Join(all, ", "))
	}
	return nil
}

// basePolicyConfig is the policy's config without types (the tenants
// bring theirs).
func (c Config) basePolicyConfig(pool int) darc.Config {
	return darc.Config{
		Workers:        c.Workers,
		QueueCapacity:  c.QueueCapacity,
		Pool:           pool,
		DeadlineFactor: c.DeadlineFactor,
		DeadlineFloor:  int64(c.DeadlineFloor),
		Delta:          c.Delta,
		Spillway:       c.Spillway,
		MinSamples:     c.MinSamples,
		MaxWindow:      c.MaxWindow,
		DelayFactor:    c.DelayFactor,
		Hysteresis:     c.Hysteresis,
		StaticReserved: c.Reserved,
		LendAll:        c.LendAll,
	}
}

// listenPort is the listen address's port.
func (s *Server) listenPort() uint16 {
	if eps, err := ParseListen(s.addr); err == nil {
		return eps[0].Addr.Port()
	}
	return s.cfg.listenPort()
}

// declared marks, by global type id, the types the live tenants' classifiers
// declare (and each tenant's UNKNOWN); native classifiers declare none:
// their types are the wire's whole type space, shown once they see a
// request.
func (mt *tenantRegistry) declared(st *dispatcher.Stats) []bool {
	d := make([]bool, len(st.Types))
	if len(d) > 0 {
		d[0] = true
	}
	mt.mu.Lock()
	defer mt.mu.Unlock()
	for _, ts := range st.Tenants {
		lt, live := mt.live[ts.Name]
		if !live || ts.Removed {
			continue
		}
		n := 1
		if lt.host != nil {
			n = lt.host.Status().NumTypes
		}
		for l := range n {
			if id := int(ts.Base) + l; id < len(d) {
				d[id] = true
			}
		}
	}
	return d
}
