package oci

import (
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/opencontainers/go-digest"
	"oras.land/oras-go/v2/registry"
)

// Scheme prefixes every reference this package reads.
const Scheme = "oci://"

// ErrBadReference: a reference is not of the form
// oci://HOST[:PORT]/REPO[:TAG][@sha256:HEX].
var ErrBadReference = errors.New("oci: bad reference")

// Ref is a parsed reference to a classifier in a registry.
type Ref struct {
	// Host is the registry, host[:port].
	Host string
	// Repo is the repository path.
	Repo string
	// Tag is the tag ("" when the reference has none).
	Tag string
	// Digest is the manifest's digest, "sha256:HEX" ("" when the reference
	// has only a tag).
	Digest string
}

// IsRef reports whether s is meant as a registry reference (it starts
// with oci://) rather than a file.
func IsRef(s string) bool { return strings.HasPrefix(s, Scheme) }

// ParseRef parses oci://HOST[:PORT]/REPO[:TAG][@sha256:HEX]. Without a tag
// or a digest the tag is "latest".
func ParseRef(s string) (Ref, error) {
	rest, ok := strings.CutPrefix(s, Scheme)
	if !ok {
		return Ref{}, fmt.Errorf("%w %q: want oci://HOST[:PORT]/REPO[:TAG][@sha256:HEX]", ErrBadReference, s)
	}
	var r Ref
	if i := strings.Index(rest, "@"); i >= 0 {
		rest, r.Digest = rest[:i], rest[i+1:]
		if d, err := digest.Parse(r.Digest); err != nil || d.Algorithm() != digest.SHA256 {
			return Ref{}, fmt.Errorf("%w %q: digest %q: want sha256:<64 hex digits>", ErrBadReference, s, r.Digest)
		}
	}
	host, path, ok := strings.Cut(rest, "/")
	if !ok || host == "" || path == "" {
		return Ref{}, fmt.Errorf("%w %q: want oci://HOST[:PORT]/REPO[:TAG][@sha256:HEX]", ErrBadReference, s)
	}
	r.Host, r.Repo = host, path
	if i := strings.LastIndex(path, ":"); i >= 0 {
		r.Repo, r.Tag = path[:i], path[i+1:]
	}
	if r.Tag == "" && r.Digest == "" {
		r.Tag = "latest"
	}
	if _, err := registry.ParseReference(r.Host + "/" + r.Repo + ":" + "x"); err != nil {
		return Ref{}, fmt.Errorf("%w %q: %v", ErrBadReference, s, err)
	}
	if r.Tag != "" {
		if err := (registry.Reference{Registry: r.Host, Repository: r.Repo, Reference: r.Tag}).ValidateReferenceAsTag(); err != nil {
			return Ref{}, fmt.Errorf("%w %q: %v", ErrBadReference, s, err)
		}
	}
	return r, nil
}

// String writes r back as oci://HOST/REPO[:TAG][@DIGEST].
func (r Ref) String() string {
	s := Scheme + r.Host + "/" + r.Repo
	if r.Tag != "" {
		s += ":" + r.Tag
	}
	if r.Digest != "" {
		s += "@" + r.Digest
	}
	return s
}

// Pinned is r by digest alone: oci://HOST/REPO@DIGEST.
func (r Ref) Pinned() Ref { return Ref{Host: r.Host, Repo: r.Repo, Digest: r.Digest} }

// reference is the tag or digest asked of the registry (the digest wins).
func (r Ref) reference() string {
	if r.Digest != "" {
		return r.Digest
	}
	return r.Tag
}

// Loopback reports whether the registry is on this machine (localhost or
// a loopback address): such registries are spoken to over plain HTTP.
func (r Ref) Loopback() bool {
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.Trim(host, "[]")
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
