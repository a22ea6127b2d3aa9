package tests

import (
	"bytes"
	"context"
	"crypto/rand"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/persephone-go/psp/loadgen"
	"github.com/persephone-go/psp/wire"
	"github.com/persephone-go/psp/workload"
)

// Classifiers committed by the SDK (relative to the repository root).
const (
	pspHeaderWasm = "examples/classifiers/c/pspheader.wasm"
	randomWasm    = "examples/classifiers/c/random.wasm"
)

// prewarm sends High Bimodal at 50% load for 3 s to every server at once
// (about 80 requests at the default dilation), so that DARC collects its
// first profile (the servers start with --min-samples 50) before the
// measured runs.
func prewarm(t *testing.T, servers ...*server) {
	t.Helper()
	var waits []func() (*loadgen.Result, error)
	for _, s := range servers {
		waits = append(waits, playAsync(t, s, builtin(t, "high-bimodal"), 0.5, 3*time.Second, 99, loadgen.Spec{Warmup: -1}))
	}
	for _, wait := range waits {
		res, err := wait()
		if err != nil {
			t.Fatalf("prewarm: %v", err)
		}
		if res.Answered == 0 {
			t.Fatalf("prewarm: no replies: %s", summary(res))
		}
	}
}

// playBoth plays the same schedule (w at load for d, seeded) against a and
// b at the same time, so both servers see the same machine noise.
func playBoth(t *testing.T, a, b *server, w *workload.Workload, load float64, d time.Duration, seed uint64) (*loadgen.Result, *loadgen.Result) {
	t.Helper()
	wa := playAsync(t, a, w, load, d, seed, loadgen.Spec{})
	wb := playAsync(t, b, w, load, d, seed, loadgen.Spec{})
	ra, erra := wa()
	rb, errb := wb()
	if erra != nil || errb != nil {
		t.Fatalf("load generator: %v, %v", erra, errb)
	}
	return ra, rb
}

// TestHighBimodalDARCBeatsCFCFS is the paper's headline on a live server:
// at 80% load with 14 workers, DARC gives SHORT requests a p99.9 slowdown
// several times lower than c-FCFS, by reserving exactly one worker for them.
// A DARC and a c-FCFS server run side by side under the same schedule; on a
// noisy machine the comparison gets a second attempt with another seed.
// Numbers from the simulator for the same setup (psp sim, 2 s): SHORT p99.9
// slowdown 2.4 under DARC, 104 under c-FCFS.
func TestHighBimodalDARCBeatsCFCFS(t *testing.T) {
	d := startServer(t, serverOptions{policy: "darc"})
	c := startServer(t, serverOptions{policy: "cfcfs"})
	prewarm(t, d, c)

	// c-FCFS's SHORT tail comes from bursts of LONG requests: a run needs
	// a few hundred SHORT requests (12 s: ~240) to show it.
	const attempts = 2
	for attempt := 1; attempt <= attempts; attempt++ {
		darcRes, cfcfsRes := playBoth(t, d, c, builtin(t, "high-bimodal"), 0.8, 12*time.Second, uint64(attempt))
		t.Logf("attempt %d, darc at load 0.8: %s", attempt, summary(darcRes))
		t.Logf("attempt %d, cfcfs at load 0.8: %s", attempt, summary(cfcfsRes))
		for _, r := range []*loadgen.Result{darcRes, cfcfsRes} {
			if r.Lost > 0 {
				t.Errorf("lost %d requests at 80%% load", r.Lost)
			}
		}
		// Under c-FCFS a SHORT request waits behind LONG ones (100x
		// longer); DARC's reserved worker keeps it from waiting. The paper
		// reports up to 15.7x; ask for 3x.
		if darcBeatsCFCFS(t, darcRes, cfcfsRes, "SHORT", attempt == attempts) {
			break
		}
	}

	// The reference's reservation for High Bimodal on 14 workers: SHORT
	// (demand 0.14) gets worker 0; LONG gets the other 13 and the spillway.
	st := d.status()
	if st.Phase != "darc" || len(st.Groups) != 2 {
		t.Fatalf("DARC status: phase %q, %d groups (want darc, 2)", st.Phase, len(st.Groups))
	}
	g0, g1 := st.Groups[0], st.Groups[1]
	t.Logf("DARC groups: %+v", st.Groups)
	if !slices.Equal(g0.Types, []string{"SHORT"}) || !slices.Equal(g0.Reserved, []int{0}) {
		t.Errorf("first group %v reserves %v, want [SHORT] on [0]", g0.Types, g0.Reserved)
	}
	if !slices.Equal(g1.Types, []string{"LONG"}) || len(g1.Reserved) != workers-1 {
		t.Errorf("second group %v reserves %v, want [LONG] on the 13 other workers", g1.Types, g1.Reserved)
	}
}

// swapped returns High Bimodal with the two types' service times swapped:
// SHORT now takes 100µs and LONG 1µs.
func swapped(t *testing.T) *workload.Workload {
	w := builtin(t, "high-bimodal")
	w.Name = "high-bimodal-swapped"
	w.Types = slices.Clone(w.Types)
	w.Types[0].Service, w.Types[1].Service = w.Types[1].Service, w.Types[0].Service
	return w
}

// TestPhaseChangeReReserves swaps the two types' service times mid-run:
// DARC must notice from its profile, re-reserve for the now-short LONG type,
// and the short requests' tail must recover.
func TestPhaseChangeReReserves(t *testing.T) {
	// Re-profiling needs completions: a smaller dilation gives ~110
	// requests/s at 80% load.
	s := startServer(t, serverOptions{policy: "darc", dilation: 2000})
	prewarm(t, s)
	phase1 := play(t, s, builtin(t, "high-bimodal"), 0.8, 3*time.Second, 1, loadgen.Spec{})
	before := s.status()
	t.Logf("phase 1: %s", summary(phase1))
	if before.Phase != "darc" || len(before.Groups) == 0 || !slices.Equal(before.Groups[0].Types, []string{"SHORT"}) {
		t.Fatalf("before the swap: phase %q groups %+v, want SHORT reserved first", before.Phase, before.Groups)
	}

	// Phase 2: the same load with the service times swapped, in two runs:
	// the transition (DARC re-profiles: 50 samples, then a queuing-delay
	// check) and then the measured run, which must show the recovered tail.
	transition := play(t, s, swapped(t), 0.8, 3*time.Second, 2, loadgen.Spec{Warmup: -1})
	mid := s.status()
	t.Logf("phase 2, transition: %s", summary(transition))
	t.Logf("reservations: %d before the swap, %d after the transition; groups: %+v", before.Reservations, mid.Reservations, mid.Groups)
	phase2 := play(t, s, swapped(t), 0.8, 4*time.Second, 3, loadgen.Spec{})
	after := s.status()
	t.Logf("phase 2, measured: %s", summary(phase2))
	if mid.Reservations <= before.Reservations {
		t.Errorf("no re-reservation after the swap (%d before, %d after)", before.Reservations, mid.Reservations)
	}
	if len(after.Groups) == 0 || !slices.Equal(after.Groups[0].Types, []string{"LONG"}) {
		t.Errorf("after the swap the first (reserved, shortest) group is %+v, want [LONG]", after.Groups)
	}
	// LONG now carries the 1µs requests. Had DARC kept its old reservation
	// they would queue behind 100µs requests like under c-FCFS (p99.9
	// slowdown in the tens to hundreds). Compare with phase 1's SHORT tail,
	// with a generous margin.
	shortBefore := typeP999Slowdown(t, phase1, "SHORT")
	shortAfter := typeP999Slowdown(t, phase2, "LONG")
	t.Logf("p99.9 slowdown of the 1µs requests: %.3g before the swap (SHORT), %.3g after (LONG)", shortBefore, shortAfter)
	if shortAfter > 3*shortBefore+10 {
		t.Errorf("short requests did not recover: p99.9 slowdown %.3g after the swap, %.3g before", shortAfter, shortBefore)
	}
}

// TestRandomClassifierNoWorseThanCFCFS: with a classifier that labels
// requests SHORT or LONG at random, both types look alike (mean ~50µs), DARC
// groups them together and behaves like c-FCFS, not worse.
func TestRandomClassifierNoWorseThanCFCFS(t *testing.T) {
	d := startServer(t, serverOptions{policy: "darc", classifier: randomWasm})
	c := startServer(t, serverOptions{policy: "cfcfs", classifier: randomWasm})
	prewarm(t, d, c)
	dr, cr := playBoth(t, d, c, builtin(t, "high-bimodal"), 0.7, 5*time.Second, 5)
	t.Logf("darc with the random classifier: %s; groups %+v", summary(dr), d.status().Groups)
	t.Logf("cfcfs with the random classifier: %s", summary(cr))
	if dr.Lost+cr.Lost > 0 {
		t.Errorf("lost requests: darc %d, cfcfs %d", dr.Lost, cr.Lost)
	}
	// Same behaviour, within the noise of a few-second run on a shared
	// machine (a p99.9 over ~400 requests is close to their maximum): the
	// p99 within 50%, the p99.9 within 2x, plus small constants.
	d99, c99 := dr.Overall.P99Slowdown, cr.Overall.P99Slowdown
	d999, c999 := dr.Overall.P999Slowdown, cr.Overall.P999Slowdown
	t.Logf("overall slowdown: darc p99 %.3g p99.9 %.3g; cfcfs p99 %.3g p99.9 %.3g", d99, d999, c99, c999)
	if d99 > 1.5*c99+2 || d999 > 2*c999+10 {
		t.Errorf("with a random classifier DARC (p99 %.3g, p99.9 %.3g) is worse than c-FCFS (p99 %.3g, p99.9 %.3g)", d99, d999, c99, c999)
	}
}

// TestHotSwapLosesNothing pushes a new classifier (twice) while a load runs:
// every request that reaches psp must be answered in time. A request the
// client lost is found: inside psp (dropped by the kernel at psp's socket
// because psp did not read in time, read and never counted, shed, its
// reply failed to leave, or answered after the client stopped waiting),
// which fails, or outside psp (at the client's socket, which it failed to
// send, or in the kernel's input backlog: a busy host starving the
// client), which is logged; a loss found nowhere fails.
func TestHotSwapLosesNothing(t *testing.T) {
	// Timing does not matter here, the number of requests around the swaps
	// does: a small dilation gives ~800 requests/s. No queue deadlines: a
	// host that starves the server for a few hundred milliseconds had it
	// shed requests as expired, with or without swaps (in runs without
	// the swaps too); without deadlines such a stall shows as lateness,
	// and a pause of the swap's own as drops at psp's socket.
	s := startServer(t, serverOptions{policy: "darc", classifier: pspHeaderWasm, token: "e2e-secret", dilation: 200,
		extra: []string{"--deadline-factor", "0"}})
	prewarm(t, s)
	wasm, err := os.ReadFile(filepath.Join(repoRoot, pspHeaderWasm))
	if err != nil {
		t.Fatal(err)
	}
	v0 := tenantVersion(t, s)
	before, backlog0 := s.settledStatus(), backlogDrops()
	swapErrs := make(chan error, 1)
	go func() {
		var err error
		for i := 0; i < 2 && err == nil; i++ {
			time.Sleep(time.Second)
			err = s.pushClassifier(wasm)
		}
		swapErrs <- err
	}()
	res := play(t, s, builtin(t, "high-bimodal"), 0.6, 3*time.Second, 7, loadgen.Spec{})
	if err := <-swapErrs; err != nil {
		t.Fatalf("hot swap: %v", err)
	}
	t.Logf("during two hot swaps: %s", summary(res))
	if v := tenantVersion(t, s); v < v0+2 {
		t.Errorf("classifier version %d after two swaps from %d", v, v0)
	}
	if res.Late != 0 || res.Sent != res.Scheduled || res.BadReplies != 0 {
		t.Errorf("hot swap: %s", summary(res))
	}
	st := s.settledStatus()
	shed := st.Dropped - before.Dropped
	if shed != 0 {
		t.Errorf("server dropped %d requests during the swaps: %+v", shed, st.Drops)
	}
	atPSP := st.socketDrops() - before.socketDrops()
	txErrors := st.Net.TxErrors - before.Net.TxErrors
	unread := (st.Net.RxPackets - before.Net.RxPackets) - (st.Received - before.Received)
	// Lost outside psp: at the client's socket, never sent, or in the
	// kernel's input backlog (requests or replies).
	backlog := backlogDrops() - backlog0
	outside := uint64(res.ClientDrops+res.SendErrors) + backlog
	// Answered by psp after the client stopped waiting (two grace periods
	// past the schedule): late, not lost, on a host that starved one side.
	// A reply the kernel dropped on its way to the client is answered too:
	// those are taken off.
	afterClient := max(int64(st.Answered-before.Answered)-res.Answered-res.Late-res.ClientDrops-int64(backlog), 0)
	t.Logf("lost %d: %d dropped at psp's socket, %d read and not counted, %d dropped by psp, %d replies psp failed to send, %d answered after the client stopped waiting, %d lost outside psp (%d at the client's socket, %d it failed to send)",
		res.Lost, atPSP, unread, shed, txErrors, afterClient, outside, res.ClientDrops, res.SendErrors)
	for i, tn := range st.Tenants {
		if i < len(before.Tenants) {
			t.Logf("tenant %s: classifier escalated to its lane %d times during the run, on its lane now: %v", tn.Name, tn.Escalations-before.Tenants[i].Escalations, tn.OnLane)
		}
	}
	if afterClient > 0 {
		t.Errorf("%d requests answered more than %v after the end of the schedule", afterClient, 2*res.Grace)
	}
	if atPSP > 0 || txErrors > 0 || unread > 0 {
		t.Errorf("psp lost requests during the swaps: the kernel dropped %d at its socket (it stopped reading), %d read were never counted, %d replies failed to leave", atPSP, unread, txErrors)
	}
	inside := atPSP + unread + shed + txErrors + uint64(afterClient)
	if found := inside + outside; uint64(res.Lost) > found {
		t.Errorf("%d requests lost and found nowhere (%d accounted for)", uint64(res.Lost)-found, found)
	} else if res.Lost > 0 && inside == 0 {
		t.Logf("the %d requests lost were lost outside psp: not a fault of the swap", res.Lost)
	}
}

func tenantVersion(t *testing.T, s *server) int {
	t.Helper()
	st := s.status()
	for _, tn := range st.Tenants {
		if tn.Name == "default" {
			return tn.Version
		}
	}
	t.Fatalf("no tenant \"default\" in /status: %+v", st.Tenants)
	return 0
}

// pushClassifier hot-swaps the default tenant's classifier with psp
// classifier push when the binary has it, else with a PUT on the admin API.
func (s *server) pushClassifier(wasm []byte) error {
	dir := s.t.TempDir()
	wf, tf := filepath.Join(dir, "c.wasm"), filepath.Join(dir, "token")
	if err := os.WriteFile(wf, wasm, 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(tf, []byte(s.token), 0o600); err != nil {
		return err
	}
	help, _ := exec.Command(pspBinary, "classifier", "push", "--help").CombinedOutput()
	if bytes.Contains(help, []byte("--tenant")) {
		out, err := exec.Command(pspBinary, "classifier", "push", "--tenant", "default",
			"--admin", s.admin, "--token-file", tf, wf).CombinedOutput()
		if err != nil {
			return &pushError{err: err, out: out}
		}
		return nil
	}
	req, err := http.NewRequest(http.MethodPut, "http://"+s.admin+"/tenants/default/classifier", bytes.NewReader(wasm))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+s.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return &pushError{out: []byte(resp.Status)}
	}
	return nil
}

type pushError struct {
	err error
	out []byte
}

func (e *pushError) Error() string {
	if e.err != nil {
		return e.err.Error() + ": " + string(e.out)
	}
	return string(e.out)
}

// TestServerSurvivesAbuse: a client killed mid-run, garbage datagrams and a
// flood of one type must not stop the server from serving the other types,
// and every drop must be counted.
func TestServerSurvivesAbuse(t *testing.T) {
	s := startServer(t, serverOptions{policy: "darc", dilation: 2000, extra: []string{"--queue-capacity", "64"}})
	prewarm(t, s)

	// 1. A client process killed (SIGKILL) a second into a 10 s run.
	client := exec.Command(pspBinary, "client", "--server", s.listen, "--load", "0.5",
		"--workers", strconv.Itoa(workers), "--dilation", strconv.FormatFloat(s.dilation, 'g', -1, 64), "--duration", "10s")
	if err := client.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	_ = client.Process.Signal(syscall.SIGKILL)
	_ = client.Wait()

	// 2. Garbage: empty, runt, random and oversized datagrams, unknown types.
	conn, err := net.Dial("udp", s.listen)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	garbage := [][]byte{{}, {1}, make([]byte, wire.HeaderLen-1), make([]byte, 9000)}
	for i := 0; i < 50; i++ {
		b := make([]byte, 16+i)
		_, _ = rand.Read(b)
		// Random ids and types (mostly UNKNOWN: the spillway worker serves
		// them), but a bounded service time: the emulate app would sleep
		// for whatever the header asks.
		b[13], b[14], b[15] = b[13]&0x03, 0, 0
		garbage = append(garbage, b)
	}
	unknown := make([]byte, wire.HeaderLen)
	wire.Header{ID: 1, Type: 999, ServiceNs: 1000}.Encode(unknown)
	garbage = append(garbage, unknown)
	for _, g := range garbage {
		_, _ = conn.Write(g)
	}

	// 3. Flood LONG at twice the server's capacity while SHORT requests
	// run at a modest rate: LONG's queue (64) overflows and drops; SHORT,
	// with its reserved worker, must be served in full.
	flood := &workload.Workload{Name: "long-flood", Types: []workload.TypeSpec{builtin(t, "high-bimodal").Types[1]}}
	shortOnly := &workload.Workload{Name: "short-only", Types: []workload.TypeSpec{builtin(t, "high-bimodal").Types[0]}}
	if err := flood.Validate(); err != nil {
		t.Fatal(err)
	}
	if err := shortOnly.Validate(); err != nil {
		t.Fatal(err)
	}
	// 2x the capacity of all 14 workers for LONG.
	floodSched, err := loadgen.NewSchedule(flood, loadgen.RateForLoad(flood, 2, workers, s.dilation), 3*time.Second, 11)
	if err != nil {
		t.Fatal(err)
	}
	type outcome struct {
		res *loadgen.Result
		err error
	}
	floodDone := make(chan outcome, 1)
	go func() {
		res, err := loadgen.Run(context.Background(), loadgen.Spec{Server: s.listen, Dilation: s.dilation,
			Grace: 200 * time.Millisecond, MaxLag: time.Second}, floodSched)
		floodDone <- outcome{res, err}
	}()
	short := play(t, s, shortOnly, 100*1e-6*s.dilation/workers, 3*time.Second, 12, loadgen.Spec{}) // 100 SHORT req/s
	fl := <-floodDone
	if fl.err != nil {
		t.Fatalf("flood: %v", fl.err)
	}
	floodRes := fl.res
	t.Logf("LONG flood: %s", summary(floodRes))
	t.Logf("SHORT during the flood: %s", summary(short))

	if !s.alive() {
		t.Fatal("the server died")
	}
	st := s.status()
	t.Logf("server: received %d answered %d dropped %d; drops %v", st.Received, st.Answered, st.Dropped, st.Drops)
	if short.Lost != 0 || short.Late != 0 {
		t.Errorf("SHORT requests lost during the LONG flood: %s", summary(short))
	}
	if p := typeP999Slowdown(t, short, "SHORT"); p > 50 {
		t.Errorf("SHORT p99.9 slowdown %.3g during the LONG flood: not isolated", p)
	}
	if floodRes.Lost == 0 {
		t.Errorf("a flood at twice the capacity lost nothing: %s", summary(floodRes))
	}
	_, _, longDropped := st.typ("LONG")
	_, _, shortDropped := st.typ("SHORT")
	if longDropped == 0 || shortDropped != 0 {
		t.Errorf("drops: LONG %d (want > 0), SHORT %d (want 0)", longDropped, shortDropped)
	}
	if st.Dropped < longDropped {
		t.Errorf("total drops %d below LONG's %d", st.Dropped, longDropped)
	}
	var other uint64
	for k, v := range st.Drops {
		if k != "queue_full" {
			other += v
		}
	}
	if other == 0 {
		t.Errorf("garbage datagrams were not counted as drops: %v", st.Drops)
	}

	// 4. After all that, a normal run is served in full.
	final := play(t, s, builtin(t, "high-bimodal"), 0.5, 2*time.Second, 13, loadgen.Spec{})
	t.Logf("afterwards: %s", summary(final))
	if final.Lost != 0 {
		t.Errorf("after the abuse the server lost %d of %d requests", final.Lost, final.Sent)
	}
}

// TestHostilePushesRefused pushes modules that must not load to a running
// psp serve (which compiles uploads in a child of itself): each push is
// refused with the reason, the running classifier keeps its version and
// keeps classifying, and a good push after them lands.
func TestHostilePushesRefused(t *testing.T) {
	s := startServer(t, serverOptions{policy: "darc", classifier: pspHeaderWasm, token: "e2e-secret", dilation: 200})
	prewarm(t, s)
	v0 := tenantVersion(t, s)
	for _, tc := range []struct{ fixture, want string }{
		{"startloop", "unreachable"},     // a start function that never ends: stopped by its fuel at load
		{"import", "refused"},            // an import psp does not provide
		{"bigtable", "limit is 1048576"}, // tables over the limit
		{"datapast", "out of bounds"},    // a data segment past the memory
	} {
		wasm, err := os.ReadFile(filepath.Join(repoRoot, "wasmclass", "testdata", tc.fixture+".wasm"))
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		err = s.pushClassifier(wasm)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("push %s: err = %v, want a refusal mentioning %q", tc.fixture, err, tc.want)
		}
		t.Logf("push %s refused after %v", tc.fixture, time.Since(start).Round(time.Millisecond))
	}
	if v := tenantVersion(t, s); v != v0 {
		t.Errorf("version %d after refused pushes, want %d", v, v0)
	}
	wasm, err := os.ReadFile(filepath.Join(repoRoot, "examples", "classifiers", "go", "pspheader.wasm"))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.pushClassifier(wasm); err != nil {
		t.Fatalf("push of the Go classifier (compiled in a child): %v", err)
	}
	if v := tenantVersion(t, s); v != v0+1 {
		t.Errorf("version %d after a good push, want %d", v, v0+1)
	}
	res := play(t, s, builtin(t, "high-bimodal"), 0.3, time.Second, 5, loadgen.Spec{})
	if res.Lost != 0 || res.BadReplies != 0 {
		t.Errorf("after the pushes: %s", summary(res))
	}
}
