package redis

import (
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
			redistest.Compare(t, real, psp, c)
		})
	}
}

// TestRedisPy runs redis-py's script of every command family against the
// server (and against redis-server, so that the script's own checks are
// known to hold for Redis).
func TestRedisPy(t *testing.T) {
	redistest.RunRedisPy(t, redistest.StartRedis(t))
	redistest.RunRedisPy(t, serveTest(t, openTest(t, Config{})))
}
