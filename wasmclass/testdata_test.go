package wasmclass

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/persephone-go/psp/internal/testenv"
)

// TestFixturesUpToDate rebuilds every testdata/*.wat with wat2wasm and
// checks that the committed .wasm matches.
func TestFixturesUpToDate(t *testing.T) {
	wat2wasm := testenv.RequireTool(t, "wat2wasm")
	sources, err := filepath.Glob("testdata/*.wat")
	if err != nil || len(sources) == 0 {
		t.Fatalf("no sources: %v", err)
	}
	dir := t.TempDir()
	for _, src := range sources {
		name := strings.TrimSuffix(filepath.Base(src), ".wat")
		out := filepath.Join(dir, name+".wasm")
		if msg, err := exec.Command(wat2wasm, src, "-o", out).CombinedOutput(); err != nil {
			t.Errorf("wat2wasm %s: %v\n%s", src, err, msg)
			continue
		}
		built, _ := os.ReadFile(out)
		committed, err := os.ReadFile(strings.TrimSuffix(src, ".wat") + ".wasm")
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if !bytes.Equal(built, committed) {
			t.Errorf("testdata/%s.wasm is stale: run `wat2wasm %s -o testdata/%s.wasm`", name, src, name)
		}
	}
}
