package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	json "github.com/goccy/go-json"
	"github.com/persephone-go/psp/loadgen"
	"github.com/persephone-go/psp/report"
	"github.com/persephone-go/psp/sim"
	"github.com/urfave/cli/v2"
)

func sweepCommand() *cli.Command {
	return &cli.Command{
		Name:  "sweep",
		Usage: "measure a server at a range of loads under each policy and plot p99.9 slowdown against load",
		Description: "psp sweep starts a psp serve process per policy on loopback (or targets a running\n" +
			"server with --server and --admin), plays the workload at each load with the psp\n" +
			"client's open-loop generator and writes, in --out: results.csv, results.json,\n" +
			"slowdown.png (p99.9 slowdown against load, one line per policy) and\n" +
			"latency-<type>.png (p99.9 latency of each type), in the form of the paper's figures.\n" +
			"Server logs go to --out too. Redraw the charts later with psp plot.\n\n" +
			"Before the first load of each policy, --prewarm of traffic at the middle load lets\n" +
			"DARC finish its start-up profiling (the server is started with --min-samples).\n\n" +
			"Example:\n" +
			"  psp sweep --policies darc,cfcfs --loads 0.2:0.9:0.1 --workload high-bimodal \\\n" +
			"    --workers 14 --app emulate --dilation 1000 --duration 5s --out results",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "policies", Value: "darc,cfcfs", Usage: "comma-separated policies to start servers with (darc, cfcfs, dfcfs, fp, darc-static); with --server, the label of the running server's policy"},
			&cli.StringFlag{Name: "loads", Value: "0.2:0.9:0.1", Usage: "offered loads: start:end:step or a comma-separated list of fractions of the workers' capacity"},
			&cli.StringFlag{Name: "app", Value: "emulate", Usage: "application the started servers run (emulate sleeps service time x dilation; with it --dilation defaults to 1000)"},
			&cli.StringFlag{Name: "classifier", Usage: "Wasm classifier the started servers load (default: the native psp-header classifier)"},
			&cli.IntFlag{Name: "min-samples", Value: 200, Usage: "completions DARC profiles before reserving (passed to the started servers)"},
			&cli.StringSliceFlag{Name: "serve-arg", Usage: "extra argument for the started psp serve processes (repeatable), e.g. --serve-arg=--idle=busy-poll"},
			&cli.StringFlag{Name: "server", Usage: "target a running server's UDP address instead of starting servers"},
			&cli.StringFlag{Name: "admin", Usage: "the running server's admin address (host:port), for its /status"},
			&cli.DurationFlag{Name: "prewarm", Value: 2 * time.Second, Usage: "traffic sent at the middle load before each policy's first point, not measured (0: none)"},
			&cli.StringFlag{Name: "out", Value: "psp-sweep", Usage: "output directory (created if missing)"},
			&cli.BoolFlag{Name: "with-sim", Usage: "also simulate the same policies and loads (psp sim, 1s) and draw them on slowdown.png as \"policy (sim)\"; written to sim.json"},
			&cli.Float64Flag{Name: "slo", Value: 10, Usage: "p99.9 slowdown SLO for the summary lines and the charts' dashed line (0: none)"},
		}, clientLoadFlags()...),
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return fmt.Errorf("sweep: unexpected argument %q (flags only; see psp sweep --help)", c.Args().First())
			}
			cfg, err := sweepConfigFromFlags(c)
			if err != nil {
				return fmt.Errorf("sweep: %w", err)
			}
			ctx, stop := clientSignalContext(c.Context)
			defer stop()
			_, err = cfg.run(ctx, c.App.Writer, c.App.ErrWriter)
			if err != nil {
				return fmt.Errorf("sweep: %w", err)
			}
			return nil
		},
	}
}

// sweepConfig is a sweep: the policies, the loads, how to reach or start
// the server, and where to write.
type sweepConfig struct {
	plan       clientPlan
	policies   []string
	loads      []float64
	app        string
	classifier string
	minSamples int
	serveArgs  []string
	server     string // running server, or "" to start one per policy
	admin      string
	prewarm    time.Duration
	out        string
	slo        float64
	withSim    bool
	simTime    time.Duration // simulated duration per point with withSim (default 1s)
}

func sweepConfigFromFlags(c *cli.Context) (*sweepConfig, error) {
	p, err := clientPlanFromFlags(c)
	if err != nil {
		return nil, err
	}
	loads, err := sweepParseLoads(c.String("loads"))
	if err != nil {
		return nil, err
	}
	if !c.IsSet("dilation") {
		switch {
		case c.String("server") != "" && c.String("admin") != "":
			// The running server says.
			st, err := sweepFetchStatus(c.Context, c.String("admin"))
			if err != nil {
				return nil, fmt.Errorf("--admin: %w", err)
			}
			if st.Dilation > 0 {
				p.spec.Dilation = st.Dilation
			}
		case c.String("server") == "" && c.String("app") == "emulate":
			// psp serve's own default for the emulate app.
			p.spec.Dilation = 1000
		}
	}
	cfg := &sweepConfig{
		plan:       p,
		loads:      loads,
		app:        c.String("app"),
		classifier: c.String("classifier"),
		minSamples: c.Int("min-samples"),
		serveArgs:  c.StringSlice("serve-arg"),
		server:     c.String("server"),
		admin:      c.String("admin"),
		prewarm:    c.Duration("prewarm"),
		out:        c.String("out"),
		slo:        c.Float64("slo"),
		withSim:    c.Bool("with-sim"),
	}
	for _, s := range strings.Split(c.String("policies"), ",") {
		if s = strings.TrimSpace(s); s != "" {
			cfg.policies = append(cfg.policies, s)
		}
	}
	switch {
	case len(cfg.policies) == 0:
		return nil, errors.New("--policies: give at least one policy")
	case cfg.server != "" && len(cfg.policies) > 1:
		return nil, errors.New("--server targets one running server: give a single --policies label")
	case cfg.server == "" && cfg.admin != "":
		return nil, errors.New("--admin needs --server (started servers get their own admin address)")
	case cfg.classifier != "":
		if _, err := os.Stat(cfg.classifier); err != nil {
			return nil, fmt.Errorf("--classifier: %w", err)
		}
	}
	return cfg, nil
}

// sweepParseLoads parses "start:end:step" (inclusive, with tolerance for
// rounding) or "a,b,c". Every load must be in (0, 2].
func sweepParseLoads(s string) ([]float64, error) {
	var loads []float64
	if strings.Contains(s, ":") {
		parts := strings.Split(s, ":")
		if len(parts) != 3 {
			return nil, fmt.Errorf("--loads %q: want start:end:step or a comma-separated list", s)
		}
		var v [3]float64
		for i, p := range parts {
			f, err := strconv.ParseFloat(strings.TrimSpace(p), 64)
			if err != nil {
				return nil, fmt.Errorf("--loads %q: %w", s, err)
			}
			v[i] = f
		}
		if !(v[2] > 0) || v[1] < v[0] {
			return nil, fmt.Errorf("--loads %q: want start <= end and step > 0", s)
		}
		for i := 0; ; i++ {
			l := v[0] + float64(i)*v[2]
			if l > v[1]+v[2]*1e-6 {
				break
			}
			loads = append(loads, math.Round(l*1e6)/1e6)
		}
	} else {
		for _, p := range strings.Split(s, ",") {
			f, err := strconv.ParseFloat(strings.TrimSpace(p), 64)
			if err != nil {
				return nil, fmt.Errorf("--loads %q: %w", s, err)
			}
			loads = append(loads, f)
		}
	}
	for _, l := range loads {
		if !(l > 0) || l > 2 {
			return nil, fmt.Errorf("--loads %q: load %v out of (0, 2]", s, l)
		}
	}
	return loads, nil
}

// run measures every policy at every load, writes the results and charts
// into cfg.out and prints the table to out (progress lines to errOut).
func (cfg *sweepConfig) run(ctx context.Context, out, errOut io.Writer) ([]report.Point, error) {
	if err := os.MkdirAll(cfg.out, 0o755); err != nil {
		return nil, fmt.Errorf("create output directory: %w", err)
	}
	var points []report.Point
	for _, policy := range cfg.policies {
		pts, err := cfg.runPolicy(ctx, policy, errOut)
		points = append(points, pts...)
		if err != nil && ctx.Err() == nil {
			return points, err
		}
		if ctx.Err() != nil {
			break
		}
	}
	if len(points) == 0 {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("interrupted before the first point: %w", ctx.Err())
		}
		return nil, errors.New("no points measured")
	}
	// An interrupted sweep still writes what it measured.
	sums := []report.Summary(nil)
	if cfg.slo > 0 {
		sums = report.Summarize(points, cfg.slo, true)
	}
	files := []string{filepath.Join(cfg.out, "results.csv"), filepath.Join(cfg.out, "results.json")}
	for _, f := range files {
		if err := report.WriteFile(f, points, sums); err != nil {
			return points, err
		}
	}
	var simPoints []report.Point
	if cfg.withSim && ctx.Err() == nil {
		var err error
		simPoints, err = cfg.simulate(ctx)
		if err != nil {
			return points, err
		}
		f := filepath.Join(cfg.out, "sim.json")
		if err := report.WriteFile(f, simPoints, nil); err != nil {
			return points, err
		}
		files = append(files, f)
	}
	plots, err := writeChartFiles(cfg.out, points, simPoints, report.PlotOptions{SLO: cfg.slo})
	if err != nil {
		return points, err
	}
	if err := report.WriteTable(out, points); err != nil {
		return points, err
	}
	if len(sums) > 0 {
		fmt.Fprintln(out)
		if err := report.WriteSummary(out, sums); err != nil {
			return points, err
		}
	}
	fmt.Fprintln(out)
	printWrittenFiles(out, append(files, plots...))
	if ctx.Err() != nil {
		return points, fmt.Errorf("interrupted: the files hold the %d points measured so far: %w", len(points), ctx.Err())
	}
	return points, nil
}

// simulate runs the simulator on the sweep's workload, workers, policies
// and loads (nominal, undilated times: slowdowns are comparable).
func (cfg *sweepConfig) simulate(ctx context.Context) ([]report.Point, error) {
	d := cfg.simTime
	if d <= 0 {
		d = time.Second
	}
	pts, err := sim.RunSweep(ctx, sim.Sweep{
		Base:     sim.Config{Workload: *cfg.plan.workload, Workers: cfg.plan.workers, Duration: d, Seed: cfg.plan.seed},
		Policies: cfg.policies,
		Loads:    cfg.loads,
	})
	if err != nil {
		return nil, fmt.Errorf("simulate: %w", err)
	}
	return pts, nil
}

// runPolicy starts a server for policy (unless one is targeted), pre-warms
// it and measures each load.
func (cfg *sweepConfig) runPolicy(ctx context.Context, policy string, errOut io.Writer) ([]report.Point, error) {
	server, admin := cfg.server, cfg.admin
	if server == "" {
		srv, err := startChildServer(ctx, childServerOptions{
			policy:     policy,
			workers:    cfg.plan.workers,
			app:        cfg.app,
			dilation:   cfg.plan.spec.Dilation,
			classifier: cfg.classifier,
			minSamples: cfg.minSamples,
			extra:      cfg.serveArgs,
			logPath:    filepath.Join(cfg.out, "server-"+policy+".log"),
		})
		if err != nil {
			return nil, err
		}
		defer srv.stop()
		server, admin = srv.listen, srv.admin
	}
	plan := cfg.plan
	plan.spec.Server = server
	if cfg.prewarm > 0 {
		warm := plan
		warm.duration = cfg.prewarm
		warm.setLoad(cfg.loads[len(cfg.loads)/2])
		fmt.Fprintf(errOut, "%s: pre-warming for %v at load %.2g\n", policy, cfg.prewarm, warm.load)
		if _, err := warm.run(ctx, policy+" prewarm"); err != nil {
			return nil, err
		}
	}
	var points []report.Point
	for _, load := range cfg.loads {
		plan.setLoad(load)
		idle := startIdleSampler(ctx, admin)
		res, err := plan.run(ctx, fmt.Sprintf("%s load %.2g", policy, load))
		meanIdle := idle()
		if err != nil {
			return points, err
		}
		ps := loadgen.PointSpec{Policy: policy, Workload: plan.workload.Name, Workers: plan.workers, Load: load, MeanIdleWorkers: meanIdle}
		reservation := ""
		if admin != "" {
			if st, err := sweepFetchStatus(ctx, admin); err == nil {
				if r := st.reservation(); r != "" {
					reservation = fmt.Sprintf(" [%s phase: %s]", st.Phase, r)
				}
			}
		}
		pt := res.Point(ps)
		points = append(points, pt)
		note := "sustained"
		if !res.Sustained {
			note = "NOT sustained: " + res.NotSustainedReason()
		}
		fmt.Fprintf(errOut, "%s load %.2g: %.0f req/s, p99.9 slowdown %.4g, %s%s\n", policy, load, res.OfferedRate, pt.Overall.P999Slowdown, note, reservation)
		if res.Interrupted {
			break
		}
	}
	return points, nil
}

// startIdleSampler polls the server's /status every 250 ms (idle_workers is
// a mean over the server's last stats interval) until the returned function
// is called; that function returns the mean of the samples (NaN, shown as
// unknown, without an admin address or samples).
func startIdleSampler(ctx context.Context, admin string) func() float64 {
	if admin == "" {
		return func() float64 { return math.NaN() }
	}
	stop := make(chan struct{})
	result := make(chan float64, 1)
	go func() {
		sum, n := 0.0, 0
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				if n == 0 {
					result <- math.NaN()
				} else {
					result <- sum / float64(n)
				}
				return
			case <-t.C:
				if st, err := sweepFetchStatus(ctx, admin); err == nil {
					sum += st.IdleWorkers
					n++
				}
			}
		}
	}()
	return func() float64 {
		close(stop)
		return <-result
	}
}

// childServerOptions describe a psp serve process to start.
type childServerOptions struct {
	policy     string
	workers    int
	app        string
	dilation   float64
	classifier string
	minSamples int
	extra      []string
	logPath    string
}

// childServer is a running psp serve child process.
type childServer struct {
	cmd           *exec.Cmd
	listen, admin string
	log           *os.File
	done          chan error
}

// startChildServer starts this executable's serve command on free loopback ports
// and waits until its /status answers.
func startChildServer(ctx context.Context, o childServerOptions) (*childServer, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("start server: %w", err)
	}
	udpPort, err := sweepFreeUDPPort()
	if err != nil {
		return nil, fmt.Errorf("start server: %w", err)
	}
	adminPort, err := sweepFreeTCPPort()
	if err != nil {
		return nil, fmt.Errorf("start server: %w", err)
	}
	listen := fmt.Sprintf("127.0.0.1:%d", udpPort)
	admin := fmt.Sprintf("127.0.0.1:%d", adminPort)
	args := []string{"serve",
		"--listen", listen,
		"--admin", admin,
		"--policy", o.policy,
		"--workers", strconv.Itoa(o.workers),
		"--app", o.app,
		"--dilation", strconv.FormatFloat(o.dilation, 'g', -1, 64),
	}
	if o.minSamples > 0 {
		args = append(args, "--min-samples", strconv.Itoa(o.minSamples))
	}
	if o.classifier != "" {
		args = append(args, "--classifier", o.classifier)
	}
	args = append(args, o.extra...)
	logf, err := os.Create(o.logPath)
	if err != nil {
		return nil, fmt.Errorf("start server: log: %w", err)
	}
	cmd := exec.Command(exe, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start server %s: %w", strings.Join(args, " "), err)
	}
	p := &childServer{cmd: cmd, listen: listen, admin: admin, log: logf, done: make(chan error, 1)}
	go func() { p.done <- cmd.Wait() }()
	deadline := time.Now().Add(15 * time.Second)
	for {
		if _, err := sweepFetchStatus(ctx, admin); err == nil {
			return p, nil
		}
		select {
		case err := <-p.done:
			p.done <- err
			p.stop()
			return nil, fmt.Errorf("server exited before answering /status: %v (see %s; command: psp %s)", err, o.logPath, strings.Join(args, " "))
		case <-ctx.Done():
			p.stop()
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			p.stop()
			return nil, fmt.Errorf("server did not answer /status on %s within 15s (see %s)", admin, o.logPath)
		}
	}
}

// stop sends SIGTERM, waits up to 10 s for a graceful exit, then kills.
func (p *childServer) stop() {
	defer p.log.Close()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

func sweepFreeUDPPort() (int, error) {
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return 0, fmt.Errorf("find a free udp port: %w", err)
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).Port, nil
}

func sweepFreeTCPPort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free tcp port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// sweepServerStatus is the part of psp serve's GET /status document the sweep
// reads.
type sweepServerStatus struct {
	Policy       string  `json:"policy"`
	Phase        string  `json:"phase"`
	Dilation     float64 `json:"dilation"`
	IdleWorkers  float64 `json:"idle_workers"`
	CPUWaste     float64 `json:"cpu_waste"`
	Reservations uint64  `json:"reservations"`
	Dropped      uint64  `json:"dropped"`
	Groups       []struct {
		Types    []string `json:"types"`
		Reserved []int    `json:"reserved"`
		Spillway bool     `json:"spillway"`
	} `json:"groups"`
}

// reservation describes DARC's current reservation compactly, e.g.
// "SHORT on 0; LONG on 1-13 + spillway", or "" for other policies.
func (st *sweepServerStatus) reservation() string {
	var b strings.Builder
	for i, g := range st.Groups {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(strings.Join(g.Types, ","))
		b.WriteString(" on ")
		switch n := len(g.Reserved); {
		case n == 0:
			b.WriteString("none")
		case n == 1:
			b.WriteString(strconv.Itoa(g.Reserved[0]))
		case g.Reserved[n-1]-g.Reserved[0] == n-1:
			fmt.Fprintf(&b, "%d-%d", g.Reserved[0], g.Reserved[n-1])
		default:
			fmt.Fprint(&b, g.Reserved)
		}
		if g.Spillway {
			b.WriteString(" + spillway")
		}
	}
	return b.String()
}

var sweepHTTPClient = &http.Client{Timeout: 2 * time.Second}

func sweepFetchStatus(ctx context.Context, admin string) (*sweepServerStatus, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+admin+"/status", nil)
	if err != nil {
		return nil, fmt.Errorf("status: %w", err)
	}
	resp, err := sweepHTTPClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("status: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("status: %s", resp.Status)
	}
	var st sweepServerStatus
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return nil, fmt.Errorf("status: decode: %w", err)
	}
	return &st, nil
}
