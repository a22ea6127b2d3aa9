package main

import (
	_ "embed"
	"fmt"
	"strings"
)

// Group is a set of benchmarks run by one go test command, with one
// section of BENCHMARKS.md.
type Group struct {
	ID        string // the section's key (-only)
	Title     string // what the benchmarks measure
	Package   string // packages, separated by spaces
	Bench     string // -bench pattern
	Benchtime string // -benchtime; "" for go test's default
}

// groupList is the list of groups, one a line (groups.txt says how).
//
//go:embed groups.txt
var groupList string

// groups are the groups of groups.txt, in its order.
var groups = mustParseGroups(groupList)

// parseGroups reads a list of groups: one a line, "id | packages | -bench
// pattern | -benchtime | title", blank lines and # comments skipped. The
// pattern may hold "|": the fields around it are fixed.
func parseGroups(list string) ([]Group, error) {
	var gs []Group
	seen := map[string]bool{}
	for n, line := range strings.Split(list, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Split(line, " | ")
		if len(f) != 5 {
			return nil, fmt.Errorf("groups line %d: %d fields separated by \" | \", want 5 (id, packages, pattern, benchtime, title)", n+1, len(f))
		}
		g := Group{ID: f[0], Package: f[1], Bench: f[2], Benchtime: f[3], Title: f[4]}
		if g.ID == "" || g.Package == "" || g.Bench == "" || g.Title == "" || seen[g.ID] {
			return nil, fmt.Errorf("groups line %d: empty field or repeated id %q", n+1, g.ID)
		}
		seen[g.ID] = true
		gs = append(gs, g)
	}
	return gs, nil
}

func mustParseGroups(list string) []Group {
	gs, err := parseGroups(list)
	if err != nil {
		panic(err)
	}
	return gs
}
