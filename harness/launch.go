package harness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/persephone-go/psp/admin"
	"github.com/persephone-go/psp/server"
)

// ServerSpec describes a psp server to start for a measurement.
type ServerSpec struct {
	// Policy is the scheduling policy (darc, cfcfs, ...).
	Policy string
	// Workers is the number of application workers.
	Workers int
	// App is the application (emulate, spin, kv, tpcc).
	App string
	// Dilation is the emulate (and tpcc) time dilation; zero leaves the
	// server's default.
	Dilation float64
	// Classifier is a Wasm classifier file; "" runs the native psp-header
	// classifier.
	Classifier string
	// MinSamples is DARC's profiling window; zero leaves the server's
	// default.
	MinSamples int
	// Args are extra psp serve arguments (Exec only), e.g. "--idle=busy-poll".
	Args []string
	// LogPath receives the server's output; "" discards it.
	LogPath string
	// Transport is how requests reach the server: "udp" (the default) or
	// "tcp" (the load generator opens connections).
	Transport string
}

// Target is a running server's addresses.
type Target struct {
	// Listen is the address requests go to: host:port (UDP) or
	// tcp://host:port.
	Listen string
	// Admin is the admin endpoint's address, or "" when unknown.
	Admin string
}

// Launcher starts psp servers.
type Launcher interface {
	// Launch starts a server for spec and returns once its admin endpoint
	// answers. The caller stops it with RunningServer.Stop.
	Launch(ctx context.Context, spec ServerSpec) (*RunningServer, error)
}

// RunningServer is a server started by a Launcher.
type RunningServer struct {
	Target
	stop func() error
}

// Stop shuts the server down gracefully (queued requests are answered)
// and waits for it.
func (s *RunningServer) Stop() error { return s.stop() }

// startupTimeout bounds a server's start, up to its first /status answer.
const startupTimeout = 15 * time.Second

// Exec starts servers as child processes running `psp serve`: each has its
// own Go runtime, so the load generator's garbage collection and threads
// do not disturb it.
type Exec struct {
	// Path is the psp executable; default: this process's executable
	// (which must then be psp).
	Path string
}

// Launch implements Launcher.
func (e Exec) Launch(ctx context.Context, spec ServerSpec) (*RunningServer, error) {
	exe := e.Path
	if exe == "" {
		var err error
		if exe, err = os.Executable(); err != nil {
			return nil, fmt.Errorf("start server: %w", err)
		}
	}
	listen, admin, err := freeLoopbackAddrs(spec.Transport == server.TransportTCP)
	if err != nil {
		return nil, fmt.Errorf("start server: %w", err)
	}
	args := append([]string{"serve", "--listen", listen, "--admin", admin}, spec.flags()...)
	args = append(args, spec.Args...)
	log, err := openLog(spec.LogPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe, args...)
	cmd.Stdout, cmd.Stderr = log, log
	child, err := startChild(cmd)
	if err != nil {
		log.Close()
		return nil, fmt.Errorf("start server %s %s: %w", exe, strings.Join(args, " "), err)
	}
	stop := func() error {
		defer log.Close()
		if err := child.stop(); err != nil {
			return fmt.Errorf("server: %w", err)
		}
		return nil
	}
	rs := &RunningServer{Target: Target{Listen: listen, Admin: admin}, stop: stop}
	if err := waitReady(ctx, admin, child.exited); err != nil {
		_ = stop()
		where := ""
		if spec.LogPath != "" {
			where = " (see " + spec.LogPath + ")"
		}
		return nil, fmt.Errorf("start server psp %s: %w%s", strings.Join(args, " "), err, where)
	}
	return rs, nil
}

// flags are the psp serve flags for spec (without addresses).
func (spec ServerSpec) flags() []string {
	args := []string{"--policy", spec.Policy, "--workers", strconv.Itoa(spec.Workers)}
	if spec.App != "" {
		args = append(args, "--app", spec.App)
	}
	if spec.Dilation != 0 {
		args = append(args, "--dilation", strconv.FormatFloat(spec.Dilation, 'g', -1, 64))
	}
	if spec.MinSamples != 0 {
		args = append(args, "--min-samples", strconv.Itoa(spec.MinSamples))
	}
	if spec.Classifier != "" {
		args = append(args, "--classifier", spec.Classifier)
	}
	return args
}

// child is a started child process.
type child struct {
	cmd    *exec.Cmd
	exited chan struct{} // closed once the process has exited and waitErr is set
	// waitErr is what cmd.Wait returned.
	waitErr error
}

// startChild starts cmd and waits for it in the background.
func startChild(cmd *exec.Cmd) (*child, error) {
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c := &child{cmd: cmd, exited: make(chan struct{})}
	go func() { c.waitErr = cmd.Wait(); close(c.exited) }()
	return c, nil
}

// stop sends the process SIGTERM, kills it if it has not exited 10 s
// later, and returns what its wait returned.
func (c *child) stop() error {
	select {
	case <-c.exited:
		return c.waitErr
	default:
	}
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.exited:
		return c.waitErr
	case <-time.After(10 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.exited
		return errors.New("did not stop within 10s of SIGTERM: killed")
	}
}

// InProcess runs servers inside this process (package server): quicker to
// start and needing no psp executable, but the servers share the Go
// runtime with the load generator. Tests use it.
type InProcess struct{}

// Launch implements Launcher.
func (InProcess) Launch(ctx context.Context, spec ServerSpec) (*RunningServer, error) {
	if len(spec.Args) > 0 {
		return nil, fmt.Errorf("start server: extra psp serve arguments %q need child processes (Exec)", spec.Args)
	}
	listen := "127.0.0.1:0"
	if spec.Transport == server.TransportTCP {
		listen = "tcp://" + listen
	}
	cfg := server.Config{
		Listen:     listen,
		Policy:     spec.Policy,
		Workers:    spec.Workers,
		MinSamples: spec.MinSamples,
		Classifier: spec.Classifier,
		App:        server.App{Name: spec.App, Dilation: spec.Dilation},
		Admin:      server.Admin{Addr: "127.0.0.1:0"},
	}
	log, err := openLog(spec.LogPath)
	if err != nil {
		return nil, err
	}
	srv, err := server.New(ctx, cfg, server.Options{Log: log})
	if err != nil {
		log.Close()
		return nil, fmt.Errorf("start server: %w", err)
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	exited := make(chan struct{})
	var runErr error
	go func() {
		runErr = srv.Run(runCtx)
		close(exited)
	}()
	stop := func() error {
		cancel()
		<-exited
		log.Close()
		return runErr
	}
	rs := &RunningServer{Target: Target{Listen: srv.Addr(), Admin: srv.AdminAddr()}, stop: stop}
	if err := waitReady(ctx, rs.Admin, exited); err != nil {
		_ = stop()
		return nil, fmt.Errorf("start server: %w", err)
	}
	return rs, nil
}

// waitReady polls adminAddr's /status until it answers, the server exits or
// startupTimeout passes.
func waitReady(ctx context.Context, adminAddr string, exited <-chan struct{}) error {
	c, err := admin.NewClient(adminAddr, time.Second)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(startupTimeout)
	for {
		if _, err := c.StatusJSON(ctx); err == nil {
			return nil
		}
		select {
		case <-exited:
			return errors.New("server exited before answering /status")
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("server did not answer /status on %s within %v", adminAddr, startupTimeout)
		}
	}
}

// openLog opens a server's log file, or a discarding writer.
func openLog(path string) (io.WriteCloser, error) {
	if path == "" {
		return nopCloser{io.Discard}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("start server: log: %w", err)
	}
	return f, nil
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

// freeLoopbackAddrs picks a free port for requests (UDP, or TCP: then
// listen is tcp://host:port) and a free TCP port for the admin endpoint on
// 127.0.0.1.
func freeLoopbackAddrs(tcp bool) (listen, admin string, err error) {
	if tcp {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return "", "", fmt.Errorf("find a free tcp port: %w", err)
		}
		listen = "tcp://" + l.Addr().String()
		l.Close()
	} else {
		c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
		if err != nil {
			return "", "", fmt.Errorf("find a free udp port: %w", err)
		}
		listen = c.LocalAddr().String()
		c.Close()
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", "", fmt.Errorf("find a free tcp port: %w", err)
	}
	admin = l.Addr().String()
	l.Close()
	return listen, admin, nil
}
