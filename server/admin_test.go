package server

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/persephone-go/psp/wasmclass"
)

// zeros is an endless reader of zero bytes.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// failingBody returns a few bytes, then an error (a client that went away).
type failingBody struct{ sent bool }

func (f *failingBody) Read(p []byte) (int, error) {
	if f.sent {
		return 0, errors.New("connection reset")
	}
	f.sent = true
	return copy(p, "\x00asm"), nil
}

func TestSwapUploadLimitAndBodyErrors(t *testing.T) {
	tokenFile := filepath.Join(t.TempDir(), "token")
	os.WriteFile(tokenFile, []byte("s3cret\n"), 0o600)
	cfg := memConfig()
	cfg.Admin.Addr = "off"
	cfg.Admin.TokenFile = tokenFile
	srv, err := New(context.Background(), cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	put := func(body io.Reader) int {
		req := httptest.NewRequest("PUT", "/tenants/default/classifier", body)
		req.Header.Set("Authorization", "Bearer s3cret")
		rec := httptest.NewRecorder()
		srv.Handler().ServeHTTP(rec, req)
		return rec.Code
	}
	// One byte more than the classifier host accepts: refused before it
	// reaches the host, as too large.
	if got := put(io.LimitReader(zeros{}, wasmclass.DefaultMaxModuleSize+1)); got != http.StatusRequestEntityTooLarge {
		t.Errorf("upload of the module limit + 1: %d, want 413", got)
	}
	// A multi-GB upload is cut off at the limit, not buffered.
	if got := put(io.LimitReader(zeros{}, 4<<30)); got != http.StatusRequestEntityTooLarge {
		t.Errorf("4 GiB upload: %d, want 413", got)
	}
	// A body that fails to arrive is a bad request, not a too large one.
	if got := put(&failingBody{}); got != http.StatusBadRequest {
		t.Errorf("broken body: %d, want 400", got)
	}
	// Within the limit it reaches the swap (409: native classifier).
	if got := put(io.LimitReader(zeros{}, 1024)); got != http.StatusConflict {
		t.Errorf("small upload: %d, want 409", got)
	}
}

func TestCloseWithoutRunFreesAdminPort(t *testing.T) {
	cfg := memConfig()
	srv, err := New(context.Background(), cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	addr := srv.AdminAddr()
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("admin address %s still in use after Close: %v", addr, err)
	}
	ln.Close()
}

func TestAdminServerTimeouts(t *testing.T) {
	srv, err := New(context.Background(), memConfig(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	h := srv.http
	if h.ReadHeaderTimeout <= 0 || h.ReadTimeout <= 0 || h.IdleTimeout <= 0 {
		t.Errorf("admin server timeouts: read header %v, read %v, idle %v; want all set (slow or idle clients hold connections forever otherwise)",
			h.ReadHeaderTimeout, h.ReadTimeout, h.IdleTimeout)
	}
	if h.WriteTimeout <= swapTimeout {
		t.Errorf("write timeout %v, want more than the swap timeout %v", h.WriteTimeout, swapTimeout)
	}
}
