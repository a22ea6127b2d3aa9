package redis

import (
	"bufio"
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/persephone-go/psp/app/redis/redistest"
)

// TestConformanceWithRedis sends every conformance sequence to
// redis-server and to psp, each on a fresh connection after FLUSHALL, and
// compares every reply byte for byte.
func TestConformanceWithRedis(t *testing.T) {
	real := redistest.StartRedis(t)
	psp := serveTest(t, openTest(t, Config{}))
	for _, c := range redistest.Cases {
		t.Run(c.Name, func(t *testing.T) {
			compareSequence(t, real, psp, c)
		})
	}
}

func compareSequence(t *testing.T, real, psp string, c redistest.Case) {
	t.Helper()
	rc, err := redistest.Dial(real)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	pc, err := redistest.Dial(psp)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	for _, conn := range []*redistest.Conn{rc, pc} {
		if _, err := conn.Do("FLUSHALL"); err != nil {
			t.Fatal(err)
		}
	}
	for _, cmd := range c.Commands {
		args := redistest.Args(cmd)
		want, err := rc.Do(args...)
		if err != nil {
			t.Fatalf("%s: redis-server: %v", cmd, err)
		}
		got, err := pc.Do(args...)
		if err != nil {
			t.Fatalf("%s: psp: %v (got %q, redis-server %q)", cmd, err, got, want)
		}
		if c.Unordered {
			got, want = sortedReply(got), sortedReply(want)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s:\npsp:          %q\nredis-server: %q", cmd, got, want)
		}
	}
}

// sortedReply sorts the elements of an array reply (nested arrays as
// wholes, a SCAN reply's second element), for replies whose order
// redis-server leaves to its hash tables.
func sortedReply(p []byte) []byte {
	if len(p) == 0 || p[0] != '*' {
		return p
	}
	r := bufio.NewReader(bytes.NewReader(p))
	head, _ := r.ReadBytes('\n')
	var elems [][]byte
	for {
		e, err := redistest.ReadReply(r)
		if err != nil {
			break
		}
		elems = append(elems, sortedReply(e))
	}
	if strings.HasPrefix(string(head), "*2") && len(elems) == 2 && elems[1][0] == '*' {
		return append(append(head, elems[0]...), elems[1]...) // SCAN: cursor, keys
	}
	slices.SortFunc(elems, bytes.Compare)
	return append(head, bytes.Join(elems, nil)...)
}

// TestRedisPy runs redis-py's script of every command family against the
// server (and against redis-server, so that the script's own checks are
// known to hold for Redis).
func TestRedisPy(t *testing.T) {
	redistest.RunRedisPy(t, redistest.StartRedis(t))
	redistest.RunRedisPy(t, serveTest(t, openTest(t, Config{})))
}
