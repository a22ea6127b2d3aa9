package server

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"syscall"
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
	reader   bool   // the read-only token (Admin.ReadTokenFile): reads everything, changes nothing
	tenant   string // the tenant a tenant token belongs to
}

func (p principal) String() string {
	switch {
	case p.operator:
		return "operator"
	case p.reader:
		return "reader"
	case p.tenant != "":
		return "tenant:" + p.tenant
	}
	return "anonymous"
}

// may reports whether p may change tenant's classifier.
func (p principal) may(tenant string) bool { return p.operator || p.tenant != "" && p.tenant == tenant }

// readsAll reports whether p may read every tenant's state (else only its
// own tenant's).
func (p principal) readsAll() bool { return p.operator || p.reader }

// credentials holds the token digests. Safe for concurrent use: tenants
// come and go.
type credentials struct {
	mu       sync.RWMutex
	operator *[32]byte
	reader   *[32]byte
	tenants  map[string][32]byte
}

func newCredentials() *credentials { return &credentials{tenants: map[string][32]byte{}} }

// MaxTokenFile bounds a token file's size (the server's and the CLI's): a
// token is a line of text.
const MaxTokenFile = 4096

// loadToken reads a token from path (see readTokenFile) or parses a hex
// SHA-256, and returns its digest; ok is false when neither is given.
// Tokens should be long random strings (openssl rand -hex 32).
func loadToken(path, digest string) (sum [32]byte, ok bool, err error) {
	switch {
	case path != "" && digest != "":
		return sum, false, errors.New("give a token file or a token digest, not both")
	case path != "":
		tok, err := readTokenFile(path)
		if err != nil {
			return sum, false, err
		}
		return sha256.Sum256([]byte(tok)), true, nil
	case digest != "":
		sum, err := ParseTokenDigest(digest)
		return sum, err == nil, err
	}
	return sum, false, nil
}

// readTokenFile opens path once and checks the file it opened, not the
// name (which could be swapped between a check and the open): no symlink
// (O_NOFOLLOW), a regular file (a FIFO is opened non-blocking and
// refused), owned by this process's user or root, not readable or
// writable by group or others, at most MaxTokenFile bytes, not empty.
func readTokenFile(path string) (string, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return "", fmt.Errorf("token file %s is a symbolic link: give the file itself", path)
		}
		return "", fmt.Errorf("token file: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("token file: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("token file %s is not a regular file", path)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return "", fmt.Errorf("token file %s has mode %04o: group or others may read it (chmod 600 %s)", path, perm, path)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		if uid := uint32(os.Geteuid()); st.Uid != uid && st.Uid != 0 {
			return "", fmt.Errorf("token file %s belongs to uid %d, not to this user (uid %d) or root (chown it)", path, st.Uid, uid)
		}
	}
	if fi.Size() > MaxTokenFile {
		return "", fmt.Errorf("token file %s has %d bytes: a token is one line (at most %d bytes)", path, fi.Size(), MaxTokenFile)
	}
	b, err := io.ReadAll(io.LimitReader(f, MaxTokenFile+1))
	if err != nil {
		return "", fmt.Errorf("token file: %w", err)
	}
	if len(b) > MaxTokenFile {
		return "", fmt.Errorf("token file %s: more than %d bytes", path, MaxTokenFile)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", fmt.Errorf("token file %s is empty (put a token in it, e.g. openssl rand -hex 32)", path)
	}
	return tok, nil
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

func (c *credentials) setReader(sum [32]byte) {
	c.mu.Lock()
	c.reader = &sum
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

// unique returns an error when a principal other than tenant self (""
// for none) holds the token digest sum: two principals with one token
// would make who a request comes from a matter of chance.
func (c *credentials) unique(sum [32]byte, self string) error {
	c.mu.RLock()
	defer c.mu.RUnlock()
	holder := ""
	switch {
	case c.operator != nil && *c.operator == sum:
		holder = "the operator"
	case c.reader != nil && *c.reader == sum:
		holder = "the read-only token"
	default:
		for name, d := range c.tenants {
			if d == sum && name != self {
				holder = fmt.Sprintf("tenant %q", name)
			}
		}
	}
	if holder == "" {
		return nil
	}
	return fmt.Errorf("%s has this token already: every credential must be a token of its own (openssl rand -hex 32)", holder)
}

// any reports whether some token exists (else every change is refused).
func (c *credentials) any() bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.operator != nil || c.reader != nil || len(c.tenants) > 0
}

// changers reports whether a token that may change something exists (the
// operator's or a tenant's; the read-only one changes nothing).
func (c *credentials) changers() bool {
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
	if c.reader != nil && subtle.ConstantTimeCompare(sum[:], c.reader[:]) == 1 && !ok {
		p, ok = principal{reader: true}, true
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

// sha256Hex is the hex SHA-256 of b.
func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}
