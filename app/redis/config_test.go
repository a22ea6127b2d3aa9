package redis

import (
	"strconv"
	"strings"
	"testing"
)

// TestConfigSetReadsBack: CONFIG SET keeps what it is given, as CONFIG GET
// then reads it, under its name and its alias, normalized as
// redis-server normalizes it; a command with one bad value changes
// nothing.
func TestConfigSetReadsBack(t *testing.T) {
	s := openTest(t, Config{Workers: 1})
	c := newCaller(s, 0)
	for _, tc := range []struct{ args []string }{
		{[]string{"CONFIG", "SET", "hash-max-ziplist-entries", "10", "ZSET-MAX-LISTPACK-VALUE", "1kb", "hz", "1000"}},
	} {
		if r := c.do(tc.args...); r != okReply {
			t.Fatalf("%v: %q", tc.args, r)
		}
	}
	for _, tc := range []struct{ name, want string }{
		{"hash-max-listpack-entries", "10"},
		{"hash-max-ziplist-entries", "10"},
		{"zset-max-ziplist-value", "1024"},
		{"hz", "500"},
		{"HZ", "500"},
	} {
		if r, want := c.do("CONFIG", "GET", tc.name), "*2\r\n"+bulk(tc.name)+bulk(tc.want); r != want {
			t.Errorf("CONFIG GET %s: %q, want %q", tc.name, r, want)
		}
	}
	// The first value is good, the second is not: neither is kept.
	r := c.do("CONFIG", "SET", "set-max-intset-entries", "7", "list-compress-depth", "-1")
	if want := "-ERR CONFIG SET failed (possibly related to argument 'list-compress-depth') - argument must be between 0 and 2147483647 inclusive\r\n"; r != want {
		t.Errorf("bad second value: %q, want %q", r, want)
	}
	if r := c.do("CONFIG", "GET", "set-max-intset-entries"); !strings.HasSuffix(r, bulk("512")) {
		t.Errorf("after a refused CONFIG SET: %q, want the default 512", r)
	}
	if r := c.do("CONFIG", "GET", "*"); !strings.HasPrefix(r, "*"+strconv.Itoa(2*(len(configParams())+countAliases()))+"\r\n") {
		t.Errorf("CONFIG GET *: %.60q, want every name and alias", r)
	}
}

func countAliases() int {
	n := 0
	for _, p := range configParams() {
		if p.alias != "" {
			n++
		}
	}
	return n
}

// TestConfigSetMaxmemory: a lower maxmemory applies to the next command;
// past the operator's bound, or removing it, is refused, and leaves the
// bound as it was.
func TestConfigSetMaxmemory(t *testing.T) {
	const limit = 1 << 20
	s := openTest(t, Config{Workers: 1, MaxMemory: limit})
	c := newCaller(s, 0)
	for _, v := range []string{"0", "2mb", "18446744073709551615"} {
		r := c.do("CONFIG", "SET", "maxmemory", v)
		if !strings.HasPrefix(r, "-ERR CONFIG SET failed (possibly related to argument 'maxmemory') - psp's dataset is bounded to 1048576 bytes") {
			t.Errorf("CONFIG SET maxmemory %s over a bound of %d: %q", v, limit, r)
		}
	}
	if r := c.do("SET", "k", strings.Repeat("x", 1000)); r != okReply {
		t.Fatalf("SET: %q", r)
	}
	if r := c.do("CONFIG", "SET", "maxmemory", "100"); r != okReply {
		t.Fatalf("CONFIG SET maxmemory 100: %q", r)
	}
	if r := c.do("SET", "k2", "v"); r != errOOM {
		t.Errorf("SET past a lowered maxmemory: %q", r)
	}
	if r := c.do("INFO", "memory"); !strings.Contains(r, "maxmemory:100\r\n") {
		t.Errorf("INFO memory: %q", r)
	}
	if r := c.do("CONFIG", "SET", "maxmemory", "1mb"); r != okReply {
		t.Fatalf("CONFIG SET maxmemory 1mb (the bound): %q", r)
	}
	if r := c.do("SET", "k2", "v"); r != okReply {
		t.Errorf("SET under maxmemory again: %q", r)
	}

	// Without an operator's bound, any value goes, 0 included.
	s = openTest(t, Config{Workers: 1})
	c = newCaller(s, 0)
	for _, v := range []string{"10", "0", "18446744073709551615"} {
		if r := c.do("CONFIG", "SET", "maxmemory", v); r != okReply {
			t.Errorf("CONFIG SET maxmemory %s without a bound: %q", v, r)
		}
	}
	if r := c.do("SET", "k", "v"); r != okReply {
		t.Errorf("SET under a maxmemory of 2^64-1: %q", r)
	}
}

// TestConfigSetProtoMaxBulkLen: a lower proto-max-bulk-len refuses longer
// arguments on the connection's next request, as redis-server does; a
// higher one than psp's is refused.
func TestConfigSetProtoMaxBulkLen(t *testing.T) {
	s := openTest(t, Config{Workers: 1, MaxBulk: 4 << 20})
	c := newCaller(s, 0)
	if r := c.do("CONFIG", "SET", "proto-max-bulk-len", "8mb"); !strings.HasPrefix(r, "-ERR CONFIG SET failed (possibly related to argument 'proto-max-bulk-len') - psp accepts arguments of at most 4194304 bytes") {
		t.Errorf("raising proto-max-bulk-len: %q", r)
	}
	if r := c.do("CONFIG", "SET", "proto-max-bulk-len", "1mb"); r != okReply {
		t.Fatalf("CONFIG SET proto-max-bulk-len 1mb: %q", r)
	}
	if got := s.maxBulk.Load(); got != 1<<20 {
		t.Errorf("max bulk %d after CONFIG SET 1mb", got)
	}
	if r := c.do("SETRANGE", "k", strconv.Itoa(2<<20), "x"); r != "-ERR string exceeds maximum allowed size (proto-max-bulk-len)\r\n" {
		t.Errorf("SETRANGE past the lowered bound: %q", r)
	}
}

// TestConfigSetRefusesWhatPspCannotDo: values that describe a server psp
// is not are refused with the reason, after redis-server's own checks.
func TestConfigSetRefusesWhatPspCannotDo(t *testing.T) {
	s := openTest(t, Config{Workers: 1})
	c := newCaller(s, 0)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"appendonly", "yes"}, "-ERR CONFIG SET failed (possibly related to argument 'appendonly') - psp keeps no data on disk\r\n"},
		{[]string{"appendonly", "maybe"}, "-ERR CONFIG SET failed (possibly related to argument 'appendonly') - argument must be 'yes' or 'no'\r\n"},
		{[]string{"save", "3600 1"}, "-ERR CONFIG SET failed (possibly related to argument 'save') - psp keeps no data on disk\r\n"},
		{[]string{"save", "3600"}, "-ERR CONFIG SET failed (possibly related to argument 'save') - Invalid save parameters\r\n"},
		{[]string{"maxmemory-policy", "allkeys-lru"}, "-ERR CONFIG SET failed (possibly related to argument 'maxmemory-policy') - psp evicts no keys: noeviction is its only policy\r\n"},
		{[]string{"databases", "4"}, "-ERR CONFIG SET failed (possibly related to argument 'databases') - can't set immutable config\r\n"},
		{[]string{"nosuch", "1"}, "-ERR Unknown option or number of arguments for CONFIG SET - 'nosuch'\r\n"},
		{[]string{"timeout", "1", "TIMEOUT", "0"}, "-ERR CONFIG SET failed (possibly related to argument 'TIMEOUT') - duplicate parameter\r\n"},
		{[]string{"appendonly", "no", "save", "", "maxmemory-policy", "NOEVICTION", "timeout", "0"}, okReply},
	} {
		if r := c.do(append([]string{"CONFIG", "SET"}, tc.args...)...); r != tc.want {
			t.Errorf("CONFIG SET %q: %q, want %q", tc.args, r, tc.want)
		}
	}
}

// TestConfigResetstat: CONFIG RESETSTAT starts INFO's counts again (the
// INFO after it counts itself, as redis-server's counts the RESETSTAT); the
// monitoring counters keep growing.
func TestConfigResetstat(t *testing.T) {
	s := openTest(t, Config{Workers: 1})
	c := newCaller(s, 0)
	c.do("SET", "k", "v")
	c.do("GET", "k")
	c.do("GET", "nosuch")
	if r := c.do("INFO", "stats"); !strings.Contains(r, "keyspace_hits:1\r\n") || !strings.Contains(r, "keyspace_misses:1\r\n") {
		t.Fatalf("INFO stats before RESETSTAT: %q", r)
	}
	if r := c.do("CONFIG", "RESETSTAT"); r != okReply {
		t.Fatalf("CONFIG RESETSTAT: %q", r)
	}
	r := c.do("INFO", "stats")
	for _, want := range []string{"keyspace_hits:0\r\n", "keyspace_misses:0\r\n", "total_commands_processed:1\r\n"} {
		if !strings.Contains(r, want) {
			t.Errorf("INFO stats after RESETSTAT: no %q in %q", want, r)
		}
	}
	for _, ctr := range s.Counters() {
		if ctr.Name == "redis_keyspace_hits_total" && ctr.Value != 1 {
			t.Errorf("%s: %v after RESETSTAT, want 1", ctr.Name, ctr.Value)
		}
	}
}

// TestFunctionHoldsNoLibraries: FUNCTION FLUSH and LIST answer as
// redis-server with no library; the subcommands that would load or run
// one are refused.
func TestFunctionHoldsNoLibraries(t *testing.T) {
	s := openTest(t, Config{Workers: 1})
	c := newCaller(s, 0)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"FUNCTION", "FLUSH"}, okReply},
		{[]string{"function", "flush", "async"}, okReply},
		{[]string{"FUNCTION", "LIST", "LIBRARYNAME", "x*", "WITHCODE"}, emptyArray},
		{[]string{"FUNCTION", "LOAD", "#!lua name=x\nredis.register_function('f', function() return 1 end)"}, "-ERR FUNCTION LOAD is not supported: psp does not run scripts\r\n"},
		{[]string{"FUNCTION", "STATS"}, "-ERR FUNCTION STATS is not supported: psp does not run scripts\r\n"},
		{[]string{"FCALL", "f", "0"}, "-ERR FCALL is not supported: psp does not run scripts\r\n"},
	} {
		if r := c.do(tc.args...); r != tc.want {
			t.Errorf("%q: %q, want %q", tc.args, r, tc.want)
		}
	}
}
