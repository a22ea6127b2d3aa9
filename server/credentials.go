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
	"syscall"
	"time"
	"unicode/utf8"

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

// audit writes the audit log: one JSON line per attempt to change a
// classifier or the tenant set, and per refused credential. Every field a
// client chooses (a tenant name, a path, an error quoting a body) is cut
// to maxAuditField bytes, so one line is at most a few KiB whatever the
// request; the file rotates at Admin.AuditLogMaxBytes (rotatingFile).
type audit struct {
	log *slog.Logger
}

// maxAuditField bounds one audit field, in bytes; maxAuditError an error
// message.
const (
	maxAuditField = 256
	maxAuditError = 1024
)

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
	Event     string // swap, rollback, tenant_add, tenant_update, tenant_remove, read, auth
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

// clip cuts s to at most n bytes (on a rune boundary), saying how long it
// was.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s...(%d bytes)", s[:cut], len(s))
}

func (a *audit) record(e auditEvent) {
	if a == nil {
		return
	}
	attrs := []slog.Attr{slog.String("event", clip(e.Event, maxAuditField)), slog.String("outcome", clip(e.Outcome, maxAuditField))}
	add := func(k, v string) {
		if v != "" {
			attrs = append(attrs, slog.String(k, clip(v, maxAuditField)))
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
	if e.Error != "" {
		attrs = append(attrs, slog.String("error", clip(e.Error, maxAuditError)))
	}
	if e.Duration > 0 {
		attrs = append(attrs, slog.Float64("duration_ms", float64(e.Duration.Microseconds())/1000))
	}
	level := slog.LevelInfo
	if e.Outcome != "ok" {
		level = slog.LevelWarn
	}
	a.log.LogAttrs(context.Background(), level, "admin", attrs...)
}

// DefaultAuditLogMaxBytes is Admin.AuditLogMaxBytes's default: 64 MiB.
const DefaultAuditLogMaxBytes = 64 << 20

// rotatingFile is the audit log file: when a write would take it past max
// bytes, it is renamed to path.1 (replacing the previous one) and a new
// file is started, so the log takes at most about 2 x max bytes of disk.
type rotatingFile struct {
	mu   sync.Mutex
	path string
	max  int64
	f    *os.File
	size int64
}

func openRotatingFile(path string, max int64) (*rotatingFile, error) {
	r := &rotatingFile{path: path, max: max}
	if err := r.open(); err != nil {
		return nil, err
	}
	return r, nil
}

func (r *rotatingFile) open() error {
	f, err := os.OpenFile(r.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return err
	}
	r.f, r.size = f, fi.Size()
	return nil
}

// Write writes p (one audit line: slog writes a record at once),
// rotating first when p would take the file past its bound.
func (r *rotatingFile) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.f == nil {
		return 0, os.ErrClosed
	}
	if r.size > 0 && r.size+int64(len(p)) > r.max {
		r.f.Close()
		r.f = nil
		if err := os.Rename(r.path, r.path+".1"); err != nil {
			return 0, fmt.Errorf("audit log: rotate: %w", err)
		}
		if err := r.open(); err != nil {
			return 0, fmt.Errorf("audit log: rotate: %w", err)
		}
	}
	n, err := r.f.Write(p)
	r.size += int64(n)
	return n, err
}

// Close closes the file.
func (r *rotatingFile) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.f == nil {
		return nil
	}
	err := r.f.Close()
	r.f = nil
	return err
}

// sha256Hex is the hex SHA-256 of b.
func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}
