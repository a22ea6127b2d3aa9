// Package oci publishes Wasm classifiers to an OCI registry and pulls them
// back, pinned by digest, through a cache kept by digest on disk.
//
// A classifier is published in the Wasm image format Istio and Envoy read
// (the "oci" variant): a manifest whose config has the media type
// ConfigMediaType and whose one layer, of LayerMediaType, is the module
// itself. Pull also accepts the "compat" variant: an image of one layer, a
// tar archive (gzip or not) holding plugin.wasm.
//
// References are written oci://HOST[:PORT]/REPO[:TAG][@sha256:HEX]. A
// reference with a digest is verified against the bytes fetched (the
// manifest's digest, then the layer's); one with only a tag is resolved
// once, and the Module pulled carries the pinned reference. Registries on
// loopback are spoken to over plain HTTP; any other host over HTTPS unless
// Client.PlainHTTP says otherwise. Credentials come from the Docker
// configuration file ($DOCKER_CONFIG/config.json or ~/.docker/config.json)
// and its credential helpers, as other OCI tools read them.
//
// # Cache
//
// With Client.CacheDir set, every module pulled is kept there under its
// manifest's digest (the manifest and the layer, each verified again when
// read), and each tag's last resolution is remembered, so a pinned
// reference is served without the registry and a tag falls back to its
// last digest when the registry cannot be reached (Module.FromCache says
// so, and Module.Warning why).
//
// A Client is safe for concurrent use; writes to the cache are atomic
// renames.
package oci
