package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// TestCredentialsUnique: one token for two principals would make who a
// request comes from a matter of map order (two tenants given one digest
// had 8 of 10 swaps credited to the wrong one). Every pair of kinds is
// refused: at start (token files and digests alike), in POST /tenants and
// in PATCH /tenants/{name}.
func TestCredentialsUnique(t *testing.T) {
	t.Run("at start", func(t *testing.T) {
		for _, tc := range []struct {
			name   string
			modify func(*Config)
			holder string
		}{
			{"two tenants, digests", func(c *Config) {
				c.Tenants[1].TokenSHA256 = TokenDigest("a-secret")
			}, `tenant "a"`},
			{"two tenants, files", func(c *Config) {
				c.Tenants[1].TokenSHA256, c.Tenants[1].TokenFile = "", writeToken(t, "a-secret")
			}, `tenant "a"`},
			{"tenant and operator", func(c *Config) {
				c.Tenants[1].TokenSHA256 = TokenDigest("operator-secret")
			}, "the operator"},
			{"tenant and reader", func(c *Config) {
				c.Admin.ReadTokenSHA256 = TokenDigest("reader-secret")
				c.Tenants[0].TokenFile = writeToken(t, "reader-secret")
			}, "the read-only token"},
			{"operator and reader", func(c *Config) {
				c.Admin.ReadTokenFile = writeToken(t, "operator-secret")
			}, "the operator"},
		} {
			cfg := tenantConfig(t)
			tc.modify(&cfg)
			srv, err := New(context.Background(), cfg, Options{})
			if err == nil {
				srv.Close()
				t.Errorf("%s: started", tc.name)
				continue
			}
			if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.holder) {
				t.Errorf("%s: %v, want a configuration error naming %s", tc.name, err, tc.holder)
			}
		}
	})

	r, _ := startLogged(t, withReader(tenantConfig(t), "reader-secret"))
	h := r.srv.Handler()
	taken := map[string]string{"a-secret": `tenant \"a\"`, "b-secret": `tenant \"b\"`, "operator-secret": "the operator", "reader-secret": "the read-only token"}
	t.Run("POST", func(t *testing.T) {
		for tok, holder := range taken {
			body := fmt.Sprintf(`{"name":"c","ports":[7003],"token_sha256":%q}`, TokenDigest(tok))
			rec := do(t, h, "POST", "/tenants", "operator-secret", []byte(body))
			if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), holder) {
				t.Errorf("POST c with %s's token: %d %s", holder, rec.Code, rec.Body)
			}
		}
		body := fmt.Sprintf(`{"name":"c","ports":[7003],"token_sha256":%q}`, TokenDigest("c-secret"))
		if rec := do(t, h, "POST", "/tenants", "operator-secret", []byte(body)); rec.Code != http.StatusCreated {
			t.Fatalf("POST c with a token of its own: %d %s", rec.Code, rec.Body)
		}
	})
	t.Run("PATCH", func(t *testing.T) {
		for tok, holder := range taken {
			if holder == `tenant \"b\"` {
				continue
			}
			body := fmt.Sprintf(`{"token_sha256":%q}`, TokenDigest(tok))
			rec := do(t, h, "PATCH", "/tenants/b", "operator-secret", []byte(body))
			if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), holder) {
				t.Errorf("PATCH b to %s's token: %d %s", holder, rec.Code, rec.Body)
			}
		}
		// Its own token again, and a new one, are fine.
		for _, tok := range []string{"b-secret", "b-new-secret"} {
			body := fmt.Sprintf(`{"token_sha256":%q}`, TokenDigest(tok))
			if rec := do(t, h, "PATCH", "/tenants/b", "operator-secret", []byte(body)); rec.Code != http.StatusOK {
				t.Errorf("PATCH b to %s: %d %s", tok, rec.Code, rec.Body)
			}
		}
		// A removed tenant's token is free again.
		if rec := do(t, h, "DELETE", "/tenants/c", "operator-secret", nil); rec.Code != http.StatusNoContent {
			t.Fatalf("DELETE c: %d %s", rec.Code, rec.Body)
		}
		body := fmt.Sprintf(`{"token_sha256":%q}`, TokenDigest("c-secret"))
		if rec := do(t, h, "PATCH", "/tenants/b", "operator-secret", []byte(body)); rec.Code != http.StatusOK {
			t.Errorf("PATCH b to removed c's token: %d %s", rec.Code, rec.Body)
		}
	})
	// Each token still names its own principal.
	for tok, want := range map[string]string{"a-secret": "tenant:a", "c-secret": "tenant:b", "operator-secret": "operator", "reader-secret": "reader"} {
		if p, ok := r.srv.creds.authenticate(tok); !ok || p.String() != want {
			t.Errorf("%s authenticates as %v (%v), want %s", tok, p, ok, want)
		}
	}
}

// withReader gives cfg a read-only token.
func withReader(cfg Config, token string) Config {
	cfg.Admin.ReadTokenSHA256 = TokenDigest(token)
	return cfg
}
