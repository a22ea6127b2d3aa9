// Package layering holds a test that keeps psp's package graph honest: data
// flows nic -> dispatcher -> worker -> nic, the policy stays pure, the CLI
// stays a thin layer over the harness, and only the packages meant to touch
// wazero or cgo do. Every rule, and every exception to a rule, is a row of
// the tables below.
package layering

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/persephone-go/psp"

// rule lists what the packages under Dir (relative to the module root) may
// import from the module: May for every file, TestsMay in addition for
// _test.go files. An entry "p" allows package p only, "p/..." p and every
// package below it. StdlibOnly forbids imports from outside the module other
// than the standard library (tests included). TopOnly applies the rule to the
// package in Dir alone, not to those below it.
type rule struct {
	Dir        string
	TopOnly    bool
	StdlibOnly bool
	May        []string
	TestsMay   []string
	Why        string
}

var rules = []rule{
	{Dir: "wire", StdlibOnly: true, May: []string{"wire"},
		Why: "the wire format is a leaf"},
	{Dir: "app", TopOnly: true, StdlibOnly: true, May: []string{"app", "nic"},
		Why: "the application contract is a leaf over the dataplane's buffer"},
	{Dir: "darc", StdlibOnly: true, May: []string{"darc", "app"},
		Why: "the policy is pure and shared by the runtime and the simulator; its request types are the application contract's"},
	{Dir: "internal/boundedfile", StdlibOnly: true, May: []string{"internal/boundedfile"},
		Why: "reading the files users name with a bound is a leaf every layer may use"},
	{Dir: "workload", May: []string{"workload", "wire", "internal/boundedfile"},
		Why: "workloads are plain data shared by the simulator and the load generator"},
	{Dir: "report", May: []string{"report", "internal/boundedfile"},
		Why: "reports are plain data and plots"},
	{Dir: "nic", May: []string{"nic/...", "wire", "internal/..."}, TestsMay: []string{"darc"},
		Why: "the dataplane sits below the dispatcher"},
	{Dir: "wasmclass", May: []string{"wasmclass/...", "app", "wire", "internal/..."},
		Why: "classifiers know nothing of the runtime"},
	{Dir: "dispatcher", May: []string{"dispatcher", "app", "darc", "nic", "wire", "internal/..."},
		TestsMay: []string{"nic/memnic", "wasmclass"},
		Why:      "the dispatcher knows applications, classifiers and dataplanes only through interfaces"},
	{Dir: "app", May: []string{"app/...", "nic", "wire", "internal/..."}, TestsMay: []string{"nic/tcp", "dispatcher", "darc"},
		Why: "applications know the contract in app, not the scheduler; they are below the server (their tests serve a stream protocol through the TCP dataplane and a dispatcher)"},
	{Dir: "sim", May: []string{"sim", "darc", "workload", "report", "internal/..."},
		Why: "the simulator drives the pure policy only"},
	{Dir: "loadgen", May: []string{"loadgen", "workload", "report", "wire", "internal/..."}, TestsMay: []string{"app/memcached/memcachedtest"},
		Why: "the load generator is a client: it knows the wire, not the server (its tests start memcached itself)"},
	{Dir: "oci", May: []string{"oci", "internal/boundedfile"}, TestsMay: []string{"examples/classifiers", "internal/..."},
		Why: "the registry client knows OCI and Wasm images, nothing of psp's runtime"},
	{Dir: "server", May: []string{"server", "dispatcher", "darc", "nic/...", "app/...", "wasmclass", "wire", "oci", "internal/..."},
		Why: "the server wires the runtime together"},
	{Dir: "admin", May: []string{"admin", "server", "wasmclass", "internal/..."},
		Why: "the admin API's client speaks to servers from outside, in the server's documents"},
	{Dir: "harness", May: []string{"harness", "admin", "server", "loadgen", "sim", "report", "workload", "darc", "wire", "examples/classifiers", "internal/..."},
		Why: "experiments drive servers from outside, through their public API"},
	{Dir: "fleet", May: []string{"fleet", "admin", "server"}, TestsMay: []string{"nic/memnic", "wire", "wasmclass"},
		Why: "rollouts drive servers from outside, through their admin API"},
	{Dir: "cmd", May: []string{"harness", "admin", "server", "wasmclass", "loadgen", "sim", "report", "workload", "darc", "wire", "fleet", "oci", "internal/..."},
		Why: "the CLI is flags and printing over the harness and the server"},
}

// importRule limits one import (a package and those below it) to files
// under OnlyIn; an empty OnlyIn forbids it everywhere.
type importRule struct {
	Import string
	OnlyIn []string
	Why    string
}

var importRules = []importRule{
	{Import: "github.com/tetratelabs/wazero", OnlyIn: []string{"wasmclass", "examples/classifiers", "sdk"},
		Why: "the Wasm runtime stays inside the classifier host"},
	{Import: "C", OnlyIn: []string{"nic/dpdk"},
		Why: "only the DPDK binding uses cgo"},
	{Import: "encoding/json",
		Why: "one JSON library: github.com/goccy/go-json"},
	{Import: "gopkg.in/yaml.v3",
		Why: "archived: use go.yaml.in/yaml/v3"},
}

func TestLayering(t *testing.T) {
	root, files := goFiles(t)
	fset := token.NewFileSet()
	for _, rel := range files {
		f, err := parser.ParseFile(fset, filepath.Join(root, rel), nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			for _, problem := range checkImport(rel, p) {
				t.Error(problem)
			}
		}
	}
}

// goFiles returns the module's root and its Go files, relative to the
// root with slashes (testdata, node_modules and hidden directories left
// out).
func goFiles(t *testing.T) (root string, files []string) {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if name == "node_modules" || name == "testdata" || (strings.HasPrefix(name, ".") && path != root) {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(path, ".go") {
			rel, _ := filepath.Rel(root, path)
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 10 {
		t.Fatalf("found only %d files: is the module root right (%s)?", len(files), root)
	}
	return root, files
}

// checkImport returns the rules file breaks by importing imp.
func checkImport(file, imp string) []string {
	var problems []string
	for _, r := range importRules {
		if imp != r.Import && !strings.HasPrefix(imp, r.Import+"/") {
			continue
		}
		ok := false
		for _, d := range r.OnlyIn {
			ok = ok || under(file, d)
		}
		if !ok {
			problems = append(problems, file+" imports "+strconv.Quote(imp)+": "+r.Why)
		}
	}
	isTest := strings.HasSuffix(file, "_test.go")
	for _, r := range rules {
		if !under(file, r.Dir) || (r.TopOnly && path.Dir(file) != r.Dir) {
			continue
		}
		if local, inModule := strings.CutPrefix(imp, module+"/"); inModule {
			allowed := matchesAny(local, r.May) || (isTest && matchesAny(local, r.TestsMay))
			if !allowed {
				problems = append(problems, file+" imports "+strconv.Quote(imp)+": "+r.Why)
			}
		} else if r.StdlibOnly && !isStdlib(imp) {
			problems = append(problems, file+" imports "+strconv.Quote(imp)+": "+r.Dir+" uses the standard library only ("+r.Why+")")
		}
	}
	return problems
}

// matchesAny reports whether the module package pkg matches a pattern: "p"
// for p itself, "p/..." for p and below.
func matchesAny(pkg string, patterns []string) bool {
	for _, p := range patterns {
		if tree, ok := strings.CutSuffix(p, "/..."); ok {
			if pkg == tree || strings.HasPrefix(pkg, tree+"/") {
				return true
			}
		} else if pkg == p {
			return true
		}
	}
	return false
}

func under(file, dir string) bool { return file == dir || strings.HasPrefix(file, dir+"/") }

func isStdlib(imp string) bool {
	first, _, _ := strings.Cut(imp, "/")
	return !strings.Contains(first, ".")
}

// TestRulesCatch checks that the tables reject what they should.
func TestRulesCatch(t *testing.T) {
	for _, c := range []struct {
		file, imp string
		bad       bool
	}{
		{"darc/darc.go", "github.com/prometheus/client_golang/prometheus", true},
		{"darc/darc_test.go", "github.com/HdrHistogram/hdrhistogram-go", true},
		{"darc/darc.go", "sort", false},
		{"dispatcher/dispatcher.go", module + "/nic/udp", true},
		{"dispatcher/dispatcher.go", module + "/nic", false},
		{"dispatcher/bench_test.go", module + "/nic/memnic", false},
		{"dispatcher/dispatcher.go", module + "/nic/memnic", true},
		{"cmd/psp/serve.go", module + "/dispatcher", true},
		{"cmd/psp/sweep.go", module + "/harness", false},
		{"server/admin.go", "encoding/json", true},
		{"server/status.go", "gopkg.in/yaml.v3", true},
		{"server/wasm.go", "github.com/tetratelabs/wazero", true},
		{"wasmclass/host.go", "github.com/tetratelabs/wazero/api", false},
		{"sim/sim.go", module + "/server", true},
		{"app/app.go", module + "/wire", true},
		{"app/memcached/server.go", module + "/wire", false},
		{"app/spin/spin.go", module + "/darc", true},
		{"wasmclass/host.go", module + "/darc", true},
		{"darc/api.go", module + "/app", false},
	} {
		if got := len(checkImport(c.file, c.imp)) > 0; got != c.bad {
			t.Errorf("%s importing %s: flagged %v, want %v", c.file, c.imp, got, c.bad)
		}
	}
}

// TestModuleRoot guards the walk above against running from a copy.
func TestModuleRoot(t *testing.T) {
	if _, err := os.Stat("../../go.mod"); err != nil {
		t.Fatalf("go.mod not found two levels up: %v", err)
	}
}
