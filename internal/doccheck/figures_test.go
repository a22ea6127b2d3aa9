package doccheck

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// repoRoot is the repository's root, from this package's directory.
const repoRoot = "../.."

// figure matches a time figure: a number (or a range of two) and a unit.
var figure = regexp.MustCompile(`(?i)(?:^|[^\w.])(\d[\d,]*(?:\.\d+)?(?:\s*(?:-|to)\s*\d[\d,]*(?:\.\d+)?)?)\s?(µs|us|ns|ms|s)\b`)

// boundWords mark the figure after them, in the same clause, as a bound or
// a definition: what the code allows or is set to, not what a run measured.
var boundWords = []string{
	"default", "at most", "at least", "up to", "no more than", "no less than",
	"within", "under", "over", "longer than", "shorter than", "more than", "less than",
	"past", "beyond", "exceeds", "bound", "limit", "cap", "floor", "ceiling", "budget",
	"max", "min", "every", "after", "timeout", "deadline", "interval", "window", "quantum",
	"defined", "set to", "sleeps", "nominal", "the paper's", "<", ">", "=", "≤", "≥",
}

// shareAfter matches a type's share right after its service time, as a
// workload's definition gives them ("SHORT 1us 50%").
var shareAfter = regexp.MustCompile(`^\s*\d+(?:\.\d+)?%`)

// yamlKey matches a setting's key just before its value on a code line
// ("\tmean: 2us").
var yamlKey = regexp.MustCompile(`^\t.*[a-z0-9_]+:\s*$`)

// definitionBefore matches the end of a clause that names what the figure
// in parentheses defines: a Go identifier or a flag ("DeadlineFloor (",
// "--spin (").
var definitionBefore = regexp.MustCompile("(?:[A-Z][A-Za-z0-9]*|--[a-z-]+|`[^`]+`)\\s*\\($")

// flagValue matches a flag given a value just before the figure
// ("--duration 1s", "-benchtime 100ms").
var flagValue = regexp.MustCompile(`(?:^|\s)--?[a-z][a-z-]*[ =]$`)

// clauseStart returns where the clause holding position i of text starts:
// after the last separator before it (. ; : at a sentence's or clause's
// end, a paragraph, a list item or a code line).
func clauseStart(text string, i int) int {
	for j := i - 1; j >= 0; j-- {
		switch text[j] {
		case ';':
			return j + 1
		case '\n':
			// a wrapped line continues the clause; a code line, a list item
			// or a paragraph starts one
			if j+1 < len(text) && strings.ContainsRune("\t -\n", rune(text[j+1])) || j > 0 && text[j-1] == '\n' {
				return j + 1
			}
		case '.', ':':
			// a sentence's end, not a decimal point or a clock time
			if j+1 < len(text) && text[j+1] == ' ' {
				return j + 1
			}
		}
	}
	return 0
}

// unmarkedFigures returns the time figures of text that no bound word or
// definition marks.
func unmarkedFigures(text string) []string {
	var bad []string
	for _, m := range figure.FindAllStringSubmatchIndex(text, -1) {
		start := m[2]
		before := text[clauseStart(text, start):start]
		lower := strings.ToLower(before)
		marked := false
		for _, w := range boundWords {
			if strings.Contains(lower, w) {
				marked = true
				break
			}
		}
		lineStart := strings.LastIndexByte(text[:start], '\n') + 1
		whole := text[lineStart:start]
		// a setting or command in inline code, a quoted example, a key's value
		quoted := strings.Count(whole, "`")%2 == 1 || strings.Count(whole, `"`)%2 == 1 || yamlKey.MatchString(whole)
		if definitionBefore.MatchString(strings.TrimRight(text[:start], " ")) || flagValue.MatchString(whole) || quoted ||
			shareAfter.MatchString(text[m[1]:]) {
			marked = true
		}
		if !marked {
			end := min(len(text), m[1]+30)
			bad = append(bad, strings.TrimSpace(text[max(lineStart, start-50):end]))
		}
	}
	return bad
}

// packageDocs returns, per file, the text of its package documentation:
// every comment of a doc.go file and the package comment of any other
// non-test Go file.
func packageDocs(t *testing.T) map[string]string {
	t.Helper()
	docs := map[string]string{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(repoRoot, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "node_modules", "testdata", "out":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments|parser.PackageClauseOnly)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(repoRoot, path)
		var groups []*ast.CommentGroup
		if filepath.Base(path) == "doc.go" {
			groups = f.Comments
		} else if f.Doc != nil {
			groups = []*ast.CommentGroup{f.Doc}
		}
		var b strings.Builder
		for _, g := range groups {
			b.WriteString(g.Text())
			b.WriteString("\n")
		}
		if b.Len() > 0 {
			docs[rel] = b.String()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) < 20 {
		t.Fatalf("found %d package docs, want the tree's: is the walk broken?", len(docs))
	}
	return docs
}

// TestPackageDocsHaveNoMeasuredFigures fails on a time figure in a package
// doc that is not marked as a definition or a bound.
func TestPackageDocsHaveNoMeasuredFigures(t *testing.T) {
	for file, text := range packageDocs(t) {
		for _, f := range unmarkedFigures(text) {
			t.Errorf("%s: %q: a measured figure belongs in BENCHMARKS.md (make bench), with its benchmark; a definition or bound says so (default, at most, ...)", file, f)
		}
	}
}

// TestUnmarkedFigures checks the check on figures it must catch and
// figures it must let through.
func TestUnmarkedFigures(t *testing.T) {
	for _, tc := range []struct {
		text string
		bad  int
	}{
		{"BenchmarkStageRecord: 20 ns per request, against 87 ns with atomic adds", 2},
		{"a hand-off per burst: 100-300 µs on two shared cores", 1},
		{"the update reached the new reservation in 0.9-1.9 s for 8 seeds", 1},
		{"it waits at most 100 ms for workers still in their handler", 0},
		{"at least DeadlineFloor (200 ms); see RATIONALE.md", 0},
		{"keeps polling for --dispatcher-spin (default 20 ms)", 0},
		{"psp sim --duration 1s --slo 10", 0},
		{"Run returns within DrainTimeout plus 100 ms.", 0},
		{"cfcfs 15 ns, dfcfs 19 ns", 2},
		{"version 1.2 of the ABI, 3 types", 0},
		{"high-bimodal     SHORT 1us 50%, LONG 100us 50%", 0},
		{"\tservice: {kind: lognormal, mean: 200us, p99: 1ms}", 0},
		{"durations are Go duration strings: \"500ns\", \"1.5us\"", 0},
		{"the nominal service times (Payment 5.7µs, OrderStatus 6µs)", 0},
		{"darc 22 ns, c-FCFS 15 ns", 2},
	} {
		if got := unmarkedFigures(tc.text); len(got) != tc.bad {
			t.Errorf("%q: unmarked %q, want %d", tc.text, got, tc.bad)
		}
	}
}

// TestFiguresCheckReadsTheTree guards the walk: a doc.go it must read.
func TestFiguresCheckReadsTheTree(t *testing.T) {
	if _, err := os.Stat(filepath.Join(repoRoot, "darc", "doc.go")); err != nil {
		t.Fatal(err)
	}
	if _, ok := packageDocs(t)[filepath.Join("darc", "doc.go")]; !ok {
		t.Error("darc/doc.go not read")
	}
}
