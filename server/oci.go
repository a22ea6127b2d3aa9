package server

import (
	"cmp"
	"context"
	"encoding/hex"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"sync"

	"github.com/persephone-go/psp/oci"
	"github.com/persephone-go/psp/wasmclass"
)

// references maps each tenant's modules (by SHA-256) to the registry
// reference, pinned by digest, each came from.
type references struct {
	mu sync.Mutex
	m  map[string][]moduleRef // by tenant, latest first
}

// moduleRef is the registry reference a tenant's module (by SHA-256)
// came from.
type moduleRef struct{ sha, ref string }

// maxRefsPerTenant bounds the modules a tenant's references are kept for
// (its latest ones, which a rollback may return to).
const maxRefsPerTenant = 8

// set records that tenant's module sha came from ref. A reference given
// with an upload is the uploader's word: it is kept for that tenant alone,
// so no tenant can label what another one runs.
func (r *references) set(tenant, sha, ref string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		r.m = map[string][]moduleRef{}
	}
	refs := slices.DeleteFunc(r.m[tenant], func(m moduleRef) bool { return m.sha == sha })
	refs = slices.Insert(refs, 0, moduleRef{sha: sha, ref: ref})
	r.m[tenant] = refs[:min(len(refs), maxRefsPerTenant)]
}

// get returns the reference tenant's module sha came from, "" when none
// was given.
func (r *references) get(tenant, sha string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, m := range r.m[tenant] {
		if m.sha == sha {
			return m.ref
		}
	}
	return ""
}

// forget drops a removed tenant's references.
func (r *references) forget(tenant string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.m, tenant)
}

// ociClient returns the registry client a config asks for.
func ociClient(c OCI) *oci.Client {
	return &oci.Client{PlainHTTP: c.PlainHTTP, DockerConfig: c.DockerConfig, CacheDir: oci.CacheDir(c.CacheDir), MaxSize: maxWasmFileBytes}
}

// pullClassifiers pulls the classifiers cfg names by registry reference
// and returns cfg with their modules in place (Classifier becomes the
// reference pinned by digest). Each pull is bounded by the size limit of
// the modules its tenant accepts. A module neither the registry nor the
// cache can give leaves its tenant pending (see startPending); only a
// malformed reference is an error.
func (s *Server) pullClassifiers(ctx context.Context, cfg Config) (Config, error) {
	base := cfg.ClassifierOptions.wasm(s.classifierOpts)
	// One bound for every pull: tenants on a registry that hangs must not
	// add up their waits before the server starts.
	startCtx, cancel := context.WithTimeout(ctx, cmp.Or(cfg.OCI.StartTimeout, startPullTimeout))
	defer cancel()
	pull := func(tenant, what, ref, fail string, opts wasmclass.Options) (wasm []byte, pinned string, err error) {
		r, err := oci.ParseRef(ref)
		if err != nil {
			return nil, "", fmt.Errorf("%w: %s: %w", ErrConfig, what, err)
		}
		client := ociClient(cfg.OCI)
		client.MaxSize = int64(cmp.Or(opts.MaxModuleSize, wasmclass.DefaultMaxModuleSize))
		m, err := client.Pull(startCtx, r)
		if err != nil {
			if ctx.Err() != nil {
				return nil, "", fmt.Errorf("server: %s: %w", what, err)
			}
			return s.startPending(tenant, what, fail, r, client, err), "", nil
		}
		src := "registry"
		if m.FromCache {
			src = "cache " + client.CacheDir
		}
		fmt.Fprintf(s.log, "psp: %s: pulled %s (%d bytes, sha256 %s, %s variant) from the %s\n", what, m.Ref, len(m.Wasm), m.SHA256, m.Variant, src)
		if m.Warning != "" {
			fmt.Fprintf(s.log, "psp: %s: warning: %s\n", what, m.Warning)
		}
		s.refs.set(tenant, m.SHA256, m.Ref.String())
		return m.Wasm, m.Ref.String(), nil
	}
	if oci.IsRef(cfg.Classifier) && len(cfg.classifierWasm) == 0 {
		wasm, pinned, err := pull(DefaultTenant, "classifier", cfg.Classifier, cfg.Fail, base)
		if err != nil {
			return cfg, err
		}
		cfg.classifierWasm = wasm
		if pinned != "" {
			cfg.Classifier = pinned
		} else {
			cfg.classifierMaxTypes = PendingMaxTypes
		}
	}
	cfg.Tenants = slices.Clone(cfg.Tenants)
	for i, t := range cfg.Tenants {
		if len(t.Wasm) > 0 || !oci.IsRef(t.Classifier) {
			continue
		}
		wasm, pinned, err := pull(t.Name, fmt.Sprintf("tenant %q", t.Name), t.Classifier, t.Fail, t.ClassifierOptions.wasm(base))
		if err != nil {
			return cfg, err
		}
		cfg.Tenants[i].Wasm = wasm
		if pinned != "" {
			cfg.Tenants[i].Classifier = pinned
		} else if t.MaxTypes == 0 {
			cfg.Tenants[i].MaxTypes = PendingMaxTypes
		}
	}
	return cfg, nil
}

// failName is a failure policy as status shows it.
func failName(s string) string {
	p, _ := failPolicy(s) // validated
	return p.String()
}

// swapParams are a swap's or a rollback's query parameters:
// expect_sha256 and expect_version (compare-and-swap), reference (the
// registry reference, pinned by digest, the uploaded module came from).
func swapParams(q url.Values) (wasmclass.Expect, string, error) {
	var exp wasmclass.Expect
	if v := q.Get("expect_sha256"); v != "" {
		sum, err := ParseTokenDigest(v)
		if err != nil {
			return exp, "", fmt.Errorf("expect_sha256 %q: want 64 hex digits", v)
		}
		exp.SHA256 = hex.EncodeToString(sum[:])
	}
	if v := q.Get("expect_version"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return exp, "", fmt.Errorf("expect_version %q: want a version number", v)
		}
		exp.Version = n
	}
	ref := q.Get("reference")
	if ref != "" {
		r, err := oci.ParseRef(ref)
		if err != nil || r.Digest == "" {
			return exp, "", fmt.Errorf("reference %q: want oci://HOST/REPO[:TAG]@sha256:HEX", ref)
		}
	}
	return exp, ref, nil
}
