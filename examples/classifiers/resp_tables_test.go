package classifiers_test

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"
)

// The C and Rust RESP classifiers carry app/redis's type table as source
// (their command list and the type names they declare), between marker
// lines. TestRESPTablesFollowNative checks that each region is the one
// rendered from app/redis.TypeNames; with PSP_UPDATE_TABLES=1 it rewrites
// the regions instead (then rebuild the modules: make classifiers-c
// classifiers-rust).

const updateTablesEnv = "PSP_UPDATE_TABLES"

// tableRegion is one generated region of a source file.
type tableRegion struct {
	file, name string
	render     func(commands, names []string) string
}

var respTableRegions = []tableRegion{
	{"c/resp.c", "commands", func(commands, _ []string) string {
		return "static const char *const COMMANDS[] = {\n" + wrapList(quoteAll(commands, `"`, `"`), "\t") + "};\n"
	}},
	{"c/resp.c", "names", func(_, names []string) string {
		return "#define NAMES \\\n" + wrapString(names, "\t\"", "\t\"", "\" \\", "\"")
	}},
	{"rust/resp.rs", "commands", func(commands, _ []string) string {
		return fmt.Sprintf("static COMMANDS: [&[u8]; NCMDS] = [\n%s];\n\nconst NCMDS: usize = %d;\n",
			wrapList(quoteAll(commands, `b"`, `"`), "    "), len(commands))
	}},
	{"rust/resp.rs", "names", func(_, names []string) string {
		return wrapString(names, "    \"", "    ", "\\", "\"")
	}},
}

func TestRESPTablesFollowNative(t *testing.T) {
	var commands []string
	for _, n := range respNames[1:] {
		if !strings.Contains(n, "_") { // the larger sizes follow the commands
			commands = append(commands, n)
		}
	}
	update := os.Getenv(updateTablesEnv) == "1"
	for _, r := range respTableRegions {
		src, err := os.ReadFile(r.file)
		if err != nil {
			t.Fatal(err)
		}
		begin, end := "// BEGIN GENERATED: "+r.name+"\n", "// END GENERATED: "+r.name+"\n"
		i, j := bytes.Index(src, []byte(begin)), bytes.Index(src, []byte(end))
		if i < 0 || j < i {
			t.Fatalf("%s: no region %q (%q ... %q)", r.file, r.name, begin, end)
		}
		have, want := string(src[i+len(begin):j]), r.render(commands, respNames)
		if have == want {
			continue
		}
		if !update {
			t.Errorf("%s: region %q is not app/redis's table: run %s=1 go test -run %s ./examples/classifiers/, then make classifiers-c classifiers-rust\nhave:\n%s\nwant:\n%s",
				r.file, r.name, updateTablesEnv, t.Name(), have, want)
			continue
		}
		out := append(append(append([]byte(nil), src[:i+len(begin)]...), want...), src[j:]...)
		if err := os.WriteFile(r.file, out, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: region %q rewritten", r.file, r.name)
	}
}

// tableWidth is the longest line the regions are wrapped to, indentation
// counted as four columns.
const tableWidth = 96

func quoteAll(items []string, open, close string) []string {
	out := make([]string, len(items))
	for i, s := range items {
		out[i] = open + s + close
	}
	return out
}

// wrapList writes items separated by ", " in lines of at most tableWidth
// columns, each line indented and ending with a comma.
func wrapList(items []string, indent string) string {
	var b, line strings.Builder
	flush := func() {
		if line.Len() > 0 {
			b.WriteString(indent + line.String() + ",\n")
			line.Reset()
		}
	}
	for _, it := range items {
		if line.Len() > 0 && 4+line.Len()+2+len(it)+1 > tableWidth {
			flush()
		}
		if line.Len() > 0 {
			line.WriteString(", ")
		}
		line.WriteString(it)
	}
	flush()
	return b.String()
}

// wrapString writes names as one string literal of names each followed by
// a \n escape (the last by none), cut into lines of at most tableWidth
// columns: the first line opens with first, the others with rest; a line
// the literal continues past ends with cont, the last with last.
func wrapString(names []string, first, rest, cont, last string) string {
	var b, line strings.Builder
	open := first
	for i, n := range names {
		piece := n
		if i < len(names)-1 {
			piece += `\n`
		}
		if line.Len() > 0 && 4+len(open)+line.Len()+len(piece)+len(cont) > tableWidth {
			b.WriteString(open + line.String() + cont + "\n")
			line.Reset()
			open = rest
		}
		line.WriteString(piece)
	}
	b.WriteString(open + line.String() + last + "\n")
	return b.String()
}
