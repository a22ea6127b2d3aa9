package server

import (
	"bytes"
	"context"
	"errors"
	"net/netip"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/persephone-go/psp/app"
	"github.com/persephone-go/psp/app/memcached"
	"github.com/persephone-go/psp/nic"
	"github.com/persephone-go/psp/nic/memnic"
	"github.com/persephone-go/psp/wire"
)

// TestMemServerMemcached serves the memcached application over the
// in-memory dataplane: a set, then a get of a value longer than a datagram
// comes back in several datagrams, in order, through the dispatcher.
func TestMemServerMemcached(t *testing.T) {
	cfg := memConfig()
	cfg.App = App{Name: AppMemcached}
	cfg.Buffers = 64
	r := start(t, cfg)
	if got := r.srv.Config().BufSize; got != DefaultMemcachedBufSize {
		t.Errorf("memcached buffer size %d, want %d", got, DefaultMemcachedBufSize)
	}
	dp := r.srv.Dataplane().(*memnic.Dataplane)
	peer := netip.MustParseAddrPort("10.0.0.9:5000")
	value := strings.Repeat("v", 4000)
	inject(dp, memcached.AppendRequest(nil, 1, []byte("set k 0 0 4000\r\n"+value+"\r\n")), peer)
	if got := string(recvReply(t, dp)[8:]); got != "STORED\r\n" {
		t.Fatalf("set: %q", got)
	}
	inject(dp, memcached.AppendRequest(nil, 2, []byte("get k\r\n")), peer)
	var body []byte
	for i := 0; i < 3; i++ {
		d := recvReply(t, dp)
		h, _ := memcached.ParseFrameHeader(d)
		if h.RequestID != 2 || int(h.Seq) != i || h.Total != 3 {
			t.Fatalf("datagram %d: header %+v", i, h)
		}
		body = append(body, d[8:]...)
	}
	if want := "VALUE k 0 4000\r\n" + value + "\r\nEND\r\n"; string(body) != want {
		t.Errorf("reassembled get: %d bytes, want %d", len(body), len(want))
	}
	time.Sleep(250 * time.Millisecond) // a stats interval
	st := getStatus(t, r.srv.Handler())
	byName := map[string]TypeStatus{}
	for _, ts := range st.Types {
		byName[ts.Name] = ts
	}
	if byName["WRITE"].Received != 1 || byName["GET"].Received != 1 || st.App != AppMemcached {
		t.Errorf("status: app %q, types %+v", st.App, st.Types)
	}
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
}

func recvReply(t *testing.T, dp *memnic.Dataplane) []byte {
	t.Helper()
	select {
	case rep := <-dp.Replies():
		return rep.Payload
	case <-time.After(10 * time.Second):
		t.Fatal("no reply")
		return nil
	}
}

// TestCustomApplication serves a program's own handler behind DARC with a
// Wasm classifier given as bytes: the same path the built-in applications
// take.
func TestCustomApplication(t *testing.T) {
	wasm, err := os.ReadFile(exampleWasm(t, "pspheader.wasm"))
	if err != nil {
		t.Fatal(err)
	}
	var closed atomic.Bool
	app := &Application{
		Name: "upper",
		Handler: app.HandlerFunc(func(_ int, _ app.Type, b *nic.Buffer) bool {
			p := b.Payload()
			copy(p[wire.HeaderLen:], bytes.ToUpper(p[wire.HeaderLen:]))
			return true
		}),
		MinPayload: wire.HeaderLen,
		Close:      func() error { closed.Store(true); return nil },
	}
	cfg := memConfig()
	cfg.App = App{Name: "ignored"}
	cfg.Tenants = []Tenant{{Name: "default", Wasm: wasm}}
	r := startWith(t, cfg, Options{Application: app})
	srv := r.srv
	dp := srv.Dataplane().(*memnic.Dataplane)
	req := append(header(5, wire.TypeShort, 0), "hello"...)
	inject(dp, req, netip.MustParseAddrPort("10.0.0.1:1"))
	if got := recvReply(t, dp); string(got[wire.HeaderLen:]) != "HELLO" {
		t.Errorf("reply %q", got)
	}
	inject(dp, []byte("short"), netip.MustParseAddrPort("10.0.0.1:1")) // below MinPayload: a runt
	time.Sleep(200 * time.Millisecond)
	st := srv.Status()
	if st.App != "upper" || st.Drops.Runt != 1 || len(st.Tenants) != 1 || st.Tenants[0].Name != "default" {
		t.Errorf("status: app %q, runts %d, tenants %+v", st.App, st.Drops.Runt, st.Tenants)
	}
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	if !closed.Load() {
		t.Error("the application was not closed")
	}
	// An application without a handler is refused, and not closed.
	closed.Store(false)
	bad := &Application{Name: "nothing", Close: app.Close}
	if _, err := New(context.Background(), memConfig(), Options{Application: bad}); !errors.Is(err, ErrConfig) {
		t.Errorf("application without handler: %v, want ErrConfig", err)
	}
	if closed.Load() {
		t.Error("New closed an application it refused")
	}
}
