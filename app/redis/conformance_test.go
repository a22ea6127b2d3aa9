package redis

import (
	"bytes"
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
			got, want = redistest.SortedReply(got), redistest.SortedReply(want)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s:\npsp:          %q\nredis-server: %q", cmd, got, want)
		}
	}
}
