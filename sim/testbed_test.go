package sim

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/persephone-go/psp/darc"
	"github.com/persephone-go/psp/report"
	"github.com/persephone-go/psp/workload"
)

func builtinPhases(t testing.TB, name string) workload.Phases {
	t.Helper()
	p, err := workload.ParsePhases(name)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// swapPhases is High Bimodal, then the same with the two service times
// swapped, each phase lasting d.
func swapPhases(t testing.TB, d time.Duration) workload.Phases {
	p := builtinPhases(t, "phase-change")
	p.Phases = p.Phases[:2]
	return p.Scaled(float64(d) / float64(time.Duration(p.Phases[0].Duration)))
}

// reReservation runs DARC through the swap and returns how long after the
// swap its reservation reached the swapped workload's nominal one.
func reReservation(t *testing.T, cfg Config) (float64, bool) {
	t.Helper()
	p := mustRun(t, cfg)
	prs, err := PhaseReservations(cfg, &p)
	if err != nil {
		t.Fatal(err)
	}
	if len(prs) != 2 || !prs[0].Matched {
		t.Fatalf("phase reservations %+v (reservations %+v)", prs, p.Timeline.Reservations)
	}
	return prs[1].AfterSec, prs[1].Matched
}

// TestPhaseChangeReReservesPaperScale: at the paper's scale (14 workers,
// load 0.8, 50,000-sample profiles), once the two types swap service
// times DARC reserves the new short type's worker within half a second.
func TestPhaseChangeReReservesPaperScale(t *testing.T) {
	seeds := []uint64{1, 2}
	if raceEnabled {
		seeds = seeds[:1]
	}
	for _, seed := range seeds {
		cfg := Config{Phases: swapPhases(t, 2*time.Second), Workers: 14, Load: 0.8, Seed: seed,
			Timeline: 100 * time.Millisecond, Darc: darc.Config{MinSamples: darc.DefaultMinSamples}}
		after, ok := reReservation(t, cfg)
		t.Logf("seed %d: re-reserved %.3f s after the swap (%v)", seed, after, ok)
		if !ok || after > 0.5 {
			t.Errorf("seed %d: DARC did not re-reserve within 0.5 s of the swap (matched %v after %.3f s)", seed, ok, after)
		}
	}
}

// TestPhaseChangeReReservesDemoScale: at the scale of the live end-to-end
// test and the demo (about 110 requests/s of a 2000x dilated server, 50
// to 200-sample profiles), DARC re-reserves within two profiling windows
// of the swap (bounded here by 0.04 s of the live server per sample of
// the window: 2 s and 8 s), for every seed.
func TestPhaseChangeReReservesDemoScale(t *testing.T) {
	const dilation = 2000
	for _, minSamples := range []int{50, 200} {
		for seed := uint64(1); seed <= 8; seed++ {
			phase := time.Duration(float64(8*time.Second) / dilation) // 8 s live: ~880 requests
			cfg := Config{Phases: swapPhases(t, phase), Workers: 14, Load: 0.8, Seed: seed, Warmup: -1,
				Timeline: phase / 40, Darc: darc.Config{MinSamples: minSamples}}
			after, ok := reReservation(t, cfg)
			live := after * dilation
			t.Logf("min samples %d, seed %d: re-reserved %.2f s (dilated) after the swap", minSamples, seed, live)
			if limit := 0.04 * float64(minSamples); !ok || live > limit {
				t.Errorf("min samples %d, seed %d: no re-reservation within %.0f s of dilated time (matched %v after %.2f s)", minSamples, seed, limit, ok, live)
			}
		}
	}
}

// TestCPUWaste: the paper's CPU waste (idle workers while requests wait)
// is zero for a work-conserving policy at any load, positive for DARC
// (reserved workers idle while other types queue) and d-FCFS.
func TestCPUWaste(t *testing.T) {
	w, _ := workload.Builtin("extreme-bimodal")
	d := 20 * time.Millisecond
	if raceEnabled {
		d = 5 * time.Millisecond
	}
	for _, load := range []float64{0.2, 0.5, 0.8, 0.95, 1.2} {
		for _, pol := range []string{"cfcfs", "fp", "ts", "ts-mq"} {
			p := mustRun(t, Config{Workload: w, Workers: 16, Policy: pol, Load: load, Duration: d, Seed: 1})
			if p.WastedWorkers != 0 {
				t.Errorf("%s at load %g: CPU waste %v, want 0 (work-conserving)", pol, load, p.WastedWorkers)
			}
			if load < 0.9 && !(p.MeanIdleWorkers > 0) {
				t.Errorf("%s at load %g: %v idle workers", pol, load, p.MeanIdleWorkers)
			}
		}
	}
	tpcc, _ := workload.Builtin("tpcc")
	for _, c := range []struct {
		w    workload.Workload
		pol  string
		load float64
	}{{tpcc, "darc", 0.3}, {w, "darc", 0.5}, {w, "dfcfs", 0.2}} {
		p := mustRun(t, Config{Workload: c.w, Workers: 16, Policy: c.pol, Load: c.load, Duration: 100 * time.Millisecond, Seed: 1})
		t.Logf("%s %s at load %g: waste %.4f, idle %.2f", c.w.Name, c.pol, c.load, p.WastedWorkers, p.MeanIdleWorkers)
		if !(p.WastedWorkers > 0) || p.WastedWorkers > p.MeanIdleWorkers {
			t.Errorf("%s %s at load %g: CPU waste %v (idle %v), want positive and at most the idle workers", c.w.Name, c.pol, c.load, p.WastedWorkers, p.MeanIdleWorkers)
		}
	}
}

// TestPerTypeSustained: time sharing with one queue per type starves the
// rare long type of Extreme Bimodal at high load; the point says so even
// though all requests together look sustained.
func TestPerTypeSustained(t *testing.T) {
	w, _ := workload.Builtin("extreme-bimodal")
	d := 200 * time.Millisecond
	if raceEnabled {
		d = 50 * time.Millisecond
	}
	p := mustRun(t, Config{Workload: w, Workers: 16, Policy: PolicyTSMultiQueue, Load: 0.9, Duration: d, Seed: 1})
	long := p.Types[1]
	t.Logf("ts-mq at 0.9: LONG %q, SHORT %q", long.NotSustained, p.Types[0].NotSustained)
	if p.Sustained || !strings.Contains(long.NotSustained, "backlog grew") || p.Types[0].NotSustained != "" {
		t.Errorf("ts-mq at 0.9: sustained %v, LONG %q, SHORT %q", p.Sustained, long.NotSustained, p.Types[0].NotSustained)
	}
	ok, why := report.SLO{Slowdown: 1000, PerType: true}.Holds(&p)
	if ok || !strings.Contains(why, "LONG not sustained") {
		t.Errorf("a per-type SLO held on a starving type: %v %q", ok, why)
	}
	for _, c := range []struct {
		pol  string
		seed uint64
	}{{"darc", 1}, {"darc", 2}, {"cfcfs", 1}} {
		if raceEnabled && c.seed > 1 {
			continue
		}
		q := mustRun(t, Config{Workload: w, Workers: 16, Policy: c.pol, Load: 0.8, Duration: 200 * time.Millisecond, Seed: c.seed})
		if !q.Sustained {
			t.Errorf("%s at 0.8, seed %d: not sustained: %+v", c.pol, c.seed, q.Types)
		}
	}
}

// TestNetworkRTT: the round trip adds to every latency, not to slowdowns.
func TestNetworkRTT(t *testing.T) {
	w, _ := workload.Builtin("high-bimodal")
	base := Config{Workload: w, Workers: 14, Policy: "darc", Load: 0.7, Duration: 50 * time.Millisecond, Seed: 3}
	with := base
	with.NetworkRTT = 10 * time.Microsecond
	a, b := mustRun(t, base), mustRun(t, with)
	for i := range a.Types {
		sa, sb := a.Types[i], b.Types[i]
		if sb.P50Latency-sa.P50Latency < 9900 || sb.P50Latency-sa.P50Latency > 10100 || sa.P999Slowdown != sb.P999Slowdown {
			t.Errorf("%s: p50 %d -> %d ns, p99.9 slowdown %v -> %v", sa.Name, sa.P50Latency, sb.P50Latency, sa.P999Slowdown, sb.P999Slowdown)
		}
	}
	if _, err := Run(Config{Workload: w, Load: 0.5, NetworkRTT: -1}); err == nil {
		t.Error("negative round trip accepted")
	}
}

// TestDispatcherRate: a dispatcher slower than the arrivals cannot sustain
// them; a fast one adds an M/D/1 wait (Pollaczek-Khinchine) in front of
// the queues.
func TestDispatcherRate(t *testing.T) {
	w := single(workload.Fixed, 100*time.Nanosecond)
	// 16 workers at load 0.5: 80 Mrps offered to a dispatcher of 50 Mrps.
	p := mustRun(t, Config{Workload: w, Workers: 16, Policy: "cfcfs", Load: 0.5, Duration: 5 * time.Millisecond, DispatcherRate: 50e6})
	if p.Sustained || p.AchievedRate > 0.7*p.OfferedRate {
		t.Errorf("dispatcher at 50 Mrps sustained %.0f req/s: %+v", p.OfferedRate, p.Types[0])
	}
	// 1 worker of 1us at load 0.1 (100k req/s), dispatcher at 125k req/s
	// (8us per request, utilisation 0.8): mean wait 0.8 x 8us / (2 x 0.2)
	// = 16us, plus the 8us of its own dispatch and 1us of service.
	q := mustRun(t, Config{Workload: single(workload.Fixed, time.Microsecond), Workers: 1, Policy: "cfcfs", Load: 0.1,
		Duration: 2 * time.Second, Seed: 2, DispatcherRate: 125e3})
	within(t, "mean latency behind an M/D/1 dispatcher", q.Overall.MeanLatency, 16e3+8e3+1e3, 0.05)
	if !q.Sustained {
		t.Error("a dispatcher at 80% utilisation not sustained")
	}
}

// TestMisclassify: with a random classifier on High Bimodal, DARC sees two
// types of the same mean and groups them: one group, every worker.
func TestMisclassify(t *testing.T) {
	w, _ := workload.Builtin("high-bimodal")
	base := Config{Workload: w, Workers: 14, Policy: "darc", Load: 0.6, Duration: 200 * time.Millisecond, Seed: 1, Timeline: 10 * time.Millisecond}
	exact := mustRun(t, base)
	random := base
	random.Misclassify = 0.5
	rnd := mustRun(t, random)
	last := func(p report.Point) report.Reservation {
		return p.Timeline.Reservations[len(p.Timeline.Reservations)-1]
	}
	if r := last(exact); len(r.Groups) != 2 || r.Groups[0].Workers != 1 {
		t.Errorf("exact classifier: reservation %s", r.String())
	}
	if r := last(rnd); len(r.Groups) != 1 || r.Groups[0].Workers != 14 {
		t.Errorf("random classifier: reservation %s, want one group of every worker", r.String())
	}
	// Results keep the true types: SHORT requests are still 1us.
	if s, _ := rnd.TypeStat("SHORT"); s.P50Slowdown < 1 || s.Count < 1000 {
		t.Errorf("random classifier, SHORT: %+v", s)
	}
	if _, err := Run(Config{Workload: w, Load: 0.5, Misclassify: 1.5}); err == nil {
		t.Error("misclassify 1.5 accepted")
	}
}

// TestShinjukuPreemptsEveryQuantum: Shinjuku preempts a slice at every
// quantum even with nothing waiting: alone on a worker, a 100us request
// pays 19 preemptions of 1us; time sharing, which preempts only when
// others wait, none.
func TestShinjukuPreemptsEveryQuantum(t *testing.T) {
	w := single(workload.Fixed, 100*time.Microsecond)
	for pol, want := range map[string]int64{PolicyShinjuku: 119_000, PolicyTS: 100_000} {
		p := mustRun(t, Config{Workload: w, Workers: 4, Policy: pol, Load: 0.001, Duration: time.Second, Seed: 1})
		if p.Overall.Count == 0 || p.Overall.MaxLatency != want || p.Overall.P50Latency != want {
			t.Errorf("%s: latency p50 %d max %d ns, want %d", pol, p.Overall.P50Latency, p.Overall.MaxLatency, want)
		}
	}
}

// TestShinjukuQueueSelection: a free worker takes the head of the queue
// that waited longest relative to its type's mean, not the shortest type.
func TestShinjukuQueueSelection(t *testing.T) {
	w, _ := workload.Builtin("high-bimodal")
	cfg := Config{Workload: w, Workers: 1, Policy: PolicyShinjuku, Load: 0.5, Duration: time.Millisecond}.withDefaults()
	e := newPreemptive(cfg)
	add := func(typ int32, arrival int64) int32 {
		h := int32(len(e.reqs))
		e.reqs = append(e.reqs, request{arrival: arrival, service: 1, remaining: 1, typ: typ, seen: typ})
		e.push(h)
		return h
	}
	short := add(0, 1_000_000) // SHORT (1us) waiting 5us at now: ratio 5
	long := add(1, 0)          // LONG (100us) waiting 1006us: ratio 10.06
	if h := e.pop(false, 1_006_000); h != long {
		t.Errorf("popped %d, want the LONG request %d (its wait is 10x its mean, SHORT's 6x)", h, long)
	}
	if h := e.pop(false, 1_006_000); h != short {
		t.Errorf("popped %d, want SHORT %d", h, short)
	}
	short2 := add(0, 2_000_000)
	add(1, 1_500_000)
	if h := e.pop(false, 2_010_000); h != short2 {
		t.Errorf("popped %d, want SHORT %d (10x its mean against LONG's 5.1x)", h, short2)
	}
}

// TestPhasesRates: each phase's arrival rate follows its own mix at the
// run's load (or its own), and types absent from a phase get no arrivals.
func TestPhasesRates(t *testing.T) {
	ph := builtinPhases(t, "phase-change").Scaled(0.02) // 100ms phases
	p := mustRun(t, Config{Phases: ph, Workers: 14, Policy: "cfcfs", Load: 0.5, Seed: 1, Warmup: -1, Timeline: 100 * time.Millisecond})
	tl := p.Timeline
	if len(tl.Phases) != 4 || tl.Phases[3].StartSec != 0.3 || len(tl.Buckets) < 4 {
		t.Fatalf("timeline phases %+v, %d buckets", tl.Phases, len(tl.Buckets))
	}
	// Expected completions per phase: 0.5 x 14 / mean service x 0.1 s.
	means := []float64{50.5e-6, 50.5e-6, 0.995*100e-6 + 0.005*1e-6, 100e-6}
	for i, b := range tl.Buckets[:4] {
		n := b.Types[0].Count + b.Types[1].Count
		want := 0.5 * 14 / means[i] * 0.1
		if math.Abs(float64(n)-want) > 0.05*want {
			t.Errorf("phase %d: %d completions, want about %.0f", i, n, want)
		}
	}
	if tl.Buckets[3].Types[1].Count > 0 {
		t.Errorf("LONG completions in the one-type phase: %d", tl.Buckets[3].Types[1].Count)
	}
	if p.Workload != "phase-change" || !(p.OfferedRate > 0) {
		t.Errorf("point workload %q, offered %v", p.Workload, p.OfferedRate)
	}
	for _, bad := range []Config{
		{Phases: ph, Workers: 14, Load: 0.5, Duration: time.Second},
		{Phases: ph, Workers: 14, Rate: 1000},
		{Phases: ph, Workers: 14},
	} {
		if _, err := Run(bad); err == nil {
			t.Errorf("accepted %+v", bad)
		}
	}
}
