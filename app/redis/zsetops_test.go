package redis

import (
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestZmpopIsAtomic: workers popping with ZMPOP from keys that fall in
// different shards pop every member exactly once.
func TestZmpopIsAtomic(t *testing.T) {
	const workers, keys, each = 3, 4, 300
	s := openTest(t, Config{Workers: workers})
	c := newCaller(s, 0)
	var names []string
	for k := range keys {
		name := "z" + strconv.Itoa(k)
		names = append(names, name)
		args := []string{"ZADD", name}
		for i := range each {
			args = append(args, strconv.Itoa(i), name+":"+strconv.Itoa(i))
		}
		c.do(args...)
	}
	popped := make([][]string, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wc := newCaller(s, w)
			for {
				r := wc.do(append(append([]string{"ZMPOP", strconv.Itoa(keys)}, names...), "MIN", "COUNT", "3")...)
				if r == nullArray {
					return
				}
				parts := strings.Split(r, "\r\n")
				// *2 $k key *n (*2 $m member $s score)...
				for i := 6; i+2 < len(parts); i += 5 {
					popped[w] = append(popped[w], parts[i])
				}
			}
		}()
	}
	wg.Wait()
	seen := map[string]int{}
	for _, p := range popped {
		for _, m := range p {
			seen[m]++
		}
	}
	if len(seen) != keys*each {
		t.Errorf("%d members popped, want %d", len(seen), keys*each)
	}
	for m, n := range seen {
		if n != 1 {
			t.Errorf("%s popped %d times", m, n)
		}
	}
	if r := c.do("EXISTS", names[0], names[1], names[2], names[3]); r != czero {
		t.Errorf("EXISTS after every pop: %q", r)
	}
}

// TestZsetStoreIsAtomic: a STORE command reads its sources at one moment
// and replaces its destination at once: a copy of a set whose members
// always share one score never shows two scores, nor a part of the set.
func TestZsetStoreIsAtomic(t *testing.T) {
	const members = 20
	s := openTest(t, Config{Workers: 3})
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		c := newCaller(s, 0)
		for i := 0; !stop.Load(); i++ {
			args := []string{"ZADD", "src"}
			for m := range members {
				args = append(args, strconv.Itoa(i), "m"+strconv.Itoa(m))
			}
			c.do(args...)
			c.do("ZUNIONSTORE", "copy", "1", "src")
			c.do("ZRANGESTORE", "copy2", "src", "0", "-1")
		}
	}()
	c := newCaller(s, 1)
	deadline := time.Now().Add(300 * time.Millisecond)
	checks := 0
	for time.Now().Before(deadline) {
		for _, args := range [][]string{
			{"ZRANGE", "copy", "0", "-1", "WITHSCORES"},
			{"ZRANGE", "copy2", "0", "-1", "WITHSCORES"},
			{"ZINTER", "2", "src", "copy", "WITHSCORES", "AGGREGATE", "MAX"},
		} {
			r := c.do(args...)
			parts := strings.Split(r, "\r\n")
			if r == emptyArray {
				continue
			}
			if parts[0] != "*"+strconv.Itoa(2*members) {
				t.Fatalf("%v: %d members: %q", args, len(parts), r)
			}
			for i := 4; i < len(parts); i += 4 {
				if parts[i] != parts[4] {
					t.Fatalf("%v saw two scores: %q", args, r)
				}
			}
			checks++
		}
	}
	stop.Store(true)
	wg.Wait()
	if checks == 0 {
		t.Fatal("no copy was read")
	}
}

// TestZsetStoreMemory: a STORE command's destination is counted as ZADD
// counts a set, whatever it replaces, and deleting every key gives all of
// it back; past maxmemory the STORE commands are refused.
func TestZsetStoreMemory(t *testing.T) {
	const limit = 1 << 20
	s := openTest(t, Config{Workers: 1, MaxMemory: limit})
	c := newCaller(s, 0)
	args := []string{"ZADD", "a"}
	for i := range 200 {
		args = append(args, strconv.Itoa(i), "member:"+strconv.Itoa(i))
	}
	c.do(args...)
	one := s.db.used.Load()
	c.do("SET", "s", strings.Repeat("x", 1000))
	for _, cmd := range [][]string{
		{"ZUNIONSTORE", "s", "1", "a"}, {"ZINTERSTORE", "b", "2", "a", "a"}, {"ZDIFFSTORE", "c", "1", "a"},
		{"ZRANGESTORE", "d", "a", "0", "-1"},
	} {
		if r := c.do(cmd...); r != ":200\r\n" {
			t.Fatalf("%v: %q", cmd, r)
		}
	}
	// Each copy holds what a holds, under a name of the same length.
	if used := s.db.used.Load(); used != 5*one {
		t.Errorf("used %d after four copies of a set of %d bytes, want %d", used, one, 5*one)
	}
	c.do("ZREMRANGEBYRANK", "b", "0", "99")
	c.do("ZREMRANGEBYSCORE", "c", "0", "99")
	c.do("ZREMRANGEBYLEX", "d", "-", "+")
	c.do("ZMPOP", "1", "s", "MAX", "COUNT", "50")
	c.do("ZDIFFSTORE", "a", "2", "a", "a")
	if r := c.do("EXISTS", "a", "b", "c", "d", "s"); r != ":3\r\n" {
		t.Errorf("EXISTS: %q", r)
	}
	c.do("DEL", "b", "c", "s")
	if used := s.db.used.Load(); used != 0 {
		t.Errorf("used %d with no key left", used)
	}
	big := strings.Repeat("v", 2000)
	for i := 0; c.do("SET", "k"+strconv.Itoa(i), big) == okReply; i++ {
	}
	c.do("ZADD", "z", "1", "m")
	for _, cmd := range [][]string{
		{"ZUNIONSTORE", "d", "1", "z"}, {"ZINTERSTORE", "d", "1", "z"}, {"ZDIFFSTORE", "d", "1", "z"},
		{"ZRANGESTORE", "d", "z", "0", "-1"},
	} {
		if r := c.do(cmd...); r != errOOM {
			t.Errorf("%v past maxmemory: %q", cmd, r)
		}
	}
}
