package server

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/google/renameio/v2"

	json "github.com/goccy/go-json"

	"github.com/persephone-go/psp/internal/boundedfile"
	"github.com/persephone-go/psp/oci"
)

// The state file: a server remembers the module each tenant whose config
// names a registry reference runs (its SHA-256, the pinned reference it
// came from, and whether it is provisional), with the module's bytes
// beside it, so that a restart resumes what swaps, rollouts and
// rollbacks made of it instead of pulling its config's tag again. It
// lives in the OCI cache directory, state/LISTEN.json (one per listen
// address), unless Config.StateFile says otherwise. An entry applies only
// while the config names the same classifier it was recorded under: a
// changed config wins. A provisional module is not resumed: a restart
// before its confirmation starts from the module it replaced.

// stateVersion is the state file's format.
const stateVersion = 1

// maxStateFile bounds the state file (1,024 tenants of a few hundred
// bytes each).
const maxStateFile = 4 << 20

// stateDoc is the state file.
type stateDoc struct {
	Version int                    `json:"version"`
	Tenants map[string]stateTenant `json:"tenants"`
}

// stateTenant is one tenant's entry.
type stateTenant struct {
	// Config is the classifier the config named when this was recorded.
	Config string      `json:"config"`
	Module stateModule `json:"module"`
	// ProvisionalUntil is set while Module awaits its confirmation;
	// Previous is then the module it replaced.
	ProvisionalUntil string       `json:"provisional_until,omitempty"`
	Previous         *stateModule `json:"previous,omitempty"`
	Recorded         string       `json:"recorded"`
}

// stateModule is a module by SHA-256, with the reference it came from.
type stateModule struct {
	SHA256    string `json:"sha256"`
	Reference string `json:"reference,omitempty"`
}

// stateStore reads and writes a state file and its modules (by SHA-256,
// in modules/ beside it). Safe for concurrent use.
type stateStore struct {
	file string
	mu   sync.Mutex
}

// stateFile is where cfg's state file goes ("" for none): Config.StateFile,
// else state/LISTEN.json in the OCI cache directory, for a server with a
// cache, a listen port of its own (not 0) and a network dataplane.
func stateFile(cfg Config) string {
	switch cfg.StateFile {
	case "off":
		return ""
	case "":
	default:
		return cfg.StateFile
	}
	cache := oci.CacheDir(cfg.OCI.CacheDir)
	if cache == "" || cfg.Dataplane == DataplaneMemory || strings.HasSuffix(cfg.Listen, ":0") {
		return ""
	}
	key := strings.NewReplacer(":", "_", "/", "_", "[", "", "]", "").Replace(cfg.Listen)
	return filepath.Join(cache, "state", key+".json")
}

func (st *stateStore) modules() string { return filepath.Join(filepath.Dir(st.file), "modules") }

// load reads the state file (an empty document when there is none).
func (st *stateStore) load() (stateDoc, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	doc := stateDoc{Tenants: map[string]stateTenant{}}
	b, err := boundedfile.Read(st.file, maxStateFile)
	if errors.Is(err, os.ErrNotExist) {
		return doc, nil
	}
	if err != nil {
		return doc, fmt.Errorf("state file: %w", err)
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return stateDoc{Tenants: map[string]stateTenant{}}, fmt.Errorf("state file %s: %w", st.file, err)
	}
	if doc.Version != stateVersion {
		return stateDoc{Tenants: map[string]stateTenant{}}, fmt.Errorf("state file %s: version %d, want %d", st.file, doc.Version, stateVersion)
	}
	if doc.Tenants == nil {
		doc.Tenants = map[string]stateTenant{}
	}
	return doc, nil
}

// save writes doc (atomically: a temporary file renamed).
func (st *stateStore) save(doc stateDoc) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	doc.Version = stateVersion
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return fmt.Errorf("state file: %w", err)
	}
	return writeFileAtomic(st.file, append(b, '\n'))
}

// putModule keeps wasm by its SHA-256, unless kept already.
func (st *stateStore) putModule(wasm []byte) error {
	sum := sha256.Sum256(wasm)
	path := filepath.Join(st.modules(), hex.EncodeToString(sum[:]))
	if _, err := os.Stat(path); err == nil {
		return nil
	}
	return writeFileAtomic(path, wasm)
}

// module returns the module kept as sha, verified.
func (st *stateStore) module(sha string) ([]byte, error) {
	if len(sha) != 64 || strings.Trim(sha, "0123456789abcdef") != "" {
		return nil, fmt.Errorf("state file: module %q: not a SHA-256", sha)
	}
	b, err := boundedfile.Read(filepath.Join(st.modules(), sha), maxWasmFileBytes)
	if err != nil {
		return nil, fmt.Errorf("state file: %w", err)
	}
	if sum := sha256.Sum256(b); hex.EncodeToString(sum[:]) != sha {
		return nil, fmt.Errorf("state file: module %.12s: its bytes have another SHA-256", sha)
	}
	return b, nil
}

// prune removes the kept modules no state file beside this one names.
func (st *stateStore) prune() {
	st.mu.Lock()
	defer st.mu.Unlock()
	keep := map[string]bool{}
	files, _ := filepath.Glob(filepath.Join(filepath.Dir(st.file), "*.json"))
	for _, f := range files {
		b, err := boundedfile.Read(f, maxStateFile)
		if err != nil {
			return // unreadable: keep everything
		}
		var doc stateDoc
		if json.Unmarshal(b, &doc) != nil {
			return
		}
		for _, t := range doc.Tenants {
			keep[t.Module.SHA256] = true
			if t.Previous != nil {
				keep[t.Previous.SHA256] = true
			}
		}
	}
	mods, _ := os.ReadDir(st.modules())
	for _, m := range mods {
		if !keep[m.Name()] && !strings.HasPrefix(m.Name(), ".") {
			os.Remove(filepath.Join(st.modules(), m.Name()))
		}
	}
}

// writeFileAtomic writes data to path through a temporary file, synced, renamed
// over it (the directory created if needed).
func writeFileAtomic(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("state file: %w", err)
	}
	if err := renameio.WriteFile(path, data, 0o600); err != nil {
		return fmt.Errorf("state file: %w", err)
	}
	return nil
}

// resumeState applies the state file to cfg: each tenant whose config
// names a registry reference, and whose entry was recorded under that
// same classifier, starts from the module the entry names (the one it
// replaced, if that one was still provisional), from the bytes kept
// beside the state file or else its pinned reference. It returns cfg so
// changed and remembers, per tenant, what the config named.
func (s *Server) resumeState(cfg Config) Config {
	if s.state == nil {
		return cfg
	}
	doc, err := s.state.load()
	if err != nil {
		// The tenants are still recorded: the next save writes the file
		// anew (an empty doc resumes nothing).
		fmt.Fprintf(s.log, "psp: warning: %v: starting from the config (the state file is written anew)\n", err)
	}
	resume := func(tenant, classifier string) (wasm []byte, ref string, ok bool) {
		if !oci.IsRef(classifier) {
			return nil, "", false
		}
		s.configured[tenant] = classifier
		e, found := doc.Tenants[tenant]
		if !found || e.Config != classifier {
			return nil, "", false
		}
		m, why := e.Module, "the module it ran"
		if e.ProvisionalUntil != "" {
			if e.Previous == nil {
				return nil, "", false
			}
			m, why = *e.Previous, fmt.Sprintf("the module it ran before a swap left unconfirmed (%.12s)", e.Module.SHA256)
		}
		ref = m.Reference
		wasm, err := s.state.module(m.SHA256)
		switch {
		case err == nil:
		case m.Reference != "":
			// Pulled, pinned, by pullClassifiers.
		default:
			fmt.Fprintf(s.log, "psp: warning: tenant %s: %v: starting from the config\n", tenant, err)
			return nil, "", false
		}
		fmt.Fprintf(s.log, "psp: tenant %s: from the state file %s: %s, sha256 %s%s, recorded %s (the config names %s)\n",
			tenant, s.state.file, why, m.SHA256, refSuffix(m.Reference), e.Recorded, classifier)
		// A module that came from the reference the config names (a
		// rollback to it, or no change at all) is not a difference.
		s.resumed[tenant] = !namedBy(m.Reference, classifier)
		if wasm != nil {
			s.refs.set(tenant, m.SHA256, m.Reference)
		}
		return wasm, ref, true
	}
	// The classifier becomes the module's pinned reference: pulled when
	// its bytes are not kept, shown in the startup line either way.
	if wasm, ref, ok := resume(DefaultTenant, cfg.Classifier); ok {
		cfg.classifierWasm = wasm
		if ref != "" {
			cfg.Classifier = ref
		}
	}
	for i, t := range cfg.Tenants {
		if wasm, ref, ok := resume(t.Name, t.Classifier); ok {
			cfg.Tenants[i].Wasm = wasm
			if ref != "" {
				cfg.Tenants[i].Classifier = ref
			}
		}
	}
	return cfg
}

func refSuffix(ref string) string {
	if ref == "" {
		return ""
	}
	return " from " + ref
}

// keepModule keeps wasm beside the state file, for a tenant whose config
// names a registry reference (a restart may resume it).
func (s *Server) keepModule(tenant string, wasm []byte) {
	if s.state == nil || len(wasm) == 0 {
		return
	}
	if _, ok := s.configured[tenant]; !ok {
		return
	}
	if err := s.state.putModule(wasm); err != nil {
		fmt.Fprintf(s.log, "psp: warning: tenant %s: %v\n", tenant, err)
	}
}

// namedBy reports whether a module pinned as reference is the one
// classifier, a registry reference, names: the same digest when
// classifier pins one, else the same repository and tag (as this server
// resolved it).
func namedBy(reference, classifier string) bool {
	m, err := oci.ParseRef(reference)
	if err != nil {
		return false
	}
	c, err := oci.ParseRef(classifier)
	if err != nil || m.Host != c.Host || m.Repo != c.Repo {
		return false
	}
	if c.Digest != "" {
		return m.Digest == c.Digest
	}
	return c.Tag != "" && m.Tag == c.Tag
}

// startedFrom records what each tenant whose config names a registry
// reference runs once the server has loaded them, keeps those modules
// and saves the state.
func (s *Server) startedFrom(cfg Config) {
	if s.state == nil || len(s.configured) == 0 {
		return
	}
	wasm := map[string][]byte{DefaultTenant: cfg.classifierWasm}
	for _, t := range cfg.Tenants {
		wasm[t.Name] = t.Wasm
	}
	for _, ti := range s.Status().Tenants {
		if _, ok := s.configured[ti.Name]; ok && ti.Pending == "" {
			s.setStartSHA(ti.Name, ti.SHA256)
			s.keepModule(ti.Name, wasm[ti.Name])
		}
	}
	s.saveState()
}

// configuredIfChanged is the classifier the config names for tenant when
// the tenant does not run the module the config gave it at start (it was
// resumed from the state file, or swapped since), else "".
func (s *Server) configuredIfChanged(tenant, sha string) string {
	c, ok := s.configured[tenant]
	s.startMu.Lock()
	start := s.startSHA[tenant]
	s.startMu.Unlock()
	if !ok || (!s.resumed[tenant] && start == sha) {
		return ""
	}
	return c
}

// setStartSHA records the module tenant started with, from its config.
func (s *Server) setStartSHA(tenant, sha string) {
	s.startMu.Lock()
	defer s.startMu.Unlock()
	s.startSHA[tenant] = sha
}

// saveState records the modules the tenants whose config names a
// registry reference run, and keeps their bytes beside the state file.
// Failures are logged: the server runs on, without a state to resume.
func (s *Server) saveState() {
	if s.state == nil || len(s.configured) == 0 {
		return
	}
	doc := stateDoc{Tenants: map[string]stateTenant{}}
	now := time.Now().UTC().Format(time.RFC3339)
	var errs []error
	for _, ti := range s.Status().Tenants {
		classifier, ok := s.configured[ti.Name]
		if !ok || ti.Removed || ti.Native || ti.SHA256 == "" || ti.Pending != "" {
			continue
		}
		e := stateTenant{Config: classifier, Module: stateModule{SHA256: ti.SHA256, Reference: ti.Reference}, Recorded: now}
		if ti.PreviousSHA256 != "" {
			// Kept (with its bytes) for a rollback to it; resumed only
			// while the module is provisional.
			e.Previous = &stateModule{SHA256: ti.PreviousSHA256, Reference: s.refs.get(ti.Name, ti.PreviousSHA256)}
		}
		if p := ti.Provisional; p != nil && e.Previous != nil {
			e.ProvisionalUntil = p.Until
		}
		doc.Tenants[ti.Name] = e
	}
	errs = append(errs, s.state.save(doc))
	if err := errors.Join(errs...); err != nil {
		fmt.Fprintf(s.log, "psp: warning: %v (a restart starts from the config)\n", err)
		return
	}
	s.state.prune()
}
