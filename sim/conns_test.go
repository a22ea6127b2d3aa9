package sim

import (
	"errors"
	"testing"
	"time"

	"github.com/persephone-go/psp/darc"
	"github.com/persephone-go/psp/internal/connpick"
	"github.com/persephone-go/psp/workload"
)

// poissonTrace returns the arrivals a seeded run of c draws.
func poissonTrace(c Config) []Arrival {
	cfg := c.withDefaults()
	sampler, arrivals := cfg.Workload.NewSampler(cfg.Seed), workload.NewArrivals(cfg.Rate, cfg.Seed)
	var trace []Arrival
	for at := arrivals.Next(); at < int64(cfg.Duration); at = arrivals.Next() {
		typ, svc := sampler.Next()
		trace = append(trace, Arrival{At: at, Type: typ, ServiceNs: svc})
	}
	return trace
}

// TestConnsReplyOrder checks the connection model on a few requests whose
// latencies follow by hand: a reply waits for the earlier replies of its
// connection, not for those of other connections; a drop passes its turn
// when it is dropped; a run without connections answers each on its own.
func TestConnsReplyOrder(t *testing.T) {
	w := workload.Workload{Name: "two", Types: []workload.TypeSpec{
		{Name: "SHORT", ID: 1, Share: 0.5, Service: workload.Dist{Kind: workload.Fixed, Value: workload.Duration(time.Microsecond)}},
		{Name: "LONG", ID: 2, Share: 0.5, Service: workload.Dist{Kind: workload.Fixed, Value: workload.Duration(100 * time.Microsecond)}},
	}}
	us := int64(time.Microsecond)
	for _, tc := range []struct {
		name   string
		conns  int
		policy string
		cap    int
		trace  []Arrival
		want   []int64 // latencies, us; -1: dropped
	}{{
		// LONG on connection 0; a SHORT on connection 1 does not wait
		// for it, the next SHORT of connection 0 (served at once by the
		// second worker) leaves after it.
		name: "two connections", conns: 2, policy: darc.NameCFCFS,
		trace: []Arrival{{At: 0, Type: 1, ServiceNs: 100 * us}, {At: 1 * us, Type: 0, ServiceNs: us, Conn: 1}, {At: 2 * us, Type: 0, ServiceNs: us}},
		want:  []int64{100, 1, 98},
	}, {
		name: "no connections", policy: darc.NameCFCFS,
		trace: []Arrival{{At: 0, Type: 1, ServiceNs: 100 * us}, {At: 1 * us, Type: 0, ServiceNs: us}, {At: 2 * us, Type: 0, ServiceNs: us}},
		want:  []int64{100, 1, 1},
	}, {
		// Three requests on one connection finishing in reverse order
		// all leave with the first.
		name: "reverse completion", conns: 1, policy: darc.NameCFCFS,
		trace: []Arrival{{At: 0, Type: 1, ServiceNs: 100 * us}, {At: 10 * us, Type: 1, ServiceNs: 50 * us}, {At: 20 * us, Type: 0, ServiceNs: us}},
		want:  []int64{100, 90, 80},
	}, {
		// One worker, queues of one request: the third request finds
		// SHORT's queue full and is dropped at 2us; the fourth, on the
		// same connection, leaves when it is served, not before the
		// first's reply.
		name: "drop passes its turn", conns: 1, policy: darc.NameCFCFS, cap: 1,
		trace: []Arrival{{At: 0, Type: 1, ServiceNs: 100 * us}, {At: 1 * us, Type: 0, ServiceNs: us}, {At: 2 * us, Type: 0, ServiceNs: us}, {At: 200 * us, Type: 0, ServiceNs: us}},
		want:  []int64{100, 100, -1, 1},
	}, {
		// A preemptive policy: SHORT preempts LONG but its reply still
		// waits for LONG's on their connection.
		name: "preemptive", conns: 1, policy: PolicyTS,
		trace: []Arrival{{At: 0, Type: 1, ServiceNs: 100 * us}, {At: 1 * us, Type: 0, ServiceNs: us}},
		want:  []int64{101, 100},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			workers := 2
			if tc.cap > 0 || tc.policy == PolicyTS {
				workers = 1
			}
			c := Config{Workload: w, Workers: workers, Policy: tc.policy, Trace: tc.trace, Conns: tc.conns, Warmup: -1,
				Darc: darc.Config{QueueCapacity: tc.cap}, TS: TSConfig{PreemptCost: -1}}
			c.TraceLatencies = make([]int64, len(tc.trace))
			p := mustRun(t, c)
			for i, l := range c.TraceLatencies {
				if l >= 0 {
					l /= us
				}
				if l != tc.want[i] {
					t.Errorf("request %d: latency %dus, want %dus (all: %v)", i, l, tc.want[i], c.TraceLatencies)
				}
			}
			if dropped := p.Overall.Dropped; tc.cap > 0 && dropped != 1 {
				t.Errorf("%d dropped, want 1", dropped)
			}
		})
	}
}

// TestConnsBounds: with as many connections as requests nothing waits for
// another request (the run without connections); with one connection and
// one c-FCFS worker, requests finish in their order anyway; in between,
// no request is answered sooner than without connections, and SHORT's
// tail under DARC grows as connections get fewer. (Round robin spaces a
// connection's requests by a sum of n inter-arrival times, so the range
// of n where LONG holds up the next request is narrow.)
func TestConnsBounds(t *testing.T) {
	w, err := workload.Builtin("high-bimodal")
	if err != nil {
		t.Fatal(err)
	}
	base := Config{Workload: w, Workers: 14, Policy: darc.NameDARC, Load: 0.8, Duration: 100 * time.Millisecond, Seed: 2}
	trace := poissonTrace(base)
	run := func(c Config, conns int, tr []Arrival) ([]int64, float64) {
		t.Helper()
		c.Conns = conns
		if tr != nil {
			c.Trace, c.Rate, c.Load, c.Duration = tr, 0, 0, 0
			c.TraceLatencies = make([]int64, len(tr))
		}
		p := mustRun(t, c)
		st, _ := p.TypeStat("SHORT")
		return c.TraceLatencies, st.P999Slowdown
	}
	alone, _ := run(base, 0, trace)
	many := make([]Arrival, len(trace))
	for i, a := range trace {
		a.Conn = i
		many[i] = a
	}
	if got, _ := run(base, len(trace), many); !equal(got, alone) {
		t.Errorf("a connection per request: latencies differ from the run without connections")
	}
	// Poisson arrivals on as many connections as requests: the same.
	_, sAlone := run(base, 0, nil)
	if _, s := run(base, MaxConns, nil); s != sAlone {
		t.Errorf("SHORT p99.9 slowdown %.4g on %d connections, %.4g without", s, MaxConns, sAlone)
	}

	one := Config{Workload: w, Workers: 1, Policy: darc.NameCFCFS, Load: 0.7, Duration: 50 * time.Millisecond, Seed: 2}
	oneTrace := poissonTrace(one)
	a, _ := run(one, 0, oneTrace)
	if b, _ := run(one, 1, oneTrace); !equal(a, b) {
		t.Errorf("one FCFS worker: latencies on one connection differ from those without")
	}

	last := sAlone
	for _, conns := range []int{30, 25, 20} {
		tr := make([]Arrival, len(trace))
		for i, a := range trace {
			a.Conn = i % conns
			tr[i] = a
		}
		lat, _ := run(base, conns, tr)
		later := 0
		for i := range lat {
			if lat[i] < alone[i] {
				t.Fatalf("%d connections: request %d answered after %d ns, before its %d ns without connections", conns, i, lat[i], alone[i])
			}
			if lat[i] > alone[i] {
				later++
			}
		}
		rr := base
		rr.ConnPick = connpick.RoundRobin
		_, s := run(rr, conns, nil)
		t.Logf("%d connections: %d of %d requests answered later; SHORT p99.9 slowdown %.3g (%.3g without)", conns, later, len(lat), s, sAlone)
		if later == 0 || s < last {
			t.Errorf("%d connections: %d requests answered later, SHORT p99.9 slowdown %.3g (%.3g with more connections)", conns, later, s, last)
		}
		last = s
	}
}

// TestConnsPool: requests sent on an idle connection, as client pools
// send them, wait behind a LONG only when every connection has a request
// in flight: on 30 connections (about 11 requests in the server at this
// load, often more) SHORT's tail is better than round robin's. (On 20,
// every connection is often busy, and piling onto the least busy one is
// no better than round robin: a real pool would make its caller wait for
// the first connection freed, which neither policy models.)
func TestConnsPool(t *testing.T) {
	w, err := workload.Builtin("high-bimodal")
	if err != nil {
		t.Fatal(err)
	}
	base := Config{Workload: w, Workers: 14, Policy: darc.NameDARC, Load: 0.8, Duration: 100 * time.Millisecond, Seed: 2, Conns: 30}
	tail := func(pick connpick.Policy) float64 {
		c := base
		c.ConnPick = pick
		p := mustRun(t, c)
		st, _ := p.TypeStat("SHORT")
		return st.P999Slowdown
	}
	none := base
	none.Conns = 0
	p := mustRun(t, none)
	alone, _ := p.TypeStat("SHORT")
	pool, rr := tail(connpick.Pool), tail(connpick.RoundRobin)
	t.Logf("SHORT p99.9 slowdown on %d connections: pool %.3g, round robin %.3g, without connections %.3g", base.Conns, pool, rr, alone.P999Slowdown)
	if !(pool < rr) || pool < alone.P999Slowdown {
		t.Errorf("SHORT p99.9 slowdown: pool %.3g, round robin %.3g, without connections %.3g; want without <= pool < round robin", pool, rr, alone.P999Slowdown)
	}
	if d := tail(""); d != pool {
		t.Errorf("default policy: SHORT p99.9 slowdown %.3g, pool's %.3g", d, pool)
	}
}

func equal(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestConnsRefused: bad connection settings are refused.
func TestConnsRefused(t *testing.T) {
	w, err := workload.Builtin("high-bimodal")
	if err != nil {
		t.Fatal(err)
	}
	base := Config{Workload: w, Workers: 4, Load: 0.5, Duration: time.Millisecond}
	for name, c := range map[string]Config{
		"negative":             {Conns: -1},
		"too many":             {Conns: MaxConns + 1},
		"trace off its conns":  {Conns: 2, Trace: []Arrival{{At: 1, Conn: 2}}},
		"trace without conns":  {Trace: []Arrival{{At: 1, Conn: 1}}},
		"bad policy":           {Conns: 2, ConnPick: "random"},
		"policy without conns": {ConnPick: connpick.Pool},
		"policy with a trace":  {Conns: 2, ConnPick: connpick.Pool, Trace: []Arrival{{At: 1, Conn: 1}}},
		"tenants":              {Conns: 2, Tenants: []Tenant{{Name: "a", Workload: w, Load: 0.5}}, Workload: workload.Workload{}},
	} {
		cfg := base
		cfg.Conns, cfg.Trace, cfg.Tenants, cfg.ConnPick = c.Conns, c.Trace, c.Tenants, c.ConnPick
		if c.Tenants != nil {
			cfg.Workload = c.Workload
		}
		if c.Trace != nil {
			cfg.Load, cfg.Duration = 0, 0
		}
		if _, err := Run(cfg); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: %v, want ErrInvalidConfig", name, err)
		}
	}
}
