package harness

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	json "github.com/goccy/go-json"

	"github.com/persephone-go/psp/internal/affinity"
	"github.com/persephone-go/psp/server"
)

// DefaultAdminTimeout bounds one admin request when AdminClient.Timeout is
// zero.
const DefaultAdminTimeout = 5 * time.Second

// maxAnswerBytes bounds a /status, /tenants or /metrics answer read by
// the client, above what the largest server answers to /status (65,536
// types, about 1.1 KB each: 72 MB). /metrics takes about 14.6 KB a type
// and passes it from some 9,000 types: a tenant's own token reads its
// series only.
const maxAnswerBytes = 128 << 20

// AdminClient talks to a running server's admin endpoint (psp serve
// --admin). It is safe for concurrent use.
type AdminClient struct {
	base  string
	http  *http.Client
	token string // for reads (SetToken)
}

// SetToken makes the client send token (Authorization: Bearer) with its
// reads: a server with tokens configured answers GET /status, /tenants
// and /metrics only with one (the operator's, the read-only one or a
// tenant's, which sees its own tenant only). Not safe to call while the
// client is in use.
func (c *AdminClient) SetToken(token string) { c.token = strings.TrimSpace(token) }

// NewAdminClient returns a client for the admin endpoint at addr: host:port
// (plain HTTP) or an http:// or https:// URL, optionally with a path
// prefix. timeout bounds each request (zero: DefaultAdminTimeout; a hot
// swap may take longer, see PushClassifier).
func NewAdminClient(addr string, timeout time.Duration) (*AdminClient, error) {
	base, err := AdminURL(addr)
	if err != nil {
		return nil, err
	}
	if timeout == 0 {
		timeout = DefaultAdminTimeout
	}
	if timeout < 0 {
		return nil, fmt.Errorf("admin: timeout %v, want > 0", timeout)
	}
	return &AdminClient{base: base, http: &http.Client{Timeout: timeout}}, nil
}

// AdminURL turns an admin address (host:port, or an http:// or https://
// URL) into the base URL requests are made under, without a trailing slash.
func AdminURL(addr string) (string, error) {
	addr = strings.TrimSpace(addr)
	bad := func(why string) (string, error) {
		return "", fmt.Errorf("admin address %q: %s (want host:port or http://host:port)", addr, why)
	}
	if addr == "" {
		return bad("empty")
	}
	if !strings.Contains(addr, "://") {
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return bad(err.Error())
		}
		if strings.ContainsAny(host, "/?#@") {
			return bad("not a host name")
		}
		if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
			return bad("port " + strconv.Quote(port) + " is not in 1..65535")
		}
		return "http://" + addr, nil
	}
	u, err := url.Parse(addr)
	if err != nil {
		return bad(err.Error())
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return bad("scheme " + strconv.Quote(u.Scheme) + " is not http or https")
	case u.Host == "" || u.Hostname() == "":
		return bad("no host")
	case u.RawQuery != "" || u.Fragment != "" || u.User != nil:
		return bad("a base URL has no query, fragment or user")
	}
	return strings.TrimRight(u.String(), "/"), nil
}

// URL returns the client's base URL.
func (c *AdminClient) URL() string { return c.base }

// StatusJSON returns the server's GET /status document as sent, once it
// has checked that it is one (see statusDocument).
func (c *AdminClient) StatusJSON(ctx context.Context) ([]byte, error) {
	body, err := c.statusBody(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := c.decodeStatus(body); err != nil {
		return nil, err
	}
	return body, nil
}

// Status returns the server's current status.
func (c *AdminClient) Status(ctx context.Context) (*server.Status, error) {
	body, err := c.statusBody(ctx)
	if err != nil {
		return nil, err
	}
	return c.decodeStatus(body)
}

// statusBody reads the server's GET /status answer.
func (c *AdminClient) statusBody(ctx context.Context) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/status", nil)
	if err != nil {
		return nil, fmt.Errorf("status: %w", err)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("status: %w (is psp serve running with --admin %s?)", err, strings.TrimPrefix(c.base, "http://"))
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes+1))
	if err != nil {
		return nil, fmt.Errorf("status: read: %w", err)
	}
	if len(body) > maxAnswerBytes {
		return nil, fmt.Errorf("status: answer larger than %d bytes", maxAnswerBytes)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("status: %s: %s", resp.Status, errorMessage(body))
	}
	return body, nil
}

// statusDocument is a psp /status document with its "policy" member
// decoded apart: every psp server reports one, and a JSON answer without it
// comes from something else listening on the admin address.
type statusDocument struct {
	server.Status
	Policy *string `json:"policy"` // shadows Status.Policy
}

// decodeStatus decodes body, refusing an answer that is not a psp status
// document.
func (c *AdminClient) decodeStatus(body []byte) (*server.Status, error) {
	var doc statusDocument
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil, fmt.Errorf("status: decode: %w (is %s a psp admin endpoint?)", err, c.base)
	}
	if doc.Policy == nil {
		return nil, fmt.Errorf(`status: decode: no "policy" member (is %s a psp admin endpoint?)`, c.base)
	}
	doc.Status.Policy = *doc.Policy
	return &doc.Status, nil
}

// DefaultSwapTimeout bounds a hot swap's request: the server compiles the
// module before it answers.
const DefaultSwapTimeout = 60 * time.Second

// PushClassifier uploads wasm as tenant's new classifier (PUT
// /tenants/{tenant}/classifier with the bearer token) and returns the
// server's answer. The request is bounded by ctx and by
// max(DefaultSwapTimeout, the client's timeout). On error the server keeps
// its running classifier.
func (c *AdminClient) PushClassifier(ctx context.Context, tenant string, wasm []byte, token string) (server.SwapResult, error) {
	return c.PushClassifierIf(ctx, tenant, wasm, token, SwapOptions{})
}

// PushClassifierIf is PushClassifier with a compare-and-swap expectation
// and the reference the module came from (see SwapOptions). A conflict's
// error wraps ErrConflict.
func (c *AdminClient) PushClassifierIf(ctx context.Context, tenant string, wasm []byte, token string, o SwapOptions) (server.SwapResult, error) {
	if tenant == "" {
		return server.SwapResult{}, errors.New("classifier push: empty tenant name")
	}
	token = strings.TrimSpace(token)
	if token == "" {
		return server.SwapResult{}, errors.New("classifier push: empty token")
	}
	u := c.base + "/tenants/" + url.PathEscape(tenant) + "/classifier" + o.query()
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, u, bytes.NewReader(wasm))
	if err != nil {
		return server.SwapResult{}, fmt.Errorf("classifier push: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/wasm")
	hc := *c.http
	hc.Timeout = max(hc.Timeout, DefaultSwapTimeout)
	resp, err := hc.Do(req)
	if err != nil {
		return server.SwapResult{}, fmt.Errorf("classifier push: %w", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode == http.StatusConflict && o.expects() {
		return server.SwapResult{}, fmt.Errorf("classifier push: %w (%s): %s", ErrConflict, resp.Status, errorMessage(body))
	}
	if resp.StatusCode != http.StatusOK {
		return server.SwapResult{}, fmt.Errorf("classifier push: %s: %s", resp.Status, errorMessage(body))
	}
	var res server.SwapResult
	if err := json.Unmarshal(body, &res); err != nil {
		return res, fmt.Errorf("classifier push: decode answer: %w", err)
	}
	return res, nil
}

// errorMessage extracts the "error" field of a JSON error answer, or the
// trimmed body.
func errorMessage(body []byte) string {
	var e struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(body, &e) == nil && e.Error != "" {
		return e.Error
	}
	msg := strings.TrimSpace(string(body))
	if len(msg) > 200 {
		msg = msg[:200] + "..."
	}
	return msg
}

// Reservation describes a status's reservation compactly, e.g.
// "SHORT on 0; LONG on 1-12 + spillway", or "" when there is none (other
// policies, or DARC still profiling).
func Reservation(st *server.Status) string {
	var b strings.Builder
	for i, g := range st.Groups {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(strings.Join(g.Types, ","))
		b.WriteString(" on ")
		if len(g.Reserved) == 0 {
			b.WriteString("none")
		} else {
			b.WriteString(affinity.FormatList(g.Reserved))
		}
		if g.Spillway {
			b.WriteString(" + spillway")
		}
	}
	return b.String()
}
