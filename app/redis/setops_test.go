package redis

import (
	"strconv"
	"strings"
	"testing"

	"github.com/persephone-go/psp/app/redis/redistest"
)

// TestSetEncodingsAsRedis: the sets SDIFFSTORE, SINTERSTORE,
// SUNIONSTORE, SMOVE and COPY make are intsets exactly when
// redis-server's are (OBJECT ENCODING), which decides the order
// SMEMBERS answers them in. SDIFF's second algorithm adds every member of
// the first set before it removes the others': past 512 integers, or with
// a string member, its result is a hash table even when what is left
// could be an intset.
func TestSetEncodingsAsRedis(t *testing.T) {
	real, err := redistest.Dial(redistest.StartRedis(t))
	if err != nil {
		t.Fatal(err)
	}
	defer real.Close()
	s := openTest(t, Config{Workers: 1})
	c := newCaller(s, 0)
	ints := func(cmd string, from, to int) []string {
		args := strings.Fields(cmd)
		for i := from; i < to; i++ {
			args = append(args, strconv.Itoa(i))
		}
		return args
	}
	seq := [][]string{
		ints("SADD big", 0, 513), {"SADD", "one", "1"}, {"SADD", "two", "1", "2"},
		{"SDIFFSTORE", "d1", "big", "one"},        // first algorithm: 512 integers, an intset
		{"SDIFFSTORE", "d2", "big", "one", "two"}, // second: a hash table of 511
		{"SADD", "mixed", "1", "2", "3", "4", "5", "6", "x"}, {"SADD", "x", "x"},
		{"SDIFFSTORE", "d3", "mixed", "x"},               // first: an intset
		{"SDIFFSTORE", "d4", "mixed", "x", "one"},        // second: a hash table
		{"SINTERSTORE", "d5", "big", "mixed"},            // integers only: an intset
		{"SUNIONSTORE", "d6", "one", "two"},              // an intset
		{"SUNIONSTORE", "d7", "one", "x"},                // a hash table
		{"SREM", "big", "600"}, ints("SREM big", 3, 513), // a hash table of 3 integers
		{"COPY", "big", "d8"}, {"SINTERSTORE", "d9", "big", "big"},
		{"SMOVE", "big", "d10", "1"}, {"SMOVE", "x", "d11", "x"},
	}
	for _, args := range seq {
		r, err := real.Do(args...)
		if err != nil {
			t.Fatal(err)
		}
		if p := c.do(args...); p != string(r) {
			t.Fatalf("%v: psp %q, redis-server %q", args, p, r)
		}
	}
	for i := 1; i <= 11; i++ {
		key := "d" + strconv.Itoa(i)
		r, err := real.Do("OBJECT", "ENCODING", key)
		if err != nil {
			t.Fatal(err)
		}
		sh, _ := s.db.shardOf([]byte(key))
		sh.mu.RLock()
		e := sh.m[key]
		sh.mu.RUnlock()
		if e == nil {
			t.Fatalf("%s: no such key in psp (redis-server: %q)", key, r)
		}
		enc := "hashtable"
		if e.obj.(*setObj).intset {
			enc = "intset"
		}
		if string(r) != bulk(enc) {
			t.Errorf("%s: psp holds it as %s, redis-server %q", key, enc, r)
		}
	}
}
