package oci

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"oras.land/oras-go/v2/registry/remote"
	"oras.land/oras-go/v2/registry/remote/auth"
	"oras.land/oras-go/v2/registry/remote/credentials"
	"oras.land/oras-go/v2/registry/remote/errcode"
)

// Media types of the Wasm image format Istio and Envoy read ("oci"
// variant): the runtime config (the manifest's config, and a layer of its
// own) and the module.
const (
	ConfigMediaType = "application/vnd.module.wasm.config.v1+json"
	LayerMediaType  = "application/vnd.module.wasm.content.layer.v1+wasm"
)

// Media types of the Wasm working group's OCI artifact: a config and one
// layer, the module.
const (
	WasmArtifactConfigMediaType = "application/vnd.wasm.config.v0+json"
	WasmArtifactLayerMediaType  = "application/wasm"
)

// Docker's media types, which compat images and older tools write.
const (
	dockerManifest = "application/vnd.docker.distribution.manifest.v2+json"
	dockerLayerGz  = "application/vnd.docker.image.rootfs.diff.tar.gzip"
	dockerLayer    = "application/vnd.docker.image.rootfs.diff.tar"
)

// Variants of a pulled image (Module.Variant).
const (
	// VariantOCI: a layer of LayerMediaType is the module.
	VariantOCI = "oci"
	// VariantCompat: the last layer is a tar archive (gzip or not, OCI or
	// Docker media type) holding plugin.wasm.
	VariantCompat = "compat"
	// VariantWasmArtifact: the Wasm working group's artifact, a layer of
	// WasmArtifactLayerMediaType.
	VariantWasmArtifact = "wasm-artifact"
)

// compatFile is the file a compat image's layer holds.
const compatFile = "plugin.wasm"

// Defaults of Client.
const (
	// DefaultMaxSize is the classifier host's default module size limit
	// (wasmclass.DefaultMaxModuleSize): what a server would refuse is not
	// pulled.
	DefaultMaxSize = 8 << 20
	DefaultTimeout = 30 * time.Second
	maxManifest    = 4 << 20
)

// Errors returned by Pull.
var (
	// ErrNotWasm: the manifest is none of the shapes of a Wasm module
	// image.
	ErrNotWasm = errors.New("oci: not a Wasm module image")
	// ErrDigest: bytes fetched do not match their digest.
	ErrDigest = errors.New("oci: digest mismatch")
	// ErrTooLarge: the module, or the layer holding it, is larger than
	// Client.MaxSize allows.
	ErrTooLarge = errors.New("oci: larger than the module size limit")
	// ErrDecompressionBomb: a compressed compat layer inflates past what a
	// module of Client.MaxSize and its archive could take.
	ErrDecompressionBomb = errors.New("oci: decompression bomb")
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
	// MaxSize bounds a module (DefaultMaxSize when 0): give the size limit
	// of the classifier host the module is for. It bounds what a pull reads
	// and holds too (a layer, an archive inflated).
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
	// Variant is the image's shape: VariantOCI, VariantCompat or
	// VariantWasmArtifact.
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

// hint explains the usual cause of err, a failed request to r's
// registry.
func (c *Client) hint(r Ref, err error) string {
	var resp *errcode.ErrorResponse
	switch {
	case errors.Is(err, auth.ErrBasicCredentialNotFound):
		return fmt.Sprintf(" (the registry wants credentials for %s: none in %s or a credential helper it names; docker login %s)", r.Host, c.dockerConfigPath(), r.Host)
	case errors.As(err, &resp) && (resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden):
		return fmt.Sprintf(" (the registry refused the credentials for %s from %s, or there were none: docker login %s)", r.Host, c.dockerConfigPath(), r.Host)
	case r.Loopback():
		return " (is the registry running?)"
	}
	return " (registry reachable over HTTPS, credentials in the Docker config?)"
}

// dockerConfigPath is the Docker configuration file credentials come
// from, as the credentials store finds it.
func (c *Client) dockerConfigPath() string {
	if c.DockerConfig != "" {
		return c.DockerConfig
	}
	if dir := os.Getenv("DOCKER_CONFIG"); dir != "" {
		return filepath.Join(dir, "config.json")
	}
	return filepath.Join("~", ".docker", "config.json")
}
