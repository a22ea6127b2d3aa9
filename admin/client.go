package admin

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
)

// Defaults of a Client.
const (
	// DefaultTimeout bounds one request when NewClient is given no
	// timeout.
	DefaultTimeout = 5 * time.Second
	// DefaultSwapTimeout bounds a request that changes the server (a hot
	// swap, adding a tenant): the server compiles the module before it
	// answers.
	DefaultSwapTimeout = 60 * time.Second
)

// maxAnswerBytes bounds an answer read by the client, above what the
// largest server answers to /status (65,536 types); a tenant's own token
// reads its series of /metrics only.
const maxAnswerBytes = 128 << 20

// errAnswerTooLarge: an answer longer than maxAnswerBytes.
var errAnswerTooLarge = fmt.Errorf("answer larger than %d bytes", maxAnswerBytes)

// Client talks to a running server's admin endpoint. It is safe for
// concurrent use.
type Client struct {
	base  string
	http  *http.Client
	token string // for reads (SetToken)
}

// NewClient returns a client for the admin endpoint at addr: host:port
// (plain HTTP) or an http:// or https:// URL, optionally with a path
// prefix. timeout bounds each request (zero: DefaultTimeout; a change of
// the server is allowed DefaultSwapTimeout at least).
func NewClient(addr string, timeout time.Duration) (*Client, error) {
	base, err := ParseURL(addr)
	if err != nil {
		return nil, err
	}
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	if timeout < 0 {
		return nil, fmt.Errorf("admin: timeout %v, want > 0", timeout)
	}
	return &Client{base: base, http: &http.Client{Timeout: timeout}}, nil
}

// ParseURL turns an admin address (host:port, or an http:// or https://
// URL) into the base URL requests are made under, without a trailing
// slash.
func ParseURL(addr string) (string, error) {
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
func (c *Client) URL() string { return c.base }

// SetToken makes the client send token (Authorization: Bearer) with its
// reads: a server with tokens configured answers GET /status, /tenants
// and /metrics only with one (the operator's, the read-only one or a
// tenant's, which sees its own tenant only). Not safe to call while the
// client is in use.
func (c *Client) SetToken(token string) { c.token = strings.TrimSpace(token) }

// statusError is an answer with an unexpected HTTP status.
type statusError struct {
	code int
	msg  string
}

func (e *statusError) Error() string { return e.msg }

// call makes one request: body as JSON (nil: none) of contentType (""
// for JSON), the bearer token when not empty (reads fall back to
// SetToken's), the answer decoded into out (nil: ignored) when it has
// status want, else a *statusError with the server's message. into, when
// set, receives the answer's bytes instead of out.
func (c *Client) call(ctx context.Context, method, path, token string, body []byte, contentType string, want int, out any, into *[]byte) error {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", cmpOr(contentType, "application/json"))
	}
	if token = strings.TrimSpace(token); token == "" && method == http.MethodGet {
		token = c.token
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	} else if method != http.MethodGet {
		return errors.New("empty token (give the file holding it)")
	}
	hc := *c.http
	if method != http.MethodGet {
		hc.Timeout = max(hc.Timeout, DefaultSwapTimeout) // adding a tenant or a swap compiles a module
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("%w (is psp serve running with --admin %s?)", err, strings.TrimPrefix(c.base, "http://"))
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes+1))
	if err != nil {
		return fmt.Errorf("read: %w", err)
	}
	if len(data) > maxAnswerBytes {
		return errAnswerTooLarge
	}
	if resp.StatusCode != want {
		return &statusError{code: resp.StatusCode, msg: resp.Status + ": " + errorMessage(data)}
	}
	if into != nil {
		*into = data
		return nil
	}
	if out != nil && len(data) > 0 {
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("decode: %w", err)
		}
	}
	return nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
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
