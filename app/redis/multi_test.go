package redis

import (
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/persephone-go/psp/app/redis/redistest"
	"github.com/persephone-go/psp/nic"
)

// TestExecIsAtomic: while one worker runs transactions that increment two
// counters, another worker reading both never sees them apart (nor a
// third key the transaction sets in between).
func TestExecIsAtomic(t *testing.T) {
	s := openTest(t, Config{Workers: 2})
	writer, reader := newCaller(s, 0), newCaller(s, 1)
	const rounds = 2000
	var done atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer done.Store(true)
		for i := range rounds {
			writer.do("MULTI")
			writer.do("INCR", "a")
			writer.do("SET", "mid", strconv.Itoa(i))
			writer.do("INCR", "b")
			if r := writer.do("EXEC"); !strings.HasPrefix(r, "*3\r\n:") {
				t.Errorf("EXEC: %q", r)
				return
			}
		}
	}()
	reads := 0
	for !done.Load() {
		r := reader.do("MGET", "a", "b")
		if r != "*2\r\n$-1\r\n$-1\r\n" {
			parts := strings.Split(r, "\r\n")
			if len(parts) < 5 || parts[2] != parts[4] {
				t.Fatalf("MGET a b during transactions: %q", r)
			}
		}
		reads++
	}
	wg.Wait()
	if r := reader.do("MGET", "a", "b"); r != "*2\r\n"+bulk(strconv.Itoa(rounds))+bulk(strconv.Itoa(rounds)) {
		t.Errorf("after %d transactions: %q", rounds, r)
	}
	t.Logf("%d reads during %d transactions", reads, rounds)
}

// TestTransactionQueueCounted: queued commands count against maxmemory
// until EXEC, DISCARD or the connection's end; past maxmemory nothing
// more is queued.
func TestTransactionQueueCounted(t *testing.T) {
	const limit = 1 << 20
	s := openTest(t, Config{Workers: 1, MaxMemory: limit})
	c := newCaller(s, 0)
	val := strings.Repeat("v", 1000)
	base := s.db.used.Load()
	for _, end := range []string{"EXEC", "DISCARD", "close"} {
		c.do("MULTI")
		for i := range 10 {
			if r := c.do("SET", "k"+strconv.Itoa(i), val); r != "+QUEUED\r\n" {
				t.Fatalf("SET in MULTI: %q", r)
			}
		}
		if queued := s.db.used.Load() - base; queued < 10*1000 {
			t.Errorf("10 queued SETs of 1,000 bytes counted for %d bytes", queued)
		}
		switch end {
		case "close":
			c.conn.ConnClosed()
			c = newCaller(s, 0)
		default:
			c.do(end)
		}
		after := s.db.used.Load() - base
		if end == "EXEC" {
			c.do("FLUSHALL")
			base = s.db.used.Load()
			after = 0
		}
		if after != 0 {
			t.Errorf("after %s, %d bytes still counted", end, after)
		}
	}

	c.do("MULTI")
	var refusedAt int
	for i := 0; i < 5000; i++ {
		r := c.do("SET", "k", val)
		if r == errOOM {
			refusedAt = i
			break
		}
		if r != "+QUEUED\r\n" {
			t.Fatalf("SET in MULTI: %q", r)
		}
	}
	if refusedAt == 0 {
		t.Fatal("queueing never stopped at maxmemory")
	}
	if r := c.do("GET", "k"); r != errOOM {
		t.Errorf("a read queued past maxmemory: %q, want OOM (nothing is queued past it)", r)
	}
	// EXEC of SETs past maxmemory is refused, and the transaction
	// discarded, as redis-server does.
	if r, want := c.do("EXEC"), "-EXECABORT Transaction discarded because of: OOM command not allowed when used memory > 'maxmemory'.\r\n"; r != want {
		t.Errorf("EXEC past maxmemory: %q, want %q", r, want)
	}
	if used := s.db.used.Load(); used != base {
		t.Errorf("after EXEC, used %d, before %d", used, base)
	}
	if r := c.do("DISCARD"); r != "-ERR DISCARD without MULTI\r\n" {
		t.Errorf("DISCARD after EXEC: %q", r)
	}
}

// TestShedCommandAbortsTransaction: a command the dispatcher sheds while a
// transaction is open is not in its queue, so EXEC discards the
// transaction instead of running the rest.
func TestShedCommandAbortsTransaction(t *testing.T) {
	s := openTest(t, Config{Workers: 1})
	c := newCaller(s, 0)
	c.do("MULTI")
	c.do("SET", "a", "1")
	shed := nic.Buffer{Data: make([]byte, 256), Flags: nic.FromStream, Session: c.conn}
	shed.Len = copy(shed.Data, redistest.Command("INCR", "a"))
	if !s.ReplyOverloaded(0, &shed) || string(shed.Payload()) != BusyReply {
		t.Fatalf("shed reply: %q", shed.Payload())
	}
	if r := c.do("EXEC"); r != "-EXECABORT Transaction discarded because of previous errors.\r\n" {
		t.Errorf("EXEC after a shed command: %q", r)
	}
	if r := c.do("GET", "a"); r != nullBulk {
		t.Errorf("GET a: %q: the transaction ran", r)
	}
}

// TestBlockingCommandsPark: a blocking command none of whose keys holds
// data parks its request (the worker goes on to the next), is unparked by
// a write to one of its keys or its connection's end, and, run again,
// pops; inside EXEC it answers a timeout's null at once; with data it pops
// without parking.
func TestBlockingCommandsPark(t *testing.T) {
	s := openTest(t, Config{Workers: 2})
	c, pusher := newCaller(s, 0), newCaller(s, 1)
	for _, tc := range []struct {
		block []string
		push  []string
		want  string
	}{
		{[]string{"BLPOP", "nokey", "0"}, []string{"RPUSH", "nokey", "a", "b"}, "*2\r\n$5\r\nnokey\r\n$1\r\na\r\n"},
		{[]string{"BRPOP", "a", "b", "0"}, []string{"LPUSH", "b", "x"}, "*2\r\n$1\r\nb\r\n$1\r\nx\r\n"},
		{[]string{"BRPOPLPUSH", "src", "d", "0"}, []string{"RPUSH", "src", "v"}, "$1\r\nv\r\n"},
		{[]string{"BLMOVE", "src2", "d", "LEFT", "RIGHT", "0"}, []string{"LMOVE", "d", "src2", "LEFT", "LEFT"}, "$1\r\nv\r\n"},
		{[]string{"BLMPOP", "0", "2", "m1", "m2", "LEFT", "COUNT", "5"}, []string{"RPUSH", "m2", "1", "2"}, "*2\r\n$2\r\nm2\r\n*2\r\n$1\r\n1\r\n$1\r\n2\r\n"},
		{[]string{"BZPOPMIN", "z", "0"}, []string{"ZADD", "z", "2", "m"}, "*3\r\n$1\r\nz\r\n$1\r\nm\r\n$1\r\n2\r\n"},
		{[]string{"BZPOPMAX", "z", "0"}, []string{"ZADD", "z", "2", "m", "3", "n"}, "*3\r\n$1\r\nz\r\n$1\r\nn\r\n$1\r\n3\r\n"},
		{[]string{"BZMPOP", "0", "1", "zz", "MIN"}, []string{"ZINCRBY", "zz", "1", "m"}, "*2\r\n$2\r\nzz\r\n*1\r\n*2\r\n$1\r\nm\r\n$1\r\n1\r\n"},
	} {
		if r := c.do(tc.block...); r != "<parked>" || c.r.parkAfter != 0 {
			t.Fatalf("%v: %q (time limit %v), want it parked without a limit", tc.block, r, c.r.parkAfter)
		}
		if s.Unpark(&c.b) {
			t.Errorf("%v: unparked before any write", tc.block)
		}
		// Another client's write to another key, then to the key.
		epoch := s.ParkEpoch()
		if r := pusher.do("SET", "other", "1"); r != okReply || s.Unpark(&c.b) || s.ParkEpoch() != epoch {
			t.Errorf("%v: a write to another key (%q) unparked it", tc.block, r)
		}
		pusher.do(tc.push...)
		if !s.Unpark(&c.b) || s.ParkEpoch() == epoch {
			t.Errorf("%v: not unparked by %v (epoch %d, was %d)", tc.block, tc.push, s.ParkEpoch(), epoch)
		}
		if r := c.resume(); r != tc.want {
			t.Errorf("%v resumed after %v: %q, want %q", tc.block, tc.push, r, tc.want)
		}
		if n := s.blocked.n.Load(); n != 0 {
			t.Errorf("%v: %d connections still registered after it popped", tc.block, n)
		}
	}

	// The push hands the element over before the pusher's next command,
	// as redis-server does: that LPOP finds nothing.
	c.do("BLPOP", "q", "0")
	pusher.do("RPUSH", "q", "x")
	if r := pusher.do("LPOP", "q"); r != nullBulk {
		t.Errorf("LPOP after a push to a blocked client's key: %q, want %q", r, nullBulk)
	}
	if r := c.resume(); r != "*2\r\n$1\r\nq\r\n$1\r\nx\r\n" {
		t.Errorf("BLPOP after the push: %q", r)
	}

	// Run again before any write (its time limit, a spurious wake): it
	// parks again.
	c.do("BLPOP", "q", "0")
	if r := c.resume(); r != "<parked>" || s.Unpark(&c.b) {
		t.Errorf("BLPOP resumed with nothing written: %q (unparked %v), want it parked again", r, s.Unpark(&c.b))
	}
	pusher.do("RPUSH", "q", "y")
	if r := c.resume(); r != "*2\r\n$1\r\nq\r\n$1\r\ny\r\n" {
		t.Errorf("BLPOP after a second push: %q", r)
	}

	// A timeout: the time limit is the rest of it; past it, a null.
	now := time.Unix(1000, 0)
	s.now = func() time.Time { return now }
	if r := c.do("BLPOP", "q", "1.5"); r != "<parked>" || c.r.parkAfter != 1500*time.Millisecond {
		t.Fatalf("BLPOP q 1.5: %q, time limit %v; want parked for 1.5s", r, c.r.parkAfter)
	}
	now = now.Add(time.Second)
	if r := c.resume(); r != "<parked>" || c.r.parkAfter != 500*time.Millisecond {
		t.Errorf("resumed a second later: %q, time limit %v; want parked for 0.5s more", r, c.r.parkAfter)
	}
	now = now.Add(500 * time.Millisecond)
	if r := c.resume(); r != nullArray {
		t.Errorf("resumed at its timeout: %q, want %q", r, nullArray)
	}
	if r := c.do("BLMOVE", "q", "d", "LEFT", "LEFT", "0.001"); r != "<parked>" || c.r.parkAfter != time.Millisecond {
		t.Fatalf("BLMOVE with a 1 ms timeout: %q, time limit %v", r, c.r.parkAfter)
	}
	now = now.Add(time.Millisecond)
	if r := c.resume(); r != nullArray {
		t.Errorf("BLMOVE at its timeout: %q, want %q (redis-server's replyToBlockedClientTimedOut)", r, nullArray)
	}

	// The connection closes while it is parked: unparked, it leaves.
	c.do("BZPOPMIN", "zq", "0")
	epoch := s.ParkEpoch()
	c.conn.ConnClosed()
	if !s.Unpark(&c.b) || s.ParkEpoch() == epoch || s.blocked.n.Load() != 0 {
		t.Errorf("closed while parked: unpark %v, epoch %d (was %d), registered %d", s.Unpark(&c.b), s.ParkEpoch(), epoch, s.blocked.n.Load())
	}
	if r := c.resume(); r == "<parked>" {
		t.Error("a closed connection's command parked again")
	}

	// A client that sent its last byte before its blocking command ran
	// is answered at once: nothing would unpark it.
	c = newCaller(s, 0)
	c.conn.PeerClosed()
	if r := c.do("BLPOP", "zq", "0"); r != nullArray || s.blocked.n.Load() != 0 {
		t.Errorf("BLPOP after the peer closed: %q (registered %d), want %q at once", r, s.blocked.n.Load(), nullArray)
	}

	// Inside EXEC nothing blocks; with data a pop does not park.
	c = newCaller(s, 0)
	c.do("MULTI")
	c.do("BLPOP", "empty", "0")
	c.do("BLMOVE", "empty", "d", "LEFT", "RIGHT", "0")
	c.do("RPUSH", "l", "x")
	c.do("BRPOP", "empty", "l", "0")
	if r, want := c.do("EXEC"), "*4\r\n*-1\r\n$-1\r\n:1\r\n*2\r\n$1\r\nl\r\n$1\r\nx\r\n"; r != want {
		t.Errorf("EXEC: %q, want %q", r, want)
	}
	pusher.do("RPUSH", "l", "y")
	if r := c.do("BLPOP", "l", "0"); r != "*2\r\n$1\r\nl\r\n$1\r\ny\r\n" {
		t.Errorf("BLPOP of a list holding data: %q", r)
	}
}
