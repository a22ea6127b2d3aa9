package oci_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	json "github.com/goccy/go-json"
	"github.com/opencontainers/go-digest"

	"github.com/persephone-go/psp/examples/classifiers"
	"github.com/persephone-go/psp/internal/registrytest"
	"github.com/persephone-go/psp/internal/testenv"
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

// TestPublishReadBySkopeo publishes with psp, reads the manifest back with
// skopeo and pulls it with psp, by digest and by tag.
func TestPublishReadBySkopeo(t *testing.T) {
	reg := registrytest.Start(t)
	skopeo := testenv.RequireTool(t, "skopeo")
	ctx := context.Background()
	wasm := classifiers.PSPHeader
	c := &oci.Client{}
	ref, _ := oci.ParseRef("oci://" + reg.Addr + "/psp/header:v1")
	pinned, err := c.Publish(ctx, wasm, ref)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(pinned.Digest, "sha256:") || pinned.Tag != "v1" {
		t.Fatalf("pinned = %v", pinned)
	}
	again, err := c.Publish(ctx, wasm, ref)
	if err != nil || again.Digest != pinned.Digest {
		t.Fatalf("publishing the same bytes again: %v, %v (first %s)", again, err, pinned.Digest)
	}

	out, err := exec.Command(skopeo, "inspect", "--raw", "--tls-verify=false", "docker://"+reg.Addr+"/psp/header:v1").Output()
	if err != nil {
		t.Fatalf("skopeo inspect: %v", err)
	}
	if got := digest.FromBytes(out).String(); got != pinned.Digest {
		t.Errorf("skopeo's manifest has digest %s, psp printed %s", got, pinned.Digest)
	}
	var man struct {
		MediaType string
		Config    struct{ MediaType string }
		Layers    []struct {
			MediaType string
			Digest    string
			Size      int
		}
	}
	if err := json.Unmarshal(out, &man); err != nil {
		t.Fatal(err)
	}
	if man.Config.MediaType != oci.ConfigMediaType || len(man.Layers) != 1 || man.Layers[0].MediaType != oci.LayerMediaType {
		t.Fatalf("skopeo inspect --raw: %s", out)
	}
	if man.Layers[0].Digest != "sha256:"+sha(wasm) || man.Layers[0].Size != len(wasm) {
		t.Errorf("layer %s (%d bytes), want the module's sha256:%s (%d bytes)", man.Layers[0].Digest, man.Layers[0].Size, sha(wasm), len(wasm))
	}

	for _, s := range []string{pinned.Pinned().String(), "oci://" + reg.Addr + "/psp/header:v1"} {
		r, _ := oci.ParseRef(s)
		m, err := c.Pull(ctx, r)
		if err != nil {
			t.Fatalf("pull %s: %v", s, err)
		}
		if !bytes.Equal(m.Wasm, wasm) || m.SHA256 != sha(wasm) || m.Ref.Digest != pinned.Digest || m.Variant != "oci" || m.FromCache {
			t.Errorf("pull %s: %d bytes, sha %s, ref %s, variant %s, cache %v", s, len(m.Wasm), m.SHA256, m.Ref, m.Variant, m.FromCache)
		}
	}
	// A digest that is not the manifest's is refused.
	wrong := pinned.Pinned()
	wrong.Digest = "sha256:" + sha([]byte("other"))
	if _, err := c.Pull(ctx, wrong); err == nil {
		t.Error("pull by an unknown digest succeeded")
	}
}

// TestPullCompatPushedBySkopeo pulls an image skopeo pushed: the compat
// variant, one gzipped tar layer holding plugin.wasm.
func TestPullCompatPushedBySkopeo(t *testing.T) {
	reg := registrytest.Start(t)
	skopeo := testenv.RequireTool(t, "skopeo")
	wasm := classifiers.PSPHeader
	layout := compatLayout(t, wasm)
	cmd := exec.Command(skopeo, "copy", "--dest-tls-verify=false", "oci:"+layout+":v1", "docker://"+reg.Addr+"/compat/header:v1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("skopeo copy: %v\n%s", err, out)
	}
	raw, err := exec.Command(skopeo, "inspect", "--raw", "--tls-verify=false", "docker://"+reg.Addr+"/compat/header:v1").Output()
	if err != nil {
		t.Fatal(err)
	}
	c := &oci.Client{CacheDir: t.TempDir()}
	r, _ := oci.ParseRef("oci://" + reg.Addr + "/compat/header:v1")
	m, err := c.Pull(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(m.Wasm, wasm) || m.Variant != "compat" || m.Ref.Digest != digest.FromBytes(raw).String() {
		t.Errorf("pulled %d bytes (want %d), variant %s, ref %s (skopeo's manifest %s)", len(m.Wasm), len(wasm), m.Variant, m.Ref, digest.FromBytes(raw))
	}
}

// compatLayout writes an OCI image layout holding a compat image of wasm.
func compatLayout(t *testing.T, wasm []byte) string {
	dir := t.TempDir()
	var tb bytes.Buffer
	gz := gzip.NewWriter(&tb)
	tw := tar.NewWriter(gz)
	tw.WriteHeader(&tar.Header{Name: "plugin.wasm", Mode: 0o644, Size: int64(len(wasm)), Typeflag: tar.TypeReg})
	tw.Write(wasm)
	tw.Close()
	gz.Close()
	layer := tb.Bytes()
	var raw bytes.Buffer
	tw = tar.NewWriter(&raw)
	tw.WriteHeader(&tar.Header{Name: "plugin.wasm", Mode: 0o644, Size: int64(len(wasm)), Typeflag: tar.TypeReg})
	tw.Write(wasm)
	tw.Close()
	config, _ := json.Marshal(map[string]any{"architecture": "amd64", "os": "linux",
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{digest.FromBytes(raw.Bytes()).String()}}})
	man, _ := json.Marshal(map[string]any{"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
		"config": map[string]any{"mediaType": "application/vnd.oci.image.config.v1+json", "digest": digest.FromBytes(config), "size": len(config)},
		"layers": []any{map[string]any{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": digest.FromBytes(layer), "size": len(layer)}}})
	index, _ := json.Marshal(map[string]any{"schemaVersion": 2, "manifests": []any{map[string]any{
		"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": digest.FromBytes(man), "size": len(man),
		"annotations": map[string]string{"org.opencontainers.image.ref.name": "v1"}}}})
	blobs := filepath.Join(dir, "blobs", "sha256")
	os.MkdirAll(blobs, 0o755)
	for _, b := range [][]byte{layer, config, man} {
		if err := os.WriteFile(filepath.Join(blobs, digest.FromBytes(b).Encoded()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(dir, "index.json"), index, 0o644)
	os.WriteFile(filepath.Join(dir, "oci-layout"), []byte(`{"imageLayoutVersion":"1.0.0"}`), 0o644)
	return dir
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
