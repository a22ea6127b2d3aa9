package tests

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	json "github.com/goccy/go-json"

	"github.com/persephone-go/psp/internal/sockstat"
	"github.com/persephone-go/psp/internal/testenv"
	"github.com/persephone-go/psp/loadgen"
	"github.com/persephone-go/psp/workload"
)

// pspBinary is the psp executable built by TestMain.
var pspBinary string

// repoRoot is the module's root directory.
var repoRoot string

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	wd, err := os.Getwd()
	if err != nil {
		fmt.Fprintln(os.Stderr, "tests:", err)
		return 1
	}
	repoRoot = filepath.Dir(wd)
	dir, err := os.MkdirTemp("", "psp-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "tests:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	pspBinary = filepath.Join(dir, "psp")
	build := exec.Command("go", "build", "-o", pspBinary, "./cmd/psp")
	build.Dir = repoRoot
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "tests: go build ./cmd/psp: %v\n%s", err, out)
		return 1
	}
	return m.Run()
}

// Emulation parameters shared by the tests: 14 workers, each request sleeps
// its service time x dilation (SHORT 1µs -> 5ms, LONG 100µs -> 500ms). A
// large dilation keeps the emulated service times well above the scheduling
// noise of a busy 2-core machine (a thread can be woken milliseconds late),
// which both the client and the server suffer: at 2000, DARC's SHORT tail
// was often dominated by that noise. DARC profiles minSamples completions
// before reserving.
const (
	workers    = 14
	dilation   = 5000
	minSamples = 50
)

// server is a running psp serve process.
type server struct {
	t      testing.TB
	cmd    *exec.Cmd
	listen string
	// tcp is the TCP address (host:port) of a server started with
	// serverOptions.tcp, else "".
	tcp   string
	admin string
	log   *bytes.Buffer
	done  chan struct{}
	token string
	// dilation is the emulate app's time dilation.
	dilation float64
}

// serverOptions complete the command line of startServer.
type serverOptions struct {
	app        string // default emulate
	minSamples int    // default: the minSamples constant
	policy     string
	classifier string  // path relative to the repository root, or ""
	token      string  // admin token enabling hot swaps, or ""
	dilation   float64 // default: the dilation constant; < 0: none
	listen     string  // default: a free UDP port
	// tcp adds a TCP listener (tcp://127.0.0.1:PORT in --listen, on a
	// free port) beside the UDP one.
	tcp bool
	// env adds variables to the server's environment.
	env   []string
	extra []string
	// cpus, when set, runs the server on those CPUs only (taskset -c, a
	// list in the kernel's format).
	cpus string
}

func freePort(t testing.TB, network string) int {
	t.Helper()
	if network == "udp" {
		c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		return c.LocalAddr().(*net.UDPAddr).Port
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startServer starts psp serve (the emulate app unless o.app says) and
// waits for /status.
// The server is stopped (SIGTERM) when the test ends; its output is logged
// if the test failed.
func startServer(t testing.TB, o serverOptions) *server {
	t.Helper()
	s := &server{
		t:      t,
		listen: fmt.Sprintf("127.0.0.1:%d", freePort(t, "udp")),
		admin:  fmt.Sprintf("127.0.0.1:%d", freePort(t, "tcp")),
		log:    &bytes.Buffer{},
		done:   make(chan struct{}),
		token:  o.token,
	}
	if o.listen != "" {
		s.listen = o.listen
	}
	s.dilation = o.dilation
	switch {
	case s.dilation == 0:
		s.dilation = dilation
	case s.dilation < 0: // no dilation: real service times
		s.dilation = 0
	}
	app := o.app
	if app == "" {
		app = "emulate"
	}
	listen := s.listen
	if o.tcp {
		s.tcp = fmt.Sprintf("127.0.0.1:%d", freePort(t, "tcp"))
		listen += ",tcp://" + s.tcp
	}
	args := []string{"serve", "--listen", listen, "--admin", s.admin,
		"--policy", o.policy, "--workers", strconv.Itoa(workers),
		"--app", app, "--dilation", strconv.FormatFloat(s.dilation, 'g', -1, 64), "--min-samples", strconv.Itoa(cmp.Or(o.minSamples, minSamples))}
	if o.classifier != "" {
		args = append(args, "--classifier", filepath.Join(repoRoot, o.classifier))
	}
	if o.token != "" {
		f := filepath.Join(t.TempDir(), "token")
		if err := os.WriteFile(f, []byte(o.token+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		args = append(args, "--token-file", f)
	}
	args = append(args, o.extra...)
	cmd := exec.Command(pspBinary, args...)
	if o.cpus != "" {
		cmd = exec.Command(testenv.RequireTool(t, "taskset"), append([]string{"-c", o.cpus, pspBinary}, args...)...)
	}
	if o.env != nil {
		cmd.Env = append(os.Environ(), o.env...)
	}
	s.run(t, cmd, strings.Join(args, " "))
	return s
}

// run starts cmd, a psp serve writing to s.log, and waits until it
// answers /status (what names it in the error when it exits first); the
// server is stopped when the test ends.
func (s *server) run(t testing.TB, cmd *exec.Cmd, what string) {
	t.Helper()
	s.cmd = cmd
	s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("start psp serve: %v", err)
	}
	go func() { _ = s.cmd.Wait(); close(s.done) }()
	t.Cleanup(s.stop)
	deadline := time.Now().Add(15 * time.Second)
	for {
		if _, err := s.fetchStatus(); err == nil {
			return
		}
		select {
		case <-s.done:
			t.Fatalf("psp %s exited early:\n%s", what, s.log)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("psp serve did not answer /status within 15s:\n%s", s.log)
		}
	}
}

func (s *server) stop() {
	select {
	case <-s.done:
		return
	default:
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
		s.t.Errorf("psp serve did not stop within 10s of SIGTERM")
	}
	if s.t.Failed() {
		s.t.Logf("psp serve output:\n%s", s.log)
	}
}

// alive reports whether the server process is still running.
func (s *server) alive() bool {
	select {
	case <-s.done:
		return false
	default:
		return true
	}
}

// status is the part of psp serve's GET /status the tests read.
type status struct {
	Policy       string `json:"policy"`
	Phase        string `json:"phase"`
	Received     uint64 `json:"received"`
	Answered     uint64 `json:"answered"`
	Dropped      uint64 `json:"dropped"`
	Reservations uint64 `json:"reservations"`
	Drops        map[string]uint64
	Groups       []struct {
		Types    []string `json:"types"`
		Reserved []int    `json:"reserved"`
		Spillway bool     `json:"spillway"`
	} `json:"groups"`
	Types []struct {
		Name     string `json:"name"`
		Received uint64 `json:"received"`
		Answered uint64 `json:"answered"`
		Dropped  uint64 `json:"dropped"`
	} `json:"types"`
	Tenants []struct {
		Name        string `json:"name"`
		Version     int    `json:"version"`
		OnLane      bool   `json:"on_lane"`
		Escalations uint64 `json:"escalations"`
	} `json:"tenants"`
	Net struct {
		RxPackets uint64 `json:"rx_packets"`
		TxPackets uint64 `json:"tx_packets"`
		TxErrors  uint64 `json:"tx_errors"`
	} `json:"net"`
	KernelDrops []struct {
		Port  uint16 `json:"port"`
		Drops uint64 `json:"drops"`
	} `json:"kernel_drops"`
}

// settledStatus returns the server's status once every request it read
// is answered or dropped and two snapshots a stats interval apart agree
// (the status is up to one interval old), or the last one after 5 s.
func (s *server) settledStatus() *status {
	s.t.Helper()
	st := s.status()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		time.Sleep(300 * time.Millisecond)
		next := s.status()
		if next.Received == st.Received && next.Answered+next.Dropped == next.Received && next.Net.RxPackets == st.Net.RxPackets {
			return next
		}
		st = next
	}
	return st
}

// socketDrops adds up the kernel's drops at the server's sockets.
func (st *status) socketDrops() uint64 {
	var n uint64
	for _, p := range st.KernelDrops {
		n += p.Drops
	}
	return n
}

// backlogDrops returns the kernel's drops of packets before any socket
// (the per-CPU input backlog: /proc/net/softnet_stat's second column),
// machine-wide, or 0 where it cannot be read.
func backlogDrops() uint64 {
	n, _ := sockstat.BacklogDrops()
	return n
}

// statusBody returns the body of the server's GET /status.
func (s *server) statusBody() ([]byte, error) {
	c := http.Client{Timeout: 2 * time.Second}
	req, err := http.NewRequest(http.MethodGet, "http://"+s.admin+"/status", nil)
	if err != nil {
		return nil, err
	}
	if s.token != "" { // a server with tokens answers reads with one only
		req.Header.Set("Authorization", "Bearer "+s.token)
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("status: %s: %s", resp.Status, b)
	}
	return b, nil
}

// decodeStatus fetches /status into st (a struct of the fields a test
// reads) and returns its body.
func (s *server) decodeStatus(st any) ([]byte, error) {
	b, err := s.statusBody()
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, st); err != nil {
		return nil, fmt.Errorf("status: %w: %s", err, b)
	}
	return b, nil
}

func (s *server) fetchStatus() (*status, error) {
	var st status
	b, err := s.decodeStatus(&st)
	if err != nil {
		return nil, err
	}
	var raw struct {
		Drops map[string]any `json:"drops"`
	}
	_ = json.Unmarshal(b, &raw)
	st.Drops = map[string]uint64{}
	for k, v := range raw.Drops {
		if f, ok := v.(float64); ok {
			st.Drops[k] = uint64(f)
		}
	}
	return &st, nil
}

func (s *server) status() *status {
	s.t.Helper()
	st, err := s.fetchStatus()
	if err != nil {
		s.t.Fatalf("GET /status: %v", err)
	}
	return st
}

func (st *status) typ(name string) (received, answered, dropped uint64) {
	for _, t := range st.Types {
		if t.Name == name {
			return t.Received, t.Answered, t.Dropped
		}
	}
	return 0, 0, 0
}

// builtin returns a built-in workload.
func builtin(t testing.TB, name string) *workload.Workload {
	t.Helper()
	w, err := workload.Builtin(name)
	if err != nil {
		t.Fatal(err)
	}
	return &w
}

// play runs w at load (fraction of the 14 emulated workers) for d against s.
func play(t testing.TB, s *server, w *workload.Workload, load float64, d time.Duration, seed uint64, spec loadgen.Spec) *loadgen.Result {
	t.Helper()
	res, err := playAsync(t, s, w, load, d, seed, spec)()
	if err != nil {
		t.Fatalf("load generator: %v", err)
	}
	return res
}

// playAsync starts play in a goroutine; the returned function waits for it.
// Runs against several servers at once see the same machine noise.
func playAsync(t testing.TB, s *server, w *workload.Workload, load float64, d time.Duration, seed uint64, spec loadgen.Spec) func() (*loadgen.Result, error) {
	t.Helper()
	rate := loadgen.RateForLoad(w, load, workers, s.dilation)
	sched, err := loadgen.NewSchedule(w, rate, d, seed)
	if err != nil {
		t.Fatal(err)
	}
	spec.Server = s.listen
	spec.Dilation = s.dilation
	// On a shared 2-core CI machine the client itself can stall for tens of
	// milliseconds: judge the server from the actual send times (the
	// sender's lag is still logged) and do not flag the runs for it.
	spec.FromActualSend = true
	if spec.MaxLag == 0 {
		spec.MaxLag = time.Second
	}
	type outcome struct {
		res *loadgen.Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := loadgen.Run(context.Background(), spec, sched)
		done <- outcome{res, err}
	}()
	return func() (*loadgen.Result, error) {
		o := <-done
		return o.res, o.err
	}
}

// typeP999Slowdown returns the named type's p99.9 slowdown in res.
// awaitAll waits for each run in turn and returns their results in that
// order, failing the test on the first error.
func awaitAll(t testing.TB, waits ...func() (*loadgen.Result, error)) []*loadgen.Result {
	t.Helper()
	res := make([]*loadgen.Result, len(waits))
	for i, wait := range waits {
		r, err := wait()
		if err != nil {
			t.Fatal(err)
		}
		res[i] = r
	}
	return res
}

// darcBeatsCFCFS logs the p99.9 slowdown of typ under DARC and c-FCFS and
// reports whether DARC's is over 3 times lower; when it is not on the last
// attempt, the test fails.
func darcBeatsCFCFS(t testing.TB, darcRes, cfcfsRes *loadgen.Result, typ string, lastAttempt bool) bool {
	t.Helper()
	darc := typeP999Slowdown(t, darcRes, typ)
	cfcfs := typeP999Slowdown(t, cfcfsRes, typ)
	t.Logf("%s p99.9 slowdown: darc %.3g, cfcfs %.3g (%.3gx lower)", typ, darc, cfcfs, cfcfs/darc)
	if darc*3 < cfcfs {
		return true
	}
	if lastAttempt {
		t.Errorf("DARC's %s p99.9 slowdown %.3g is not several times below c-FCFS's %.3g", typ, darc, cfcfs)
	}
	return false
}

func typeP999Slowdown(t testing.TB, res *loadgen.Result, name string) float64 {
	t.Helper()
	for _, ts := range res.Types {
		if ts.Name == name {
			if ts.Count == 0 {
				t.Fatalf("no %s samples", name)
			}
			return ts.P999Slowdown
		}
	}
	t.Fatalf("no type %s in the result", name)
	return 0
}

// summary is one line describing a result, for test logs.
func summary(res *loadgen.Result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%.0f req/s offered, %.0f achieved, sent %d, answered %d, late %d, lost %d, overloaded %d, lag p99 %v",
		res.OfferedRate, res.AchievedRate, res.Sent, res.Answered, res.Late, res.Lost, res.Overloaded, res.LagP99)
	for _, ts := range res.Types {
		fmt.Fprintf(&b, "; %s n=%d p99.9 %.3gms slowdown p50 %.3g p99.9 %.3g", ts.Name, ts.Count, float64(ts.P999Latency)/1e6, ts.P50Slowdown, ts.P999Slowdown)
	}
	return b.String()
}
