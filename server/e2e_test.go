package server

import (
	"bytes"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	json "github.com/goccy/go-json"

	"github.com/persephone-go/psp/internal/testenv"
	"github.com/persephone-go/psp/wire"
)

// exampleWasm returns a committed example classifier.
func exampleWasm(t *testing.T, name string) string {
	t.Helper()
	p := filepath.Join("..", "examples", "classifiers", "c", name)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("example classifier missing: %v", err)
	}
	return p
}

// udpClient sends psp requests and collects replies by id.
type udpClient struct {
	conn    *net.UDPConn
	mu      sync.Mutex
	replies map[uint32]wire.Header
	done    chan struct{}
}

func newUDPClient(t *testing.T, server string) *udpClient {
	t.Helper()
	raddr, err := net.ResolveUDPAddr("udp", server)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.DialUDP("udp", nil, raddr)
	if err != nil {
		t.Fatal(err)
	}
	c := &udpClient{conn: conn, replies: map[uint32]wire.Header{}, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		buf := make([]byte, 2048)
		for {
			n, err := conn.Read(buf)
			if err != nil {
				return
			}
			h, err := wire.Decode(buf[:n])
			if err != nil {
				continue
			}
			c.mu.Lock()
			c.replies[h.ID] = h
			c.mu.Unlock()
		}
	}()
	t.Cleanup(func() { conn.Close(); <-c.done })
	return c
}

func (c *udpClient) send(t *testing.T, payload []byte) {
	t.Helper()
	if _, err := c.conn.Write(payload); err != nil {
		t.Fatal(err)
	}
}

func (c *udpClient) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.replies)
}

// TestUDPEndToEnd runs the whole server over real UDP loopback: emulate app,
// a Wasm classifier, DARC reserving for SHORT, /status over HTTP, and a hot
// swap through PUT with a token.
func TestUDPEndToEnd(t *testing.T) {
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte("let-me-in\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := Config{
		Listen:     "127.0.0.1:0",
		Workers:    4,
		Buffers:    512,
		Policy:     "darc",
		MinSamples: 100,
		Classifier: exampleWasm(t, "pspheader.wasm"),
		App:        App{Name: AppEmulate, Dilation: 10},
		Admin:      Admin{Addr: "127.0.0.1:0", TokenFile: tokenFile},
	}
	r := start(t, cfg)
	admin := "http://" + r.srv.AdminAddr()
	client := newUDPClient(t, r.srv.Addr())

	const n = 600
	sawShortReserved := false
	for i := 0; i < n; i++ {
		typ, svc := wire.TypeShort, uint32(1000) // 10µs emulated
		if i%2 == 1 {
			typ, svc = wire.TypeLong, 20000 // 200µs emulated
		}
		client.send(t, header(uint32(i), typ, svc))
		if i%20 == 19 {
			time.Sleep(5 * time.Millisecond) // stay well under capacity
			st := httpStatus(t, admin)
			if st.Phase == "darc" && len(st.Groups) == 2 && st.Groups[0].Types[0] == "default/SHORT" && len(st.Groups[0].Reserved) == 1 {
				sawShortReserved = true
			}
		}
	}
	client.send(t, []byte{0xde, 0xad})                                               // a runt, dropped and counted
	client.send(t, append(header(n+1000, wire.TypeShort, 1), make([]byte, 5000)...)) // oversized: truncated, dropped
	client.send(t, header(n+1001, 0xdeadbeef, 100))                                  // garbage type: UNKNOWN, answered
	client.send(t, header(n+1002, wire.TypeShort, 0xffffffff))                       // 4.3s: over the app's cap, refused and counted
	waitUntil(t, "replies", func() bool {
		if client.count() == n+1 {
			return true
		}
		if testing.Verbose() {
			st := httpStatus(t, admin)
			j, _ := json.Marshal(st.Types[:3])
			client.mu.Lock()
			_, g := client.replies[n+1001]
			client.mu.Unlock()
			t.Logf("%d replies (garbage answered %v); received %d drops %+v groups %+v types %s", client.count(), g, st.Received, st.Drops, st.Groups, j)
		}
		return false
	})

	var st Status
	waitUntil(t, "a status with every request answered", func() bool {
		st = httpStatus(t, admin)
		return st.Answered == n+1 && st.Drops.Runt == 1 && st.Drops.Truncated == 1 && st.Drops.ServiceCap == 1
	})
	if st.Received != n+4 || st.Types[0].Answered != 1 {
		t.Errorf("received %d (want %d), UNKNOWN answered %d (want 1)", st.Received, n+4, st.Types[0].Answered)
	}
	if !sawShortReserved {
		j, _ := json.MarshalIndent(st.Types[:3], "", " ")
		t.Errorf("no status showed DARC reserving one worker for default/SHORT (last: phase %q groups %+v) %s", st.Phase, st.Groups, j)
	}
	if st.Reservations == 0 {
		t.Errorf("no reservation computed")
	}
	if len(st.Tenants) != 1 || st.Tenants[0].Name != DefaultTenant || st.Tenants[0].Version != 1 {
		t.Fatalf("tenants %+v", st.Tenants)
	}

	put := func(token string, body []byte) (int, string) {
		req, _ := http.NewRequest("PUT", admin+"/tenants/default/classifier", bytes.NewReader(body))
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b bytes.Buffer
		b.ReadFrom(resp.Body)
		return resp.StatusCode, b.String()
	}
	random, err := os.ReadFile(exampleWasm(t, "random.wasm"))
	if err != nil {
		t.Fatal(err)
	}
	if code, _ := put("", random); code != http.StatusUnauthorized {
		t.Errorf("swap without token: %d, want 401", code)
	}
	if code, body := put("let-me-in", []byte("not wasm at all")); code != http.StatusBadRequest {
		t.Errorf("swap with garbage: %d %s, want 400", code, body)
	}
	if code, body := put("let-me-in", random); code != http.StatusOK {
		t.Fatalf("swap: %d %s", code, body)
	}
	// After the swap the random classifier assigns SHORT or LONG at random:
	// type-9 (StockLevel) requests must now be counted as SHORT or LONG.
	for i := n; i < n+100; i++ {
		client.send(t, header(uint32(i), wire.TypeStockLevel, 1000))
	}
	waitUntil(t, "replies after the swap", func() bool { return client.count() == n+101 })
	waitUntil(t, "status after the swap", func() bool {
		st = httpStatus(t, admin)
		return st.Answered == n+101
	})
	if st.Tenants[0].Version != 2 {
		t.Errorf("version after swap %d, want 2", st.Tenants[0].Version)
	}
	for _, ts := range st.Types {
		if ts.Name == "default/StockLevel" && ts.Received != 0 {
			t.Errorf("StockLevel received %d after swapping in the random classifier, want 0", ts.Received)
		}
	}
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
}

func httpStatus(t *testing.T, base string) Status {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, base+"/status", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer let-me-in") // TestUDPEndToEnd's token: reads need one
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st Status
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	return st
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testenv.WaitFor(t, what, 15*time.Second, cond)
}
