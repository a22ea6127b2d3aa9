package harness

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	json "github.com/goccy/go-json"

	"github.com/persephone-go/psp/server"
)

// Tenants returns the server's tenants (GET /tenants).
func (c *AdminClient) Tenants(ctx context.Context) ([]server.TenantInfo, error) {
	var ts []server.TenantInfo
	if err := c.call(ctx, http.MethodGet, "/tenants", "", nil, http.StatusOK, &ts); err != nil {
		return nil, fmt.Errorf("tenants: %w", err)
	}
	return ts, nil
}

// AddTenant adds a tenant to a multi-tenant server (POST /tenants; the
// operator's token). t.Wasm is its classifier (empty: the native one).
func (c *AdminClient) AddTenant(ctx context.Context, t server.Tenant, token string) (server.TenantInfo, error) {
	var ti server.TenantInfo
	body, err := json.Marshal(t)
	if err != nil {
		return ti, fmt.Errorf("tenant add: %w", err)
	}
	if err := c.call(ctx, http.MethodPost, "/tenants", token, body, http.StatusCreated, &ti); err != nil {
		return ti, fmt.Errorf("tenant add %s: %w", t.Name, err)
	}
	return ti, nil
}

// UpdateTenant changes a tenant's ports, share or token (PATCH
// /tenants/{name}; the operator's token).
func (c *AdminClient) UpdateTenant(ctx context.Context, name string, u server.TenantUpdate, token string) (server.TenantInfo, error) {
	var ti server.TenantInfo
	body, err := json.Marshal(u)
	if err != nil {
		return ti, fmt.Errorf("tenant update: %w", err)
	}
	if err := c.call(ctx, http.MethodPatch, "/tenants/"+url.PathEscape(name), token, body, http.StatusOK, &ti); err != nil {
		return ti, fmt.Errorf("tenant update %s: %w", name, err)
	}
	return ti, nil
}

// RemoveTenant removes a tenant (DELETE /tenants/{name}; the operator's
// token).
func (c *AdminClient) RemoveTenant(ctx context.Context, name, token string) error {
	if err := c.call(ctx, http.MethodDelete, "/tenants/"+url.PathEscape(name), token, nil, http.StatusNoContent, nil); err != nil {
		return fmt.Errorf("tenant remove %s: %w", name, err)
	}
	return nil
}

// Rollback swaps a tenant's previous classifier back in (POST
// /tenants/{name}/rollback; the tenant's or the operator's token).
func (c *AdminClient) Rollback(ctx context.Context, name, token string) (server.SwapResult, error) {
	var res server.SwapResult
	if err := c.call(ctx, http.MethodPost, "/tenants/"+url.PathEscape(name)+"/rollback", token, nil, http.StatusOK, &res); err != nil {
		return res, fmt.Errorf("tenant rollback %s: %w", name, err)
	}
	return res, nil
}

// call makes one admin request: body as JSON (nil: none), the bearer token
// when not empty, the answer decoded into out (nil: ignored) when it has
// status want, else an error with the server's message.
func (c *AdminClient) call(ctx context.Context, method, path, token string, body []byte, want int, out any) error {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
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
		hc.Timeout = max(hc.Timeout, DefaultSwapTimeout) // adding a tenant compiles its module
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
		return fmt.Errorf("answer larger than %d bytes", maxAnswerBytes)
	}
	if resp.StatusCode != want {
		return &statusError{code: resp.StatusCode, msg: resp.Status + ": " + errorMessage(data)}
	}
	if out != nil && len(data) > 0 {
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("decode: %w", err)
		}
	}
	return nil
}
