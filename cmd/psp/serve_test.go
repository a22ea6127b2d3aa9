package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	json "github.com/goccy/go-json"

	"github.com/persephone-go/psp/internal/testenv"
	"github.com/persephone-go/psp/server"
	"github.com/persephone-go/psp/wire"
)

// freeAddr returns a free loopback address (host:port) for network "tcp"
// (an admin endpoint) or "udp" (a dataplane).
func freeAddr(t *testing.T, network string) string {
	t.Helper()
	listen := func() (io.Closer, net.Addr, error) {
		ln, err := net.Listen(network, "127.0.0.1:0")
		if err != nil {
			return nil, nil, err
		}
		return ln, ln.Addr(), nil
	}
	if network == "udp" {
		listen = func() (io.Closer, net.Addr, error) {
			pc, err := net.ListenPacket(network, "127.0.0.1:0")
			if err != nil {
				return nil, nil, err
			}
			return pc, pc.LocalAddr(), nil
		}
	}
	c, addr, err := listen()
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	return addr.String()
}

// sendHeader sends a psp-header request h over UDP to addr and returns the
// connection, for its reply; it closes when the test ends.
func sendHeader(t *testing.T, addr string, h wire.Header) net.Conn {
	t.Helper()
	conn, err := net.Dial("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	req := make([]byte, wire.HeaderLen)
	h.Encode(req)
	if _, err := conn.Write(req); err != nil {
		t.Fatal(err)
	}
	return conn
}

// exitWithPSP runs psp with args in a test binary re-executed as a child
// process and exits: status 1 (the error on stderr) when psp fails, else 0.
func exitWithPSP(args ...string) {
	if err := newApp().Run(append([]string{"psp"}, args...)); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}

func runPSP(ctx context.Context, args ...string) (string, error) {
	app := newApp()
	var out bytes.Buffer
	app.Writer, app.ErrWriter = &out, &out
	err := app.RunContext(ctx, append([]string{"psp"}, args...))
	return out.String(), err
}

// serveInProcess runs a server for cfg until the test ends.
func serveInProcess(t *testing.T, cfg server.Config) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := server.New(ctx, cfg, server.Options{Log: &strings.Builder{}})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-served })
}

// mustPSP runs psp with args and returns its output, failing the test on
// an error.
func mustPSP(t *testing.T, args ...string) string {
	t.Helper()
	out, err := runPSP(context.Background(), args...)
	if err != nil {
		t.Fatalf("psp %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

func TestServePrintConfig(t *testing.T) {
	out, err := runPSP(context.Background(), "serve", "--print-config", "--workers", "3", "--policy", "fp", "--min-samples", "77")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := server.ParseConfig([]byte(out))
	if err != nil {
		t.Fatalf("printed config does not parse: %v\n%s", err, out)
	}
	if cfg.Workers != 3 || cfg.Policy != "fp" || cfg.MinSamples != 77 || cfg.App.Name != server.AppEmulate {
		t.Errorf("printed config %+v", cfg)
	}
	if _, err := runPSP(context.Background(), "serve", "--print-config", "--policy", "lifo"); err == nil || !strings.Contains(err.Error(), "lifo") {
		t.Errorf("bad policy: %v", err)
	}
}

// TestServeStatusPush runs a server over UDP loopback with a Wasm
// classifier (in-process, through package server: the command-line library
// keeps global state, so two commands may not run at once), then psp status
// and psp classifier push against it.
func TestServeStatusPush(t *testing.T) {
	wasm := filepath.Join("..", "..", "examples", "classifiers", "c", "pspheader.wasm")
	dir := t.TempDir()
	token := filepath.Join(dir, "token")
	os.WriteFile(token, []byte("tok\n"), 0o600)
	admin := freeAddr(t, "tcp")
	listen := freeAddr(t, "udp")

	ctx, cancel := context.WithCancel(context.Background())
	srv, err := server.New(ctx, server.Config{Listen: listen, Workers: 2, Policy: "cfcfs", Classifier: wasm,
		App: server.App{Name: server.AppEmulate, Dilation: 1}, Admin: server.Admin{Addr: admin, TokenFile: token}}, server.Options{})
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Run(ctx) }()
	var out string
	deadline := time.Now().Add(10 * time.Second)
	for {
		if out, err = runPSP(context.Background(), "status", "--admin", admin, "--token-file", token); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("psp status never answered: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !strings.Contains(out, "policy cfcfs") || !strings.Contains(out, "default: wasm, version 1") {
		t.Errorf("psp status output:\n%s", out)
	}

	conn := sendHeader(t, listen, wire.Header{ID: 42, Type: wire.TypeShort, ServiceNs: 1000})
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	rep := make([]byte, 64)
	n, err := conn.Read(rep)
	if err != nil {
		t.Fatalf("no reply: %v", err)
	}
	if h, _ := wire.Decode(rep[:n]); h.ID != 42 {
		t.Errorf("reply %+v", h)
	}

	// Flags after the file, as people type them.
	out, err = runPSP(context.Background(), "classifier", "push", wasm, "--admin", admin, "--token-file", token)
	if err != nil || !strings.Contains(out, "version 2") {
		t.Errorf("push: %v\n%s", err, out)
	}
	if _, err := runPSP(context.Background(), "classifier", "push", "--admin", admin, "--token-file", token, filepath.Join("..", "..", "go.mod")); err == nil || !strings.Contains(err.Error(), "400") {
		t.Errorf("pushing go.mod: %v, want a 400 error", err)
	}
	var st server.Status
	for deadline := time.Now().Add(5 * time.Second); ; {
		out, err = runPSP(context.Background(), "status", "--json", "--admin", admin, "--token-file", token)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal([]byte(out), &st); err != nil {
			t.Fatal(err)
		}
		if st.Answered == 1 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if st.Tenants[0].Version != 2 || st.Answered != 1 {
		t.Errorf("status after push: version %d answered %d, want 2 and 1", st.Tenants[0].Version, st.Answered)
	}
	// Where the request's time went: a row for SHORT with every stage.
	out, err = runPSP(context.Background(), "status", "--admin", admin, "--token-file", token)
	if err != nil {
		t.Fatal(err)
	}
	var row string
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 2 && strings.HasSuffix(f[0], "SHORT") && f[1] == "1" {
			row = line
		}
	}
	if !strings.Contains(out, "where the time went") || !strings.Contains(out, "HANDOFF") || strings.Count(row, " / ") != 6 ||
		!strings.Contains(out, "Go runtime: GOMAXPROCS") {
		t.Errorf("psp status shows no stage breakdown for the SHORT request:\n%s", out)
	}
	cancel()
	if err := testenv.Await(t, served, 15*time.Second, "serve to stop"); err != nil {
		t.Errorf("serve: %v", err)
	}
}

func TestServeOverloadFlags(t *testing.T) {
	out, err := runPSP(context.Background(), "serve", "--print-config", "--deadline-factor", "4", "--deadline-floor", "20ms",
		"--deadline", "LONG=300ms", "--deadline", "SHORT=off", "--budget", "LONG=900", "--guarantee", "LONG=100", "--max-service", "2ms")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := server.ParseConfig([]byte(out))
	if err != nil {
		t.Fatalf("printed config does not parse: %v\n%s", err, out)
	}
	long, short := cfg.Types["LONG"], cfg.Types["SHORT"]
	if cfg.DeadlineFactor != 4 || cfg.DeadlineFloor != 20*time.Millisecond || cfg.App.MaxService != 2*time.Millisecond ||
		long != (server.TypeLimits{Deadline: "300ms", Budget: 900, Guarantee: 100}) || short.Deadline != "off" {
		t.Errorf("printed config %+v", cfg)
	}
	for _, bad := range [][]string{{"--budget", "LONG"}, {"--budget", "LONG=many"}, {"--deadline", "LONG=soon"}, {"--guarantee", "=5"}} {
		if _, err := runPSP(context.Background(), append([]string{"serve", "--print-config"}, bad...)...); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}

func TestPrintStatusOverloaded(t *testing.T) {
	st := &server.Status{Policy: "darc", Received: 100, Answered: 60, Dropped: 40, Overloaded: true, ShedRate: 512, Pool: 8160, Shared: 4110, Borrowed: 40,
		Types: []server.TypeStatus{
			{ID: 2, Name: "LONG", Received: 100, Answered: 60, Dropped: 40, Budget: 4470, Held: 45, DeadlineNs: 1e9, MaxWaitNs: 9e8, ShedRate: 512},
		}}
	st.Drops.Budget, st.Drops.Expired = 30, 10
	st.Types[0].Drops = st.Drops
	st.Net.RxDropped = 7
	var b bytes.Buffer
	if err := printStatus(&b, st); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"OVERLOADED: shedding 512 requests/s over the last second: LONG 512/s", "received 100 = answered 60 + dropped 40 + in flight 0",
		"drops: budget 30, expired 10", "dropped on receive 7", "45/4470", "LONG: budget 30, expired 10", "buffer pool: 8160 requests"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("status lacks %q:\n%s", want, b.String())
		}
	}
}

// TestPrintStatusDispatcher: psp status says how the dispatcher waits.
func TestPrintStatusDispatcher(t *testing.T) {
	for _, tc := range []struct {
		spinNs int64
		want   string
	}{
		{20e6, "dispatcher: polls for 20ms after its last work, then parks"},
		{0, "dispatcher: parks as soon as it is idle"},
		{-1, "dispatcher: busy-polls, never parks"},
	} {
		st := &server.Status{Policy: "darc", DispatcherSpinNs: tc.spinNs, DispatcherParks: 7}
		var b bytes.Buffer
		if err := printStatus(&b, st); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(b.String(), tc.want) {
			t.Errorf("spin %d ns: status lacks %q:\n%s", tc.spinNs, tc.want, b.String())
		}
		if tc.spinNs >= 0 && !strings.Contains(b.String(), "parks so far: 7") {
			t.Errorf("spin %d ns: status lacks the park count:\n%s", tc.spinNs, b.String())
		}
	}
}

// TestServeByteFlagsTakeUnits: flags in BYTES take a unit (binary or
// decimal), keep a negative sign where it means unbounded, and refuse what
// is not a size by name.
func TestServeByteFlagsTakeUnits(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--app", "memcached", "--memcached-store-memory", "128MiB"}, "store_memory: 134217728"},
		{[]string{"--app", "memcached", "--memcached-store-memory", "1.5 GiB"}, "store_memory: 1610612736"},
		{[]string{"--app", "memcached", "--memcached-store-memory", "-1"}, "store_memory: -1"},
		{[]string{"--buf-size", "4KiB"}, "buf_size: 4096"},
		{[]string{"--app", "memcached", "--memcached-tcp-memory", "64MB"}, "tcp_memory: 64000000"},
		{[]string{"--buf-size", "1.5KiB"}, "buf_size: 1536"},
		{[]string{"--buf-size", "1,024"}, "buf_size: 1024"},
		{[]string{"--buf-size", "0.5 kB"}, "buf_size: 500"},
	} {
		out, err := runApp(t, append(append([]string{"serve"}, tc.args...), "--print-config")...)
		if err != nil || !strings.Contains(out, tc.want) {
			t.Errorf("%v: %v, want %q in\n%s", tc.args, err, tc.want, out)
		}
	}
	for _, bad := range []string{"12xyz", "99999999999999999999999", "MiB", "", "1.5", "1.0001KB", "0.3"} {
		if out, err := runApp(t, "serve", "--buf-size", bad, "--print-config"); err == nil {
			t.Errorf("--buf-size %q accepted:\n%s", bad, out)
		}
	}
}
