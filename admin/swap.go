package admin

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/persephone-go/psp/server"
	"github.com/persephone-go/psp/wasmclass"
)

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

// conflict turns a conditional change's 409 into an error wrapping
// wasmclass.ErrConflict.
func (o SwapOptions) conflict(op string, err error) error {
	if se := (*statusError)(nil); o.expects() && errors.As(err, &se) && se.code == http.StatusConflict {
		return fmt.Errorf("%s: %w (%v)", op, wasmclass.ErrConflict, err)
	}
	return fmt.Errorf("%s: %w", op, err)
}

// PushClassifier uploads wasm as tenant's new classifier (PUT
// /tenants/{tenant}/classifier with the bearer token) and returns the
// server's answer. The request is bounded by ctx and by
// max(DefaultSwapTimeout, the client's timeout). On error the server keeps
// its running classifier.
func (c *Client) PushClassifier(ctx context.Context, tenant string, wasm []byte, token string) (server.SwapResult, error) {
	return c.PushClassifierIf(ctx, tenant, wasm, token, SwapOptions{})
}

// PushClassifierIf is PushClassifier with a compare-and-swap expectation
// and the reference the module came from (see SwapOptions). A conflict's
// error wraps wasmclass.ErrConflict.
func (c *Client) PushClassifierIf(ctx context.Context, tenant string, wasm []byte, token string, o SwapOptions) (server.SwapResult, error) {
	var res server.SwapResult
	if tenant == "" {
		return res, errors.New("classifier push: empty tenant name")
	}
	if strings.TrimSpace(token) == "" {
		return res, errors.New("classifier push: empty token")
	}
	path := "/tenants/" + url.PathEscape(tenant) + "/classifier" + o.query()
	if err := c.call(ctx, http.MethodPut, path, token, wasm, "application/wasm", http.StatusOK, &res, nil); err != nil {
		return server.SwapResult{}, o.conflict("classifier push", err)
	}
	return res, nil
}

// Rollback swaps a tenant's previous classifier back in (POST
// /tenants/{name}/rollback; the tenant's or the operator's token).
func (c *Client) Rollback(ctx context.Context, name, token string) (server.SwapResult, error) {
	return c.RollbackIf(ctx, name, token, SwapOptions{})
}

// RollbackIf is Rollback, only over the running module o expects; a
// conflict's error wraps wasmclass.ErrConflict.
func (c *Client) RollbackIf(ctx context.Context, name, token string, o SwapOptions) (server.SwapResult, error) {
	var res server.SwapResult
	if err := c.call(ctx, http.MethodPost, "/tenants/"+url.PathEscape(name)+"/rollback"+o.query(), token, nil, "", http.StatusOK, &res, nil); err != nil {
		return res, o.conflict("tenant rollback "+name, err)
	}
	return res, nil
}

// Confirm confirms tenant's provisional swap to the module sha (hex): for
// good with extend 0, else for extend more (it stays provisional). A
// server with no provisional swap of that module (reverted already, or
// another module runs) refuses: the error wraps wasmclass.ErrConflict.
func (c *Client) Confirm(ctx context.Context, tenant, token, sha string, extend time.Duration) (server.SwapResult, error) {
	var res server.SwapResult
	q := url.Values{"expect_sha256": {sha}}
	if extend > 0 {
		q.Set("provisional", extend.String())
	}
	if err := c.call(ctx, http.MethodPost, "/tenants/"+url.PathEscape(tenant)+"/confirm?"+q.Encode(), token, nil, "", http.StatusOK, &res, nil); err != nil {
		return res, SwapOptions{ExpectSHA256: sha}.conflict("confirm "+tenant, err)
	}
	return res, nil
}
