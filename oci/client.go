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
	"net/http"
	"path"
	"strings"
	"time"

	json "github.com/goccy/go-json"
	"github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/registry/remote"
	"oras.land/oras-go/v2/registry/remote/auth"
	"oras.land/oras-go/v2/registry/remote/credentials"
)

// Media types of the Wasm image format ("oci" variant).
const (
	ConfigMediaType = "application/vnd.module.wasm.config.v1+json"
	LayerMediaType  = "application/vnd.module.wasm.content.layer.v1+wasm"
)

// Docker's media types, which compat images and older tools write.
const (
	dockerManifest = "application/vnd.docker.distribution.manifest.v2+json"
	dockerLayerGz  = "application/vnd.docker.image.rootfs.diff.tar.gzip"
	dockerLayer    = "application/vnd.docker.image.rootfs.diff.tar"
)

// compatFile is the file a compat image's layer holds.
const compatFile = "plugin.wasm"

// Defaults of Client.
const (
	DefaultMaxSize = 64 << 20
	DefaultTimeout = 30 * time.Second
	maxManifest    = 4 << 20
)

// Errors returned by Pull.
var (
	// ErrNotWasm: the manifest is neither variant of the Wasm image format.
	ErrNotWasm = errors.New("oci: not a Wasm module image")
	// ErrDigest: bytes fetched do not match their digest.
	ErrDigest = errors.New("oci: digest mismatch")
	// ErrInsecure: plain HTTP was asked for a registry not on loopback
	// without Client.PlainHTTP.
	ErrInsecure = errors.New("oci: plain HTTP to a registry off loopback")
)

// Client publishes and pulls classifiers. Its zero value speaks HTTPS to
// registries off loopback and plain HTTP on loopback, reads credentials
// from the Docker configuration file and keeps no cache.
type Client struct {
	// PlainHTTP speaks plain HTTP to every registry, not only loopback
	// ones (an explicit choice: credentials and modules travel in clear).
	PlainHTTP bool
	// DockerConfig is the Docker configuration file credentials come from
	// ("": $DOCKER_CONFIG/config.json, else ~/.docker/config.json).
	DockerConfig string
	// CacheDir keeps pulled modules by digest ("": no cache).
	CacheDir string
	// MaxSize bounds a module (DefaultMaxSize when 0).
	MaxSize int64
	// Timeout bounds each HTTP request (DefaultTimeout when 0).
	Timeout time.Duration
}

// Module is a classifier pulled from a registry.
type Module struct {
	// Wasm is the module.
	Wasm []byte
	// Ref is the reference pinned by the manifest's digest, the tag kept
	// when there was one: oci://HOST/REPO[:TAG]@sha256:HEX.
	Ref Ref
	// SHA256 is the module's SHA-256 in hex (what psp status shows).
	SHA256 string
	// Variant is "oci" or "compat".
	Variant string
	// FromCache: served from Client.CacheDir without the registry.
	FromCache bool
	// Warning says why a tag was served from the cache ("" otherwise).
	Warning string
}

func (c *Client) maxSize() int64 {
	if c.MaxSize > 0 {
		return c.MaxSize
	}
	return DefaultMaxSize
}

// repository opens r's repository with credentials and the transport
// r's host calls for.
func (c *Client) repository(r Ref) (*remote.Repository, error) {
	repo, err := remote.NewRepository(r.Host + "/" + r.Repo)
	if err != nil {
		return nil, fmt.Errorf("%w %s: %v", ErrBadReference, r, err)
	}
	repo.PlainHTTP = c.PlainHTTP || r.Loopback()
	var store credentials.Store
	if c.DockerConfig != "" {
		store, err = credentials.NewStore(c.DockerConfig, credentials.StoreOptions{})
	} else {
		store, err = credentials.NewStoreFromDocker(credentials.StoreOptions{})
	}
	if err != nil {
		return nil, fmt.Errorf("oci: docker config: %w", err)
	}
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	repo.Client = &auth.Client{
		Client:     &http.Client{Timeout: timeout},
		Credential: credentials.Credential(store),
		Cache:      auth.NewCache(),
	}
	repo.SkipReferrersGC = true
	return repo, nil
}

// Publish pushes wasm to r (its tag; a digest in r is refused) in the
// "oci" variant and returns the reference pinned by the manifest's digest.
// Publishing the same bytes twice gives the same digest.
func (c *Client) Publish(ctx context.Context, wasm []byte, r Ref) (Ref, error) {
	if r.Digest != "" {
		return Ref{}, fmt.Errorf("oci: publish %s: %w: publish to a tag, the digest is the registry's answer", r, ErrBadReference)
	}
	if int64(len(wasm)) > c.maxSize() {
		return Ref{}, fmt.Errorf("oci: publish %s: %d bytes, larger than %d", r, len(wasm), c.maxSize())
	}
	repo, err := c.repository(r)
	if err != nil {
		return Ref{}, err
	}
	config := []byte("{}")
	cfg := content.NewDescriptorFromBytes(ConfigMediaType, config)
	layer := content.NewDescriptorFromBytes(LayerMediaType, wasm)
	layer.Annotations = map[string]string{ocispec.AnnotationTitle: compatFile}
	man, err := json.Marshal(ocispec.Manifest{
		Versioned: specs.Versioned{SchemaVersion: 2},
		MediaType: ocispec.MediaTypeImageManifest,
		Config:    cfg,
		Layers:    []ocispec.Descriptor{layer},
	})
	if err != nil {
		return Ref{}, fmt.Errorf("oci: publish %s: manifest: %w", r, err)
	}
	for _, b := range []struct {
		d    ocispec.Descriptor
		data []byte
	}{{layer, wasm}, {cfg, config}} {
		if err := pushBlob(ctx, repo, b.d, b.data); err != nil {
			return Ref{}, fmt.Errorf("oci: publish %s: %w", r, err)
		}
	}
	md := content.NewDescriptorFromBytes(ocispec.MediaTypeImageManifest, man)
	if err := repo.PushReference(ctx, md, bytes.NewReader(man), r.Tag); err != nil {
		return Ref{}, fmt.Errorf("oci: publish %s: manifest: %w%s", r, err, hint(r))
	}
	r.Digest = md.Digest.String()
	if c.CacheDir != "" {
		_ = c.cachePut(r, man, wasm) // the registry has it; a cache failure is not the publisher's
	}
	return r, nil
}

// pushBlob pushes a blob the repository does not have yet.
func pushBlob(ctx context.Context, repo *remote.Repository, d ocispec.Descriptor, data []byte) error {
	ok, err := repo.Exists(ctx, d)
	if err != nil {
		return fmt.Errorf("blob %s: %w", d.Digest, err)
	}
	if ok {
		return nil
	}
	if err := repo.Push(ctx, d, bytes.NewReader(data)); err != nil {
		return fmt.Errorf("blob %s: %w", d.Digest, err)
	}
	return nil
}

// hint explains the usual cause of a failed request.
func hint(r Ref) string {
	if r.Loopback() {
		return " (is the registry running?)"
	}
	return " (registry reachable over HTTPS, credentials in the Docker config?)"
}

// Pull fetches the module r names. A reference with a digest is served
// from the cache when it is there, else fetched and verified; a tag is
// resolved by the registry, or by the cache's last resolution of it when
// the registry cannot be reached.
func (c *Client) Pull(ctx context.Context, r Ref) (Module, error) {
	if r.Digest != "" && c.CacheDir != "" {
		if m, err := c.cacheGet(r); err == nil {
			return m, nil
		}
	}
	m, err := c.fetch(ctx, r)
	if err == nil {
		if c.CacheDir != "" {
			if err := c.cachePut(m.Ref, m.manifest, m.layer); err != nil {
				m.Warning = "not cached: " + err.Error()
			}
		}
		return m.Module, nil
	}
	if r.Digest == "" && c.CacheDir != "" && !errors.Is(err, ErrDigest) && !errors.Is(err, ErrNotWasm) {
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

// fetched is a module with the bytes it came in.
type fetched struct {
	Module
	manifest, layer []byte
}

func (c *Client) fetch(ctx context.Context, r Ref) (fetched, error) {
	repo, err := c.repository(r)
	if err != nil {
		return fetched{}, err
	}
	desc, rc, err := repo.FetchReference(ctx, r.reference())
	if err != nil {
		return fetched{}, fmt.Errorf("oci: pull %s: %w%s", r, err, hint(r))
	}
	if desc.Size > maxManifest {
		rc.Close()
		return fetched{}, fmt.Errorf("oci: pull %s: manifest of %d bytes, larger than %d", r, desc.Size, maxManifest)
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
	layerDesc, variant, err := wasmLayer(man)
	if err != nil {
		return fetched{}, fmt.Errorf("oci: pull %s: %w", r, err)
	}
	if layerDesc.Size > c.maxSize()*2 {
		return fetched{}, fmt.Errorf("oci: pull %s: layer of %d bytes, larger than %d", r, layerDesc.Size, c.maxSize()*2)
	}
	if layerDesc.Size <= 0 {
		return fetched{}, fmt.Errorf("oci: pull %s: %w: layer of size %d", r, ErrNotWasm, layerDesc.Size)
	}
	lrc, err := repo.Fetch(ctx, layerDesc)
	if err != nil {
		return fetched{}, fmt.Errorf("oci: pull %s: layer: %w", r, err)
	}
	// The manifest's size bounds the read: a registry that sends more
	// (or never stops) is cut one byte past it.
	layer, err := readAll(lrc, layerDesc.Size)
	lrc.Close()
	if err != nil {
		return fetched{}, fmt.Errorf("oci: pull %s: layer: %w (the manifest says %d bytes)", r, err, layerDesc.Size)
	}
	if d := digest.FromBytes(layer); d != layerDesc.Digest {
		return fetched{}, fmt.Errorf("oci: pull %s: %w: layer is %s, manifest says %s", r, ErrDigest, d, layerDesc.Digest)
	}
	wasm, err := c.extract(layer, variant)
	if err != nil {
		return fetched{}, fmt.Errorf("oci: pull %s: %w", r, err)
	}
	sum := sha256.Sum256(wasm)
	return fetched{Module: Module{Wasm: wasm, Ref: pinned, SHA256: hex.EncodeToString(sum[:]), Variant: variant},
		manifest: man, layer: layer}, nil
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

// wasmLayer finds the module's layer in a manifest of either variant.
func wasmLayer(man []byte) (ocispec.Descriptor, string, error) {
	var m ocispec.Manifest
	if err := json.Unmarshal(man, &m); err != nil {
		return ocispec.Descriptor{}, "", fmt.Errorf("%w: manifest: %v", ErrNotWasm, err)
	}
	switch m.MediaType {
	case "", ocispec.MediaTypeImageManifest, dockerManifest:
	default:
		return ocispec.Descriptor{}, "", fmt.Errorf("%w: manifest of media type %q (an index or a list? name the manifest of one image)", ErrNotWasm, m.MediaType)
	}
	if m.Config.MediaType == ConfigMediaType || m.ArtifactType == ConfigMediaType {
		for _, l := range m.Layers {
			if l.MediaType == LayerMediaType {
				return l, "oci", nil
			}
		}
		return ocispec.Descriptor{}, "", fmt.Errorf("%w: no layer of media type %s", ErrNotWasm, LayerMediaType)
	}
	if len(m.Layers) == 1 {
		switch m.Layers[0].MediaType {
		case ocispec.MediaTypeImageLayer, ocispec.MediaTypeImageLayerGzip, dockerLayer, dockerLayerGz:
			return m.Layers[0], "compat", nil
		case LayerMediaType:
			return m.Layers[0], "oci", nil
		}
	}
	var types []string
	for _, l := range m.Layers {
		types = append(types, l.MediaType)
	}
	return ocispec.Descriptor{}, "", fmt.Errorf("%w: config %q, layers %v (want config %s with a layer %s, or one image layer holding %s)",
		ErrNotWasm, m.Config.MediaType, types, ConfigMediaType, LayerMediaType, compatFile)
}

// extract returns the module a layer holds.
func (c *Client) extract(layer []byte, variant string) ([]byte, error) {
	if variant == "oci" {
		return layer, nil
	}
	var r io.Reader = bytes.NewReader(layer)
	if len(layer) > 2 && layer[0] == 0x1f && layer[1] == 0x8b {
		gz, err := gzip.NewReader(r)
		if err != nil {
			return nil, fmt.Errorf("%w: compat layer: %v", ErrNotWasm, err)
		}
		defer gz.Close()
		// A small layer can inflate without bound (a gzip bomb): what
		// is decompressed is bounded like the layer itself.
		r = &boundedReader{r: gz, left: c.maxSize() * 2}
	}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil, fmt.Errorf("%w: compat layer holds no %s", ErrNotWasm, compatFile)
		}
		if errors.Is(err, errInflated) {
			return nil, fmt.Errorf("%w: compat layer: decompresses to more than %d bytes", ErrNotWasm, c.maxSize()*2)
		}
		if err != nil {
			return nil, fmt.Errorf("%w: compat layer: %v", ErrNotWasm, err)
		}
		if h.Typeflag == tar.TypeReg && path.Clean(strings.TrimPrefix(h.Name, "/")) == compatFile {
			wasm, err := readAll(tr, c.maxSize())
			if errors.Is(err, errInflated) {
				return nil, fmt.Errorf("%w: compat layer: decompresses to more than %d bytes", ErrNotWasm, c.maxSize()*2)
			}
			return wasm, err
		}
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
