package oci_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/persephone-go/psp/examples/classifiers"
	"github.com/persephone-go/psp/internal/registrytest"
	"github.com/persephone-go/psp/oci"
)

func TestParseRef(t *testing.T) {
	d := "sha256:" + strings.Repeat("ab", 32)
	for _, tc := range []struct {
		in   string
		want oci.Ref
		str  string
	}{
		{"oci://127.0.0.1:5000/psp/kv:v1", oci.Ref{Host: "127.0.0.1:5000", Repo: "psp/kv", Tag: "v1"}, ""},
		{"oci://reg.example/kv", oci.Ref{Host: "reg.example", Repo: "kv", Tag: "latest"}, "oci://reg.example/kv:latest"},
		{"oci://reg.example/a/b@" + d, oci.Ref{Host: "reg.example", Repo: "a/b", Digest: d}, ""},
		{"oci://localhost:5000/kv:v2@" + d, oci.Ref{Host: "localhost:5000", Repo: "kv", Tag: "v2", Digest: d}, ""},
	} {
		got, err := oci.ParseRef(tc.in)
		if err != nil {
			t.Fatalf("%s: %v", tc.in, err)
		}
		if got != tc.want {
			t.Errorf("%s: got %+v, want %+v", tc.in, got, tc.want)
		}
		want := tc.str
		if want == "" {
			want = tc.in
		}
		if got.String() != want {
			t.Errorf("%s: String() = %s", tc.in, got.String())
		}
	}
	for _, bad := range []string{"kv.wasm", "oci://", "oci://host", "oci://host/", "oci://host/kv@sha256:12", "oci://host/kv@md5:" + strings.Repeat("a", 32), "oci://host/Kv:v1", "oci://host/kv:bad tag"} {
		if _, err := oci.ParseRef(bad); !errors.Is(err, oci.ErrBadReference) {
			t.Errorf("%q: err = %v, want ErrBadReference", bad, err)
		}
	}
	for s, want := range map[string]bool{"oci://127.0.0.1:1/r": true, "oci://localhost/r": true, "oci://[::1]:5000/r": true, "oci://10.0.0.1/r": false, "oci://reg.example/r": false} {
		r, err := oci.ParseRef(s)
		if err != nil {
			t.Fatal(err)
		}
		if r.Loopback() != want {
			t.Errorf("%s: Loopback() = %v", s, !want)
		}
	}
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// TestPublishTwiceSameDigest: publishing the same bytes again gives the
// same digest, and a digest that is not the manifest's is refused.
func TestPublishTwiceSameDigest(t *testing.T) {
	reg := registrytest.Start(t)
	ctx := context.Background()
	c := &oci.Client{}
	ref, _ := oci.ParseRef("oci://" + reg.Addr + "/psp/header:v1")
	pinned, err := c.Publish(ctx, classifiers.PSPHeader, ref)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(pinned.Digest, "sha256:") || pinned.Tag != "v1" {
		t.Fatalf("pinned = %v", pinned)
	}
	again, err := c.Publish(ctx, classifiers.PSPHeader, ref)
	if err != nil || again.Digest != pinned.Digest {
		t.Fatalf("publishing the same bytes again: %v, %v (first %s)", again, err, pinned.Digest)
	}
	wrong := pinned.Pinned()
	wrong.Digest = "sha256:" + sha([]byte("other"))
	if _, err := c.Pull(ctx, wrong); err == nil {
		t.Error("pull by an unknown digest succeeded")
	}
	big := &oci.Client{MaxSize: int64(len(classifiers.PSPHeader)) - 1}
	if _, err := big.Publish(ctx, classifiers.PSPHeader, ref); !errors.Is(err, oci.ErrTooLarge) {
		t.Errorf("publish over the size limit: %v, want ErrTooLarge", err)
	}
}

// TestCacheServesWhenRegistryDown pulls through a cache, stops the
// registry, and pulls again by digest and by tag.
func TestCacheServesWhenRegistryDown(t *testing.T) {
	reg := registrytest.Start(t)
	ctx := context.Background()
	wasm := classifiers.PSPHeader
	cache := t.TempDir()
	pub := &oci.Client{}
	ref, _ := oci.ParseRef("oci://" + reg.Addr + "/psp/cached:stable")
	pinned, err := pub.Publish(ctx, wasm, ref)
	if err != nil {
		t.Fatal(err)
	}
	c := &oci.Client{CacheDir: cache}
	if m, err := c.Pull(ctx, ref); err != nil || m.FromCache {
		t.Fatalf("first pull: %v (from cache %v)", err, m.FromCache)
	}
	reg.Stop()
	m, err := c.Pull(ctx, pinned.Pinned())
	if err != nil || !m.FromCache || !bytes.Equal(m.Wasm, wasm) || m.Warning != "" {
		t.Fatalf("by digest, registry down: %v, from cache %v, warning %q", err, m.FromCache, m.Warning)
	}
	m, err = c.Pull(ctx, ref)
	if err != nil || !m.FromCache || m.Ref.Digest != pinned.Digest || !strings.Contains(m.Warning, "registry unreachable") {
		t.Fatalf("by tag, registry down: %v, from cache %v, ref %s, warning %q", err, m.FromCache, m.Ref, m.Warning)
	}
	// Without a cache the same pull fails.
	if _, err := (&oci.Client{}).Pull(ctx, ref); err == nil {
		t.Fatal("pull without a cache, registry down: no error")
	}
	// A tampered cache entry is not served.
	layer := filepath.Join(cache, "blobs", sha(wasm))
	if err := os.WriteFile(layer, append(bytes.Clone(wasm), 0), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Pull(ctx, pinned.Pinned()); err == nil {
		t.Fatal("a tampered cache entry was served")
	}
}

// TestPullVerifiesLayer tampers with the registry's copy of the layer:
// the pull must fail on the digest.
func TestPullVerifiesLayer(t *testing.T) {
	reg := registrytest.Start(t)
	ctx := context.Background()
	wasm := bytes.Clone(classifiers.PSPHeader)
	ref, _ := oci.ParseRef("oci://" + reg.Addr + "/psp/tampered:v1")
	pinned, err := (&oci.Client{}).Publish(ctx, wasm, ref)
	if err != nil {
		t.Fatal(err)
	}
	h := sha(wasm)
	blob := filepath.Join(reg.Dir(), "data", "docker", "registry", "v2", "blobs", "sha256", h[:2], h, "data")
	bad := bytes.Clone(wasm)
	bad[len(bad)-1] ^= 0xff
	if err := os.WriteFile(blob, bad, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = (&oci.Client{}).Pull(ctx, pinned.Pinned())
	if !errors.Is(err, oci.ErrDigest) {
		t.Fatalf("pull of a tampered layer: %v, want ErrDigest", err)
	}
}
