package oci

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"

	json "github.com/goccy/go-json"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/errdef"
)

// Pull fetches the module r names. A reference with a digest is served
// from the cache when it is there, else fetched and verified; a tag is
// resolved by the registry, or by the cache's last resolution of it when
// the registry cannot be reached.
//
// Every shape of Wasm image Istio's and Envoy Gateway's fetchers accept is
// read: the "oci" variant (a layer of LayerMediaType, among one or two
// layers), the "compat" variant (the last of any number of layers, a tar
// archive, gzipped or not, of an OCI or Docker media type, holding a file
// named plugin.wasm) and the Wasm working group's artifact (a layer of
// WasmArtifactLayerMediaType), each alone or in an index (OCI's, or a
// Docker manifest list) naming it for linux/amd64, as docker buildx
// pushes images; the reference is then pinned by the index's digest.
// What is read is bounded by Client.MaxSize:
// the module's layer by it, a compat layer and its archive inflated by it
// plus archiveSlack.
//
// # Errors
//
// ErrNotWasm, ErrDigest, ErrTooLarge and ErrDecompressionBomb say that the
// image itself is refused (the cache is then not asked for the tag);
// anything else is the registry's or the network's.
func (c *Client) Pull(ctx context.Context, r Ref) (Module, error) {
	if r.Digest != "" && c.CacheDir != "" {
		if m, err := c.cacheGet(r); err == nil {
			return m, nil
		}
	}
	m, err := c.fetch(ctx, r)
	if err == nil {
		if c.CacheDir != "" {
			if err := c.cachePut(m.Ref, m.index, m.manifest, m.layer); err != nil {
				m.Warning = "not cached: " + err.Error()
			}
		}
		return m.Module, nil
	}
	if r.Digest == "" && c.CacheDir != "" && !Refused(err) {
		if d, cerr := c.cacheTag(r); cerr == nil {
			pinned := r
			pinned.Digest = d
			if cm, cerr := c.cacheGet(pinned); cerr == nil {
				cm.Warning = fmt.Sprintf("registry unreachable, tag %s served from the cache as last resolved (%v)", r.Tag, err)
				return cm, nil
			}
		}
	}
	return Module{}, err
}

// Refused reports whether err says the image itself was refused (not a
// Wasm image, a digest that does not match, too large, a decompression
// bomb), rather than that it could not be fetched: pulling it again will
// not help.
func Refused(err error) bool {
	return errors.Is(err, ErrNotWasm) || errors.Is(err, ErrDigest) || errors.Is(err, ErrTooLarge) || errors.Is(err, ErrDecompressionBomb)
}

// fetched is a module with the bytes it came in: the index it was
// chosen from (nil when the reference named an image), its image's
// manifest and the layer holding it.
type fetched struct {
	Module
	index, manifest, layer []byte
}

func (c *Client) fetch(ctx context.Context, r Ref) (fetched, error) {
	repo, err := c.repository(r)
	if err != nil {
		return fetched{}, err
	}
	desc, rc, err := repo.FetchReference(ctx, r.reference())
	if errors.Is(err, errdef.ErrNotFound) {
		return fetched{}, fmt.Errorf("oci: pull %s: %w (the registry has no such tag or digest in %s: published yet?)", r, err, r.Repo)
	}
	if err != nil {
		return fetched{}, fmt.Errorf("oci: pull %s: %w%s", r, err, c.hint(r, err))
	}
	if desc.Size > maxManifest {
		rc.Close()
		return fetched{}, fmt.Errorf("oci: pull %s: %w: manifest of %d bytes, larger than %d", r, ErrNotWasm, desc.Size, maxManifest)
	}
	man, err := readAll(rc, maxManifest)
	rc.Close()
	if err != nil {
		return fetched{}, fmt.Errorf("oci: pull %s: manifest: %w", r, err)
	}
	if desc.Size > 0 && int64(len(man)) != desc.Size {
		// The registry announced another length than it sent (the
		// client library may also cut what it reads to compute a
		// digest): these are not the bytes a digest could pin.
		return fetched{}, fmt.Errorf("oci: pull %s: manifest: read %d bytes, the registry announced %d", r, len(man), desc.Size)
	}
	got := digest.FromBytes(man)
	if r.Digest != "" && got.String() != r.Digest {
		return fetched{}, fmt.Errorf("oci: pull %s: %w: manifest is %s", r, ErrDigest, got)
	}
	if desc.Digest != "" && desc.Digest != got {
		return fetched{}, fmt.Errorf("oci: pull %s: %w: registry said %s, manifest is %s", r, ErrDigest, desc.Digest, got)
	}
	pinned := r
	pinned.Digest = got.String()
	index := []byte(nil)
	image, isIndex, err := imageOf(man)
	if err != nil {
		return fetched{}, fmt.Errorf("oci: pull %s: %w", r, err)
	}
	if isIndex {
		// An index (or a Docker manifest list): the image it names,
		// fetched by its digest and verified against it.
		irc, err := repo.Fetch(ctx, image)
		if err != nil {
			return fetched{}, fmt.Errorf("oci: pull %s: manifest %s: %w", r, image.Digest, err)
		}
		b, err := readSized(irc, image.Size)
		irc.Close()
		if err != nil {
			return fetched{}, fmt.Errorf("oci: pull %s: manifest %s: %w", r, image.Digest, err)
		}
		if d := digest.FromBytes(b); d != image.Digest {
			return fetched{}, fmt.Errorf("oci: pull %s: %w: manifest is %s, the index says %s", r, ErrDigest, d, image.Digest)
		}
		index, man = man, b
	}
	layerDesc, variant, err := wasmLayer(man)
	if err != nil {
		return fetched{}, fmt.Errorf("oci: pull %s: %w", r, err)
	}
	if err := c.checkLayer(layerDesc, variant); err != nil {
		return fetched{}, fmt.Errorf("oci: pull %s: %w", r, err)
	}
	lrc, err := repo.Fetch(ctx, layerDesc)
	if err != nil {
		return fetched{}, fmt.Errorf("oci: pull %s: layer: %w%s", r, err, c.hint(r, err))
	}
	// The manifest's size bounds the read: a registry that sends more
	// (or never stops) is cut one byte past it.
	layer, err := readSized(lrc, layerDesc.Size)
	lrc.Close()
	if err != nil {
		return fetched{}, fmt.Errorf("oci: pull %s: layer: %w", r, err)
	}
	if d := digest.FromBytes(layer); d != layerDesc.Digest {
		return fetched{}, fmt.Errorf("oci: pull %s: %w: layer is %s, manifest says %s", r, ErrDigest, d, layerDesc.Digest)
	}
	wasm, err := c.extract(layer, variant)
	if err != nil {
		return fetched{}, fmt.Errorf("oci: pull %s: %w", r, err)
	}
	return fetched{Module: newModule(wasm, pinned, variant), index: index, manifest: man, layer: layer}, nil
}

func newModule(wasm []byte, r Ref, variant string) Module {
	sum := sha256.Sum256(wasm)
	return Module{Wasm: wasm, Ref: r, SHA256: hex.EncodeToString(sum[:]), Variant: variant}
}

// archiveSlack is what a compat layer may hold beside its module (tar
// headers, runtime-config.json, gzip's overhead on incompressible bytes):
// a 64th of the module size limit plus 1 MiB.
func (c *Client) archiveSlack() int64 { return c.maxSize()/64 + 1<<20 }

// layerBound is the largest layer of variant a pull reads: the module
// itself, or a compat archive of it.
func (c *Client) layerBound(variant string) int64 {
	if variant == VariantCompat {
		return c.maxSize() + c.archiveSlack()
	}
	return c.maxSize()
}

// checkLayer refuses a layer descriptor a pull would not read.
func (c *Client) checkLayer(d ocispec.Descriptor, variant string) error {
	if d.Size <= 0 {
		return fmt.Errorf("%w: layer of size %d", ErrNotWasm, d.Size)
	}
	if b := c.layerBound(variant); d.Size > b {
		what := "the module size limit"
		if variant == VariantCompat {
			what = fmt.Sprintf("the module size limit, %d, and %d for the archive", c.maxSize(), c.archiveSlack())
		}
		return fmt.Errorf("%w: %s layer of %d bytes, larger than %d (%s)", ErrTooLarge, variant, d.Size, b, what)
	}
	return nil
}

// readAll reads at most limit bytes, failing past it.
func readAll(r io.Reader, limit int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("larger than %d bytes", limit)
	}
	return b, nil
}

// readSized reads exactly size bytes into one allocation of that size,
// failing when r ends before or has more.
func readSized(r io.Reader, size int64) ([]byte, error) {
	b := make([]byte, size)
	if n, err := io.ReadFull(r, b); err != nil {
		return nil, fmt.Errorf("read %d of the %d bytes the manifest gives: %w", n, size, err)
	}
	var one [1]byte
	if n, _ := r.Read(one[:]); n > 0 {
		return nil, fmt.Errorf("more than the %d bytes the manifest gives", size)
	}
	return b, nil
}

// manifest is an image manifest, or an index (Manifests).
type manifest struct {
	ocispec.Manifest
	Manifests []ocispec.Descriptor `json:"manifests"`
}

// Media types of an index of images.
const dockerManifestList = "application/vnd.docker.distribution.manifest.list.v2+json"

// imageOf reads a manifest: when it is an index (or a Docker manifest
// list) it returns the descriptor of the image to read in it and true;
// else false, the manifest being the image's own.
//
// The image is the one Istio's fetcher reads (go-containerregistry's
// remote.Descriptor.Image): the first manifest for linux/amd64, one
// without a platform counting as such. An index with none (a module for
// wasip1/wasm, say) gives the one image in it that is not an attestation
// (platform unknown/unknown, as docker buildx adds them). Indexes are not
// followed further.
func imageOf(b []byte) (ocispec.Descriptor, bool, error) {
	var m manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return ocispec.Descriptor{}, false, fmt.Errorf("%w: manifest: %v", ErrNotWasm, err)
	}
	if m.MediaType != ocispec.MediaTypeImageIndex && m.MediaType != dockerManifestList && len(m.Manifests) == 0 {
		return ocispec.Descriptor{}, false, nil
	}
	var images []ocispec.Descriptor
	var platforms []string
	for _, d := range m.Manifests {
		if d.MediaType != ocispec.MediaTypeImageManifest && d.MediaType != dockerManifest {
			platforms = append(platforms, d.MediaType)
			continue
		}
		p := d.Platform
		if p == nil || p.OS == "linux" && p.Architecture == "amd64" {
			return checkManifestDesc(d)
		}
		platforms = append(platforms, p.OS+"/"+p.Architecture)
		if p.OS != "unknown" || p.Architecture != "unknown" {
			images = append(images, d)
		}
	}
	if len(images) == 1 {
		return checkManifestDesc(images[0])
	}
	return ocispec.Descriptor{}, true, fmt.Errorf("%w: an index of %d manifests, none for linux/amd64 and not one image besides attestations (%s): name the image's manifest by its digest",
		ErrNotWasm, len(m.Manifests), strings.Join(platforms, ", "))
}

// checkManifestDesc refuses an index's entry a pull would not read.
func checkManifestDesc(d ocispec.Descriptor) (ocispec.Descriptor, bool, error) {
	if d.Size <= 0 || d.Size > maxManifest {
		return ocispec.Descriptor{}, true, fmt.Errorf("%w: the index names a manifest of %d bytes (at most %d)", ErrNotWasm, d.Size, maxManifest)
	}
	if err := d.Digest.Validate(); err != nil {
		return ocispec.Descriptor{}, true, fmt.Errorf("%w: the index names manifest %q: %v", ErrNotWasm, d.Digest, err)
	}
	return d, true, nil
}

// compatLayerTypes are the media types of a compat variant's last layer.
var compatLayerTypes = []string{ocispec.MediaTypeImageLayerGzip, ocispec.MediaTypeImageLayer, dockerLayerGz, dockerLayer}

// wasmLayer finds the module's layer in a manifest of any shape:
//   - a layer of LayerMediaType (the oci variant; Istio wants two
//     layers, the other of ConfigMediaType, and psp publishes that; one
//     such layer among any others is taken);
//   - a layer of WasmArtifactLayerMediaType (the Wasm working group's
//     artifact);
//   - else the last layer, a tar archive of compatLayerTypes (compat).
func wasmLayer(b []byte) (ocispec.Descriptor, string, error) {
	var m manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return ocispec.Descriptor{}, "", fmt.Errorf("%w: manifest: %v", ErrNotWasm, err)
	}
	switch m.MediaType {
	case "", ocispec.MediaTypeImageManifest, dockerManifest:
	default:
		return ocispec.Descriptor{}, "", fmt.Errorf("%w: manifest of media type %q (an index within an index? name the manifest of one image)", ErrNotWasm, m.MediaType)
	}
	if len(m.Manifests) > 0 {
		return ocispec.Descriptor{}, "", fmt.Errorf("%w: an index of %d manifests within an index (name the manifest of one image by its digest)", ErrNotWasm, len(m.Manifests))
	}
	for _, v := range []struct{ mediaType, variant string }{{LayerMediaType, VariantOCI}, {WasmArtifactLayerMediaType, VariantWasmArtifact}} {
		var found []ocispec.Descriptor
		for _, l := range m.Layers {
			if l.MediaType == v.mediaType {
				found = append(found, l)
			}
		}
		switch len(found) {
		case 0:
			continue
		case 1:
			return found[0], v.variant, nil
		}
		return ocispec.Descriptor{}, "", fmt.Errorf("%w: %d layers of media type %s: which is the module?", ErrNotWasm, len(found), v.mediaType)
	}
	types := make([]string, len(m.Layers))
	for i, l := range m.Layers {
		types[i] = l.MediaType
	}
	if n := len(m.Layers); n > 0 {
		last := m.Layers[n-1]
		for _, t := range compatLayerTypes {
			if last.MediaType == t {
				return last, VariantCompat, nil
			}
		}
	}
	return ocispec.Descriptor{}, "", fmt.Errorf("%w: config %q, layers %v (want a layer %s (oci variant), a layer %s (Wasm artifact), or a last layer of a tar archive holding %s (compat variant: %s))",
		ErrNotWasm, m.Config.MediaType, types, LayerMediaType, WasmArtifactLayerMediaType, compatFile, strings.Join(compatLayerTypes, ", "))
}

// extract returns the module a layer holds: the layer itself, or the
// plugin.wasm a compat archive holds (the first file of that base name,
// in any directory, as Istio's fetcher reads it).
func (c *Client) extract(layer []byte, variant string) ([]byte, error) {
	if variant != VariantCompat {
		return layer, nil
	}
	var r io.Reader = bytes.NewReader(layer)
	bound := c.maxSize() + c.archiveSlack()
	compressed := len(layer) > 2 && layer[0] == 0x1f && layer[1] == 0x8b
	if compressed {
		gz, err := gzip.NewReader(r)
		if err != nil {
			return nil, fmt.Errorf("%w: compat layer: %v", ErrNotWasm, err)
		}
		defer gz.Close()
		// A small layer can inflate without bound: what is
		// decompressed is bounded like the layer itself.
		r = &boundedReader{r: gz, left: bound}
	}
	bomb := func() error {
		return fmt.Errorf("%w: a compat layer of %d bytes inflates past %d bytes (the module size limit, %d, and %d for the archive)",
			ErrDecompressionBomb, len(layer), bound, c.maxSize(), c.archiveSlack())
	}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		switch {
		case err == io.EOF:
			return nil, fmt.Errorf("%w: compat layer holds no %s", ErrNotWasm, compatFile)
		case errors.Is(err, errInflated):
			return nil, bomb()
		case err != nil:
			return nil, fmt.Errorf("%w: compat layer: %v", ErrNotWasm, err)
		}
		if h.Typeflag != tar.TypeReg || path.Base(h.Name) != compatFile {
			continue
		}
		if h.Size > c.maxSize() {
			return nil, fmt.Errorf("%w: %s of %d bytes in the compat layer, the limit is %d", ErrTooLarge, h.Name, h.Size, c.maxSize())
		}
		wasm := make([]byte, h.Size)
		if _, err := io.ReadFull(tr, wasm); err != nil {
			if errors.Is(err, errInflated) {
				return nil, bomb()
			}
			return nil, fmt.Errorf("%w: compat layer: %s: %v", ErrNotWasm, h.Name, err)
		}
		return wasm, nil
	}
}

// errInflated: a compressed compat layer decompressed past its bound.
var errInflated = errors.New("oci: compat layer decompressed past its bound")

// boundedReader reads from r until left bytes have been read, then fails
// with errInflated.
type boundedReader struct {
	r    io.Reader
	left int64
}

func (b *boundedReader) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, errInflated
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.r.Read(p)
	b.left -= int64(n)
	return n, err
}
