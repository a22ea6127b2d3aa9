package admin

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestAdminAnswersOfLargeServers: a server may declare 65,536 types; its
// /status is about 1.1 KB a type (17.9 MB at 16,384 types, 72 MB at
// 65,535) and its /metrics about 14.6 KB a type (57 MB for 1,024 tenants
// of 4 types). The client read 16 MiB at most: psp status failed on a
// 16,384-type server, and Metrics cut a longer exposition without a word
// (psp rollout then parsed half a line; /tenants was cut the same way).
// They now read up to maxAnswerBytes and refuse more, saying so.
func TestAdminAnswersOfLargeServers(t *testing.T) {
	status := `{"policy":"darc","types":[` + strings.Repeat(`{"id":1,"name":"`+strings.Repeat("x", 1000)+`"},`, 17<<10) + `{"id":2}]}`
	metrics := strings.Repeat("psp_x{type=\"t\"} 1\n", 17<<20/19)
	serve := func(h http.HandlerFunc) *Client {
		srv := httptest.NewServer(h)
		t.Cleanup(srv.Close)
		c, err := NewClient(srv.URL, 20*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	ctx := context.Background()
	c := serve(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/status":
			io.WriteString(w, status)
		case "/metrics":
			io.WriteString(w, metrics)
		}
	})
	if st, err := c.Status(ctx); err != nil || len(st.Types) != 17<<10+1 {
		t.Errorf("status of %d bytes: %v", len(status), err)
	}
	if body, err := c.Metrics(ctx); err != nil || !bytes.Equal(body, []byte(metrics)) {
		t.Errorf("metrics of %d bytes: read %d, %v", len(metrics), len(body), err)
	}
	huge := serve(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(w, io.LimitReader(repeatReader('#'), maxAnswerBytes+1))
	})
	if _, err := huge.Metrics(ctx); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("metrics past the bound: %v, want an error saying it is larger", err)
	}
	if _, err := huge.StatusJSON(ctx); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("status past the bound: %v, want an error saying it is larger", err)
	}
	if _, err := huge.Tenants(ctx); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("tenants past the bound: %v, want an error saying it is larger", err)
	}
}

// repeatReader reads as an endless run of its byte.
type repeatReader byte

func (r repeatReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(r)
	}
	return len(p), nil
}
