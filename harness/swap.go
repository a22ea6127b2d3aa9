package harness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/persephone-go/psp/server"
)

// ErrConflict: a compare-and-swap found another module running than the
// one it expected (HTTP 409).
var ErrConflict = errors.New("conflict")

// SwapOptions make a swap or a rollback conditional and say where a
// module came from.
type SwapOptions struct {
	// ExpectSHA256 (hex) and ExpectVersion name the running module the
	// change must replace ("" and 0: not checked).
	ExpectSHA256  string
	ExpectVersion int
	// Reference is the registry reference, pinned by digest, the module
	// came from (shown in psp status and psp tenant list).
	Reference string
	// Provisional makes a swap provisional: the server rolls it back
	// unless Confirm confirms it within this long (0: a swap for good).
	Provisional time.Duration
}

func (o SwapOptions) expects() bool { return o.ExpectSHA256 != "" || o.ExpectVersion != 0 }

// query is o as the admin API's query string ("" or "?...").
func (o SwapOptions) query() string {
	q := url.Values{}
	if o.ExpectSHA256 != "" {
		q.Set("expect_sha256", o.ExpectSHA256)
	}
	if o.ExpectVersion != 0 {
		q.Set("expect_version", strconv.Itoa(o.ExpectVersion))
	}
	if o.Reference != "" {
		q.Set("reference", o.Reference)
	}
	if o.Provisional > 0 {
		q.Set("provisional", o.Provisional.String())
	}
	if len(q) == 0 {
		return ""
	}
	return "?" + q.Encode()
}

// statusError is an admin answer with an unexpected HTTP status.
type statusError struct {
	code int
	msg  string
}

func (e *statusError) Error() string { return e.msg }

// RollbackIf is Rollback, only over the running module o expects; a
// conflict's error wraps ErrConflict.
func (c *AdminClient) RollbackIf(ctx context.Context, name, token string, o SwapOptions) (res server.SwapResult, err error) {
	err = c.call(ctx, http.MethodPost, "/tenants/"+url.PathEscape(name)+"/rollback"+o.query(), token, nil, http.StatusOK, &res)
	if err != nil {
		if se := (*statusError)(nil); o.expects() && errors.As(err, &se) && se.code == http.StatusConflict {
			return res, fmt.Errorf("tenant rollback %s: %w (%v)", name, ErrConflict, err)
		}
		return res, fmt.Errorf("tenant rollback %s: %w", name, err)
	}
	return res, nil
}

// Metrics returns the server's GET /metrics (Prometheus text format).
func (c *AdminClient) Metrics(ctx context.Context) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/metrics", nil)
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes+1))
	if err != nil {
		return nil, fmt.Errorf("metrics: read: %w", err)
	}
	if len(body) > maxAnswerBytes {
		return nil, fmt.Errorf("metrics: answer larger than %d bytes (a server of many types: a tenant's own token reads its series only)", maxAnswerBytes)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("metrics: %s", resp.Status)
	}
	return body, nil
}

// Confirm confirms tenant's provisional swap to the module sha (hex): for
// good with extend 0, else for extend more (it stays provisional). A
// server with no provisional swap of that module (reverted already, or
// another module runs) refuses: the error wraps ErrConflict.
func (c *AdminClient) Confirm(ctx context.Context, tenant, token, sha string, extend time.Duration) (res server.SwapResult, err error) {
	q := url.Values{"expect_sha256": {sha}}
	if extend > 0 {
		q.Set("provisional", extend.String())
	}
	err = c.call(ctx, http.MethodPost, "/tenants/"+url.PathEscape(tenant)+"/confirm?"+q.Encode(), token, nil, http.StatusOK, &res)
	if err != nil {
		if se := (*statusError)(nil); errors.As(err, &se) && se.code == http.StatusConflict {
			return res, fmt.Errorf("confirm %s: %w (%v)", tenant, ErrConflict, err)
		}
		return res, fmt.Errorf("confirm %s: %w", tenant, err)
	}
	return res, nil
}
