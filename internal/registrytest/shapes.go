package registrytest

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	json "github.com/goccy/go-json"
	"github.com/opencontainers/go-digest"

	"github.com/persephone-go/psp/internal/testenv"
)

// Media types of the Wasm image shapes, spelled out here rather than
// taken from package oci: these images are made as a tool other than psp
// would make them.
const (
	wasmConfigMedia   = "application/vnd.module.wasm.config.v1+json"
	wasmLayerMedia    = "application/vnd.module.wasm.content.layer.v1+wasm"
	artifactConfig    = "application/vnd.wasm.config.v0+json"
	artifactLayer     = "application/wasm"
	imageConfigMedia  = "application/vnd.oci.image.config.v1+json"
	tarGzipLayerMedia = "application/vnd.oci.image.layer.v1.tar+gzip"
	tarLayerMedia     = "application/vnd.oci.image.layer.v1.tar"
	ociManifestMedia  = "application/vnd.oci.image.manifest.v1+json"
	ociIndexMedia     = "application/vnd.oci.image.index.v1+json"
	dockerManifest    = "application/vnd.docker.distribution.manifest.v2+json"
	dockerList        = "application/vnd.docker.distribution.manifest.list.v2+json"
	inTotoLayer       = "application/vnd.in-toto+json"
)

// Shape is a Wasm module image pushed by PushShapes.
type Shape struct {
	// Name names the shape; the image is REGISTRY/shapes/Name:v1.
	Name string
	// Ref is its oci:// reference by tag.
	Ref string
	// Variant is what a reader should call it: "oci", "compat" or
	// "wasm-artifact".
	Variant string
	// Media is the media type of the manifest the registry holds.
	Media string
	// Manifest is that manifest's bytes, as skopeo reads them back.
	Manifest []byte
}

// Digest is the digest of the manifest the registry holds.
func (s Shape) Digest() string { return digest.FromBytes(s.Manifest).String() }

// PushShapes writes wasm in each shape of image Istio's and Envoy
// Gateway's fetchers accept, and the Wasm working group's artifact, as an
// OCI image layout written here, and copies each into r with skopeo. It
// skips tb (fails it under CI=true) when skopeo is not installed.
func PushShapes(tb testing.TB, r *Registry, wasm []byte) []Shape {
	tb.Helper()
	skopeo := testenv.RequireTool(tb, "skopeo")
	runtimeConfig := []byte(`{"type":"envoy_proxy","abiVersions":["v0.2.1"]}`)
	var shapes []Shape
	for _, s := range []struct {
		name, variant, media string
		args                 []string // skopeo copy's
		build                func(l *layout)
	}{
		{name: "oci-istio-test", variant: "oci", media: ociManifestMedia, build: func(l *layout) {
			// As Istio's own fetcher test builds it: an image config, the
			// module's layer, then a layer of the runtime config.
			l.manifest(map[string]any{"config": l.blob(imageConfigMedia, imageConfig(wasm, runtimeConfig)),
				"layers": []any{l.blob(wasmLayerMedia, wasm), l.blob(wasmConfigMedia, runtimeConfig)}})
		}},
		{name: "oci-spec", variant: "oci", media: ociManifestMedia, build: func(l *layout) {
			// As the Wasm image spec's example: the runtime config as the
			// manifest's config and as the first of two layers.
			l.manifest(map[string]any{"config": l.blob(wasmConfigMedia, runtimeConfig),
				"layers": []any{l.blob(wasmConfigMedia, runtimeConfig), l.blob(wasmLayerMedia, wasm)}})
		}},
		{name: "compat-oci-two-layers", variant: "compat", media: ociManifestMedia, build: func(l *layout) {
			base, baseID := tarLayer(tb, true, [2]string{"etc/motd", "a base layer"})
			last, lastID := tarLayer(tb, true, [2]string{"runtime-config.json", string(runtimeConfig)}, [2]string{"plugin.wasm", string(wasm)})
			l.manifest(map[string]any{"config": l.blob(imageConfigMedia, imageConfig(baseID, lastID)),
				"layers":      []any{l.blob(tarGzipLayerMedia, base), l.blob(tarGzipLayerMedia, last)},
				"annotations": map[string]string{"module.wasm.image/variant": "compat"}})
		}},
		{name: "compat-three-layers-tar", variant: "compat", media: ociManifestMedia, build: func(l *layout) {
			// Any number of layers, the last an uncompressed tar.
			a, aID := tarLayer(tb, true, [2]string{"etc/motd", "a base layer"})
			b, bID := tarLayer(tb, true, [2]string{"etc/issue", "another"})
			last, lastID := tarLayer(tb, false, [2]string{"plugin.wasm", string(wasm)})
			l.manifest(map[string]any{"config": l.blob(imageConfigMedia, imageConfig(aID, bID, lastID)),
				"layers": []any{l.blob(tarGzipLayerMedia, a), l.blob(tarGzipLayerMedia, b), l.blob(tarLayerMedia, last)}})
		}},
		{name: "compat-docker", variant: "compat", media: dockerManifest, args: []string{"--format", "v2s2"}, build: func(l *layout) {
			// skopeo converts it to Docker's media types, as docker build
			// and docker push would have written it.
			base, baseID := tarLayer(tb, true, [2]string{"etc/motd", "a base layer"})
			last, lastID := tarLayer(tb, true, [2]string{"wasm/plugin.wasm", string(wasm)})
			l.manifest(map[string]any{"config": l.blob(imageConfigMedia, imageConfig(baseID, lastID)),
				"layers": []any{l.blob(tarGzipLayerMedia, base), l.blob(tarGzipLayerMedia, last)}})
		}},
		{name: "wasm-artifact", variant: "wasm-artifact", media: ociManifestMedia, build: func(l *layout) {
			cfg, _ := json.Marshal(map[string]any{"architecture": "wasm", "os": "wasip1", "layerDigests": []string{digest.FromBytes(wasm).String()}})
			l.manifest(map[string]any{"artifactType": "application/wasm", "config": l.blob(artifactConfig, cfg),
				"layers": []any{l.blob(artifactLayer, wasm)}})
		}},
		{name: "index-buildx", variant: "compat", media: ociIndexMedia, args: []string{"--multi-arch", "all"}, build: func(l *layout) {
			// As docker buildx pushes an image by default: an index of
			// the image (linux/amd64) and its provenance attestation
			// (platform unknown/unknown), which Istio's fetcher skips.
			last, lastID := tarLayer(tb, true, [2]string{"plugin.wasm", string(wasm)})
			img := l.image(ociManifestMedia, map[string]any{"config": l.blob(imageConfigMedia, imageConfig(lastID)),
				"layers": []any{l.blob(tarGzipLayerMedia, last)}})
			img["platform"] = map[string]string{"os": "linux", "architecture": "amd64"}
			att := l.image(ociManifestMedia, map[string]any{"config": l.blob(imageConfigMedia, imageConfig()),
				"layers": []any{l.blob(inTotoLayer, []byte(`{"_type":"https://in-toto.io/Statement/v0.1","predicateType":"https://slsa.dev/provenance/v0.2"}`))}})
			att["platform"] = map[string]string{"os": "unknown", "architecture": "unknown"}
			att["annotations"] = map[string]string{"vnd.docker.reference.type": "attestation-manifest", "vnd.docker.reference.digest": img["digest"].(string)}
			l.index(ociIndexMedia, att, img) // the attestation first: a reader taking the first manifest gets no module
		}},
		{name: "index-docker-multiarch", variant: "compat", media: dockerList, args: []string{"--multi-arch", "all", "--format", "v2s2"}, build: func(l *layout) {
			// A manifest list of two platforms, linux/arm64 first,
			// converted to Docker's media types by skopeo: Istio's
			// fetcher takes linux/amd64's image; arm64's holds no module.
			other, otherID := tarLayer(tb, true, [2]string{"plugin.wasm", "not the module"})
			arm := l.image(ociManifestMedia, map[string]any{"config": l.blob(imageConfigMedia, imageConfig(otherID)),
				"layers": []any{l.blob(tarGzipLayerMedia, other)}})
			arm["platform"] = map[string]string{"os": "linux", "architecture": "arm64"}
			last, lastID := tarLayer(tb, true, [2]string{"plugin.wasm", string(wasm)})
			amd := l.image(ociManifestMedia, map[string]any{"config": l.blob(imageConfigMedia, imageConfig(lastID)),
				"layers": []any{l.blob(tarGzipLayerMedia, last)}})
			amd["platform"] = map[string]string{"os": "linux", "architecture": "amd64"}
			l.index(ociIndexMedia, arm, amd)
		}},
	} {
		l := newLayout(tb)
		s.build(l)
		dest := r.Addr + "/shapes/" + s.name + ":v1"
		cmd := exec.Command(skopeo, append(append([]string{"copy", "--dest-tls-verify=false"}, s.args...), "oci:"+l.dir+":v1", "docker://"+dest)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			tb.Fatalf("skopeo copy to %s: %v\n%s", dest, err, out)
		}
		raw, err := exec.Command(skopeo, "inspect", "--raw", "--tls-verify=false", "docker://"+dest).Output()
		if err != nil {
			tb.Fatalf("skopeo inspect %s: %v", dest, err)
		}
		shapes = append(shapes, Shape{Name: s.name, Ref: "oci://" + dest, Variant: s.variant, Media: s.media, Manifest: raw})
	}
	return shapes
}

// layout is an OCI image layout written by hand: its blobs by digest and
// one manifest tagged v1.
type layout struct {
	dir string
	tb  testing.TB
}

func newLayout(tb testing.TB) *layout {
	tb.Helper()
	l := &layout{dir: tb.TempDir(), tb: tb}
	if err := os.MkdirAll(filepath.Join(l.dir, "blobs", "sha256"), 0o755); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(l.dir, "oci-layout"), []byte(`{"imageLayoutVersion":"1.0.0"}`), 0o644); err != nil {
		tb.Fatal(err)
	}
	return l
}

// blob stores b and returns its descriptor with mediaType.
func (l *layout) blob(mediaType string, b []byte) map[string]any {
	l.tb.Helper()
	d := digest.FromBytes(b)
	if err := os.WriteFile(filepath.Join(l.dir, "blobs", "sha256", d.Encoded()), b, 0o644); err != nil {
		l.tb.Fatal(err)
	}
	return map[string]any{"mediaType": mediaType, "digest": d.String(), "size": len(b)}
}

// manifest stores m, an OCI image manifest, as the image tagged v1.
func (l *layout) manifest(m map[string]any) {
	l.tb.Helper()
	l.tag(l.image(ociManifestMedia, m))
}

// image stores m, a manifest of mediaType, and returns its descriptor.
func (l *layout) image(mediaType string, m map[string]any) map[string]any {
	l.tb.Helper()
	m["schemaVersion"] = 2
	m["mediaType"] = mediaType
	b, err := json.Marshal(m)
	if err != nil {
		l.tb.Fatal(err)
	}
	return l.blob(mediaType, b)
}

// index stores an index (or a Docker manifest list) of mediaType over
// manifests as the image tagged v1.
func (l *layout) index(mediaType string, manifests ...map[string]any) {
	l.tb.Helper()
	l.tag(l.image(mediaType, map[string]any{"manifests": manifests}))
}

// tag names d v1 in the layout's index.json.
func (l *layout) tag(d map[string]any) {
	l.tb.Helper()
	d["annotations"] = map[string]string{"org.opencontainers.image.ref.name": "v1"}
	index, _ := json.Marshal(map[string]any{"schemaVersion": 2, "manifests": []any{d}})
	if err := os.WriteFile(filepath.Join(l.dir, "index.json"), index, 0o644); err != nil {
		l.tb.Fatal(err)
	}
}

// tarLayer is a tar archive holding files (name, content), gzipped when
// gz, and its diff ID's content (the archive before compression).
func tarLayer(tb testing.TB, gz bool, files ...[2]string) (layer, diffID []byte) {
	tb.Helper()
	var raw bytes.Buffer
	tw := tar.NewWriter(&raw)
	for _, f := range files {
		if err := tw.WriteHeader(&tar.Header{Name: f[0], Mode: 0o644, Size: int64(len(f[1])), Typeflag: tar.TypeReg}); err != nil {
			tb.Fatal(err)
		}
		if _, err := tw.Write([]byte(f[1])); err != nil {
			tb.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		tb.Fatal(err)
	}
	if !gz {
		return raw.Bytes(), raw.Bytes()
	}
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	zw.Write(raw.Bytes())
	if err := zw.Close(); err != nil {
		tb.Fatal(err)
	}
	return z.Bytes(), raw.Bytes()
}

// imageConfig is a container image config over layers' diff IDs.
func imageConfig(diffIDs ...[]byte) []byte {
	ids := make([]string, len(diffIDs))
	for i, d := range diffIDs {
		ids[i] = digest.FromBytes(d).String()
	}
	b, _ := json.Marshal(map[string]any{"architecture": "amd64", "os": "linux", "rootfs": map[string]any{"type": "layers", "diff_ids": ids}})
	return b
}
