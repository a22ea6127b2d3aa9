package server

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/persephone-go/psp/internal/testenv"
)

// rawRequest sends a request's head and then body (sent bytes of a body
// that claims length, or, with length -1, chunks of chunked encoding)
// and then stalls; it returns the answer's status code (0: none) once the
// server answers or closes.
func rawRequest(addr, method, path, token string, length int64, body []byte) int {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return 0
	}
	defer c.Close()
	head := fmt.Sprintf("%s %s HTTP/1.1\r\nHost: psp\r\nAuthorization: Bearer %s\r\n", method, path, token)
	if length >= 0 {
		head += fmt.Sprintf("Content-Length: %d\r\n\r\n", length)
	} else {
		head += "Transfer-Encoding: chunked\r\n\r\n"
	}
	go func() {
		c.Write([]byte(head))
		if length < 0 {
			fmt.Fprintf(c, "%x\r\n", len(body))
		}
		c.Write(body) // the answer may come first: the write then fails
	}()
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestAdminBodiesBudgeted: uploads that send all of their body but the
// last byte and stall (300 PUTs of 8 MiB less a byte had taken a
// server from 105 MB to 2.9 GB) are held to the budget: each token has at
// most two in flight (429 past them), all of them together at most eight
// of the largest modules (503 past it), each is cut when it stalls (408),
// and the heap grows by about the budget, not by the uploads. Every
// endpoint with a body, and chunked bodies that declare no length, count.
func TestAdminBodiesBudgeted(t *testing.T) {
	cfg := memConfig()
	cfg.Admin.TokenFile = writeToken(t, "operator-secret")
	cfg.Policy = "cfcfs" // the tenants share one policy: no worker each
	const tenants = 6
	for i := range tenants {
		cfg.Tenants = append(cfg.Tenants, Tenant{Name: fmt.Sprintf("t%d", i), Ports: []uint16{uint16(7101 + i)}, TokenSHA256: TokenDigest(fmt.Sprintf("t%d-secret", i))})
	}
	srv, err := New(context.Background(), cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	srv.bodies = newBodyLimits(adminBodyBudget, adminUploadsPerCredential, time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	addr := srv.AdminAddr()

	body := make([]byte, maxClassifierUpload-1)
	var peak atomic.Uint64
	var baseline runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&baseline)
	stopSampling := testenv.Every(20*time.Millisecond, func() {
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		if m.HeapAlloc > peak.Load() {
			peak.Store(m.HeapAlloc)
		}
	})

	// Three uploads per tenant token (one past its count), stalled a byte
	// short: 18 uploads for a budget of 8. The first token's two are in
	// flight before its third is sent, which meets the count (429) with
	// room left in the budget; the others race for what is left (503).
	var mu sync.Mutex
	codes := map[int]int{}
	var wg sync.WaitGroup
	upload := func(i int) {
		code := rawRequest(addr, "PUT", fmt.Sprintf("/tenants/t%d/classifier", i), fmt.Sprintf("t%d-secret", i), maxClassifierUpload, body)
		mu.Lock()
		codes[code]++
		mu.Unlock()
	}
	for range 2 {
		wg.Go(func() { upload(0) })
	}
	testenv.WaitFor(t, "two uploads of one token in flight", 10*time.Second, func() bool {
		return srv.bodies.reserved() >= 2*maxClassifierUpload
	})
	upload(0)
	for i := 1; i < tenants; i++ {
		for range 3 {
			wg.Go(func() { upload(i) })
		}
	}
	// The other endpoints' bodies: the operator's chunked POST and a
	// PATCH, both stalled.
	for _, req := range []struct{ method, path string }{{"POST", "/tenants"}, {"PATCH", "/tenants/t0"}} {
		wg.Go(func() {
			code := rawRequest(addr, req.method, req.path, "operator-secret", -1, []byte(`{"name":`))
			mu.Lock()
			codes[code]++
			mu.Unlock()
		})
	}
	wg.Wait()
	stopSampling()
	grew := int64(peak.Load()) - int64(baseline.HeapAlloc)
	t.Logf("answers by status: %v; heap grew by %d MiB at most (budget %d MiB)", codes, grew>>20, adminBodyBudget>>20)
	// A token's third upload meets its count (429) unless the budget
	// (503) refused one of its first two.
	if codes[http.StatusTooManyRequests] == 0 || codes[http.StatusServiceUnavailable] == 0 ||
		codes[http.StatusTooManyRequests]+codes[http.StatusServiceUnavailable] < 3*tenants+2-(adminBodyBudget/maxClassifierUpload+2) {
		t.Errorf("refused: %d for the count (429), %d for the budget (503); want both, and all that did not fit",
			codes[http.StatusTooManyRequests], codes[http.StatusServiceUnavailable])
	}
	if codes[http.StatusRequestTimeout] == 0 || codes[http.StatusRequestTimeout] > adminBodyBudget/maxClassifierUpload+2 {
		t.Errorf("%d stalled uploads cut (408), want some, and at most the budget's 8 plus the two small ones", codes[http.StatusRequestTimeout])
	}
	if codes[0] > 0 {
		t.Errorf("%d requests got no answer", codes[0])
	}
	if grew > 2*adminBodyBudget {
		t.Errorf("heap grew by %d MiB for a %d MiB budget", grew>>20, adminBodyBudget>>20)
	}
	if n := srv.bodies.reserved(); n != 0 {
		t.Errorf("%d bytes still reserved after every body ended", n)
	}
	_, metrics := scrape(t, srv.Handler(), "operator-secret")
	for _, reason := range []string{"in_flight", "budget", "stalled"} {
		if sumMetric(metrics, `psp_admin_bodies_refused_total{reason="`+reason+`"}`) == 0 {
			t.Errorf("no body refused for %s in /metrics", reason)
		}
	}
	// Within the bounds the endpoints work: a declared length past the
	// limit is refused before a byte is read, a small body is read.
	if code := rawRequest(addr, "PUT", "/tenants/t1/classifier", "t1-secret", 1<<30, nil); code != http.StatusRequestEntityTooLarge {
		t.Errorf("a 1 GiB declared upload: %d, want 413", code)
	}
	if code := rawRequest(addr, "PATCH", "/tenants/t1", "operator-secret", 16, []byte(`{"ports":[7102]}`)); code != http.StatusOK {
		t.Errorf("a small PATCH after the flood: %d, want 200", code)
	}
	if !strings.Contains(metrics, "psp_admin_body_bytes") {
		t.Error("no psp_admin_body_bytes in /metrics")
	}
}
