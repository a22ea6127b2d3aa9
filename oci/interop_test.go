package oci_test

import (
	"bytes"
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

// TestPullShapesMadeWithoutPSP pulls each shape of Wasm image Istio's and
// Envoy Gateway's fetchers accept (and the Wasm working group's artifact),
// written as an OCI layout by the test and copied into a registry with
// skopeo: the module comes back, pinned by the digest of the manifest
// skopeo reads from the registry. (server's TestServeShapesMadeWithoutPSP
// serves them.)
func TestPullShapesMadeWithoutPSP(t *testing.T) {
	reg := registrytest.Start(t)
	wasm := classifiers.PSPHeader
	shapes := registrytest.PushShapes(t, reg, wasm)
	caches := make([]*oci.Client, len(shapes))
	for i, sh := range shapes {
		caches[i] = &oci.Client{CacheDir: t.TempDir()}
		t.Run(sh.Name, func(t *testing.T) {
			var got struct{ MediaType string }
			if err := json.Unmarshal(sh.Manifest, &got); err != nil || got.MediaType != sh.Media {
				t.Fatalf("the registry's manifest: media type %q (%v), want %s:\n%s", got.MediaType, err, sh.Media, sh.Manifest)
			}
			c := caches[i]
			for _, ref := range []string{sh.Ref, "oci://" + reg.Addr + "/shapes/" + sh.Name + "@" + sh.Digest()} {
				r, err := oci.ParseRef(ref)
				if err != nil {
					t.Fatal(err)
				}
				m, err := c.Pull(context.Background(), r)
				if err != nil {
					t.Fatalf("pull %s: %v\nmanifest: %s", ref, err, sh.Manifest)
				}
				if !bytes.Equal(m.Wasm, wasm) || m.Variant != sh.Variant || m.Ref.Digest != sh.Digest() {
					t.Errorf("pull %s: %d bytes (want %d), variant %s (want %s), pinned %s (skopeo's manifest %s)",
						ref, len(m.Wasm), len(wasm), m.Variant, sh.Variant, m.Ref, sh.Digest())
				}
			}
		})
	}
	// Each comes back from its cache, by tag, with the registry down.
	reg.Stop()
	for i, sh := range shapes {
		r, _ := oci.ParseRef(sh.Ref)
		m, err := caches[i].Pull(context.Background(), r)
		if err != nil || !m.FromCache || !bytes.Equal(m.Wasm, wasm) || m.Ref.Digest != sh.Digest() {
			t.Errorf("%s from the cache, registry down: %v (from cache %v, %d bytes, pinned %s)", sh.Name, err, m.FromCache, len(m.Wasm), m.Ref)
		}
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
