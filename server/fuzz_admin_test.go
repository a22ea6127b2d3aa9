package server

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	json "github.com/goccy/go-json"

	"github.com/persephone-go/psp/nic/memnic"
)

// lineBound is an audit log writer that fails the fuzz input writing a
// line longer than maxLine (every field of an audit line is bounded).
type lineBound struct {
	mu    sync.Mutex
	lines int
	long  int // length of the longest line seen over the bound
}

const maxAuditLine = 4096

// maxRequestTime bounds one admin request of the fuzz target: a hot swap
// compiles its module (the seeds' take milliseconds).
const maxRequestTime = 5 * time.Second

func (l *lineBound) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, line := range bytes.Split(p, []byte("\n")) {
		if len(line) > maxAuditLine {
			l.long = max(l.long, len(line))
		}
	}
	l.lines++
	return len(p), nil
}

// FuzzAdminAPI drives the admin API of a live in-process multi-tenant
// server (tokens configured, packets flowing) with random methods, paths,
// headers, bodies and tokens, seeded with the tenant lifecycle (add,
// update, swap, rollback, remove, reads). Whatever the request: no panic,
// no 500, no audit line past its bound, and the counters stay consistent
// (Received = Answered + Dropped + InFlight for the server, and per tenant
// Received = Answered + Dropped + Queued + Running + Classifying).
func FuzzAdminAPI(f *testing.F) {
	wasm, err := os.ReadFile("../examples/classifiers/c/pspheader.wasm")
	if err != nil {
		f.Fatal(err)
	}
	dir := f.TempDir()
	writeTok := func(name, tok string) string {
		p := dir + "/" + name
		if err := os.WriteFile(p, []byte(tok+"\n"), 0o600); err != nil {
			f.Fatal(err)
		}
		return p
	}
	cfg := memConfig()
	cfg.Admin.TokenFile = writeTok("op", "operator-secret")
	cfg.Admin.ReadTokenFile = writeTok("read", "read-secret")
	cfg.Tenants = []Tenant{
		{Name: "a", Ports: []uint16{portA}, Workers: 1, TokenFile: writeTok("a", "a-secret")},
		{Name: "b", Ports: []uint16{portB}, Wasm: wasm, TokenSHA256: TokenDigest("b-secret")},
	}
	audit := &lineBound{}
	srv, err := New(context.Background(), cfg, Options{Log: audit})
	if err != nil {
		f.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc, stopped := make(chan error, 1), make(chan struct{})
	go func() { errc <- srv.Run(ctx); close(stopped) }()
	f.Cleanup(func() { cancel(); <-errc })
	for deadline := time.Now().Add(10 * time.Second); !srv.Status().Running; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			f.Fatal("the server did not start")
		}
	}
	h := srv.Handler()
	dp := srv.Dataplane().(*memnic.Dataplane)
	peer := netip.MustParseAddrPort("10.0.0.9:1")
	go func() { // drain reply copies
		for {
			select {
			case <-dp.Replies():
			case <-ctx.Done():
				return
			}
		}
	}()

	tokens := []string{"", "operator-secret", "read-secret", "a-secret", "b-secret", "c-secret"}
	addC, _ := json.Marshal(Tenant{Name: "c", Ports: []uint16{7003}, Wasm: wasm, TokenSHA256: TokenDigest("c-secret")})
	seeds := []struct {
		method, path string
		tok          uint8
		auth         string
		body         []byte
	}{
		{"GET", "/status", 1, "", nil},
		{"GET", "/metrics", 2, "", nil},
		{"GET", "/tenants", 3, "", nil},
		{"POST", "/tenants", 1, "", addC},
		{"POST", "/tenants", 1, "", []byte(`{"name":"d","ports":[7005],"weight":1e308,"buffers":1000}`)},
		{"PATCH", "/tenants/a", 1, "", []byte(`{"weight":1e308,"buffers":1000}`)},
		{"PATCH", "/tenants/c", 1, "", []byte(`{"ports":[7004],"max_workers":2,"weight":0.5}`)},
		{"PUT", "/tenants/c/classifier", 5, "", wasm},
		{"PUT", "/tenants/b/classifier", 4, "", wasm[:len(wasm)/2]},
		{"POST", "/tenants/b/rollback", 4, "", nil},
		{"DELETE", "/tenants/c", 1, "", nil},
		{"DELETE", "/tenants/" + strings.Repeat("x", 5000), 0, "", nil},
		{"POST", "/tenants", 0, "Basic Zm9vOmJhcg==", []byte(`{"name":"` + strings.Repeat("n", 5000) + `"}`)},
		{"GET", "/", 0, "bearer   operator-secret  ", nil},
		{"OPTIONS", "/tenants/a", 1, "", nil},
	}
	for _, s := range seeds {
		f.Add(s.method, s.path, s.tok, s.auth, s.body, uint8(3))
	}
	var mu sync.Mutex // one request at a time: the counters are checked between them
	f.Fuzz(func(t *testing.T, method, path string, tok uint8, auth string, body []byte, packets uint8) {
		mu.Lock()
		defer mu.Unlock()
		if !strings.HasPrefix(path, "/") {
			path = "/" + path
		}
		req, err := http.NewRequest(method, "http://admin"+path, bytes.NewReader(body))
		if err != nil {
			return // not a request a server could receive
		}
		req.RemoteAddr = "192.0.2.1:1"
		if auth != "" {
			req.Header.Set("Authorization", auth)
		} else if tk := tokens[int(tok)%len(tokens)]; tk != "" {
			req.Header.Set("Authorization", "Bearer "+tk)
		}
		if tok&0x80 != 0 {
			req.Header.Set("Content-Type", "application/json")
		}
		for i := range int(packets % 8) {
			port := []uint16{portA, portB, 7003, 7004, 7005, 6789}[i%6]
			dp.InjectPort(header(uint32(i), uint32(i%3), 100), peer, port)
		}
		rec := httptest.NewRecorder()
		served := make(chan struct{})
		go func() { h.ServeHTTP(rec, req); close(served) }()
		select {
		case <-served:
		case <-time.After(maxRequestTime):
			buf := make([]byte, 1<<20)
			t.Fatalf("%s %.80q: no answer within %v\n%s", method, path, maxRequestTime, buf[:runtime.Stack(buf, true)])
		}
		if rec.Code >= 500 {
			t.Fatalf("%s %.80q: %d %s", method, path, rec.Code, rec.Body)
		}
		if audit.long > 0 {
			t.Fatalf("%s %.80q: an audit line of %d bytes (bound %d)", method, path, audit.long, maxAuditLine)
		}
		select {
		case <-stopped:
			t.Fatalf("%s %.80q: the server stopped", method, path)
		default:
		}
		st := srv.Status()
		if st.Received != st.Answered+st.Dropped+st.InFlight {
			t.Fatalf("%s %.80q: received %d != answered %d + dropped %d + in flight %d", method, path, st.Received, st.Answered, st.Dropped, st.InFlight)
		}
		if got := st.Drops.Total(); got != st.Dropped {
			t.Fatalf("dropped %d, drops by reason add up to %d", st.Dropped, got)
		}
		for _, ti := range st.Tenants {
			if in := ti.Answered + ti.Dropped + uint64(ti.Queued+ti.Running+ti.Classifying); ti.Received != in {
				t.Fatalf("tenant %s: received %d, answered %d + dropped %d + queued %d + running %d + classifying %d",
					ti.Name, ti.Received, ti.Answered, ti.Dropped, ti.Queued, ti.Running, ti.Classifying)
			}
		}
		if len(body)%16 == 0 { // now and then: the whole scrape, once per series
			rec := do(t, h, "GET", "/metrics", "read-secret", nil)
			if rec.Code != 200 {
				t.Fatalf("/metrics: %d %.500s", rec.Code, rec.Body)
			}
		}
	})
}
