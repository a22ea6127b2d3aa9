package fleet

import (
	"errors"
	"fmt"
	"time"
)

// Defaults and bounds of Plan.
const (
	// DefaultConfirmDeadline is how long a server keeps a module the
	// rollout swapped in without hearing from it: the rollout renews its
	// swaps while it runs and confirms them when every wave passed.
	DefaultConfirmDeadline = 30 * time.Second
	MinConfirmDeadline     = 2 * time.Second
	MaxConfirmDeadline     = time.Hour
)

// Plan is a rollout: which servers, in which waves, baked how long,
// judged by which bounds.
type Plan struct {
	// Servers are the admin addresses, in rollout order.
	Servers []string
	// Tenant is the tenant whose classifier is replaced.
	Tenant string
	// Canary is the number of servers in the first wave (default 1).
	Canary int
	// Wave is the number of servers in each later wave (0: all the rest
	// at once, but the control group).
	Wave int
	// Control is the number of servers kept on the old module until every
	// other wave passed (default 1; negative: none): every wave before
	// theirs is compared with servers still on the old module, in the same
	// window. The control group is the last wave, compared with its own
	// windows on the old module during the bake before.
	Control int
	// Bake is how long each wave runs the new module before it is judged.
	// A wave whose faults or UNKNOWN share already cross their bound,
	// whatever the rest of the bake brings, is judged at once.
	Bake time.Duration
	// Bounds judge each wave's servers against the baseline.
	Bounds Bounds
	// ConfirmDeadline is how long a swapped server keeps the new module
	// without hearing from the rollout (DefaultConfirmDeadline when 0):
	// every swap is provisional, renewed while the rollout runs and
	// confirmed when every wave passed, so a rollout that dies leaves no
	// server on a module nobody confirmed.
	ConfirmDeadline time.Duration
	// Prometheus, when set, is the base URL of a Prometheus server
	// scraping the servers (as instance="HOST:PORT" of their admin
	// address): the analysis reads the counters and latency histograms
	// from it, at the same moments, instead of from each server.
	Prometheus string
	// Token is the bearer token (the operator's or the tenant's).
	Token string
	// Timeout bounds each admin request (0: admin.DefaultTimeout).
	Timeout time.Duration
}

// control is the size of the control group the plan keeps.
func (p Plan) control() int {
	switch {
	case p.Control < 0:
		return 0
	case p.Control == 0:
		return 1
	}
	return p.Control
}

// confirmDeadline is the deadline of the rollout's provisional swaps.
func (p Plan) confirmDeadline() time.Duration {
	if p.ConfirmDeadline == 0 {
		return DefaultConfirmDeadline
	}
	return p.ConfirmDeadline
}

// Waves splits the servers: the canaries, then waves of Wave, then the
// control group (the last Control servers; none when every server is a
// canary).
func (p Plan) Waves() [][]string {
	canary := max(p.Canary, 1)
	n := min(canary, len(p.Servers))
	out := [][]string{p.Servers[:n]}
	rest := p.Servers[n:]
	if len(rest) == 0 {
		return out
	}
	ctl := min(p.control(), len(rest))
	mid, last := rest[:len(rest)-ctl], rest[len(rest)-ctl:]
	for len(mid) > 0 {
		k := len(mid)
		if p.Wave > 0 {
			k = min(p.Wave, k)
		}
		out = append(out, mid[:k])
		mid = mid[k:]
	}
	if len(last) > 0 {
		out = append(out, last)
	}
	return out
}

// kind names wave i of waves: canary, wave or control.
func (p Plan) kind(i int, waves [][]string) string {
	switch {
	case i == 0:
		return "canary"
	case i == len(waves)-1 && p.control() > 0:
		return "control"
	}
	return "wave"
}

// Validate checks the plan.
func (p Plan) Validate() error {
	switch {
	case len(p.Servers) == 0:
		return errors.New("fleet: no servers")
	case p.Tenant == "":
		return errors.New("fleet: no tenant")
	case p.Canary < 0 || p.Wave < 0:
		return fmt.Errorf("fleet: canary %d, wave %d: want >= 0", p.Canary, p.Wave)
	case p.Bake <= 0:
		return fmt.Errorf("fleet: bake %v: want > 0", p.Bake)
	case p.ConfirmDeadline != 0 && (p.ConfirmDeadline < MinConfirmDeadline || p.ConfirmDeadline > MaxConfirmDeadline):
		return fmt.Errorf("fleet: confirm deadline %v: want %v to %v", p.ConfirmDeadline, MinConfirmDeadline, MaxConfirmDeadline)
	}
	if err := p.Bounds.Validate(); err != nil {
		return err
	}
	seen := map[string]bool{}
	for _, s := range p.Servers {
		if seen[s] {
			return fmt.Errorf("fleet: server %s listed twice", s)
		}
		seen[s] = true
	}
	return nil
}

// tick is how often a bake reads the servers: a tenth of it, between
// 100 ms and a second.
func (p Plan) tick() time.Duration {
	return min(time.Second, max(100*time.Millisecond, p.Bake/10))
}
