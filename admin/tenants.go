package admin

import (
	"context"
	"fmt"
	"net/http"
	"net/url"

	json "github.com/goccy/go-json"

	"github.com/persephone-go/psp/server"
)

// Tenants returns the server's tenants (GET /tenants).
func (c *Client) Tenants(ctx context.Context) ([]server.TenantInfo, error) {
	var ts []server.TenantInfo
	if err := c.call(ctx, http.MethodGet, "/tenants", "", nil, "", http.StatusOK, &ts, nil); err != nil {
		return nil, fmt.Errorf("tenants: %w", err)
	}
	return ts, nil
}

// AddTenant adds a tenant to a multi-tenant server (POST /tenants; the
// operator's token). t.Wasm is its classifier (empty: the native one).
func (c *Client) AddTenant(ctx context.Context, t server.Tenant, token string) (server.TenantInfo, error) {
	var ti server.TenantInfo
	body, err := json.Marshal(t)
	if err != nil {
		return ti, fmt.Errorf("tenant add: %w", err)
	}
	if err := c.call(ctx, http.MethodPost, "/tenants", token, body, "", http.StatusCreated, &ti, nil); err != nil {
		return ti, fmt.Errorf("tenant add %s: %w", t.Name, err)
	}
	return ti, nil
}

// UpdateTenant changes a tenant's ports, share or token (PATCH
// /tenants/{name}; the operator's token).
func (c *Client) UpdateTenant(ctx context.Context, name string, u server.TenantUpdate, token string) (server.TenantInfo, error) {
	var ti server.TenantInfo
	body, err := json.Marshal(u)
	if err != nil {
		return ti, fmt.Errorf("tenant update: %w", err)
	}
	if err := c.call(ctx, http.MethodPatch, "/tenants/"+url.PathEscape(name), token, body, "", http.StatusOK, &ti, nil); err != nil {
		return ti, fmt.Errorf("tenant update %s: %w", name, err)
	}
	return ti, nil
}

// RemoveTenant removes a tenant (DELETE /tenants/{name}; the operator's
// token).
func (c *Client) RemoveTenant(ctx context.Context, name, token string) error {
	if err := c.call(ctx, http.MethodDelete, "/tenants/"+url.PathEscape(name), token, nil, "", http.StatusNoContent, nil, nil); err != nil {
		return fmt.Errorf("tenant remove %s: %w", name, err)
	}
	return nil
}
