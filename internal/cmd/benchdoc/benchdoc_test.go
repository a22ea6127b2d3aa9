package main

import (
	"os"
	"strings"
	"testing"
	"time"
)

const sampleOutput = `goos: linux
goarch: amd64
pkg: github.com/persephone-go/psp/darc
cpu: Some CPU
BenchmarkCycle/cfcfs-2         	 1399294	        86.11 ns/op	       0 B/op	       0 allocs/op
BenchmarkBurst/darc-2          	   95937	      3101 ns/op	        96.91 ns/request	       0 B/op	       0 allocs/op
BenchmarkCycle/cfcfs-2         	 1399294	        80.00 ns/op	       0 B/op	       0 allocs/op
BenchmarkCycle/cfcfs-2         	 1399294	        90.00 ns/op	       0 B/op	       0 allocs/op
a benchmark's own log line
PASS
ok  	github.com/persephone-go/psp/darc	11.016s
pkg: github.com/persephone-go/psp/report
BenchmarkRecord-2   	 7589401	        66.29 ns/op	       16 B/op	       1 allocs/op
`

func TestParseAndSummarize(t *testing.T) {
	if cpu := cpuFromOutput(sampleOutput); cpu != "Some CPU" {
		t.Errorf("cpu %q", cpu)
	}
	runs := parseBenchOutput(sampleOutput)
	if len(runs) != 5 {
		t.Fatalf("%d runs, want 5: %+v", len(runs), runs)
	}
	sums := summarize(runs)
	if len(sums) != 3 || sums[0].Name != "darc.BenchmarkCycle/cfcfs" || sums[2].Name != "report.BenchmarkRecord" {
		t.Fatalf("summaries %+v", sums)
	}
	c := sums[0]
	if c.Runs != 3 || c.Med["ns/op"] != 86.11 || c.Min["ns/op"] != 80 || c.Max["ns/op"] != 90 {
		t.Errorf("cycle %+v", c)
	}
	for s, want := range map[*Summary]string{
		&sums[0]: "86.1 ns/op [80-90], 0 allocs/op",
		&sums[1]: "3101 ns/op, 96.9 ns/request, 0 allocs/op",
		&sums[2]: "66.3 ns/op, 16 B/op, 1 allocs/op",
	} {
		if got := formatSummary(*s); got != want {
			t.Errorf("%s: %q, want %q", s.Name, got, want)
		}
	}
}

// TestSectionsRoundTrip: -only rewrites one group's section and keeps the
// others as they were.
func TestSectionsRoundTrip(t *testing.T) {
	m := Machine{CPU: "Some CPU", CPUs: 2, OS: "linux/amd64", Go: "go1.26", Load: "0.5"}
	at := time.Date(2026, 12, 2, 7, 40, 0, 0, time.UTC)
	sums := summarize(parseBenchOutput(sampleOutput))
	doc := renderDoc(map[string]string{
		"darc":   renderSection(groups[1], 3, m, at, sums[:2]),
		"record": renderSection(groups[len(groups)-1], 3, m, at, sums[2:]),
	})
	for _, want := range []string{"## The policy", "`darc.BenchmarkCycle/cfcfs` | 86.1 ns/op [80-90]", "Some CPU, 2 CPUs", "2026-12-02 07:40 UTC", "-count 3"} {
		if !strings.Contains(doc, want) {
			t.Errorf("doc lacks %q:\n%s", want, doc)
		}
	}
	back := parseSections(doc)
	if len(back) != 2 {
		t.Fatalf("parsed %d sections, want 2", len(back))
	}
	if again := renderDoc(back); again != doc {
		t.Errorf("round trip changed the doc:\n%s\n---\n%s", doc, again)
	}
}

func TestSelectGroups(t *testing.T) {
	if g, err := selectGroups("sim,darc"); err != nil || len(g) != 2 || g[0].ID != "darc" {
		t.Errorf("selectGroups: %v %+v", err, g)
	}
	if _, err := selectGroups("nosuch"); err == nil {
		t.Error("an unknown group was accepted")
	}
}

func TestParseGroups(t *testing.T) {
	if len(groups) < 5 || groups[0].ID != "dispatcher" || groups[1].Bench != "Cycle|Burst|Complete|DispatchEmpty|ReservationUpdate|ManyTypes" {
		t.Errorf("groups.txt read as %+v", groups)
	}
	for _, bad := range []string{"a | ./x | B | 1x", "a | ./x | B | 1x | t\na | ./y | C | 1x | u", " | ./x | B | 1x | t"} {
		if _, err := parseGroups(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// TestBenchmarksFileIsGenerated: the repository's BENCHMARKS.md is what
// benchdoc writes, section for section (no hand edits, no group missing).
func TestBenchmarksFileIsGenerated(t *testing.T) {
	b, err := os.ReadFile("../../../BENCHMARKS.md")
	if err != nil {
		t.Fatal(err)
	}
	sections := parseSections(string(b))
	for _, g := range groups {
		if _, ok := sections[g.ID]; !ok {
			t.Errorf("BENCHMARKS.md has no section for group %q: run make bench BENCH=%s", g.ID, g.ID)
		}
	}
	if got := renderDoc(sections); got != string(b) {
		t.Error("BENCHMARKS.md differs from what make bench writes: regenerate it rather than edit it")
	}
}
