package oci_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	json "github.com/goccy/go-json"
	"github.com/opencontainers/go-digest"

	"github.com/persephone-go/psp/oci"
)

// hostileRegistry serves one manifest (for every tag) and one blob (for
// every digest), each through its own handler, as a registry bent on
// harming its clients would.
func hostileRegistry(t *testing.T, manifest, blob http.HandlerFunc) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/v2/":
			w.WriteHeader(http.StatusOK)
		case strings.Contains(r.URL.Path, "/manifests/"):
			manifest(w, r)
		case strings.Contains(r.URL.Path, "/blobs/"):
			blob(w, r)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// compatManifest is a Docker manifest with one gzipped layer of layer's
// digest and size.
func compatManifest(t *testing.T, layer []byte) []byte {
	t.Helper()
	m, err := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     "application/vnd.docker.distribution.manifest.v2+json",
		"config":        map[string]any{"mediaType": "application/vnd.docker.container.image.v1+json", "digest": digest.FromString("{}").String(), "size": 2},
		"layers":        []map[string]any{{"mediaType": "application/vnd.docker.image.rootfs.diff.tar.gzip", "digest": digest.FromBytes(layer).String(), "size": len(layer)}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// serveBytes answers with b, its length and a manifest's media type.
func serveBytes(b []byte) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/vnd.docker.distribution.manifest.v2+json")
		w.Header().Set("Content-Length", fmt.Sprint(len(b)))
		if r.Method != http.MethodHead {
			_, _ = w.Write(b)
		}
	}
}

// TestPullRefusesGzipBomb: a compat layer of a few kilobytes that inflates
// to far more than a module may be is refused once its bound is
// decompressed, not after inflating all of it.
func TestPullRefusesGzipBomb(t *testing.T) {
	var gz bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&gz, gzip.BestCompression)
	tw := tar.NewWriter(zw)
	const junk = 64 << 20 // zeros: 64 MiB inflated, some 64 KB compressed
	if err := tw.WriteHeader(&tar.Header{Name: "junk", Mode: 0o644, Size: junk, Typeflag: tar.TypeReg}); err != nil {
		t.Fatal(err)
	}
	zeros := make([]byte, 1<<20)
	for range junk >> 20 {
		_, _ = tw.Write(zeros)
	}
	tw.Close()
	zw.Close()
	layer := gz.Bytes()
	addr := hostileRegistry(t, serveBytes(compatManifest(t, layer)), serveBytes(layer))
	ref, err := oci.ParseRef("oci://" + addr + "/bomb:v1")
	if err != nil {
		t.Fatal(err)
	}
	c := &oci.Client{MaxSize: 64 << 10}
	_, err = c.Pull(context.Background(), ref)
	want := fmt.Sprintf("decompression bomb: a compat layer of %d bytes inflates past %d bytes", len(layer), 64<<10+1<<10+1<<20)
	if !errors.Is(err, oci.ErrDecompressionBomb) || !strings.Contains(err.Error(), want) || !oci.Refused(err) {
		t.Fatalf("pull of a gzip bomb (%d bytes compressed): %v, want %q", len(layer), err, want)
	}
	t.Log(err)
}

// TestPullRefusesOversizedManifest: a manifest over 4 MiB is refused by
// its announced length, not cut to 4 MiB and pinned by the digest of the
// cut.
func TestPullRefusesOversizedManifest(t *testing.T) {
	layer := []byte("never fetched")
	man := compatManifest(t, layer)
	padded := append(bytes.Clone(man), bytes.Repeat([]byte(" "), 5<<20)...)
	addr := hostileRegistry(t, serveBytes(padded), serveBytes(layer))
	ref, _ := oci.ParseRef("oci://" + addr + "/padded:v1")
	_, err := (&oci.Client{}).Pull(context.Background(), ref)
	if err == nil || !strings.Contains(err.Error(), "larger than 4194304") {
		t.Fatalf("pull of a %d-byte manifest: %v", len(padded), err)
	}
}

// TestPullReadsLayerToItsSize: a layer body that never ends is read one
// byte past the size its manifest gives, then refused.
func TestPullReadsLayerToItsSize(t *testing.T) {
	layer := []byte("\x00asm\x01\x00\x00\x00")
	endless := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		chunk := bytes.Repeat([]byte{0}, 64<<10)
		for r.Context().Err() == nil {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}
	addr := hostileRegistry(t, serveBytes(compatManifest(t, layer)), endless)
	ref, _ := oci.ParseRef("oci://" + addr + "/endless:v1")
	start := time.Now()
	_, err := (&oci.Client{}).Pull(context.Background(), ref)
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("more than the %d bytes the manifest gives", len(layer))) {
		t.Fatalf("pull of an endless layer: %v", err)
	}
	t.Logf("refused after %v: %v", time.Since(start), err)
}

// TestPullBoundedByModuleSize: a layer announced larger than the module
// size limit (the server's, not a larger one of the pull's own) is refused
// before a byte of it is fetched, and a compat archive's plugin.wasm over
// the limit too.
func TestPullBoundedByModuleSize(t *testing.T) {
	fetched := false
	layer := make([]byte, 9<<20) // a module over the 8 MiB default
	man, _ := json.Marshal(map[string]any{"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
		"config": map[string]any{"mediaType": oci.ConfigMediaType, "digest": digest.FromString("{}").String(), "size": 2},
		"layers": []any{map[string]any{"mediaType": oci.LayerMediaType, "digest": digest.FromBytes(layer).String(), "size": len(layer)}}})
	addr := hostileRegistry(t, serveBytes(man), func(w http.ResponseWriter, r *http.Request) { fetched = true; serveBytes(layer)(w, r) })
	ref, _ := oci.ParseRef("oci://" + addr + "/big:v1")
	_, err := (&oci.Client{}).Pull(context.Background(), ref)
	if !errors.Is(err, oci.ErrTooLarge) || !strings.Contains(err.Error(), "oci layer of 9437184 bytes, larger than 8388608") || fetched {
		t.Fatalf("pull of a 9 MiB module: %v (layer fetched: %v)", err, fetched)
	}
	if m, err := (&oci.Client{MaxSize: 16 << 20}).Pull(context.Background(), ref); err != nil || len(m.Wasm) != len(layer) {
		t.Fatalf("the same pull with a 16 MiB limit: %v", err)
	}

	// A compat archive whose plugin.wasm is over the limit, in a layer
	// within the archive's bound.
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	tw := tar.NewWriter(zw)
	tw.WriteHeader(&tar.Header{Name: "plugin.wasm", Mode: 0o644, Size: 100 << 10, Typeflag: tar.TypeReg})
	tw.Write(make([]byte, 100<<10))
	tw.Close()
	zw.Close()
	compat := gz.Bytes()
	addr = hostileRegistry(t, serveBytes(compatManifest(t, compat)), serveBytes(compat))
	ref, _ = oci.ParseRef("oci://" + addr + "/compat:v1")
	_, err = (&oci.Client{MaxSize: 64 << 10}).Pull(context.Background(), ref)
	if !errors.Is(err, oci.ErrTooLarge) || !strings.Contains(err.Error(), "plugin.wasm of 102400 bytes in the compat layer, the limit is 65536") {
		t.Fatalf("pull of a compat image of a 100 KiB module, limit 64 KiB: %v", err)
	}
}

// TestPullIndexChecksItsImage: an index is followed to the image it names
// for linux/amd64 only through that image's digest (a registry that
// answers it with other bytes is refused), and an index with no image a
// pull could choose is refused with the platforms it holds.
func TestPullIndexChecksItsImage(t *testing.T) {
	module := []byte("\x00asm\x01\x00\x00\x00")
	image, err := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     "application/vnd.oci.image.manifest.v1+json",
		"config":        map[string]any{"mediaType": "application/vnd.wasm.config.v0+json", "digest": digest.FromString("{}").String(), "size": 2},
		"layers":        []map[string]any{{"mediaType": "application/wasm", "digest": digest.FromBytes(module).String(), "size": len(module)}},
	})
	if err != nil {
		t.Fatal(err)
	}
	index := func(platforms ...string) []byte {
		var ms []map[string]any
		for _, p := range platforms {
			os, arch, _ := strings.Cut(p, "/")
			ms = append(ms, map[string]any{"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": digest.FromBytes(image).String(),
				"size": len(image), "platform": map[string]string{"os": os, "architecture": arch}})
		}
		b, _ := json.Marshal(map[string]any{"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json", "manifests": ms})
		return b
	}
	serve := func(idx, img []byte) string {
		return hostileRegistry(t, func(w http.ResponseWriter, r *http.Request) {
			if strings.HasSuffix(r.URL.Path, "/v1") {
				w.Header().Set("Content-Type", "application/vnd.oci.image.index.v1+json")
				w.Write(idx)
				return
			}
			w.Header().Set("Content-Type", "application/vnd.oci.image.manifest.v1+json")
			w.Write(img)
		}, func(w http.ResponseWriter, r *http.Request) { w.Write(module) })
	}
	pull := func(host string) (oci.Module, error) {
		r, err := oci.ParseRef("oci://" + host + "/psp/m:v1")
		if err != nil {
			t.Fatal(err)
		}
		return (&oci.Client{Timeout: 5 * time.Second}).Pull(context.Background(), r)
	}
	// One image for wasip1/wasm beside an attestation: taken.
	if m, err := pull(serve(index("unknown/unknown", "wasip1/wasm"), image)); err != nil || !bytes.Equal(m.Wasm, module) || m.Variant != oci.VariantWasmArtifact {
		t.Fatalf("an index of one image and an attestation: %v (%d bytes, %s)", err, len(m.Wasm), m.Variant)
	}
	// The image's manifest answered with other bytes than its digest.
	tampered := bytes.Replace(image, []byte(`"size":2`), []byte(`"size":3`), 1)
	if _, err := pull(serve(index("linux/amd64"), tampered)); !errors.Is(err, oci.ErrDigest) {
		t.Fatalf("an index whose image was tampered with: %v, want ErrDigest", err)
	}
	// Two images, neither for linux/amd64: which one is the module's?
	_, err = pull(serve(index("linux/arm64", "linux/s390x", "unknown/unknown"), image))
	if !errors.Is(err, oci.ErrNotWasm) || !strings.Contains(err.Error(), "linux/arm64, linux/s390x, unknown/unknown") {
		t.Fatalf("an index of two other platforms: %v, want ErrNotWasm naming them", err)
	}
}

// TestPullFollowsBlobRedirect: a registry that answers a layer with a
// redirect to storage elsewhere (as registries backed by object stores
// do) is followed there, and what it serves is still checked against
// the layer's digest.
func TestPullFollowsBlobRedirect(t *testing.T) {
	module := []byte("\x00asm\x01\x00\x00\x00")
	man, _ := json.Marshal(map[string]any{"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
		"config": map[string]any{"mediaType": oci.ConfigMediaType, "digest": digest.FromString("{}").String(), "size": 2},
		"layers": []any{map[string]any{"mediaType": oci.LayerMediaType, "digest": digest.FromBytes(module).String(), "size": len(module)}}})
	for _, tc := range []struct {
		name   string
		stored []byte
		ok     bool
	}{{"the layer", module, true}, {"other bytes", []byte("\x00asm\x01\x00\x00\x01"), false}} {
		t.Run(tc.name, func(t *testing.T) {
			storage := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(tc.stored) }))
			defer storage.Close()
			addr := hostileRegistry(t, serveBytes(man), func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, storage.URL+"/bucket/layer?signature=x", http.StatusTemporaryRedirect)
			})
			ref, _ := oci.ParseRef("oci://" + addr + "/redirected:v1")
			m, err := (&oci.Client{}).Pull(context.Background(), ref)
			switch {
			case tc.ok && (err != nil || !bytes.Equal(m.Wasm, module)):
				t.Fatalf("pull through a redirect: %v (%d bytes)", err, len(m.Wasm))
			case !tc.ok && !errors.Is(err, oci.ErrDigest):
				t.Fatalf("pull of other bytes through a redirect: %v, want ErrDigest", err)
			}
		})
	}
}
