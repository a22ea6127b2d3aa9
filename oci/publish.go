package oci

import (
	"bytes"
	"context"
	"fmt"

	json "github.com/goccy/go-json"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/registry/remote"
)

// The runtime config psp publishes.
const (
	// RuntimeType is the config's type: the runtime the module is for.
	RuntimeType = "psp_classifier"
	// ABIVersion is the classifier ABI the module implements (sdk/ABI.md,
	// version 1).
	ABIVersion = "psp_abi_v1"
	// runtimeConfigFile and the module's file name title the two layers.
	runtimeConfigFile = "runtime-config.json"
)

// RuntimeConfig is the runtime config of the Wasm image format: the
// manifest's config and, in the two-layer "oci" variant Istio reads, a
// layer of its own.
type RuntimeConfig struct {
	// Type names the runtime the module is for (required by the format;
	// RuntimeType when empty).
	Type string `json:"type"`
	// ABIVersions are the ABI versions the module implements (ABIVersion
	// when empty).
	ABIVersions []string `json:"abiVersions,omitempty"`
	// Config is runtime-specific: psp writes the module's type names
	// ({"types": [...]}) when the publisher knows them.
	Config map[string]any `json:"config,omitempty"`
}

// Publish pushes wasm to r (its tag; a digest in r is refused) and returns
// the reference pinned by the manifest's digest; see PublishConfig.
func (c *Client) Publish(ctx context.Context, wasm []byte, r Ref) (Ref, error) {
	return c.PublishConfig(ctx, wasm, r, RuntimeConfig{})
}

// PublishConfig pushes wasm to r in the two-layer "oci" variant Istio's
// fetcher accepts: a manifest whose config is cfg (ConfigMediaType) and
// whose layers are cfg again (ConfigMediaType, titled runtime-config.json)
// and the module (LayerMediaType, titled plugin.wasm), in that order, so
// that a reader taking the last layer finds the module too. Publishing the
// same bytes and config twice gives the same digest.
func (c *Client) PublishConfig(ctx context.Context, wasm []byte, r Ref, cfg RuntimeConfig) (Ref, error) {
	if r.Digest != "" {
		return Ref{}, fmt.Errorf("oci: publish %s: %w: publish to a tag, the digest is the registry's answer", r, ErrBadReference)
	}
	if int64(len(wasm)) > c.maxSize() {
		return Ref{}, fmt.Errorf("oci: publish %s: %w: %d bytes, the limit is %d", r, ErrTooLarge, len(wasm), c.maxSize())
	}
	if cfg.Type == "" {
		cfg.Type = RuntimeType
	}
	if len(cfg.ABIVersions) == 0 {
		cfg.ABIVersions = []string{ABIVersion}
	}
	repo, err := c.repository(r)
	if err != nil {
		return Ref{}, err
	}
	config, err := json.Marshal(cfg)
	if err != nil {
		return Ref{}, fmt.Errorf("oci: publish %s: runtime config: %w", r, err)
	}
	cfgDesc := content.NewDescriptorFromBytes(ConfigMediaType, config)
	cfgLayer := cfgDesc
	cfgLayer.Annotations = map[string]string{ocispec.AnnotationTitle: runtimeConfigFile}
	layer := content.NewDescriptorFromBytes(LayerMediaType, wasm)
	layer.Annotations = map[string]string{ocispec.AnnotationTitle: compatFile}
	man, err := json.Marshal(ocispec.Manifest{
		Versioned: specs.Versioned{SchemaVersion: 2},
		MediaType: ocispec.MediaTypeImageManifest,
		Config:    cfgDesc,
		Layers:    []ocispec.Descriptor{cfgLayer, layer},
	})
	if err != nil {
		return Ref{}, fmt.Errorf("oci: publish %s: manifest: %w", r, err)
	}
	for _, b := range []struct {
		d    ocispec.Descriptor
		data []byte
	}{{layer, wasm}, {cfgDesc, config}} {
		if err := pushBlob(ctx, repo, b.d, b.data); err != nil {
			return Ref{}, fmt.Errorf("oci: publish %s: %w%s", r, err, c.hint(r, err))
		}
	}
	md := content.NewDescriptorFromBytes(ocispec.MediaTypeImageManifest, man)
	if err := repo.PushReference(ctx, md, bytes.NewReader(man), r.Tag); err != nil {
		return Ref{}, fmt.Errorf("oci: publish %s: manifest: %w%s", r, err, c.hint(r, err))
	}
	r.Digest = md.Digest.String()
	if c.CacheDir != "" {
		_ = c.cachePut(r, nil, man, wasm) // the registry has it; a cache failure is not the publisher's
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
