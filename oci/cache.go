package oci

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/opencontainers/go-digest"

	"github.com/persephone-go/psp/internal/boundedfile"
)

// CacheDir turns a cache setting (a configuration's or a flag's) into
// Client.CacheDir: "" is psp/oci in the user's cache directory (none when
// there is no such directory), "off" no cache, anything else that
// directory.
func CacheDir(setting string) string {
	switch setting {
	case "off":
		return ""
	case "":
		if dir, err := os.UserCacheDir(); err == nil {
			return filepath.Join(dir, "psp", "oci")
		}
		return ""
	}
	return setting
}

// The cache under Client.CacheDir:
//
//	manifests/HEX   a manifest, by its digest
//	blobs/HEX       a layer, by its digest
//	tags/HEX        "REF DIGEST": a tag's last resolution (HEX: SHA-256 of REF)

// cachePut keeps a pulled module: its layer, then its image's manifest,
// then the index it was chosen from (nil when none), then the tag's
// resolution (to the index when there is one), each written to a
// temporary file and renamed.
func (c *Client) cachePut(r Ref, index, manifest, layer []byte) error {
	ld := digest.FromBytes(layer)
	md := digest.FromBytes(manifest)
	if err := writeAtomic(filepath.Join(c.CacheDir, "blobs", ld.Encoded()), layer); err != nil {
		return err
	}
	if err := writeAtomic(filepath.Join(c.CacheDir, "manifests", md.Encoded()), manifest); err != nil {
		return err
	}
	if index != nil {
		md = digest.FromBytes(index)
		if err := writeAtomic(filepath.Join(c.CacheDir, "manifests", md.Encoded()), index); err != nil {
			return err
		}
	}
	if r.Tag != "" {
		key := r
		key.Digest = ""
		if err := writeAtomic(c.tagFile(key), []byte(key.String()+" "+md.String()+"\n")); err != nil {
			return err
		}
	}
	return nil
}

// maxTagFile bounds a cached tag's file (a digest).
const maxTagFile = 4 << 10

// cacheGet returns the module pinned by r.Digest from the cache, verifying
// both digests again and bounding it as a pull does.
func (c *Client) cacheGet(r Ref) (Module, error) {
	d, err := digest.Parse(r.Digest)
	if err != nil {
		return Module{}, fmt.Errorf("oci: cache: %w", err)
	}
	man, err := c.cachedManifest(d)
	if err != nil {
		return Module{}, err
	}
	image, isIndex, err := imageOf(man)
	if err != nil {
		return Module{}, fmt.Errorf("oci: cache: %w", err)
	}
	if isIndex {
		if man, err = c.cachedManifest(image.Digest); err != nil {
			return Module{}, err
		}
	}
	ld, variant, err := wasmLayer(man)
	if err != nil {
		return Module{}, fmt.Errorf("oci: cache: %w", err)
	}
	if err := c.checkLayer(ld, variant); err != nil {
		return Module{}, fmt.Errorf("oci: cache: %w", err)
	}
	layer, err := boundedfile.Read(filepath.Join(c.CacheDir, "blobs", ld.Digest.Encoded()), c.layerBound(variant))
	if err != nil {
		return Module{}, fmt.Errorf("oci: cache: %w", err)
	}
	if digest.FromBytes(layer) != ld.Digest {
		return Module{}, fmt.Errorf("oci: cache: layer %s: %w", ld.Digest, ErrDigest)
	}
	wasm, err := c.extract(layer, variant)
	if err != nil {
		return Module{}, fmt.Errorf("oci: cache: %w", err)
	}
	m := newModule(wasm, r, variant)
	m.FromCache = true
	return m, nil
}

// cachedManifest reads the manifest of digest d from the cache, verified.
func (c *Client) cachedManifest(d digest.Digest) ([]byte, error) {
	man, err := boundedfile.Read(filepath.Join(c.CacheDir, "manifests", d.Encoded()), maxManifest)
	if err != nil {
		return nil, fmt.Errorf("oci: cache: %w", err)
	}
	if digest.FromBytes(man) != d {
		return nil, fmt.Errorf("oci: cache: manifest %s: %w", d, ErrDigest)
	}
	return man, nil
}

// cacheTag returns the digest a tag last resolved to.
func (c *Client) cacheTag(r Ref) (string, error) {
	key := r
	key.Digest = ""
	b, err := boundedfile.Read(c.tagFile(key), maxTagFile)
	if err != nil {
		return "", fmt.Errorf("oci: cache: %w", err)
	}
	name, d, ok := strings.Cut(strings.TrimSpace(string(b)), " ")
	if !ok || name != key.String() {
		return "", fmt.Errorf("oci: cache: tag file for %s holds %q", key, b)
	}
	if _, err := digest.Parse(d); err != nil {
		return "", fmt.Errorf("oci: cache: tag %s: %w", key, err)
	}
	return d, nil
}

func (c *Client) tagFile(r Ref) string {
	sum := sha256.Sum256([]byte(r.String()))
	return filepath.Join(c.CacheDir, "tags", hex.EncodeToString(sum[:]))
}

// writeAtomic writes data to path through a temporary file, synced, renamed
// over it (the directory created if needed).
func writeAtomic(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("oci: cache: %w", err)
	}
	if err := replaceFile(path, data); err != nil {
		return fmt.Errorf("oci: cache: %w", err)
	}
	return nil
}
