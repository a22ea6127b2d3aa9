package redis

import (
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/persephone-go/psp/app/redis/redistest"
)

// TestWatchRacingIncrements: clients on four workers increment one
// counter by reading it and writing it back in a transaction, WATCHing it
// first and trying again when EXEC answers the null array. None of the
// increments is lost: between a client's WATCH and its EXEC, a write of
// another client always fails the EXEC, however the workers interleave.
func TestWatchRacingIncrements(t *testing.T) {
	s := openTest(t, Config{Workers: 4})
	addr := serveTest(t, s)
	const clients, each = 3, 300
	var retries atomic.Int64
	var wg sync.WaitGroup
	for range clients {
		c, err := redistest.Dial(addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		wg.Go(func() {
			do := func(args ...string) string {
				r, err := c.Do(args...)
				if err != nil {
					t.Errorf("%q: %v", args, err)
				}
				return string(r)
			}
			for done := 0; done < each; {
				if r := do("WATCH", "counter"); r != "+OK\r\n" {
					t.Errorf("WATCH: %q", r)
					return
				}
				n := 0
				if r := do("GET", "counter"); r != "$-1\r\n" {
					body := strings.Split(r, "\r\n")
					if len(body) < 2 {
						t.Errorf("GET: %q", r)
						return
					}
					n, _ = strconv.Atoi(body[1])
				}
				do("MULTI")
				do("SET", "counter", strconv.Itoa(n+1))
				switch r := do("EXEC"); r {
				case "*-1\r\n":
					retries.Add(1)
				case "*1\r\n+OK\r\n":
					done++
				default:
					t.Errorf("EXEC: %q", r)
					return
				}
			}
		})
	}
	wg.Wait()
	c := newCaller(s, 0)
	if r := c.do("GET", "counter"); r != bulk(strconv.Itoa(clients*each)) {
		t.Errorf("after %d increments of %d clients: %q", each, clients, r)
	}
	t.Logf("%d increments, %d EXECs that found the counter modified", clients*each, retries.Load())
	checkNoWatches(t, s)
}

// checkNoWatches fails the test if a shard still lists a watched key.
func checkNoWatches(t *testing.T, s *Server) {
	t.Helper()
	for i := range s.db.shards {
		sh := &s.db.shards[i]
		sh.mu.RLock()
		n := len(sh.watched)
		sh.mu.RUnlock()
		if n != 0 {
			t.Errorf("shard %d still lists %d watched keys", i, n)
		}
	}
}

// TestWatchesForgotten: every way a connection's watches end (UNWATCH,
// EXEC that runs or fails, EXECABORT, DISCARD, RESET, the connection's
// end, WATCH once it has closed) leaves no watch behind in the shards,
// and EXEC without MULTI keeps them.
func TestWatchesForgotten(t *testing.T) {
	s := openTest(t, Config{Workers: 2})
	c, other := newCaller(s, 0), newCaller(s, 1)
	keys := []string{"WATCH"}
	for i := range 50 {
		keys = append(keys, "k"+strconv.Itoa(i))
	}
	for _, end := range [][]string{
		{"UNWATCH"},
		{"MULTI", "EXEC"},
		{"SET k1 x", "MULTI", "EXEC"},
		{"MULTI", "NOSUCH", "EXEC"},
		{"MULTI", "DISCARD"},
		{"RESET"},
		{"SET k1 x", "WATCH more", "UNWATCH"},
	} {
		if r := c.do(keys...); r != "+OK\r\n" {
			t.Fatalf("WATCH: %q", r)
		}
		if r := c.do("EXEC"); r != "-ERR EXEC without MULTI\r\n" {
			t.Fatalf("EXEC: %q", r)
		}
		if r := other.do("SET", "k49", "v"); r != "+OK\r\n" {
			t.Fatalf("SET: %q", r)
		}
		for _, cmd := range end {
			c.do(redistest.Args(cmd)...)
		}
		checkNoWatches(t, s)
		if t.Failed() {
			t.Fatalf("after WATCH, %q", end)
		}
	}
	c.do(keys...)
	c.conn.ConnClosed()
	checkNoWatches(t, s)
	c.do(keys...)
	checkNoWatches(t, s)
}

// TestWatchDirtyBeforeExec: a write another worker ran while the
// watching connection was between requests fails its EXEC, and so does
// the watched key's expiry, even with no command reading it.
func TestWatchDirtyBeforeExec(t *testing.T) {
	s := openTest(t, Config{Workers: 2})
	a, b := newCaller(s, 0), newCaller(s, 1)
	for _, tc := range []struct {
		name, write string
		fails       bool
	}{
		{"another worker's write", "SET k v", true},
		{"a DEL of nothing", "DEL nokey", false},
		{"an INCR of another key", "INCR other", false},
		{"a FLUSHALL of an absent key", "FLUSHALL", false},
	} {
		a.do("DEL", "k")
		a.do("WATCH", "k", "nokey")
		b.do(redistest.Args(tc.write)...)
		a.do("MULTI")
		a.do("PING")
		want := "*1\r\n+PONG\r\n"
		if tc.fails {
			want = "*-1\r\n"
		}
		if r := a.do("EXEC"); r != want {
			t.Errorf("%s: EXEC %q, want %q", tc.name, r, want)
		}
	}
	a.do("SET", "k", "v", "PX", "30")
	a.do("WATCH", "k")
	// The sweeper deletes the key once it expires: no command reads it.
	for deadline := time.Now().Add(5 * time.Second); s.db.keys.Load() != 0; {
		if time.Now().After(deadline) {
			t.Fatal("the expired key was not deleted in 5 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	a.do("MULTI")
	a.do("PING")
	if r := a.do("EXEC"); r != "*-1\r\n" {
		t.Errorf("EXEC after the watched key expired: %q", r)
	}
}
