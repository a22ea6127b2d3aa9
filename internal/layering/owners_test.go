package layering

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// moduleFile is one parsed Go file of the module.
type moduleFile struct {
	rel  string // relative to the module root, with slashes
	test bool
	ast  *ast.File
}

// parseModule parses every Go file of the module.
func parseModule(t *testing.T) []moduleFile {
	t.Helper()
	root, files := goFiles(t)
	fset := token.NewFileSet()
	var out []moduleFile
	for _, rel := range files {
		f, err := parser.ParseFile(fset, filepath.Join(root, rel), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, moduleFile{rel: rel, test: strings.HasSuffix(rel, "_test.go"), ast: f})
	}
	return out
}

// moduleImports returns the module packages (relative paths) f imports.
func moduleImports(f moduleFile) []string {
	var pkgs []string
	for _, imp := range f.ast.Imports {
		p, _ := strconv.Unquote(imp.Path.Value)
		if local, ok := strings.CutPrefix(p, module+"/"); ok {
			pkgs = append(pkgs, local)
		}
	}
	return pkgs
}

// TestOneOwnerPerConcept checks, on the source, that each concept has one
// owner: the experiments harness is the CLI's alone, the application
// contract (package app) keeps applications and classifiers off the
// scheduler, routing by port is the dispatcher's, and the admin API's
// errors are defined once.
func TestOneOwnerPerConcept(t *testing.T) {
	files := parseModule(t)

	t.Run("harness is imported by the CLI alone", func(t *testing.T) {
		for _, f := range files {
			if !slices.Contains(moduleImports(f), "harness") {
				continue
			}
			// The end-to-end suite's tests drive the harness itself.
			if !under(f.rel, "cmd/psp") && !under(f.rel, "harness") && !(under(f.rel, "tests") && f.test) {
				t.Errorf("%s imports harness: only cmd/psp does (the admin API's client is package admin)", f.rel)
			}
		}
	})

	// As go list's Imports: the packages, not their tests (a test may
	// serve an application through a dispatcher; see the layering rules).
	t.Run("applications and wasmclass reach no scheduler package", func(t *testing.T) {
		deps := map[string][]string{} // package -> module packages its non-test files import
		for _, f := range files {
			if !f.test {
				dir := path.Dir(f.rel)
				deps[dir] = append(deps[dir], moduleImports(f)...)
			}
		}
		scheduler := []string{"darc", "dispatcher"}
		for pkg := range deps {
			if !under(pkg, "app") && !under(pkg, "wasmclass") {
				continue
			}
			seen := map[string]string{} // package -> the package that imports it
			todo := []string{pkg}
			for len(todo) > 0 {
				p := todo[0]
				todo = todo[1:]
				for _, d := range deps[p] {
					if _, ok := seen[d]; !ok && d != pkg {
						seen[d] = p
						todo = append(todo, d)
					}
				}
			}
			for _, s := range scheduler {
				if by, ok := seen[s]; ok {
					t.Errorf("%s reaches %s (imported by %s): applications and classifiers know the contract in app only", pkg, s, by)
				}
			}
		}
	})

	t.Run("wasmclass does no routing by port", func(t *testing.T) {
		checked := false
		for _, f := range files {
			if f.test || !under(f.rel, "wasmclass") {
				continue
			}
			ast.Inspect(f.ast, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.Ident:
					if l := strings.ToLower(n.Name); l == "port" || l == "ports" || strings.Contains(l, "dstport") || strings.Contains(l, "byport") {
						t.Errorf("%s: identifier %s: wasmclass classifies for one module; ports are the dispatcher's", f.rel, n.Name)
					}
				case *ast.TypeSpec:
					if n.Name.Name == "HostSpec" {
						for _, fl := range n.Type.(*ast.StructType).Fields.List {
							for _, name := range fl.Names {
								if name.Name == "Tenants" {
									t.Errorf("%s: HostSpec.Tenants: a Host classifies for one module", f.rel)
								}
							}
						}
					}
				case *ast.FuncDecl:
					if n.Name.Name == "ClassifyBatch" && n.Recv != nil {
						checked = true
						if params := n.Type.Params.NumFields(); params != 2 {
							t.Errorf("%s: ClassifyBatch takes %d parameters, want (payloads, out)", f.rel, params)
						}
					}
				}
				return true
			})
		}
		if !checked {
			t.Error("no ClassifyBatch method found in wasmclass")
		}
	})

	t.Run("one definition of each admin error", func(t *testing.T) {
		defined := map[string][]string{}
		for _, f := range files {
			if f.test {
				continue
			}
			for _, d := range f.ast.Decls {
				g, ok := d.(*ast.GenDecl)
				if !ok || g.Tok != token.VAR {
					continue
				}
				for _, s := range g.Specs {
					for _, name := range s.(*ast.ValueSpec).Names {
						defined[name.Name] = append(defined[name.Name], f.rel)
					}
				}
			}
		}
		for _, name := range []string{"ErrConflict", "ErrUnknownTenant", "ErrNoPrevious"} {
			if where := defined[name]; len(where) != 1 {
				t.Errorf("%s is defined %d times (%s), want once", name, len(where), strings.Join(where, ", "))
			}
		}
	})
}
