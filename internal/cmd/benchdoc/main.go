// Command benchdoc runs psp's named benchmarks (groups.txt) and writes BENCHMARKS.md:
// per group of benchmarks, the command that ran them, the machine and the
// date, and per benchmark its figures (the median of the runs, with their
// range). Every measured figure the project quotes has this one owner, so
// it cannot drift from the code that produces it. make bench runs it.
//
//	go run ./internal/cmd/benchdoc [-o BENCHMARKS.md] [-only ID,...] [-count N] [-list]
//
// With -only, the other groups' sections are kept as they are in the
// output file. Errors (a benchmark that fails, a file that cannot be
// written) end the run with status 1; the file is written only when every
// group asked for ran.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"
)

func main() {
	out := flag.String("o", "BENCHMARKS.md", "output `FILE`")
	only := flag.String("only", "", "comma-separated group `IDs` to run (default: all; -list shows them)")
	count := flag.Int("count", 3, "runs of each benchmark (-count of go test)")
	list := flag.Bool("list", false, "list the groups and their commands, run nothing")
	flag.Parse()
	if err := run(os.Stdout, *out, *only, *count, *list); err != nil {
		fmt.Fprintln(os.Stderr, "benchdoc:", err)
		os.Exit(1)
	}
}

func run(w io.Writer, out, only string, count int, list bool) error {
	if count < 1 {
		return fmt.Errorf("-count %d: want at least 1", count)
	}
	groups, err := selectGroups(only)
	if err != nil {
		return err
	}
	if list {
		for _, g := range groups {
			fmt.Fprintf(w, "%-12s %s\n", g.ID, g.command(count))
		}
		return nil
	}
	sections := map[string]string{}
	if old, err := os.ReadFile(out); err == nil {
		sections = parseSections(string(old))
	} else if !os.IsNotExist(err) {
		return fmt.Errorf("read %s: %w", out, err)
	}
	m := describeMachine()
	for _, g := range groups {
		fmt.Fprintf(w, "%s: %s\n", g.ID, g.command(count))
		start := time.Now()
		res, cpu, err := g.run(count)
		if err != nil {
			return fmt.Errorf("%s: %w", g.ID, err)
		}
		m.Load = loadAverage()
		if cpu != "" {
			m.CPU = cpu
		}
		sections[g.ID] = renderSection(g, count, m, time.Now().UTC(), res)
		fmt.Fprintf(w, "%s: %d benchmarks in %v\n", g.ID, len(res), time.Since(start).Round(time.Second))
	}
	doc := renderDoc(sections)
	tmp := out + ".tmp"
	if err := os.WriteFile(tmp, []byte(doc), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", out, err)
	}
	if err := os.Rename(tmp, out); err != nil {
		return fmt.Errorf("write %s: %w", out, err)
	}
	fmt.Fprintf(w, "wrote %s\n", out)
	return nil
}

// selectGroups returns the groups named by only (all when empty), in the
// list's order.
func selectGroups(only string) ([]Group, error) {
	if only == "" {
		return groups, nil
	}
	want := map[string]bool{}
	for _, id := range strings.Split(only, ",") {
		want[strings.TrimSpace(id)] = true
	}
	var sel []Group
	for _, g := range groups {
		if want[g.ID] {
			sel = append(sel, g)
			delete(want, g.ID)
		}
	}
	for id := range want {
		return nil, fmt.Errorf("-only: no group %q (-list shows them)", id)
	}
	return sel, nil
}

// command is the go test command line that runs g's benchmarks.
func (g Group) command(count int) string {
	args := []string{"go", "test", "-run", "'^$'", "-bench", "'" + g.Bench + "'", "-benchmem", "-count", fmt.Sprint(count)}
	if g.Benchtime != "" {
		args = append(args, "-benchtime", g.Benchtime)
	}
	return strings.Join(append(args, g.Package), " ")
}

// run runs g's benchmarks and returns their summaries and the processor
// go test names.
func (g Group) run(count int) ([]Summary, string, error) {
	args := []string{"test", "-run", "^$", "-bench", g.Bench, "-benchmem", "-count", fmt.Sprint(count)}
	if g.Benchtime != "" {
		args = append(args, "-benchtime", g.Benchtime)
	}
	args = append(args, strings.Fields(g.Package)...)
	cmd := exec.Command("go", args...)
	cmd.Stderr = os.Stderr
	b, err := cmd.Output()
	if err != nil {
		return nil, "", fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, tail(string(b), 20))
	}
	runs := parseBenchOutput(string(b))
	if len(runs) == 0 {
		return nil, "", fmt.Errorf("go %s: no benchmark ran (pattern %q)", strings.Join(args, " "), g.Bench)
	}
	return summarize(runs), cpuFromOutput(string(b)), nil
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// Machine describes where a group ran.
type Machine struct {
	CPU    string
	CPUs   int
	OS     string
	Go     string
	Kernel string
	Load   string // load average over the last minute, at the group's end
}

func describeMachine() Machine {
	m := Machine{CPU: cpuModel(), CPUs: runtime.NumCPU(), OS: runtime.GOOS + "/" + runtime.GOARCH}
	if b, err := exec.Command("go", "env", "GOVERSION").Output(); err == nil {
		m.Go = strings.TrimSpace(string(b))
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	return m
}

func (m Machine) String() string {
	s := fmt.Sprintf("%s, %d CPUs, %s", m.CPU, m.CPUs, m.OS)
	if m.Kernel != "" {
		s += " (Linux " + m.Kernel + ")"
	}
	if m.Go != "" {
		s += ", " + m.Go
	}
	if m.Load != "" {
		s += ", load average " + m.Load
	}
	return s
}

// cpuModel is the processor's model name, as go test prints it.
func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown CPU"
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown CPU"
}

// loadAverage is the one-minute load average ("" where unknown).
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return ""
	}
	return f[0]
}
