package server

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/persephone-go/psp/wasmclass"
)

// The audit log. Every attempt to change a classifier or the tenant set,
// and every refused credential, is a JSON line, in one of two streams so
// that no volume of refusals can push a change out of what is kept:
//
//   - changes made (outcome ok): swaps, rollbacks, tenants added, updated
//     and removed, one line each, in Admin.AuditLog;
//   - everything refused, in Admin.AuditLog + ".refused": refused
//     credentials (a missing or wrong token: unauthorized; a token that
//     may not: forbidden) once per source, event, outcome and principal
//     per refusalInterval, the first in full at once and the rest as one
//     line with their count when the interval ends; other refusals
//     (conflicts, bad modules or settings), one line each.
//
// A source is the client's address, an IPv6 one cut to its /64 (one
// host may hold a whole /64). At most maxRefusalSources sources are told
// apart per interval; refusals from more are counted together. Each file
// rotates at Admin.AuditLogMaxBytes, one older file kept (rotatingFile).
// Without Admin.AuditLog both streams go to the server's log.
//
// Every field a client chooses (a tenant name, a path, an error quoting a
// body) is cut to maxAuditField bytes, so one line is at most a few KiB
// whatever the request.
type audit struct {
	changes, refusals *slog.Logger
	interval          time.Duration

	mu      sync.Mutex
	counts  map[refusalKey]*refusalCount // this interval's refused credentials
	flush   *time.Timer                  // ends the interval; nil when counts is empty
	closed  bool
	refused atomic.Uint64 // refused credentials
	folded  atomic.Uint64 // of which told in a count rather than a line of their own
}

// Audit bounds: one field and an error message, in bytes; the interval
// over which refused credentials are counted; the sources told apart in
// an interval.
const (
	maxAuditField     = 256
	maxAuditError     = 1024
	refusalInterval   = 10 * time.Second
	maxRefusalSources = 1024
)

// refusalKey says which refused credentials one line counts.
type refusalKey struct {
	source, event, outcome, principal string
}

// refusalCount counts the refusals of one key after the first's line.
type refusalCount struct {
	n     uint64
	first time.Time
}

// newAudit writes changes to one writer and refusals to another (may be
// the same) and counts refused credentials per interval.
func newAudit(changes, refusals io.Writer, interval time.Duration) *audit {
	return &audit{changes: auditLogger(changes), refusals: auditLogger(refusals), interval: interval, counts: map[refusalKey]*refusalCount{}}
}

func auditLogger(w io.Writer) *slog.Logger {
	h := slog.NewJSONHandler(w, &slog.HandlerOptions{ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey && len(groups) == 0 {
			a.Value = slog.StringValue(a.Value.Time().UTC().Format(time.RFC3339Nano))
		}
		return a
	}})
	return slog.New(h).With("log", "psp-audit")
}

// auditEvent is one audit line's fields; empty ones are left out.
type auditEvent struct {
	Event     string // swap, rollback, tenant_add, tenant_update, tenant_remove, read
	Tenant    string
	Principal string
	Remote    string
	SHA256    string
	Size      int
	Version   int
	Outcome   string // ok, refused, conflict, unauthorized, forbidden
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

// credentialRefused reports whether an outcome is a refused credential.
func credentialRefused(outcome string) bool {
	return outcome == "unauthorized" || outcome == "forbidden"
}

// source is the part of a client's address a refusal is counted by: its
// IP, or an IPv6 address's /64.
func source(remote string) string {
	ap, err := netip.ParseAddrPort(remote)
	if err != nil {
		return clip(remote, maxAuditField)
	}
	a := ap.Addr().Unmap()
	if a.Is6() {
		p, _ := a.Prefix(64)
		return p.String()
	}
	return a.String()
}

func (a *audit) record(e auditEvent) {
	if a == nil {
		return
	}
	switch {
	case e.Outcome == "ok":
		a.write(a.changes, e)
	case credentialRefused(e.Outcome):
		a.refused.Add(1)
		if a.count(e) {
			a.write(a.refusals, e)
		}
	default:
		a.write(a.refusals, e)
	}
}

// count counts a refused credential in its interval and reports whether
// it is the first of its key (to be written in full).
func (a *audit) count(e auditEvent) (first bool) {
	k := refusalKey{source: source(e.Remote), event: clip(e.Event, maxAuditField), outcome: e.Outcome, principal: clip(e.Principal, maxAuditField)}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return true
	}
	c, ok := a.counts[k]
	if !ok && len(a.counts) >= maxRefusalSources {
		k.source = fmt.Sprintf("(more than %d sources)", maxRefusalSources)
		c, ok = a.counts[k]
	}
	if ok {
		c.n++
		a.folded.Add(1)
		return false
	}
	a.counts[k] = &refusalCount{first: time.Now()}
	if a.flush == nil {
		a.flush = time.AfterFunc(a.interval, a.endInterval)
	}
	return true
}

// endInterval writes one line per key refused again since its first line
// and starts a new interval.
func (a *audit) endInterval() {
	a.mu.Lock()
	counts := a.counts
	a.counts, a.flush = map[refusalKey]*refusalCount{}, nil
	a.mu.Unlock()
	for k, c := range counts {
		if c.n == 0 {
			continue
		}
		a.refusals.LogAttrs(context.Background(), slog.LevelWarn, "admin refusals repeated",
			slog.String("event", k.event), slog.String("outcome", k.outcome), slog.String("principal", k.principal),
			slog.String("source", k.source), slog.Uint64("count", c.n),
			slog.String("since", c.first.UTC().Format(time.RFC3339Nano)))
	}
}

// close writes what the current interval counted; later refusals are
// written one line each.
func (a *audit) close() {
	if a == nil {
		return
	}
	a.mu.Lock()
	a.closed = true
	if a.flush != nil {
		a.flush.Stop()
	}
	a.mu.Unlock()
	a.endInterval()
}

// write writes e as one line to l.
func (a *audit) write(l *slog.Logger, e auditEvent) {
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
	l.LogAttrs(context.Background(), level, "admin", attrs...)
}

// DefaultAuditLogMaxBytes is Admin.AuditLogMaxBytes's default: 64 MiB.
const DefaultAuditLogMaxBytes = 64 << 20

// refusalsSuffix names the refusals' file after the changes' one.
const refusalsSuffix = ".refused"

// rotatingFile is an audit log file: when a write would take it past max
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
