package redis

import (
	"bytes"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/persephone-go/psp/app/redis/redistest"
)

// TestConformanceWithRedis sends every conformance sequence to
// redis-server and to psp, each on a fresh connection after FLUSHALL, and
// compares every reply byte for byte, in RESP2 and again in RESP3.
func TestConformanceWithRedis(t *testing.T) {
	real := redistest.StartRedis(t)
	psp := serveTest(t, openTest(t, Config{}))
	for _, c := range slices.Concat(redistest.Cases, redistest.TwoClientCases) {
		t.Run(c.Name, func(t *testing.T) {
			redistest.Compare(t, real, psp, c)
		})
	}
	// Every sequence again after HELLO 3: every reply in RESP3.
	for _, c := range slices.Concat(redistest.Cases, redistest.TwoClientCases) {
		if c.RESP3 {
			continue
		}
		c.RESP3 = true
		t.Run(c.Name+" in RESP3", func(t *testing.T) {
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

// TestHelloWithRedis: HELLO switches a connection between RESP2 and RESP3
// and answers redis-server's map in the protocol it switched to (the
// connection's id masked), HELLO without a version in the connection's.
func TestHelloWithRedis(t *testing.T) {
	real := redistest.StartRedis(t)
	psp := serveTest(t, openTest(t, Config{}))
	id := regexp.MustCompile(`\$2\r\nid\r\n:[0-9]+\r\n`)
	conns := dialPair(t, real, psp, "")
	for _, cmd := range []string{
		"FLUSHALL", "ZADD z 1.5 a", "HELLO", "ZSCORE z a", "HELLO 3", "ZSCORE z a", "HELLO", "HELLO 3 SETNAME x",
		"CLIENT GETNAME", "HGETALL nosuch", "HELLO 2", "ZSCORE z a", "HELLO 3", "RESET", "ZSCORE z a",
		"HELLO 3 AUTH default pw SETNAME y", "ZSCORE z a", "HELLO 2 AUTH default pw", "HELLO 3 AUTH bob pw", "ZSCORE z a",
	} {
		args := redistest.Args(cmd)
		want, err := conns[0].Do(args...)
		if err != nil {
			t.Fatalf("%s: redis-server: %v", cmd, err)
		}
		got, err := conns[1].Do(args...)
		if err != nil {
			t.Fatalf("%s: psp: %v", cmd, err)
		}
		want = id.ReplaceAll(want, []byte("$2\r\nid\r\n:ID\r\n"))
		got = id.ReplaceAll(got, []byte("$2\r\nid\r\n:ID\r\n"))
		if !bytes.Equal(got, want) {
			t.Errorf("%s:\npsp:          %q\nredis-server: %q", cmd, got, want)
		}
	}
}

// TestCommandShapesWithRedis: every command's COMMAND INFO and COMMAND
// DOCS (a container's subcommands each by name: redis-server lists more
// of them than psp runs) in RESP2 and in RESP3, byte for byte
// redis-server's. Left out: SCRIPT (psp runs none of its subcommands and
// lists none) and CLIENT SETINFO (redis-server 7.2's, not 7.0.15's).
func TestCommandShapesWithRedis(t *testing.T) {
	real := redistest.StartRedis(t)
	psp := serveTest(t, openTest(t, Config{}))
	cmds, _ := commandTable()
	var names []string
	for name, c := range cmds {
		if c.subs == nil && name != "script" {
			names = append(names, name)
		}
		for sub := range c.subs {
			if name+"|"+sub != "client|setinfo" {
				names = append(names, name+"|"+sub)
			}
		}
	}
	for _, proto := range []string{"2", "3"} {
		conns := dialPair(t, real, psp, proto)
		for _, name := range names {
			for _, sub := range []string{"INFO", "DOCS"} {
				want, err := conns[0].Do("COMMAND", sub, name)
				if err != nil {
					t.Fatalf("COMMAND %s %s: redis-server: %v", sub, name, err)
				}
				got, err := conns[1].Do("COMMAND", sub, name)
				if err != nil {
					t.Fatalf("COMMAND %s %s: psp: %v", sub, name, err)
				}
				if !bytes.Equal(got, want) {
					t.Errorf("RESP%s COMMAND %s %s:\npsp:          %.400q\nredis-server: %.400q", proto, sub, name, got, want)
				}
			}
		}
	}
}

// TestHelloPipelined: the commands pipelined after HELLO 3 (read-only
// ones, which may run at once on several workers) answer in RESP3, and
// those after HELLO 2 in RESP2, whatever worker runs them.
func TestHelloPipelined(t *testing.T) {
	c, err := redistest.Dial(serveTest(t, openTest(t, Config{Workers: 4})))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const n = 50
	var req, want []byte
	for _, proto := range []string{"3", "2", "3"} {
		req = append(req, redistest.Command("HELLO", proto)...)
		for range n {
			req = append(req, redistest.Command("GET", "nosuch")...)
		}
	}
	if err := c.Send(req); err != nil {
		t.Fatal(err)
	}
	for _, null := range []string{"_\r\n", "$-1\r\n", "_\r\n"} {
		if _, err := c.Read(1); err != nil {
			t.Fatal(err)
		}
		want = []byte(strings.Repeat(null, n))
		got, err := c.Read(n)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("after HELLO: %q %v, want %d %q", got, err, n, null)
		}
	}
}

// TestClientReplyWithRedis: CLIENT REPLY OFF, SKIP and ON silence the
// replies redis-server silences (a long reply, a batch of GETs, errors,
// a transaction's) and no others: pub/sub notices are sent, ON and RESET
// answer. The commands go pipelined, QUIT last, and the whole of what each
// server sends is compared, in RESP2 and in RESP3.
func TestClientReplyWithRedis(t *testing.T) {
	real := redistest.StartRedis(t)
	psp := serveTest(t, openTest(t, Config{}))
	long := []string{"RPUSH", "big"}
	for i := range 3000 {
		long = append(long, strings.Repeat("x", 20)+strconv.Itoa(i))
	}
	cmds := [][]string{
		{"FLUSHALL"}, long, {"CLIENT", "REPLY", "OFF"}, {"SET", "a", "1"}, {"GET", "a"}, {"GET", "a"}, {"GET", "a"},
		{"LRANGE", "big", "0", "-1"}, {"NOSUCH"}, {"GET"}, {"CLIENT", "REPLY", "SKIP"}, {"PING"},
		{"CLIENT", "REPLY", "ON"}, {"GET", "a"}, {"CLIENT", "REPLY", "SKIP"}, {"LRANGE", "big", "0", "-1"},
		{"GET", "a"}, {"CLIENT", "REPLY", "SKIP"}, {"CLIENT", "REPLY", "SKIP"}, {"GET", "a"}, {"ECHO", "x"},
		{"CLIENT", "REPLY", "SKIP"}, {"MULTI"}, {"SET", "b", "2"}, {"CLIENT", "REPLY", "SKIP"}, {"EXEC"},
		{"GET", "b"}, {"CLIENT", "REPLY", "FOO"}, {"CLIENT", "REPLY"}, {"CLIENT", "REPLY", "SKIP"},
		{"BLPOP", "big", "0"}, {"LLEN", "big"}, {"CLIENT", "REPLY", "OFF"}, {"SUBSCRIBE", "c"},
		{"PSUBSCRIBE", "e*"}, {"PING"}, {"UNSUBSCRIBE"}, {"PUNSUBSCRIBE"}, {"RESET"}, {"PING"},
		{"CLIENT", "REPLY", "SKIP"}, {"RESET"}, {"PING"}, {"QUIT"},
	}
	for _, resp3 := range []bool{false, true} {
		var replies [2][]byte
		proto := ""
		if resp3 {
			proto = "3"
		}
		for i, c := range dialPair(t, real, psp, proto) {
			var err error
			var req []byte
			for _, cmd := range cmds {
				req = append(req, redistest.Command(cmd...)...)
			}
			if err := c.Send(req); err != nil {
				t.Fatal(err)
			}
			if replies[i], err = c.ReadAll(); err != nil {
				t.Fatalf("resp3 %v: %v", resp3, err)
			}
		}
		if !bytes.Equal(replies[1], replies[0]) {
			t.Errorf("RESP3 %v:\npsp:          %q\nredis-server: %q", resp3, replies[1], replies[0])
		}
	}
}

// TestInfoWithRedis: INFO's arguments choose the sections redis-server's
// choose (of those psp writes; "default" leaves Commandstats out, "all"
// and "everything" have it), CPU's fields are redis-server's, and
// Commandstats counts each command's calls, errors answered and
// refusals as redis-server does (psp's usec read 0: only the counts are
// compared).
func TestInfoWithRedis(t *testing.T) {
	real := redistest.StartRedis(t)
	psp := serveTest(t, openTest(t, Config{}))
	conns := dialPair(t, real, psp, "")
	info := func(c *redistest.Conn, args ...string) string {
		r, err := c.Do(append([]string{"INFO"}, args...)...)
		if err != nil {
			t.Fatal(err)
		}
		return string(r)
	}
	pspSections := map[string]bool{"Server": true, "Clients": true, "Memory": true, "Persistence": true, "Stats": true,
		"Replication": true, "CPU": true, "Commandstats": true, "Cluster": true, "Keyspace": true}
	headers := func(r string, only bool) []string {
		var hs []string
		for _, line := range strings.Split(r, "\r\n") {
			if h, ok := strings.CutPrefix(line, "# "); ok && (!only || pspSections[h]) {
				hs = append(hs, h)
			}
		}
		return hs
	}
	for _, args := range [][]string{nil, {"default"}, {"all"}, {"everything"}, {"cpu"}, {"commandSTATS"},
		{"cpu", "sentinel"}, {"cpu", "all"}, {"cpu", "default"}, {"server", "cpu"}, {"nosuch"}} {
		want, got := headers(info(conns[0], args...), true), headers(info(conns[1], args...), false)
		if !slices.Equal(got, want) {
			t.Errorf("INFO %v: psp's sections %v, redis-server's %v", args, got, want)
		}
	}
	fields := func(r string) []string {
		var fs []string
		for _, line := range strings.Split(r, "\r\n") {
			if k, _, ok := strings.Cut(line, ":"); ok {
				fs = append(fs, k)
			}
		}
		return fs
	}
	for _, f := range fields(info(conns[1], "cpu")) {
		if !slices.Contains(fields(info(conns[0], "cpu")), f) {
			t.Errorf("INFO cpu: psp's %s is not redis-server's", f)
		}
	}
	if r := info(conns[1], "cpu"); !strings.Contains(r, "used_cpu_user:") || !strings.Contains(r, "used_cpu_sys:") {
		t.Errorf("INFO cpu: %q", r)
	}

	// The same commands on both, then their counts compared.
	cmds := []string{"CONFIG RESETSTAT", "GET x", "GET", "INCR", "SET s a", "INCR s", "INCR s", "LPUSH s a",
		"CLIENT NOSUCH", "CLIENT GETNAME x", "CLIENT GETNAME", "NOSUCH", "MULTI", "INCR s", "SET t 1", "GET",
		"EXEC", "MULTI", "INCR s", "SET t 1", "EXEC", "SUBSCRIBE c", "GET x", "UNSUBSCRIBE", "ZADD z x 1",
		"ZADD z 1 a", "ZRANGE z 0 -1", "XADD x 1-1 f v", "XADD x 1-1 f v"}
	counts := func(c *redistest.Conn) map[string]string {
		for _, cmd := range cmds {
			if _, err := c.Do(redistest.Args(cmd)...); err != nil {
				t.Fatal(err)
			}
		}
		m := map[string]string{}
		for _, line := range strings.Split(info(c, "commandstats"), "\r\n") {
			name, v, ok := strings.Cut(line, ":")
			if !ok {
				continue
			}
			var kept []string
			for _, kv := range strings.Split(v, ",") {
				if !strings.HasPrefix(kv, "usec") {
					kept = append(kept, kv)
				}
			}
			m[name] = strings.Join(kept, ",")
		}
		return m
	}
	want, got := counts(conns[0]), counts(conns[1])
	if len(got) == 0 || !maps.Equal(got, want) {
		t.Errorf("INFO commandstats:\npsp:          %v\nredis-server: %v", got, want)
	}
}

// dialPair connects to redis-server (real) and psp, in that order, each
// connection closed when the test ends; a proto other than "" is sent in
// HELLO first.
func dialPair(t *testing.T, real, psp, proto string) [2]*redistest.Conn {
	t.Helper()
	var conns [2]*redistest.Conn
	for i, addr := range []string{real, psp} {
		c, err := redistest.Dial(addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		if proto != "" {
			if _, err := c.Do("HELLO", proto); err != nil {
				t.Fatal(err)
			}
		}
		conns[i] = c
	}
	return conns
}
