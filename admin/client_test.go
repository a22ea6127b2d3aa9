package admin

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/persephone-go/psp/server"
)

func TestParseURL(t *testing.T) {
	good := map[string]string{
		"127.0.0.1:9090":           "http://127.0.0.1:9090",
		"localhost:1":              "http://localhost:1",
		"[::1]:9090":               "http://[::1]:9090",
		"http://127.0.0.1:9090":    "http://127.0.0.1:9090",
		"http://127.0.0.1:9090/":   "http://127.0.0.1:9090",
		"https://psp.example/adm/": "https://psp.example/adm",
	}
	for in, want := range good {
		if got, err := ParseURL(in); err != nil || got != want {
			t.Errorf("ParseURL(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "127.0.0.1", "http//127.0.0.1:1", "ftp://h:1", "http://", "127.0.0.1:0",
		"127.0.0.1:99999", "host/x:1", "http://h:1/?q=1", "http://u@h:1"} {
		if got, err := ParseURL(bad); err == nil {
			t.Errorf("ParseURL(%q) = %q, accepted", bad, got)
		}
	}
}

func TestClientStatusAndErrors(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/base/status":
			w.Write([]byte(`{"policy":"darc","dilation":1000,"groups":[{"types":["SHORT"],"reserved":[0]},{"types":["LONG"],"reserved":[1,2,3],"spillway":true}],
				"types":[{"id":1,"name":"SHORT","profiled_mean_service_ns":1000,"measured_mean_service_ns":1100}]}`))
		case "/base/tenants/default/classifier":
			if r.Header.Get("Authorization") != "Bearer tok" {
				w.WriteHeader(http.StatusUnauthorized)
				w.Write([]byte(`{"error":"missing or wrong bearer token"}`))
				return
			}
			w.Write([]byte(`{"tenant":"default","version":2}`))
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	c, err := NewClient(srv.URL+"/base/", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	st, err := c.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.Policy != "darc" || st.Dilation != 1000 || len(st.Types) != 1 || st.Types[0].MeasuredMeanServiceNs != 1100 {
		t.Errorf("status %+v", st)
	}
	if got, want := Reservation(st), "SHORT on 0; LONG on 1-3 + spillway"; got != want {
		t.Errorf("reservation %q, want %q", got, want)
	}
	res, err := c.PushClassifier(context.Background(), "default", []byte("\x00asm"), "tok\n")
	if err != nil || res != (server.SwapResult{Tenant: "default", Version: 2}) {
		t.Errorf("push: %+v, %v", res, err)
	}
	if _, err := c.PushClassifier(context.Background(), "default", nil, "wrong"); err == nil || !strings.Contains(err.Error(), "wrong bearer token") {
		t.Errorf("push with a wrong token: %v", err)
	}
	bad, _ := NewClient(srv.URL+"/nothing", time.Second)
	if _, err := bad.Status(context.Background()); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("status of a wrong path: %v", err)
	}
}

// TestClientRefusesOtherJSON: an address answering JSON that is not
// a psp status document (another service on the admin port) is refused by
// Status and by StatusJSON (psp status --json), not passed on.
func TestClientRefusesOtherJSON(t *testing.T) {
	for _, body := range []string{`{"status":"ok"}`, `[1,2,3]`, `"policy"`, `null`, `{"policy"`} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Write([]byte(body))
		}))
		c, err := NewClient(srv.URL, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := c.StatusJSON(context.Background()); err == nil || !strings.Contains(err.Error(), "psp admin endpoint") {
			t.Errorf("StatusJSON of %s: %q, %v; want refused", body, got, err)
		}
		if _, err := c.Status(context.Background()); err == nil {
			t.Errorf("Status of %s accepted", body)
		}
		srv.Close()
	}
}
