package redis

import (
	"strings"
	"testing"
)

// TestClientList: CLIENT LIST has a line per open connection, in id order,
// with each one's name and last command, filtered by ID; a closed
// connection leaves it.
func TestClientList(t *testing.T) {
	s := openTest(t, Config{Workers: 2})
	a, b := newCaller(s, 0), newCaller(s, 1)
	a.do("CLIENT", "SETNAME", "alpha")
	b.do("GET", "k")
	lines := strings.Split(strings.TrimSuffix(a.do("CLIENT", "LIST"), "\r\n"), "\n")
	// A bulk string: its length line, then the lines, the last one empty.
	if len(lines) != 4 || lines[3] != "" {
		t.Fatalf("CLIENT LIST: %q, want two lines", lines)
	}
	first, second := lines[1], lines[2]
	if !strings.HasPrefix(first, "id=1 ") || !strings.Contains(first, "name=alpha ") || !strings.Contains(first, " cmd=client|list ") {
		t.Errorf("first line %q: want id=1, name=alpha, cmd=client|list", first)
	}
	if !strings.HasPrefix(second, "id=2 ") || !strings.Contains(second, "name= ") || !strings.Contains(second, " cmd=get ") {
		t.Errorf("second line %q: want id=2, no name, cmd=get", second)
	}
	if r := a.do("CLIENT", "LIST", "ID", "2", "77"); !strings.Contains(r, "id=2 ") || strings.Contains(r, "id=1 ") {
		t.Errorf("CLIENT LIST ID 2 77: %q, want connection 2 alone", r)
	}
	b.conn.ConnClosed()
	if r := a.do("CLIENT", "LIST"); strings.Contains(r, "id=2 ") {
		t.Errorf("CLIENT LIST after connection 2 closed: %q", r)
	}
}
