package oci_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	json "github.com/goccy/go-json"
	"github.com/opencontainers/go-digest"

	"github.com/persephone-go/psp/examples/classifiers"
	"github.com/persephone-go/psp/internal/registrytest"
	"github.com/persephone-go/psp/internal/testenv"
	"github.com/persephone-go/psp/oci"
)

// layout is an OCI image layout a test writes by hand, as a tool other
// than psp would: its blobs by digest and one manifest tagged v1.
type layout struct {
	dir string
	t   *testing.T
}

func newLayout(t *testing.T) *layout {
	t.Helper()
	l := &layout{dir: t.TempDir(), t: t}
	if err := os.MkdirAll(filepath.Join(l.dir, "blobs", "sha256"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(l.dir, "oci-layout"), []byte(`{"imageLayoutVersion":"1.0.0"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	return l
}

// blob stores b and returns its descriptor with mediaType.
func (l *layout) blob(mediaType string, b []byte) map[string]any {
	l.t.Helper()
	d := digest.FromBytes(b)
	if err := os.WriteFile(filepath.Join(l.dir, "blobs", "sha256", d.Encoded()), b, 0o644); err != nil {
		l.t.Fatal(err)
	}
	return map[string]any{"mediaType": mediaType, "digest": d.String(), "size": len(b)}
}

// manifest stores m as the image tagged v1.
func (l *layout) manifest(m map[string]any) {
	l.t.Helper()
	m["schemaVersion"] = 2
	if _, ok := m["mediaType"]; !ok {
		m["mediaType"] = "application/vnd.oci.image.manifest.v1+json"
	}
	b, err := json.Marshal(m)
	if err != nil {
		l.t.Fatal(err)
	}
	d := l.blob(m["mediaType"].(string), b)
	d["annotations"] = map[string]string{"org.opencontainers.image.ref.name": "v1"}
	index, _ := json.Marshal(map[string]any{"schemaVersion": 2, "manifests": []any{d}})
	if err := os.WriteFile(filepath.Join(l.dir, "index.json"), index, 0o644); err != nil {
		l.t.Fatal(err)
	}
}

// tarLayer is a tar archive holding files (name, content), gzipped when
// gz.
func tarLayer(t *testing.T, gz bool, files ...[2]string) (layer, diffID []byte) {
	t.Helper()
	var raw bytes.Buffer
	tw := tar.NewWriter(&raw)
	for _, f := range files {
		if err := tw.WriteHeader(&tar.Header{Name: f[0], Mode: 0o644, Size: int64(len(f[1])), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(f[1]))
	}
	tw.Close()
	if !gz {
		return raw.Bytes(), raw.Bytes()
	}
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	zw.Write(raw.Bytes())
	zw.Close()
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

// copyIn copies the layout's image into the registry with skopeo, with
// args (--format v2s2 converts it to Docker's media types), and returns
// the manifest skopeo reads back from the registry.
func copyIn(t *testing.T, skopeo string, l *layout, dest string, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(skopeo, append(append([]string{"copy", "--dest-tls-verify=false"}, args...), "oci:"+l.dir+":v1", "docker://"+dest)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("skopeo copy to %s: %v\n%s", dest, err, out)
	}
	raw, err := exec.Command(skopeo, "inspect", "--raw", "--tls-verify=false", "docker://"+dest).Output()
	if err != nil {
		t.Fatalf("skopeo inspect %s: %v", dest, err)
	}
	return raw
}

// TestPullShapesMadeWithoutPSP builds each shape of Wasm image Istio's and
// Envoy Gateway's fetchers accept (and the Wasm working group's artifact)
// as an OCI layout written here, copies it into a registry with skopeo, and
// pulls it with psp: the module comes back, pinned by the digest of the
// manifest skopeo reads from the registry.
func TestPullShapesMadeWithoutPSP(t *testing.T) {
	reg := registrytest.Start(t)
	skopeo := testenv.RequireTool(t, "skopeo")
	wasm := classifiers.PSPHeader
	runtimeConfig := []byte(`{"type":"envoy_proxy","abiVersions":["v0.2.1"]}`)
	for _, tc := range []struct {
		name    string
		build   func(l *layout)
		args    []string
		variant string
		media   string // the manifest's media type in the registry
	}{
		{name: "oci-istio-test", variant: oci.VariantOCI, media: "application/vnd.oci.image.manifest.v1+json", build: func(l *layout) {
			// As Istio's own fetcher test builds it: an image config, the
			// module's layer, then a layer of the runtime config.
			l.manifest(map[string]any{"config": l.blob("application/vnd.oci.image.config.v1+json", imageConfig(wasm, runtimeConfig)),
				"layers": []any{l.blob(oci.LayerMediaType, wasm), l.blob(oci.ConfigMediaType, runtimeConfig)}})
		}},
		{name: "oci-spec", variant: oci.VariantOCI, media: "application/vnd.oci.image.manifest.v1+json", build: func(l *layout) {
			// As the Wasm image spec's example: the runtime config as the
			// manifest's config and as the first of two layers.
			l.manifest(map[string]any{"config": l.blob(oci.ConfigMediaType, runtimeConfig),
				"layers": []any{l.blob(oci.ConfigMediaType, runtimeConfig), l.blob(oci.LayerMediaType, wasm)}})
		}},
		{name: "compat-oci-two-layers", variant: oci.VariantCompat, media: "application/vnd.oci.image.manifest.v1+json", build: func(l *layout) {
			base, baseID := tarLayer(t, true, [2]string{"etc/motd", "a base layer"})
			last, lastID := tarLayer(t, true, [2]string{"runtime-config.json", string(runtimeConfig)}, [2]string{"plugin.wasm", string(wasm)})
			l.manifest(map[string]any{"config": l.blob("application/vnd.oci.image.config.v1+json", imageConfig(baseID, lastID)),
				"layers":      []any{l.blob("application/vnd.oci.image.layer.v1.tar+gzip", base), l.blob("application/vnd.oci.image.layer.v1.tar+gzip", last)},
				"annotations": map[string]string{"module.wasm.image/variant": "compat"}})
		}},
		{name: "compat-docker", variant: oci.VariantCompat, media: "application/vnd.docker.distribution.manifest.v2+json", args: []string{"--format", "v2s2"}, build: func(l *layout) {
			// skopeo converts it to Docker's media types, as docker build
			// and docker push would have written it.
			base, baseID := tarLayer(t, true, [2]string{"etc/motd", "a base layer"})
			last, lastID := tarLayer(t, true, [2]string{"wasm/plugin.wasm", string(wasm)})
			l.manifest(map[string]any{"config": l.blob("application/vnd.oci.image.config.v1+json", imageConfig(baseID, lastID)),
				"layers": []any{l.blob("application/vnd.oci.image.layer.v1.tar+gzip", base), l.blob("application/vnd.oci.image.layer.v1.tar+gzip", last)}})
		}},
		{name: "wasm-artifact", variant: oci.VariantWasmArtifact, media: "application/vnd.oci.image.manifest.v1+json", build: func(l *layout) {
			cfg, _ := json.Marshal(map[string]any{"architecture": "wasm", "os": "wasip1", "layerDigests": []string{digest.FromBytes(wasm).String()}})
			l.manifest(map[string]any{"artifactType": "application/wasm", "config": l.blob(oci.WasmArtifactConfigMediaType, cfg),
				"layers": []any{l.blob(oci.WasmArtifactLayerMediaType, wasm)}})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLayout(t)
			tc.build(l)
			dest := reg.Addr + "/shapes/" + tc.name + ":v1"
			raw := copyIn(t, skopeo, l, dest, tc.args...)
			var got struct{ MediaType string }
			if err := json.Unmarshal(raw, &got); err != nil || got.MediaType != tc.media {
				t.Fatalf("the registry's manifest: media type %q (%v), want %s:\n%s", got.MediaType, err, tc.media, raw)
			}
			c := &oci.Client{CacheDir: t.TempDir()}
			for _, ref := range []string{"oci://" + dest, "oci://" + reg.Addr + "/shapes/" + tc.name + "@" + digest.FromBytes(raw).String()} {
				r, err := oci.ParseRef(ref)
				if err != nil {
					t.Fatal(err)
				}
				m, err := c.Pull(context.Background(), r)
				if err != nil {
					t.Fatalf("pull %s: %v\nmanifest: %s", ref, err, raw)
				}
				if !bytes.Equal(m.Wasm, wasm) || m.Variant != tc.variant || m.Ref.Digest != digest.FromBytes(raw).String() {
					t.Errorf("pull %s: %d bytes (want %d), variant %s (want %s), pinned %s (skopeo's manifest %s)",
						ref, len(m.Wasm), len(wasm), m.Variant, tc.variant, m.Ref, digest.FromBytes(raw))
				}
			}
		})
	}
}

// TestPublishedImagePassesIstioFetcher publishes a module with psp, copies
// the image out of the registry with skopeo, and checks it against each
// acceptance rule of Istio's fetcher (istio/istio pkg/wasm: imagefetcher.go
// PrepareFetch and extractOCIArtifactImage, cache.go isValidWasmBinary),
// reading only what skopeo wrote.
func TestPublishedImagePassesIstioFetcher(t *testing.T) {
	reg := registrytest.Start(t)
	skopeo := testenv.RequireTool(t, "skopeo")
	wasm := classifiers.PSPHeader
	ref, _ := oci.ParseRef("oci://" + reg.Addr + "/psp/header:v1")
	pinned, err := (&oci.Client{}).PublishConfig(context.Background(), wasm, ref,
		oci.RuntimeConfig{Config: map[string]any{"types": []string{"UNKNOWN", "SHORT", "LONG"}}})
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	cmd := exec.Command(skopeo, "copy", "--src-tls-verify=false", "docker://"+reg.Addr+"/psp/header:v1", "oci:"+out+":v1")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("skopeo copy out: %v\n%s", err, b)
	}
	raw, err := exec.Command(skopeo, "inspect", "--raw", "--tls-verify=false", "docker://"+reg.Addr+"/psp/header:v1").Output()
	if err != nil {
		t.Fatal(err)
	}
	blob := func(d string) []byte {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(out, "blobs", "sha256", digest.Digest(d).Encoded()))
		if err != nil {
			t.Fatalf("blob %s: %v", d, err)
		}
		if digest.FromBytes(b).String() != d {
			t.Fatalf("blob %s: skopeo wrote bytes of digest %s", d, digest.FromBytes(b))
		}
		return b
	}
	type desc struct {
		MediaType   string
		Digest      string
		Size        int
		Annotations map[string]string
	}
	var man struct {
		SchemaVersion int
		MediaType     string
		Config        desc
		Layers        []desc
	}
	if err := json.Unmarshal(raw, &man); err != nil {
		t.Fatal(err)
	}

	// Rule 1 (PrepareFetch): the tag resolves to one image manifest, and
	// Istio pins it by that manifest's digest (a WasmPlugin's sha256 is
	// compared with it): the digest psp printed.
	if man.SchemaVersion != 2 || (man.MediaType != "application/vnd.oci.image.manifest.v1+json" && man.MediaType != "") {
		t.Errorf("rule 1: schema %d, media type %q: want an OCI image manifest", man.SchemaVersion, man.MediaType)
	}
	if d := digest.FromBytes(raw).String(); d != pinned.Digest {
		t.Errorf("rule 1: the registry's manifest has digest %s, psp printed %s", d, pinned.Digest)
	}
	// Rule 2: a Docker schema 2 manifest would be read as a compat image
	// (extractDockerImage); this one is OCI, so Istio tries compat on the
	// last layer (extractOCIStandardImage), which needs
	// application/vnd.oci.image.layer.v1.tar+gzip, then the oci variant.
	if len(man.Layers) == 0 || man.Layers[len(man.Layers)-1].MediaType == "application/vnd.oci.image.layer.v1.tar+gzip" {
		t.Fatalf("rule 2: layers %+v: the last layer must not be read as a compat archive", man.Layers)
	}
	// Rule 3 (extractOCIArtifactImage): exactly two layers.
	if len(man.Layers) != 2 {
		t.Fatalf("rule 3: %d layers, Istio's oci variant wants exactly 2", len(man.Layers))
	}
	// Rule 4: one layer of media type
	// application/vnd.module.wasm.content.layer.v1+wasm, whose bytes
	// (Istio reads them as they are, uncompressed) are the module.
	var module []byte
	for _, l := range man.Layers {
		if l.MediaType == "application/vnd.module.wasm.content.layer.v1+wasm" {
			module = blob(l.Digest)
			break
		}
	}
	if !bytes.Equal(module, wasm) {
		t.Fatalf("rule 4: the module layer holds %d bytes, want the %d published", len(module), len(wasm))
	}
	// Rule 5 (cache.go isValidWasmBinary): at least 8 bytes, starting with
	// the Wasm magic number.
	if len(module) < 8 || !bytes.Equal(module[:4], []byte("\x00asm")) {
		t.Errorf("rule 5: the module does not start with \\0asm")
	}
	// Rule 6 (the Wasm image spec Istio cites): the other layer is the
	// runtime config, application/vnd.module.wasm.config.v1+json, a JSON
	// object whose type (required) names the runtime; the manifest's
	// config is the same document.
	var other desc
	for _, l := range man.Layers {
		if l.MediaType != oci.LayerMediaType {
			other = l
		}
	}
	var rc struct {
		Type        string
		ABIVersions []string
		Config      struct{ Types []string }
	}
	if other.MediaType != "application/vnd.module.wasm.config.v1+json" || json.Unmarshal(blob(other.Digest), &rc) != nil || rc.Type == "" {
		t.Errorf("rule 6: the second layer %+v holds %+v: want the runtime config with a type", other, rc)
	}
	if man.Config.MediaType != oci.ConfigMediaType || man.Config.Digest != other.Digest {
		t.Errorf("rule 6: the manifest's config %+v, want the runtime config layer %s", man.Config, other.Digest)
	}
	if rc.Type != oci.RuntimeType || len(rc.ABIVersions) != 1 || rc.ABIVersions[0] != oci.ABIVersion || len(rc.Config.Types) != 3 {
		t.Errorf("runtime config %+v", rc)
	}

	// And psp reads its own image back, by digest and by tag.
	for _, r := range []oci.Ref{pinned.Pinned(), ref} {
		m, err := (&oci.Client{}).Pull(context.Background(), r)
		if err != nil || !bytes.Equal(m.Wasm, wasm) || m.Variant != oci.VariantOCI || m.Ref.Digest != pinned.Digest {
			t.Fatalf("pull %s: %v, %d bytes, variant %s, pinned %s", r, err, len(m.Wasm), m.Variant, m.Ref)
		}
	}
}
