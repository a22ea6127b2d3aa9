// Package layering holds a test that keeps psp's package graph honest: data
// flows nic -> dispatcher -> worker -> nic, the policy stays pure, and only
// the packages meant to touch wazero or cgo do.
package layering

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/persephone-go/psp"

// rule forbids packages under Dir (relative to the module root) from
// importing anything matching one of Forbid (a path prefix). When StdlibOnly
// is set, only standard-library imports are allowed.
type rule struct {
	Dir        string
	StdlibOnly bool
	Allow      []string // prefixes allowed in addition to the standard library
	Forbid     []string
	Why        string
}

var rules = []rule{
	{Dir: "darc", StdlibOnly: true, Why: "the policy is pure and shared by the runtime and the simulator"},
	{Dir: "wire", StdlibOnly: true, Why: "the wire format is a leaf"},
	{Dir: "nic", Forbid: []string{module + "/dispatcher", module + "/server", module + "/app", module + "/wasmclass", module + "/loadgen", module + "/sim", module + "/cmd"}, Why: "the dataplane sits below the dispatcher"},
	{Dir: "dispatcher", Forbid: []string{module + "/server", module + "/app", module + "/loadgen", module + "/sim", module + "/cmd", module + "/nic/udp", module + "/nic/dpdk"}, Why: "the dispatcher knows applications and dataplanes only through interfaces"},
	{Dir: "wasmclass", Forbid: []string{module + "/dispatcher", module + "/server", module + "/nic", module + "/app", module + "/loadgen", module + "/cmd"}, Why: "classifiers know nothing of the runtime"},
	{Dir: "app", Forbid: []string{module + "/server", module + "/loadgen", module + "/sim", module + "/cmd"}, Why: "applications are below the server"},
	{Dir: "sim", Forbid: []string{module + "/dispatcher", module + "/server", module + "/nic", module + "/wasmclass", module + "/loadgen", module + "/cmd"}, Why: "the simulator drives the pure policy only"},
	{Dir: "workload", Forbid: []string{module + "/"}, Allow: nil, Why: "workloads are plain data shared by the simulator and the load generator"},
	{Dir: "report", Forbid: []string{module + "/dispatcher", module + "/server", module + "/nic", module + "/wasmclass", module + "/cmd"}, Why: "reports are plain data and plots"},
}

// onlyIn restricts an import to files under the listed directories.
var onlyIn = map[string][]string{
	"github.com/tetratelabs/wazero": {"wasmclass", "examples/classifiers", "sdk"},
	"C":                             {"nic/dpdk"},
}

func TestLayering(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	checked := 0
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
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		checked++
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			checkImport(t, rel, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 10 {
		t.Fatalf("checked only %d files: is the module root right (%s)?", checked, root)
	}
}

func checkImport(t *testing.T, file, imp string) {
	t.Helper()
	for prefix, dirs := range onlyIn {
		if imp == prefix || strings.HasPrefix(imp, prefix+"/") {
			ok := false
			for _, d := range dirs {
				if under(file, d) {
					ok = true
				}
			}
			if !ok {
				t.Errorf("%s imports %q, allowed only under %v", file, imp, dirs)
			}
		}
	}
	for _, r := range rules {
		if !under(file, r.Dir) {
			continue
		}
		if r.StdlibOnly && !isStdlib(imp) {
			allowed := false
			for _, a := range r.Allow {
				if strings.HasPrefix(imp, a) {
					allowed = true
				}
			}
			if !allowed && !strings.HasSuffix(file, "_test.go") {
				t.Errorf("%s imports %q: %s must use the standard library only (%s)", file, imp, r.Dir, r.Why)
			}
		}
		for _, f := range r.Forbid {
			if strings.HasPrefix(imp, f) && !strings.HasPrefix(imp, module+"/"+r.Dir) && !strings.HasPrefix(imp, module+"/internal/") && !strings.HasPrefix(imp, module+"/wire") && !strings.HasPrefix(imp, module+"/darc") {
				t.Errorf("%s imports %q: %s", file, imp, r.Why)
			}
		}
	}
}

func under(file, dir string) bool { return file == dir || strings.HasPrefix(file, dir+"/") }

func isStdlib(imp string) bool {
	first, _, _ := strings.Cut(imp, "/")
	return !strings.Contains(first, ".")
}

// TestModuleRoot guards the walk above against running from a copy.
func TestModuleRoot(t *testing.T) {
	if _, err := os.Stat("../../go.mod"); err != nil {
		t.Fatalf("go.mod not found two levels up: %v", err)
	}
}
