package redis

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/persephone-go/psp/app/redis/redistest"
	"github.com/persephone-go/psp/nic"
)

// caller runs commands on one worker of a server, without a dataplane.
type caller struct {
	s    *Server
	w    int
	conn *Conn
	b    nic.Buffer
	r    testReply
}

func newCaller(s *Server, w int) *caller {
	return &caller{s: s, w: w, conn: s.NewConn(uint64(w+1), netipAddrPort()).(*Conn),
		b: nic.Buffer{Data: make([]byte, testRoom)}, r: testReply{room: testRoom}}
}

// load puts the request in the caller's buffer.
func (c *caller) load(req []byte) {
	if len(req) > len(c.b.Data) {
		c.b.Data = make([]byte, len(req))
	}
	c.b.Len = copy(c.b.Data, req)
	c.b.Flags, c.b.Session = nic.FromStream, c.conn
	c.r.chunks, c.r.park, c.r.parkAfter = c.r.chunks[:0], false, 0
}

// do runs one command and returns its whole reply.
func (c *caller) do(args ...string) string {
	c.load(redistest.Command(args...))
	return c.run()
}

// resume runs the parked request again, as the dispatcher does once the
// server unparks it.
func (c *caller) resume() string {
	c.r.chunks, c.r.park, c.r.parkAfter = c.r.chunks[:0], false, 0
	c.b.Flags |= nic.Resumed
	return c.run()
}

// run runs the loaded request and returns its whole reply, "<parked>"
// when it parked.
func (c *caller) run() string {
	if !c.s.HandleMulti(c.w, 0, &c.b, &c.r) {
		if c.r.park {
			return "<parked>"
		}
		return "<dropped>"
	}
	var all []byte
	for _, ch := range c.r.chunks {
		all = append(all, ch...)
	}
	return string(append(all, c.b.Payload()...))
}

// TestCommandsAllocateNothing: the common commands run without a heap
// allocation once their key exists (the store keeps a copy of what a new
// key or value holds: that allocation is the data).
func TestCommandsAllocateNothing(t *testing.T) {
	s := openTest(t, Config{Workers: 1})
	c := newCaller(s, 0)
	for _, setup := range [][]string{{"SET", "k", "value"}, {"SET", "n", "1"}, {"HSET", "h", "f", "v"},
		{"ZADD", "z", "1", "m"}, {"RPUSH", "l", "a", "b", "c"}, {"SADD", "s", "x"}} {
		c.do(setup...)
	}
	checkNoAllocs(t, c, [][]string{
		{"PING"}, {"GET", "k"}, {"GET", "missing"}, {"SET", "k", "other"}, {"INCR", "n"},
		{"MGET", "k", "n", "missing"}, {"EXISTS", "k"}, {"HGET", "h", "f"}, {"ZSCORE", "z", "m"},
		{"LRANGE", "l", "0", "-1"}, {"SISMEMBER", "s", "x"}, {"TTL", "k"}, {"ECHO", "hello"},
		{"SCAN", "0", "COUNT", "10"},
	})
}

// TestRESP3AllocatesNothing: the same on a connection that sent HELLO 3,
// whose replies take RESP3's shapes (null, double, map, set, pairs).
func TestRESP3AllocatesNothing(t *testing.T) {
	s := openTest(t, Config{Workers: 1})
	c := newCaller(s, 0)
	if r := c.do("HELLO", "3"); r[0] != '%' {
		t.Fatalf("HELLO 3: %q", r)
	}
	for _, setup := range [][]string{{"SET", "k", "value"}, {"HSET", "h", "f", "v"},
		{"ZADD", "z", "1", "m", "2.5", "n"}, {"SADD", "s", "x"}} {
		c.do(setup...)
	}
	if r := c.do("ZSCORE", "z", "n"); r != ",2.5\r\n" {
		t.Fatalf("ZSCORE in RESP3: %q", r)
	}
	checkNoAllocs(t, c, [][]string{
		{"GET", "k"}, {"GET", "missing"}, {"MGET", "k", "missing"}, {"ZSCORE", "z", "m"},
		{"ZSCORE", "z", "missing"}, {"HGETALL", "h"}, {"HGETALL", "missing"}, {"SMEMBERS", "s"},
		{"ZRANGE", "z", "0", "-1", "WITHSCORES"}, {"ZMSCORE", "z", "m", "missing"},
	})
}

// checkNoAllocs runs each command on c, over and over, and fails the
// test for each that allocates.
func checkNoAllocs(t *testing.T, c *caller, cmds [][]string) {
	t.Helper()
	for _, args := range cmds {
		req := redistest.Command(args...)
		if n := testing.AllocsPerRun(200, func() {
			c.load(req)
			c.s.HandleMulti(0, 0, &c.b, &c.r)
		}); n != 0 {
			t.Errorf("%s: %.1f allocations per command", strings.Join(args, " "), n)
		}
	}
}

// TestIncrIsAtomic: INCRs from many workers at once lose no update.
func TestIncrIsAtomic(t *testing.T) {
	const workers, each = 4, 500
	s := openTest(t, Config{Workers: workers})
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := newCaller(s, w)
			for range each {
				if r := c.do("INCR", "n"); r[0] != ':' {
					t.Errorf("INCR: %q", r)
					return
				}
				c.do("HINCRBY", "h", "f", "2")
				c.do("ZINCRBY", "z", "1", "m")
				c.do("RPUSH", "l", "x")
			}
		}()
	}
	wg.Wait()
	c := newCaller(s, 0)
	for _, q := range []struct{ cmd []string }{
		{[]string{"GET", "n"}}, {[]string{"HGET", "h", "f"}}, {[]string{"ZSCORE", "z", "m"}}, {[]string{"LLEN", "l"}},
	} {
		got := c.do(q.cmd...)
		var want string
		switch q.cmd[0] {
		case "GET":
			want = bulk(strconv.Itoa(workers * each))
		case "HGET":
			want = bulk(strconv.Itoa(2 * workers * each))
		case "ZSCORE":
			want = bulk(strconv.Itoa(workers * each))
		case "LLEN":
			want = ":" + strconv.Itoa(workers*each) + "\r\n"
		}
		if got != want {
			t.Errorf("%v: %q, want %q", q.cmd, got, want)
		}
	}
}

func bulk(s string) string { return "$" + strconv.Itoa(len(s)) + "\r\n" + s + "\r\n" }

// TestMsetIsAtomic: MGET never sees some keys of an MSET and not the
// others, however the keys fall across shards; RENAME is never seen half
// done.
func TestMsetIsAtomic(t *testing.T) {
	s := openTest(t, Config{Workers: 3})
	keys := []string{"a", "b", "c", "d", "e", "f", "g", "h"}
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		c := newCaller(s, 0)
		for i := 0; !stop.Load(); i++ {
			args := []string{"MSET"}
			for _, k := range keys {
				args = append(args, k, strconv.Itoa(i))
			}
			c.do(args...)
			c.do("SET", "src", strconv.Itoa(i))
			c.do("RENAME", "src", "dst")
		}
	}()
	go func() {
		defer wg.Done()
		c := newCaller(s, 1)
		for i := 0; !stop.Load(); i++ {
			c.do("EXISTS", "src", "dst") // either, or both between rounds, never neither once started
		}
	}()
	c := newCaller(s, 2)
	deadline := time.Now().Add(300 * time.Millisecond)
	checks := 0
	for time.Now().Before(deadline) {
		r := c.do(append([]string{"MGET"}, keys...)...)
		parts := strings.Split(r, "\r\n")
		var vals []string
		for i := 2; i < len(parts); i += 2 {
			vals = append(vals, parts[i])
		}
		for _, v := range vals {
			if v != vals[0] {
				t.Fatalf("MGET saw a partial MSET: %q", r)
			}
		}
		checks++
	}
	stop.Store(true)
	wg.Wait()
	if checks == 0 {
		t.Fatal("no MGET ran")
	}
}

// TestScanGuarantee: a full SCAN returns every key present for its whole
// duration, exactly once, while other workers create and delete keys,
// whatever COUNT; a cursor never issued is a place to start like any
// other.
func TestScanGuarantee(t *testing.T) {
	s := openTest(t, Config{Workers: 2})
	c := newCaller(s, 0)
	const stable = 3000
	for i := range stable {
		c.do("SET", "stable:"+strconv.Itoa(i), "v")
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		w := newCaller(s, 1)
		for i := 0; !stop.Load(); i++ {
			w.do("SET", "churn:"+strconv.Itoa(i%5000), "v")
			w.do("DEL", "churn:"+strconv.Itoa((i+2500)%5000))
		}
	}()
	for _, count := range []string{"1", "7", "100", "5000"} {
		seen := map[string]int{}
		cursor := "0"
		for calls := 0; ; calls++ {
			if calls > 100000 {
				t.Fatalf("COUNT %s: SCAN did not end", count)
			}
			r := c.do("SCAN", cursor, "COUNT", count, "MATCH", "stable:*")
			next, keys := parseScan(t, r)
			for _, k := range keys {
				seen[k]++
			}
			if cursor = next; cursor == "0" {
				break
			}
		}
		if len(seen) != stable {
			t.Errorf("COUNT %s: %d of %d stable keys returned", count, len(seen), stable)
		}
		for k, n := range seen {
			if n != 1 {
				t.Errorf("COUNT %s: %s returned %d times", count, k, n)
			}
		}
	}
	stop.Store(true)
	wg.Wait()
	// A cursor never issued: the scan goes on from there to the end.
	next, _ := parseScan(t, c.do("SCAN", "12345678901234567890", "COUNT", "1000000"))
	if next != "0" {
		t.Errorf("SCAN from a cursor never issued with a huge COUNT ended at %s, want 0", next)
	}
}

// parseScan splits a SCAN reply into its cursor and keys.
func parseScan(t *testing.T, r string) (string, []string) {
	t.Helper()
	parts := strings.Split(r, "\r\n")
	if len(parts) < 4 || parts[0] != "*2" {
		t.Fatalf("SCAN reply %q", r)
	}
	var keys []string
	for i := 5; i < len(parts); i += 2 {
		keys = append(keys, parts[i])
	}
	return parts[2], keys
}

// TestMaxMemory: past maxmemory, commands that may grow the dataset are
// refused with redis-server's noeviction error, reads and deletes are
// served, and writes work again once memory is freed; the estimate stays
// within the limit plus one command.
func TestMaxMemory(t *testing.T) {
	const limit = 1 << 20
	s := openTest(t, Config{Workers: 1, MaxMemory: limit})
	c := newCaller(s, 0)
	val := strings.Repeat("x", 1000)
	var refused int
	for i := 0; i < 5000; i++ {
		r := c.do("SET", "k"+strconv.Itoa(i), val)
		if r == "-OOM command not allowed when used memory > 'maxmemory'.\r\n" {
			refused = i
			break
		}
		if r != "+OK\r\n" {
			t.Fatalf("SET: %q", r)
		}
	}
	if refused == 0 {
		t.Fatal("no SET was refused")
	}
	if used := s.db.used.Load(); used > limit+2000 {
		t.Errorf("used %d, limit %d: over by more than one SET", used, limit)
	}
	for _, args := range [][]string{{"LPUSH", "l", "x"}, {"SADD", "s", "m"}, {"HSET", "h", "f", "v"}, {"APPEND", "k1", "x"}, {"INCR", "n"},
		{"SUNIONSTORE", "d", "s"}, {"SINTERSTORE", "d", "s"}, {"SDIFFSTORE", "d", "s"}, {"COPY", "k1", "c"}} {
		if r := c.do(args...); !strings.HasPrefix(r, "-OOM") {
			t.Errorf("%v past maxmemory: %q", args, r)
		}
	}
	if r := c.do("GET", "k1"); r != bulk(val) {
		t.Errorf("GET past maxmemory: %.40q", r)
	}
	for i := 0; i < refused/2; i++ {
		c.do("DEL", "k"+strconv.Itoa(i))
	}
	if r := c.do("SET", "again", "v"); r != "+OK\r\n" {
		t.Errorf("SET after DELs: %q", r)
	}
	if r := c.do("INFO", "memory"); !strings.Contains(r, "maxmemory:"+strconv.Itoa(limit)+"\r\n") {
		t.Errorf("INFO memory: %q", r)
	}
}

// TestMemoryUsage: MEMORY USAGE answers each kind of key's size as counted
// against maxmemory, growing with its value, and nil for no key.
func TestMemoryUsage(t *testing.T) {
	s := openTest(t, Config{Workers: 1})
	c := newCaller(s, 0)
	for _, args := range [][]string{{"SET", "s", "v"}, {"RPUSH", "l", "a"}, {"HSET", "h", "f", "v"}, {"SADD", "t", "m"}, {"ZADD", "z", "1", "m"}} {
		c.do(args...)
		key := args[1]
		r := c.do("MEMORY", "USAGE", key)
		n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(r, ":"), "\r\n"))
		if err != nil || n <= 0 {
			t.Errorf("MEMORY USAGE %s: %q", key, r)
			continue
		}
		sh, _ := s.db.shardOf([]byte(key))
		if e := sh.m[key]; e == nil || int64(n) != e.size {
			t.Errorf("MEMORY USAGE %s: %d, not the size counted", key, n)
		}
	}
	usage := func(r string) int {
		n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(r, ":"), "\r\n"))
		return n
	}
	small := usage(c.do("MEMORY", "USAGE", "s"))
	c.do("SET", "s", strings.Repeat("x", 10000))
	if big := usage(c.do("MEMORY", "USAGE", "s", "SAMPLES", "0")); big-small < 9999 {
		t.Errorf("MEMORY USAGE of a 10,000-byte value %d, of a 1-byte one %d", big, small)
	}
	if r := c.do("MEMORY", "USAGE", "nokey"); r != nullBulk {
		t.Errorf("MEMORY USAGE nokey: %q", r)
	}
}

// TestLongCommandsDoNotStopGets: while one worker runs KEYS over many
// keys, GETs on another worker start and finish: the long command holds
// one shard at a time, read-locked (a store locked whole for the KEYS
// would finish no GET that started during it).
func TestLongCommandsDoNotStopGets(t *testing.T) {
	s := openTest(t, Config{Workers: 2})
	c := newCaller(s, 0)
	const keys = 30000
	fill(c, keys)
	c.r.room = 1 << 20
	var inKeys, stop atomic.Bool
	var during atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		g := newCaller(s, 1)
		for !stop.Load() {
			before := inKeys.Load()
			if r := g.do("GET", "key:77"); r != bulk("v") {
				t.Errorf("GET: %q", r)
				return
			}
			if before && inKeys.Load() {
				during.Add(1)
			}
		}
	}()
	start := time.Now()
	for range 2 {
		inKeys.Store(true)
		r := c.do("KEYS", "*")
		inKeys.Store(false)
		if !strings.HasPrefix(r, "*"+strconv.Itoa(keys)+"\r\n") {
			t.Fatalf("KEYS: %.40q", r)
		}
	}
	elapsed := time.Since(start)
	stop.Store(true)
	<-done
	if during.Load() < 10 {
		t.Errorf("%d GETs started and finished during %v of KEYS", during.Load(), elapsed)
	}
	t.Logf("%d GETs started and finished during 2 KEYS * of %d keys (%v)", during.Load(), keys, elapsed)
}

// TestReplyLongerThanABuffer: a reply longer than one buffer leaves in
// chunks of the dataplane's room; when no buffer is left for a chunk, the
// reply is cut and the connection closed.
func TestReplyLongerThanABuffer(t *testing.T) {
	s := openTest(t, Config{Workers: 1})
	c := newCaller(s, 0)
	big := strings.Repeat("v", 3*testRoom+17)
	c.do("SET", "big", big)
	if r := c.do("GET", "big"); r != bulk(big) {
		t.Fatalf("GET of %d bytes: %d bytes back", len(big), len(r))
	}
	if len(c.r.chunks) != 3 {
		t.Errorf("%d leading chunks, want 3", len(c.r.chunks))
	}
	c.r.fail = true
	c.do("GET", "big")
	if c.b.Flags&nic.ReplyClose == 0 || c.b.Len != 0 {
		t.Errorf("a cut reply: flags %v, len %d; want ReplyClose and nothing more", c.b.Flags, c.b.Len)
	}
	c.r.fail = false
	if r := c.do("PING"); r != "+PONG\r\n" {
		t.Errorf("after a cut reply: %q", r)
	}
}

// TestOverloadReply: a shed command is answered with a BUSY error.
func TestOverloadReply(t *testing.T) {
	s := openTest(t, Config{})
	b := nic.Buffer{Data: make([]byte, 256)}
	b.Len = copy(b.Data, redistest.Command("GET", "k"))
	if !s.ReplyOverloaded(0, &b) || !bytes.Equal(b.Payload(), []byte(BusyReply)) {
		t.Fatalf("%q", b.Payload())
	}
	if n := testing.AllocsPerRun(100, func() { s.ReplyOverloaded(0, &b) }); n != 0 {
		t.Errorf("%.1f allocations", n)
	}
}

// TestNameWithANul: a command name with a NUL inside is unknown, whatever
// it starts with (redis-server's answer depends on its hash seed).
func TestNameWithANul(t *testing.T) {
	c := newCaller(openTest(t, Config{}), 0)
	if r := c.do("GET\x00x", "k"); r != "-ERR unknown command 'GET', with args beginning with: 'k' \r\n" {
		t.Errorf("%q", r)
	}
}

func ExampleServer() {
	s, _ := Open(Config{})
	defer s.Close()
	b := nic.Buffer{Data: make([]byte, 512)}
	for _, cmd := range []string{"SET greeting hello", "GET greeting", "INCR greeting"} {
		b.Len = copy(b.Data, cmd+"\r\n") // an inline command
		s.Handle(0, 0, &b)
		fmt.Printf("%q\n", b.Payload())
	}
	// Output:
	// "+OK\r\n"
	// "$5\r\nhello\r\n"
	// "-ERR value is not an integer or out of range\r\n"
}

// TestSetAlgebraIsAtomic: SMOVE moves members between two sets while
// other workers read both at once (SUNION, SINTERCARD) and store their
// union (SUNIONSTORE): every read sees each member in exactly one set.
func TestSetAlgebraIsAtomic(t *testing.T) {
	s := openTest(t, Config{Workers: 3})
	const n = 20
	add := []string{"SADD", "a"}
	for i := 1; i <= n; i++ {
		add = append(add, "m"+strconv.Itoa(i))
	}
	c := newCaller(s, 2)
	c.do(add...)
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		c := newCaller(s, 0)
		for i := 0; !stop.Load(); i++ {
			m := "m" + strconv.Itoa(i%n+1)
			if c.do("SMOVE", "a", "b", m) == ":0\r\n" {
				c.do("SMOVE", "b", "a", m)
			}
		}
	}()
	errs := make(chan string, 1)
	go func() {
		defer wg.Done()
		c := newCaller(s, 1)
		for !stop.Load() {
			if r := c.do("SUNIONSTORE", "u", "a", "b"); r != ":20\r\n" {
				select {
				case errs <- "SUNIONSTORE saw a partial SMOVE: " + r:
				default:
				}
				return
			}
		}
	}()
	deadline := time.Now().Add(300 * time.Millisecond)
	checks := 0
	for time.Now().Before(deadline) {
		if r := c.do("SUNION", "a", "b"); !strings.HasPrefix(r, "*20\r\n") {
			t.Errorf("SUNION saw a partial SMOVE: %q", r)
			break
		}
		if r := c.do("SINTERCARD", "2", "a", "b"); r != ":0\r\n" {
			t.Errorf("SINTERCARD saw a partial SMOVE: %q", r)
			break
		}
		checks++
	}
	stop.Store(true)
	wg.Wait()
	select {
	case msg := <-errs:
		t.Error(msg)
	default:
	}
	if checks == 0 {
		t.Fatal("no SUNION ran")
	}
}

// TestStoreAccounting: a set stored by SUNIONSTORE, SINTERSTORE or
// SDIFFSTORE, and a key made by COPY, is accounted as the SADD that
// built its source was; replacing or deleting it gives the bytes back,
// and SMOVE there and back leaves the total as it was.
func TestStoreAccounting(t *testing.T) {
	s := openTest(t, Config{Workers: 1})
	c := newCaller(s, 0)
	used := func() int64 { return s.db.used.Load() }
	for _, members := range [][]string{{"1", "2", "30", "-4"}, {"a", "bb", "7", strings.Repeat("x", 100)}} {
		c.do("FLUSHALL")
		base := used()
		c.do(append([]string{"SADD", "a"}, members...)...)
		size := used() - base
		for _, args := range [][]string{{"SUNIONSTORE", "d", "a"}, {"SINTERSTORE", "d", "a", "a"},
			{"SDIFFSTORE", "d", "a", "nok"}, {"COPY", "a", "d"}} {
			c.do("SET", "d", "a string value") // replaced by the stored set
			if args[0] == "COPY" {
				args = append(args, "REPLACE")
			}
			if r := c.do(args...); r != ":"+strconv.Itoa(len(members))+"\r\n" && r != ":1\r\n" {
				t.Fatalf("%v: %q", args, r)
			}
			if got := used() - base - size; got != size {
				t.Errorf("%v %v: the stored set is accounted %d bytes, the SADD's %d", args, members, got, size)
			}
			c.do("DEL", "d")
			if used() != base+size {
				t.Errorf("%v %v: %d bytes left after DEL", args, members, used()-base-size)
			}
		}
		c.do("SADD", "b", "z")
		mid := used()
		c.do("SMOVE", "a", "b", members[0])
		c.do("SMOVE", "b", "a", members[0])
		if used() != mid {
			t.Errorf("SMOVE there and back: %d bytes more", used()-mid)
		}
	}
}
