package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/persephone-go/psp/dispatcher"
	"github.com/persephone-go/psp/internal/accept"
	"github.com/persephone-go/psp/nic"
	"github.com/persephone-go/psp/nic/udp"
	"github.com/persephone-go/psp/wasmclass"
)

// adminShutdownTimeout bounds how long Close waits for admin requests in
// progress.
const adminShutdownTimeout = 300 * time.Millisecond

// Options are the parts of a server that are not configuration.
type Options struct {
	// Log receives one-line progress messages (default: discard).
	Log io.Writer
	// Application, when set, is served instead of the built-in application
	// Config.App names (Config.App is then ignored).
	Application *Application
	// Classifiers are the base options of every Wasm tenant's classifier
	// (limits, fuel, time limit, breaker, compilation). A program whose
	// main calls wasmclass.RunCompileChild should set CompileInChild, so
	// that uploaded modules compile in a bounded child process.
	Classifiers wasmclass.Options
}

// Server is psp's live server. Build it with New, run it with Run.
type Server struct {
	cfg        Config
	log        io.Writer
	dp         nic.Dataplane
	addr       string
	disp       *dispatcher.Dispatcher
	tenants    *tenantRegistry
	creds      *credentials
	audit      *audit
	auditFiles []io.Closer // the changes' and the refusals' audit files
	app        *Application
	closeApp   func() error
	registry   *prometheus.Registry
	// scrape is held by the one /metrics gather running (see
	// oneGather).
	scrape         chan struct{}
	adminLn        net.Listener
	adminAccept    *accept.Listener // adminLn's TCP listener (under TLS when on)
	files          fileBudget
	bodies         *bodyLimits // the admin bodies' budget
	http           *http.Server
	started        time.Time
	classifierOpts wasmclass.Options
	// describeTenants is the classifier part of the startup line.
	describeTenants string
	refs            references   // registry references of the modules run
	pending         pendingPulls // tenants whose module could not be fetched at start
	mix             typeMix      // per-type counters over the last shareWindow
	provisional     provisionals // swaps awaiting their confirmation
	state           *stateStore  // nil: no state file
	// configured is what the config names for each tenant whose
	// classifier is a registry reference; resumed says which started
	// from the state file; startSHA what each ran at start otherwise.
	configured map[string]string
	resumed    map[string]bool
	startMu    sync.Mutex
	startSHA   map[string]string // guarded by startMu
	ran        bool
	stopping   atomic.Bool // Run's context is done: draining
	mu         sync.Mutex
	// workersAuto: the worker count followed the CPUs (Config.Workers 0).
	workersAuto bool
	memory      memoryBudget // the soft memory limit serve set
}

// New opens a server for cfg. The caller must call Run (which closes
// everything when it returns) or Close.
func New(ctx context.Context, cfg Config, opts Options) (_ *Server, err error) {
	custom := opts.Application != nil
	if custom {
		if err := opts.Application.validate(); err != nil {
			return nil, err
		}
		cfg.App = App{Name: opts.Application.Name}
		if cfg.App.Name == "" {
			cfg.App.Name = "custom"
		}
	}
	if err := cfg.validate(custom); err != nil {
		return nil, err
	}
	workersAuto := cfg.Workers == 0
	cfg = cfg.withDefaults()
	s := &Server{cfg: cfg, log: opts.Log, started: time.Now(), classifierOpts: opts.Classifiers, workersAuto: workersAuto}
	if s.log == nil {
		s.log = io.Discard
	}
	s.files = openFiles(cfg)
	s.bodies = newBodyLimits(adminBodyBudget, adminUploadsPerCredential, adminBodyStall)
	defer func() {
		if err != nil {
			s.Close()
		}
	}()

	if custom {
		s.app = opts.Application
	} else {
		if s.app, err = openApp(cfg); err != nil {
			return nil, err
		}
		s.closeApp = s.app.Close
	}
	if err := s.openCredentials(cfg); err != nil {
		return nil, err
	}
	s.configured, s.startSHA, s.resumed = map[string]string{}, map[string]string{}, map[string]bool{}
	if f := stateFile(cfg); f != "" {
		s.state = &stateStore{file: f}
	}
	cfg.Tenants = slices.Clone(cfg.Tenants)
	cfg = s.resumeState(cfg)
	if cfg, err = s.pullClassifiers(ctx, cfg); err != nil {
		return nil, err
	}
	if err := s.openTenants(ctx, cfg, opts); err != nil {
		return nil, err
	}
	s.startedFrom(cfg)
	s.registry = prometheus.NewRegistry()
	s.scrape = make(chan struct{}, 1)
	if err := s.registerMetrics(); err != nil {
		return nil, err
	}
	if cfg.Admin.Addr != "off" {
		raw, err := net.Listen("tcp", cfg.Admin.Addr)
		if err != nil {
			return nil, fmt.Errorf("server: admin listen: %w (is another psp serve running? use --admin ADDR)", err)
		}
		// Temporary accept errors are retried with a pause, and past its
		// share of the descriptors (or past its address's share of that)
		// a connection is refused at once.
		s.adminAccept = accept.NewListener(raw, accept.NewLoop(accept.Options{Name: "psp serve: admin", Log: s.log}), s.files.admin)
		s.adminAccept.SetPerSource(s.files.perSource)
		var ln net.Listener = s.adminAccept
		if cfg.Admin.TLSCert != "" {
			cert, err := tls.LoadX509KeyPair(cfg.Admin.TLSCert, cfg.Admin.TLSKey)
			if err != nil {
				ln.Close()
				return nil, fmt.Errorf("server: admin tls: %w (tls_cert and tls_key: PEM files)", err)
			}
			ln = tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
		}
		s.adminLn = ln
		s.http = &http.Server{
			Handler:           s.Handler(),
			MaxHeaderBytes:    adminMaxHeaderBytes,
			ReadHeaderTimeout: adminReadHeaderTimeout,
			ReadTimeout:       adminReadTimeout,
			WriteTimeout:      adminWriteTimeout,
			IdleTimeout:       adminIdleTimeout,
		}
	}
	if custom {
		// The server closes the caller's application only once it owns
		// it: a New that fails leaves it to the caller.
		s.closeApp = s.app.Close
	}
	return s, nil
}

// Addr returns the data-plane address requests go to (resolved when the
// config asked for port 0).
func (s *Server) Addr() string { return s.addr }

// AdminAddr returns the admin endpoint's address, or "" when disabled.
func (s *Server) AdminAddr() string {
	if s.adminLn == nil {
		return ""
	}
	return s.adminLn.Addr().String()
}

// Config returns the effective configuration.
func (s *Server) Config() Config { return s.cfg }

// Dataplane returns the server's dataplane (tests inject into memnic).
func (s *Server) Dataplane() nic.Dataplane { return s.dp }

// Dispatcher returns the server's dispatcher.
func (s *Server) Dispatcher() *dispatcher.Dispatcher { return s.disp }

// Run serves until ctx is cancelled, then shuts down gracefully and closes
// everything. It returns the first error (nil after a requested shutdown).
func (s *Server) Run(ctx context.Context) error {
	s.mu.Lock()
	if s.ran {
		s.mu.Unlock()
		return errors.New("server: Run called twice")
	}
	s.ran = true
	s.mu.Unlock()

	// httpErr receives only a failure of the admin endpoint (never with
	// the endpoint off).
	httpErr := make(chan error, 1)
	if h, ln := s.http, s.adminLn; h != nil {
		// Close clears s.http, perhaps before this goroutine runs (a Run
		// that fails at once): Serve then returns ErrServerClosed.
		go func() {
			if err := h.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				httpErr <- fmt.Errorf("server: admin http: %w", err)
			}
		}()
	}
	fmt.Fprintf(s.log, "psp serve: %s\n", s.describe())
	if n := runtime.GOMAXPROCS(0); s.cfg.Idle == dispatcher.IdleBusyPoll && s.cfg.Workers+1 > n {
		fmt.Fprintf(s.log, "psp serve: warning: busy-poll with %d workers and a dispatcher on %d usable cores: threads will starve each other (use --idle spin-then-park or fewer workers)\n", s.cfg.Workers, n)
	} else if cores := AutoWorkers(); !s.workersAuto && s.cfg.Workers > cores {
		fmt.Fprintf(s.log, "psp serve: note: %d workers on %d usable CPUs: threads outnumber cores, so a request handed to a worker may wait for a core (fine for workers that sleep, as emulated ones do; --workers auto gives %d)\n",
			s.cfg.Workers, cores, cores)
	}

	if restore := s.sizeProcs(); restore != nil {
		defer restore()
	}
	if restore := s.sizeMemory(); restore != nil {
		defer restore()
	}
	dispCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	dispErr := make(chan error, 1)
	go func() { dispErr <- s.disp.Run(dispCtx) }()
	if s.pending.retried() > 0 {
		go s.retryPending(dispCtx)
	}
	go s.sampleTypeMix(dispCtx)

	var err error
	stopping := ctx.Done()
wait:
	for {
		select {
		case <-stopping:
			s.stopping.Store(true)
			fmt.Fprintf(s.log, "psp serve: stopping: answering the requests already received (at most %v; then what is left is dropped)\n", s.cfg.DrainTimeout)
			stopping = nil
		case err = <-dispErr:
			break wait
		case err = <-httpErr:
			cancel()
			<-dispErr
			break wait
		}
	}
	st := s.disp.Stats()
	fmt.Fprintf(s.log, "psp serve: stopped: received %d, answered %d, dropped %d%s\n", st.Received, st.Answered, st.Dropped, dropSummary(st.Drops))
	if st.Abandoned > 0 {
		// A handler is still running: the application stays open (closing
		// it under a worker is not safe); the process exits anyway.
		fmt.Fprintf(s.log, "psp serve: %d requests still running on workers at the drain timeout were abandoned\n", st.Abandoned)
		s.closeApp = nil
	}
	if cerr := s.Close(); err == nil {
		err = cerr
	}
	return err
}

// sizeProcs raises GOMAXPROCS to what the dispatcher needs (see
// dispatcher.Spec.Procs) unless the GOMAXPROCS environment variable sets
// it, and returns a function restoring the previous value (nil when it
// left it alone).
func (s *Server) sizeProcs() (restore func()) {
	need := s.disp.Spec().Procs()
	have := runtime.GOMAXPROCS(0)
	if need <= have {
		return nil
	}
	if env := os.Getenv("GOMAXPROCS"); env != "" {
		fmt.Fprintf(s.log, "psp serve: warning: GOMAXPROCS=%s from the environment, but %d workers under %s need %d: workers that sleep in the kernel will hold every Go processor and delay the others\n",
			env, s.cfg.Workers, s.cfg.Idle, need)
		return nil
	}
	runtime.GOMAXPROCS(need)
	fmt.Fprintf(s.log, "psp serve: GOMAXPROCS %d (was %d): one per worker and dispatcher thread, which keep theirs while they sleep in the kernel, and one spare\n", need, have)
	return func() { runtime.GOMAXPROCS(have) }
}

// workersText says how many workers serve and where the count came from.
func (s *Server) workersText() string {
	if s.workersAuto {
		return fmt.Sprintf("%d workers (auto: one per usable CPU, at least %d)", s.cfg.Workers, MinAutoWorkers)
	}
	return fmt.Sprintf("%d workers", s.cfg.Workers)
}

// describe is the startup line.
func (s *Server) describe() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s on %s, policy %s, %s (%s), app %s",
		s.dataplaneText(), s.addr, s.cfg.Policy, s.workersText(), s.cfg.Idle, s.cfg.App.Name)
	if s.cfg.Idle == dispatcher.IdleSpinThenPark {
		if s.cfg.DispatcherSpin > 0 {
			fmt.Fprintf(&b, ", dispatcher polls %v before parking", s.cfg.DispatcherSpin)
		}
		if s.cfg.InPlace > 0 {
			fmt.Fprintf(&b, ", in place under %v", s.cfg.InPlace)
		}
	}
	if s.cfg.App.Dilation != 0 {
		fmt.Fprintf(&b, " (dilation %g)", s.cfg.App.Dilation)
	}
	fmt.Fprintf(&b, ", classifier %s", s.describeTenants)
	if a := s.AdminAddr(); a != "" {
		fmt.Fprintf(&b, ", admin http://%s", a)
	}
	fmt.Fprintf(&b, ", %s", s.files)
	return b.String()
}

// dataplaneText names the dataplanes served, with the TCP connection limit
// and the file descriptor budget it was fitted under.
func (s *Server) dataplaneText() string {
	var names []string
	for _, e := range s.cfg.endpoints() {
		if e.Transport == TransportTCP {
			names = append(names, "tcp")
		} else {
			names = append(names, s.cfg.Dataplane)
		}
	}
	text := strings.Join(names, " and ") + " dataplane"
	if len(names) > 1 {
		text += "s"
	}
	if t, ok := tcpDataplane(s.dp); ok {
		text += fmt.Sprintf(" (up to %d TCP connections)", t.MaxConns())
	}
	return text
}

// Close releases everything New opened. Run calls it; call it yourself only
// when you do not call Run.
func (s *Server) Close() error {
	var errs []error
	s.provisional.stopAll()
	if s.http != nil {
		// Bounded: the process must exit soon after the drain.
		ctx, cancel := context.WithTimeout(context.Background(), adminShutdownTimeout)
		if err := s.http.Shutdown(ctx); err != nil {
			// A request still running, or a connection closing after a
			// refused body (net/http lingers half a second so that the
			// client reads the answer before a reset): cut it.
			s.http.Close()
		}
		cancel()
		s.http = nil
	}
	if s.adminLn != nil {
		// Shutdown closes only the listeners Serve is using: without Run
		// the listener would stay open. Closing it twice is harmless.
		s.adminLn.Close()
	}
	if s.dp != nil {
		if err := s.dp.Close(); err != nil && !errors.Is(err, nic.ErrClosed) {
			errs = append(errs, fmt.Errorf("server: close dataplane: %w", err))
		}
		s.dp = nil
	}
	if s.tenants != nil {
		if err := s.tenants.closeAll(); err != nil {
			errs = append(errs, fmt.Errorf("server: close classifiers: %w", err))
		}
	}
	s.audit.close()
	for _, f := range s.auditFiles {
		f.Close()
	}
	s.auditFiles = nil
	if s.closeApp != nil {
		if err := s.closeApp(); err != nil {
			errs = append(errs, fmt.Errorf("server: close app: %w", err))
		}
		s.closeApp = nil
	}
	return errors.Join(errs...)
}

// Status returns the current status (at most one stats interval old).
func (s *Server) Status() Status {
	ds := s.disp.Stats()
	st := buildStatus(ds, s.disp.Stages(), s.tenants.declared(ds))
	st.Runtime = runtimeStatus()
	st.WorkersAuto = s.workersAuto
	st.App = s.cfg.App.Name
	st.Dilation = s.cfg.App.Dilation
	st.Listen = s.addr
	st.Dataplane = s.cfg.Dataplane
	if t, ok := tcpDataplane(s.dp); ok {
		cs := t.ConnStats()
		st.TCP = &cs
	}
	st.UptimeSeconds = time.Since(s.started).Seconds()
	st.CountersAgeSeconds = max(0, float64(s.dp.Now()-ds.At)/float64(time.Second))
	if pd, ok := member[portDropper](s.dp); ok {
		st.KernelDrops = pd.PortDrops()
	}
	if s.app != nil && s.app.Counters != nil {
		st.AppCounters = s.app.Counters()
	}
	st.Tenants = s.tenants.status(ds)
	for i := range st.Types {
		ts := &st.Types[i]
		for _, t := range ds.Tenants {
			if ts.ID >= t.Base && int(ts.ID) < int(t.Base)+t.NumTypes {
				ts.Tenant, ts.Local = t.Name, ts.ID-t.Base
			}
		}
	}
	st.MultiTenant = s.cfg.shares()
	st.Classifying = ds.Classifying
	for i := range st.Tenants {
		st.Tenants[i].Reference = s.refs.get(st.Tenants[i].Name, st.Tenants[i].SHA256)
		st.Tenants[i].Pending = s.pending.describe(st.Tenants[i].Name, st.Tenants[i].SHA256)
		st.Tenants[i].Configured = s.configuredIfChanged(st.Tenants[i].Name, st.Tenants[i].SHA256)
		if !st.Tenants[i].Removed {
			st.Tenants[i].Provisional = s.provisional.info(st.Tenants[i].Name)
		}
	}
	return st
}

// portDropper is a dataplane that counts the kernel's drops per port.
type portDropper interface{ PortDrops() []udp.PortDrops }

// dropSummary is " (budget 3, expired 2)", or "" without drops.
func dropSummary(d dispatcher.Drops) string {
	if d.Total() == 0 {
		return ""
	}
	return " (" + d.String() + ")"
}
