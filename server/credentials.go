package server

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/persephone-go/psp/wasmclass"
)

// Credentials. The admin endpoint knows two kinds of bearer tokens: the
// operator's (Admin.TokenFile or Admin.TokenSHA256), which may change
// every tenant and the tenant set itself, and each tenant's
// (Tenant.TokenFile or Tenant.TokenSHA256), which may change that tenant's
// classifier only. Tokens are kept as SHA-256 digests only and compared in
// constant time; a token file must not be readable by group or others.

// principal is who a request authenticated as.
type principal struct {
	operator bool
	tenant   string // the tenant a tenant token belongs to
}

func (p principal) String() string {
	switch {
	case p.operator:
		return "operator"
	case p.tenant != "":
		return "tenant:" + p.tenant
	}
	return "anonymous"
}

// may reports whether p may change tenant's classifier.
func (p principal) may(tenant string) bool { return p.operator || p.tenant == tenant }

// credentials holds the token digests. Safe for concurrent use: tenants
// come and go.
type credentials struct {
	mu       sync.RWMutex
	operator *[32]byte
	tenants  map[string][32]byte
}

func newCredentials() *credentials { return &credentials{tenants: map[string][32]byte{}} }

// loadToken reads a token from path (refusing files group or others may
// read, and empty ones) or parses a hex SHA-256, and returns its digest; ok
// is false when neither is given. Tokens should be long random strings
// (openssl rand -hex 32).
func loadToken(path, digest string) (sum [32]byte, ok bool, err error) {
	switch {
	case path != "" && digest != "":
		return sum, false, errors.New("give a token file or a token digest, not both")
	case path != "":
		fi, err := os.Stat(path)
		if err != nil {
			return sum, false, fmt.Errorf("token file: %w", err)
		}
		if !fi.Mode().IsRegular() {
			return sum, false, fmt.Errorf("token file %s is not a regular file", path)
		}
		if perm := fi.Mode().Perm(); perm&0o077 != 0 {
			return sum, false, fmt.Errorf("token file %s has mode %04o: group or others may read it (chmod 600 %s)", path, perm, path)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return sum, false, fmt.Errorf("token file: %w", err)
		}
		tok := strings.TrimSpace(string(b))
		if tok == "" {
			return sum, false, fmt.Errorf("token file %s is empty (put a token in it, e.g. openssl rand -hex 32)", path)
		}
		return sha256.Sum256([]byte(tok)), true, nil
	case digest != "":
		sum, err := ParseTokenDigest(digest)
		return sum, err == nil, err
	}
	return sum, false, nil
}

// ParseTokenDigest parses a token's SHA-256 as 64 hex digits (what
// TokenDigest and psp tenant token print).
func ParseTokenDigest(s string) ([32]byte, error) {
	var sum [32]byte
	b, err := hex.DecodeString(strings.TrimSpace(s))
	if err != nil || len(b) != len(sum) {
		return sum, fmt.Errorf("token digest %q: want the 64 hex digits of a SHA-256", s)
	}
	copy(sum[:], b)
	return sum, nil
}

// TokenDigest returns the hex SHA-256 of a token, as configuration keys
// token_sha256 take it.
func TokenDigest(token string) string {
	sum := sha256.Sum256([]byte(strings.TrimSpace(token)))
	return hex.EncodeToString(sum[:])
}

func (c *credentials) setOperator(sum [32]byte) {
	c.mu.Lock()
	c.operator = &sum
	c.mu.Unlock()
}

func (c *credentials) setTenant(name string, sum [32]byte, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ok {
		c.tenants[name] = sum
	} else {
		delete(c.tenants, name)
	}
}

// any reports whether some token exists (else every change is refused).
func (c *credentials) any() bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.operator != nil || len(c.tenants) > 0
}

// authenticate returns who token is; ok is false for no known token. Every
// stored digest is compared (in constant time), so the time taken does not
// tell which, if any, matched.
func (c *credentials) authenticate(token string) (p principal, ok bool) {
	sum := sha256.Sum256([]byte(token))
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.operator != nil && subtle.ConstantTimeCompare(sum[:], c.operator[:]) == 1 {
		p, ok = principal{operator: true}, true
	}
	for name, d := range c.tenants {
		if subtle.ConstantTimeCompare(sum[:], d[:]) == 1 && !ok {
			p, ok = principal{tenant: name}, true
		}
	}
	return p, ok
}

// bearer extracts the bearer token of r ("" when there is none). The
// scheme is case-insensitive (RFC 9110, section 11.1).
func bearer(r *http.Request) string {
	scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(tok)
}

// audit writes the audit log: one JSON line per attempt to change a
// classifier or the tenant set, and per refused credential.
type audit struct {
	log *slog.Logger
}

func newAudit(w io.Writer) *audit {
	h := slog.NewJSONHandler(w, &slog.HandlerOptions{ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey && len(groups) == 0 {
			a.Value = slog.StringValue(a.Value.Time().UTC().Format(time.RFC3339Nano))
		}
		return a
	}})
	return &audit{log: slog.New(h).With("log", "psp-audit")}
}

// auditEvent is one audit line's fields; empty ones are left out.
type auditEvent struct {
	Event     string // swap, rollback, tenant_add, tenant_update, tenant_remove, auth
	Tenant    string
	Principal string
	Remote    string
	SHA256    string
	Size      int
	Version   int
	Outcome   string // ok, refused, conflict, unauthorized, forbidden, error
	Error     string
	Duration  time.Duration
	Expected  wasmclass.Expect // a compare-and-swap's expectation
	Reference string           // the registry reference a module came from
}

func (a *audit) record(e auditEvent) {
	if a == nil {
		return
	}
	attrs := []slog.Attr{slog.String("event", e.Event), slog.String("outcome", e.Outcome)}
	add := func(k, v string) {
		if v != "" {
			attrs = append(attrs, slog.String(k, v))
		}
	}
	add("tenant", e.Tenant)
	add("principal", e.Principal)
	add("remote", e.Remote)
	add("sha256", e.SHA256)
	if e.Size > 0 || e.SHA256 != "" {
		attrs = append(attrs, slog.Int("size", e.Size))
	}
	if e.Version > 0 {
		attrs = append(attrs, slog.Int("version", e.Version))
	}
	add("expected_sha256", e.Expected.SHA256)
	if e.Expected.Version > 0 {
		attrs = append(attrs, slog.Int("expected_version", e.Expected.Version))
	}
	add("reference", e.Reference)
	add("error", e.Error)
	if e.Duration > 0 {
		attrs = append(attrs, slog.Float64("duration_ms", float64(e.Duration.Microseconds())/1000))
	}
	level := slog.LevelInfo
	if e.Outcome != "ok" {
		level = slog.LevelWarn
	}
	a.log.LogAttrs(context.Background(), level, "admin", attrs...)
}

// sha256Hex is the hex SHA-256 of b.
func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}
