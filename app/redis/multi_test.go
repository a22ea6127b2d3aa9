package redis

import (
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

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

// TestBlockingCommandsDoNotBlock: a blocking command none of whose keys
// holds data answers an error at once outside a transaction (the worker
// goes on to the next request), and a timeout's null inside EXEC; with
// data it pops.
func TestBlockingCommandsDoNotBlock(t *testing.T) {
	s := openTest(t, Config{Workers: 1})
	c := newCaller(s, 0)
	for _, argv := range [][]string{
		{"BLPOP", "nokey", "0"}, {"BRPOP", "a", "b", "0"}, {"BRPOPLPUSH", "nokey", "d", "0"},
		{"BLMOVE", "nokey", "d", "LEFT", "RIGHT", "0"}, {"BLMPOP", "0", "1", "nokey", "LEFT"},
		{"BZPOPMIN", "nokey", "0"}, {"BZPOPMAX", "nokey", "0"}, {"BZMPOP", "0", "1", "nokey", "MIN"},
	} {
		want := "-ERR " + argv[0] + " would block: psp does not block clients (no key given holds data)\r\n"
		if r := c.do(argv...); r != want {
			t.Errorf("%v: %q, want %q", argv, r, want)
		}
		// The same worker answers the next request: nothing was held.
		if r := c.do("PING"); r != "+PONG\r\n" {
			t.Fatalf("PING after %v: %q", argv, r)
		}
	}
	c.do("MULTI")
	c.do("BLPOP", "nokey", "0")
	c.do("BLMOVE", "nokey", "d", "LEFT", "RIGHT", "0")
	c.do("RPUSH", "l", "x")
	c.do("BRPOP", "nokey", "l", "0")
	if r, want := c.do("EXEC"), "*4\r\n*-1\r\n$-1\r\n:1\r\n*2\r\n$1\r\nl\r\n$1\r\nx\r\n"; r != want {
		t.Errorf("EXEC: %q, want %q", r, want)
	}
}
