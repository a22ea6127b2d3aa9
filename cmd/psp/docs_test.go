package main

import (
	"bufio"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

// The user documentation: every fenced psp command in these files must parse
// with the CLI's flags.
var docFiles = []string{"README.md", "docs/*.md", "sdk/README.md", "nic/dpdk/README.md"}

// repoRoot is the repository's root, from this package's directory.
const repoRoot = "../.."

// docCommand is one psp command line found in a fenced block.
type docCommand struct {
	file string
	line int
	args []string // without the program name
}

func (c docCommand) String() string {
	return c.file + ":" + strconv.Itoa(c.line) + ": psp " + strings.Join(c.args, " ")
}

// docMarkdownFiles returns the documentation files, relative to the root.
func docMarkdownFiles(t *testing.T) []string {
	t.Helper()
	var files []string
	for _, pat := range docFiles {
		m, err := filepath.Glob(filepath.Join(repoRoot, pat))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range m {
			rel, _ := filepath.Rel(repoRoot, f)
			files = append(files, rel)
		}
	}
	if len(files) < 3 {
		t.Fatalf("found %d documentation files (%v), want README.md and docs/", len(files), files)
	}
	return files
}

// docCommands extracts the psp command lines of the fenced blocks of a
// Markdown file: in shell blocks (sh, bash, shell, console), lines starting
// with psp, ./psp or go run ./cmd/psp (after an optional "$ " prompt, sudo
// and VAR=value assignments); in other blocks (a program's output) only
// lines with a "$ " prompt. Lines are joined over backslash continuations
// and cut at a comment, pipe, redirection or &.
func docCommands(t *testing.T, file string) []docCommand {
	t.Helper()
	f, err := os.Open(filepath.Join(repoRoot, file))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var cmds []docCommand
	sc := bufio.NewScanner(f)
	inFence, shell, n, start := false, false, 0, 0
	var pending string
	for sc.Scan() {
		n++
		line := sc.Text()
		if fence, ok := strings.CutPrefix(strings.TrimSpace(line), "```"); ok {
			inFence, pending = !inFence, ""
			shell = fence == "sh" || fence == "bash" || fence == "shell" || fence == "console"
			continue
		}
		if !inFence || (!shell && !strings.HasPrefix(strings.TrimSpace(line), "$ ") && pending == "") {
			continue
		}
		if pending == "" {
			start = n
		}
		if cont, ok := strings.CutSuffix(strings.TrimRight(line, " "), `\`); ok {
			pending += cont + " "
			continue
		}
		logical := pending + line
		pending = ""
		if !pspLine.MatchString(logical) {
			continue
		}
		words, err := shellWords(logical)
		if err != nil {
			t.Errorf("%s:%d: %v", file, start, err)
			continue
		}
		if args, ok := pspArgs(words); ok {
			cmds = append(cmds, docCommand{file: file, line: start, args: args})
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return cmds
}

var (
	assignment = regexp.MustCompile(`^[A-Z_][A-Z0-9_]*=`)
	pspLine    = regexp.MustCompile(`^\s*(\$\s+)?(sudo\s+)?([A-Z_][A-Z0-9_]*=\S*\s+)*(\./psp|psp|go run \./cmd/psp)(\s|$)`)
)

// pspArgs returns the arguments of a psp command line, if words is one.
func pspArgs(words []string) ([]string, bool) {
	if len(words) > 0 && words[0] == "$" {
		words = words[1:]
	}
	for len(words) > 0 && (words[0] == "sudo" || assignment.MatchString(words[0])) {
		words = words[1:]
	}
	switch {
	case len(words) > 0 && (words[0] == "psp" || words[0] == "./psp"):
		words = words[1:]
	case len(words) > 2 && words[0] == "go" && words[1] == "run" && words[2] == "./cmd/psp":
		words = words[3:]
	default:
		return nil, false
	}
	for i, w := range words {
		switch {
		case w == "|" || w == "||" || w == "&&" || w == ";" || w == "&" ||
			strings.HasPrefix(w, ">") || strings.HasPrefix(w, "2>") || strings.HasPrefix(w, "<") ||
			strings.HasPrefix(w, "#"):
			return words[:i], true
		}
	}
	return words, true
}

// shellWords splits a command line as a POSIX shell would split its words
// (quotes, backslashes and comments; no expansion). Operators are words of their own
// only where separated by blanks, as they are in the docs.
func shellWords(s string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ' || c == '\t':
			if inWord {
				words, inWord = append(words, cur.String()), false
				cur.Reset()
			}
		case c == '#' && !inWord:
			return words, nil // a comment to the end of the line
		case c == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, errors.New("unterminated single quote")
			}
			cur.WriteString(s[i+1 : i+1+j])
			i, inWord = i+1+j, true
		case c == '"':
			i++
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) {
					i++
				}
				cur.WriteByte(s[i])
			}
			if i >= len(s) {
				return nil, errors.New("unterminated double quote")
			}
			inWord = true
		case c == '\\' && i+1 < len(s):
			i++
			cur.WriteByte(s[i])
			inWord = true
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}

// parseOnly returns the psp command line with every action replaced by one
// that only records that it ran: running it parses the flags exactly as psp
// does and does nothing else.
func parseOnly(ran *bool) *app {
	a := newApp()
	a.Writer, a.ErrWriter = io.Discard, io.Discard
	var walk func([]*cli.Command)
	walk = func(cmds []*cli.Command) {
		for _, c := range cmds {
			if len(c.Subcommands) == 0 || len(c.Flags) > 0 { // a leaf, or one with an action of its own (psp rollout)
				c.Action = func(*cli.Context) error { *ran = true; return nil }
			}
			c.Before, c.After = nil, nil
			walk(c.Subcommands)
		}
	}
	walk(a.Commands)
	return a
}

// TestDocCommandsParse checks every psp command shown in README.md and docs/
// against the CLI: the subcommand exists and every flag is one of its own.
func TestDocCommandsParse(t *testing.T) {
	total := 0
	for _, file := range docMarkdownFiles(t) {
		for _, cmd := range docCommands(t, file) {
			total++
			if len(cmd.args) == 0 {
				continue
			}
			ran := false
			err := parseOnly(&ran).Run(append([]string{"psp"}, cmd.args...))
			switch {
			case err != nil:
				t.Errorf("%v:\n\t%v", cmd, err)
			case !ran && !helpOnly(cmd.args):
				t.Errorf("%v:\n\tnames no command (psp --help lists them)", cmd)
			}
		}
	}
	t.Logf("%d psp commands checked", total)
	if total < 20 {
		t.Errorf("found %d psp commands in the docs, want at least 20: is the extraction broken?", total)
	}
}

// helpOnly reports whether args only ask for help or the version.
func helpOnly(args []string) bool {
	for _, a := range args {
		switch a {
		case "--help", "-h", "help", "h", "--version", "-v":
			return true
		}
	}
	return false
}

// TestDocCommandsFlagged checks that the extraction and the parse-only app
// catch a wrong flag, a wrong command and a right one.
func TestDocCommandsFlagged(t *testing.T) {
	for _, tc := range []struct {
		line string
		ok   bool
	}{
		{"./psp serve --app memcached --workers 4 # comment", true},
		{"psp classifier push NEW.wasm --tenant kv --token-file kv.token &", true},
		{"sudo ./psp serve --eal '-l 0-1 --no-huge' --dataplane dpdk", true},
		{"./psp serve --no-such-flag 1", false},
		{"./psp classifier nosuch FILE", false},
		{"./psp tenant add x --ports 7002 --wieght 1", false},
	} {
		words, err := shellWords(tc.line)
		if err != nil {
			t.Fatal(err)
		}
		args, ok := pspArgs(words)
		if !ok {
			t.Fatalf("%q: not seen as a psp command", tc.line)
		}
		ran := false
		err = parseOnly(&ran).Run(append([]string{"psp"}, args...))
		if got := err == nil && ran; got != tc.ok {
			t.Errorf("%q: parsed %v (err %v), want %v", tc.line, got, err, tc.ok)
		}
	}
}

// TestDocsRun runs the documented commands that need no server, no network
// and little time: a server's configuration as it would start
// (--print-config) and a classifier check.
func TestDocsRun(t *testing.T) {
	var cmds []docCommand
	for _, file := range docMarkdownFiles(t) {
		cmds = append(cmds, docCommands(t, file)...)
	}
	t.Chdir(repoRoot)
	ran := 0
	for _, cmd := range cmds {
		{
			args, ok := runnable(cmd.args)
			if !ok {
				continue
			}
			ran++
			var out strings.Builder
			a := newApp()
			a.Writer, a.ErrWriter = &out, &out
			if err := a.Run(append([]string{"psp"}, args...)); err != nil {
				t.Errorf("%v:\n\t%v\n%s", cmd, err, out.String())
			}
		}
	}
	t.Logf("%d documented commands run", ran)
	if ran < 3 {
		t.Errorf("ran %d documented commands, want at least 3", ran)
	}
}

// runnable returns the arguments that run cmd without a server, a network
// or hardware, if it is such a command: serve with --print-config added
// (UDP dataplane, no token or OCI reference, files present) and
// classifier check of a committed module.
func runnable(args []string) ([]string, bool) {
	if len(args) == 0 {
		return nil, false
	}
	for i, a := range args {
		if strings.HasPrefix(a, "oci://") || (strings.HasSuffix(a, ".wasm") || strings.HasSuffix(a, ".yaml")) && !exists(a) {
			return nil, false
		}
		if (a == "--dataplane" && i+1 < len(args) && args[i+1] == "dpdk") || strings.Contains(a, "token") || a == "--memcached-dir" {
			return nil, false
		}
	}
	switch {
	case args[0] == "serve":
		return append(append([]string(nil), args...), "--print-config"), true
	case len(args) > 1 && args[0] == "classifier" && args[1] == "check":
		return args, true
	case len(args) == 2 && args[0] == "experiment" && args[1] == "list":
		return args, true
	}
	return nil, false
}

func exists(name string) bool {
	_, err := os.Stat(name)
	return err == nil
}

// TestDocLinks checks that the relative links of the documentation point to
// files that exist.
func TestDocLinks(t *testing.T) {
	link := regexp.MustCompile(`\]\(([^)#\s]+)(#[^)\s]*)?\)`)
	for _, file := range docMarkdownFiles(t) {
		b, err := os.ReadFile(filepath.Join(repoRoot, file))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range link.FindAllStringSubmatch(string(b), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			p := filepath.Join(repoRoot, filepath.Dir(file), target)
			if _, err := os.Stat(p); err != nil {
				t.Errorf("%s: link to %s: %v", file, target, err)
			}
		}
	}
}

// TestREADMEShort keeps the README a page for users: the rest goes to docs/.
func TestREADMEShort(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), "\n"); n >= 250 {
		t.Errorf("README.md has %d lines, want under 250: move the detail to a page under docs/", n)
	}
}
