package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/persephone-go/psp/internal/testenv"
	"github.com/persephone-go/psp/report"
	"github.com/persephone-go/psp/wire"
)

// clientTestEcho answers psp-header requests at once, on UDP loopback.
func clientTestEcho(t *testing.T) string {
	t.Helper()
	addr, _ := testenv.UDPServer(t, func(req []byte) []byte {
		if len(req) < wire.HeaderLen {
			return nil
		}
		return req[:wire.HeaderLen]
	})
	return addr
}

func runApp(t *testing.T, args ...string) (string, error) {
	t.Helper()
	app := newApp()
	var out, errOut bytes.Buffer
	app.Writer, app.ErrWriter = &out, &errOut
	err := app.Run(append([]string{"psp"}, args...))
	return out.String() + errOut.String(), err
}

func TestClientCommandJSONAndPlot(t *testing.T) {
	addr := clientTestEcho(t)
	dir := t.TempDir()
	samples := filepath.Join(dir, "samples.csv")
	out, err := runApp(t, "client", "--server", addr, "--workload", "high-bimodal", "--rate", "2000",
		"--duration", "300ms", "--seed", "3", "--json", "--label", "echo", "--max-lag", "1s", "--samples", samples)
	if err != nil {
		t.Fatalf("psp client: %v\n%s", err, out)
	}
	pts, err := report.ReadJSON(strings.NewReader(out))
	if err != nil {
		t.Fatalf("reading the client's JSON back: %v\n%s", err, out)
	}
	if len(pts) != 1 || pts[0].Policy != "echo" || pts[0].Source != "measured" || !pts[0].Sustained ||
		pts[0].Overall.Count == 0 || len(pts[0].Types) != 2 {
		t.Fatalf("unexpected point: %+v", pts)
	}
	if want := 2000 * 50.5e-6 / 14; pts[0].Load < want*0.99 || pts[0].Load > want*1.01 {
		t.Errorf("load %v, want %v (rate x mean service / workers)", pts[0].Load, want)
	}
	b, err := os.ReadFile(samples)
	if err != nil || !bytes.HasPrefix(b, []byte("id,type,")) || bytes.Count(b, []byte("\n")) < 400 {
		t.Fatalf("samples file: %v, %d bytes", err, len(b))
	}

	res := filepath.Join(dir, "client.json")
	if err := os.WriteFile(res, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
	charts := filepath.Join(dir, "charts")
	out, err = runApp(t, "plot", "--out", charts, res)
	if err != nil {
		t.Fatalf("psp plot: %v\n%s", err, out)
	}
	for _, f := range []string{"slowdown.png", "latency-SHORT.png", "latency-LONG.png"} {
		if st, err := os.Stat(filepath.Join(charts, f)); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
}

// TestClientCommandSpinWindowZero: --spin-window 0 (the sender only
// sleeps between sends) still plays the whole schedule and gets every reply.
func TestClientCommandSpinWindowZero(t *testing.T) {
	addr := clientTestEcho(t)
	out, err := runApp(t, "client", "--server", addr, "--workload", "high-bimodal", "--rate", "2000",
		"--duration", "300ms", "--json", "--max-lag", "1s", "--spin-window", "0")
	if err != nil {
		t.Fatalf("psp client: %v\n%s", err, out)
	}
	pts, err := report.ReadJSON(strings.NewReader(out))
	if err != nil {
		t.Fatalf("reading the client's JSON back: %v\n%s", err, out)
	}
	if len(pts) != 1 || !pts[0].Sustained || pts[0].Overall.Count == 0 {
		t.Fatalf("unexpected point: %+v", pts)
	}
}

func TestClientCommandTableAndNotSustained(t *testing.T) {
	// Nobody listens on a closed port: everything is lost.
	addr := freeAddr(t, "udp")
	out, err := runApp(t, "client", "--server", addr, "--load", "0.5", "--dilation", "1000", "--duration", "200ms", "--grace", "10ms")
	if err == nil || !strings.Contains(err.Error(), "not sustained") {
		t.Fatalf("want a not-sustained error, got %v\n%s", err, out)
	}
	if !strings.Contains(out, "lost") || !strings.Contains(out, "SHORT") {
		t.Errorf("table output lacks the type rows or the lost count:\n%s", out)
	}
	// The client cannot know the server's idle workers: "-", not "0.00".
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 6 && f[0] == "server" && f[2] == "all" && f[6] != "-" {
			t.Errorf("idle column %q on %q, want -", f[6], line)
		}
	}
}

// TestClientDurationBounds: --grace and --max-lag are refused when
// negative or beyond the server's bound on durations (2562047h overflowed
// the schedule's end plus the grace).
func TestClientDurationBounds(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--grace", "2562047h"}, "--grace 2562047h0m0s: want a duration up to 24h0m0s"},
		{[]string{"--grace", "25h"}, "--grace 25h0m0s: want a duration up to 24h0m0s"},
		{[]string{"--grace", "-1s"}, "--grace -1s: want a duration up to 24h0m0s (not negative)"},
		{[]string{"--max-lag", "-1s"}, "--max-lag -1s: want a duration up to 24h0m0s (not negative)"},
		{[]string{"--max-lag", "2562047h"}, "--max-lag 2562047h0m0s"},
		{[]string{"--rate", "0.001", "--duration", "99999h"}, "--duration 99999h0m0s: want > 0, up to 24h0m0s"},
		{[]string{"--duration", "-1s"}, "--duration -1s: want > 0"},
	} {
		args := append([]string{"client", "--server", "127.0.0.1:1", "--rate", "10"}, tc.args...)
		if out, err := runApp(t, args...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want an error with %q\n%s", tc.args, err, tc.want, out)
		}
	}
}

func TestClientCommandBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"client"}, // no rate or load
		{"client", "--rate", "10", "--load", "0.5"}, // both
		{"client", "--rate", "10", "--workload", "no-such-workload"},
		{"client", "--rate", "10", "--dilation", "-1"},
		{"client", "--rate", "10", "--warmup", "1.5"},
		{"client", "--rate", "10", "--spin-window", "-1us"},
		{"client", "--rate", "10", "--spin-window", "2s"},
		{"plot"},
		{"plot", "missing.csv"},
		{"sweep", "--loads", "0.9:0.1:0.1"},
		{"sweep", "--server", "127.0.0.1:1", "--policies", "darc,cfcfs"},
	} {
		if out, err := runApp(t, args...); err == nil {
			t.Errorf("%v: no error\n%s", args, out)
		}
	}
}

func TestClientCommandAdminDefaults(t *testing.T) {
	addr := clientTestEcho(t)
	admin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/status" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte(`{"policy":"darc","phase":"darc","dilation":1000,"groups":[]}`))
	}))
	defer admin.Close()
	out, err := runApp(t, "client", "--server", addr, "--admin", strings.TrimPrefix(admin.URL, "http://"),
		"--load", "0.5", "--duration", "300ms", "--json", "--max-lag", "1s")
	if err != nil {
		t.Fatalf("psp client: %v\n%s", err, out)
	}
	pts, err := report.ReadJSON(strings.NewReader(out))
	if err != nil || len(pts) != 1 {
		t.Fatalf("%v\n%s", err, out)
	}
	// The server's dilation (1000) turns load 0.5 into 0.5 x 14 / 50.5ms.
	if want := 0.5 * 14 / 50.5e-3; pts[0].Policy != "darc" || pts[0].OfferedRate < want*0.7 || pts[0].OfferedRate > want*1.3 {
		t.Errorf("policy %q, offered %.1f req/s, want darc at ~%.1f", pts[0].Policy, pts[0].OfferedRate, want)
	}
}
