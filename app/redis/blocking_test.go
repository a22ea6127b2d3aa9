package redis

import (
	"errors"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/persephone-go/psp/app/redis/redistest"
	"github.com/persephone-go/psp/internal/testenv"
)

// A blockStep is one step of a blockCase, on client c (0, 1, 2, ...).
type blockStep struct {
	c int
	// cmd is an inline-quoted command ($N: client N's id). A block
	// step's command must block:
	// its reply is read by a later read step. Another's reply is read at
	// once.
	cmd   string
	block bool
	// read: the reply of the client's blocking command, "<blocked>" while
	// it is still blocked; readWait later (redis-server's side) or once
	// its time limit has passed (psp's, as the dispatcher runs it again).
	read bool
	// skip: the reply is not compared (HELLO's names the server).
	skip bool
}

// readWait is how long a read step waits for a blocked client's reply.
const readWait = 300 * time.Millisecond

func block(c int, cmd string) blockStep { return blockStep{c: c, cmd: cmd, block: true} }
func do(c int, cmd string) blockStep    { return blockStep{c: c, cmd: cmd} }
func read(c int) blockStep              { return blockStep{c: c, read: true} }

// A blockCase is a sequence of commands from several clients, some of
// which block, whose replies psp and redis-server must send alike: who is
// served what, in which order, and what the other clients see meanwhile.
type blockCase struct {
	name  string
	steps []blockStep
}

var blockCases = []blockCase{
	{"served in the order they blocked", []blockStep{
		block(1, "BLPOP k 0"), block(2, "BLPOP k 0"), do(0, "RPUSH k a"),
		read(1), read(2), do(0, "RPUSH k b"), read(2), do(0, "LLEN k"),
	}},
	{"the element is handed over before the pusher's next command", []blockStep{
		block(1, "BLPOP q 0"), do(0, "RPUSH q x"), do(0, "LPOP q"), read(1),
	}},
	{"a variadic push serves each blocked client", []blockStep{
		block(1, "BLPOP k 0"), block(2, "BRPOP k 0"), do(0, "RPUSH k 1 2 3"),
		do(0, "LRANGE k 0 -1"), read(1), read(2),
	}},
	{"BLMPOP with a count, two clients", []blockStep{
		block(1, "BLMPOP 0 1 k LEFT COUNT 2"), block(2, "BLMPOP 0 1 k LEFT COUNT 2"),
		do(0, "RPUSH k 1 2 3"), do(0, "EXISTS k"), read(1), read(2),
	}},
	{"linked BLMOVEs", []blockStep{
		block(1, "BLMOVE list1 list2 RIGHT LEFT 0"), block(2, "BLMOVE list2 list3 LEFT RIGHT 0"),
		do(0, "RPUSH list1 foo"), do(0, "LRANGE list1 0 -1"), do(0, "LRANGE list2 0 -1"),
		do(0, "LRANGE list3 0 -1"), read(1), read(2),
	}},
	{"circular BRPOPLPUSH", []blockStep{
		block(1, "BRPOPLPUSH list1 list2 0"), block(2, "BRPOPLPUSH list2 list1 0"),
		do(0, "RPUSH list1 foo"), do(0, "LRANGE list1 0 -1"), do(0, "LRANGE list2 0 -1"),
		read(1), read(2),
	}},
	{"a key served again once a BLMOVE chain pushes back to it", []blockStep{
		block(1, "BLMOVE l1 l2 RIGHT LEFT 0"), block(2, "BLMOVE l2 l1 LEFT RIGHT 0"), block(3, "BLPOP l1 0"),
		do(0, "RPUSH l1 foo"), do(0, "LRANGE l1 0 -1"), do(0, "LRANGE l2 0 -1"), read(1), read(2), read(3),
	}},
	{"self-referential BRPOPLPUSH, then a BLPOP behind it", []blockStep{
		block(1, "BRPOPLPUSH blist blist 0"), block(2, "BLPOP blist 0"), do(0, "RPUSH blist foo"),
		do(0, "LRANGE blist 0 -1"), read(1), read(2),
	}},
	{"BLMOVE to a key of another type: WRONGTYPE, the element stays", []blockStep{
		block(1, "BLMOVE src dst LEFT LEFT 0"), do(0, "SET dst x"), do(0, "RPUSH src a"),
		read(1), do(0, "LRANGE src 0 -1"),
	}},
	{"a transaction's writes are served once it is done", []blockStep{
		block(1, "BLPOP k 0"), do(0, "MULTI"), do(0, "RPUSH k a"), do(0, "LPOP k"), do(0, "EXEC"),
		read(1), do(0, "RPUSH k b"), read(1),
	}},
	{"LPUSH + DEL in a transaction does not serve", []blockStep{
		block(1, "BLPOP list 0"), do(0, "MULTI"), do(0, "LPUSH list a"), do(0, "DEL list"),
		do(0, "EXEC"), read(1), do(0, "LPUSH list b"), read(1),
	}},
	{"ZADD + DEL + SET in a transaction: the blocked client waits on", []blockStep{
		block(1, "BZPOPMIN zset 0"), do(0, "MULTI"), do(0, "ZADD zset 0 foo"), do(0, "DEL zset"),
		do(0, "SET zset foo"), do(0, "EXEC"), read(1), do(0, "DEL zset"), do(0, "ZADD zset 1 bar"),
		read(1),
	}},
	{"LPUSH + SET in a transaction, BLMPOP", []blockStep{
		block(1, "BLMPOP 0 1 list LEFT"), do(0, "MULTI"), do(0, "LPUSH list a"), do(0, "DEL list"),
		do(0, "SET list foo"), do(0, "EXEC"), read(1), do(0, "DEL list"), do(0, "LPUSH list b"),
		read(1),
	}},
	{"served from the key written first", []blockStep{
		block(1, "BLPOP a b 0"), do(0, "MULTI"), do(0, "RPUSH b x"), do(0, "RPUSH a y"),
		do(0, "EXEC"), read(1), do(0, "LRANGE a 0 -1"),
	}},
	{"clients blocked for a list and for a sorted set on one key", []blockStep{
		block(1, "BLPOP k 0"), block(2, "BZPOPMAX k 0"), do(0, "ZADD k 1 m 2 n"), read(1), read(2),
		do(0, "ZRANGE k 0 -1"), do(0, "DEL k"), do(0, "RPUSH k v"), read(1),
	}},
	{"BZMPOP with a count, then BZPOPMIN", []blockStep{
		block(1, "BZMPOP 0 2 z1 z2 MAX COUNT 2"), block(2, "BZPOPMIN z2 0"),
		do(0, "ZADD z2 1 a 2 b 3 c"), read(1), read(2), do(0, "ZCARD z2"),
	}},
	{"a RESP3 client is answered in RESP3", []blockStep{
		{c: 1, cmd: "HELLO 3", skip: true}, block(1, "BZPOPMIN z 0"), do(0, "ZADD z 1.5 m"), read(1),
	}},
	{"CLIENT UNBLOCK", []blockStep{
		block(1, "BLPOP l 0"), do(0, "CLIENT UNBLOCK $1"), read(1),
		block(1, "BLMOVE a b LEFT LEFT 0"), do(0, "CLIENT UNBLOCK $1 timeout"), read(1),
		block(1, "BZMPOP 0 1 z MIN"), do(0, "CLIENT UNBLOCK $1 ERROR"), read(1),
		do(0, "CLIENT UNBLOCK $1"), do(0, "CLIENT UNBLOCK $0"), do(0, "CLIENT UNBLOCK 123456"),
		do(0, "CLIENT UNBLOCK abc"), do(0, "CLIENT UNBLOCK abc foo"), do(0, "CLIENT UNBLOCK $1 foo"),
		do(0, "CLIENT UNBLOCK 1 2 3"), do(0, "CLIENT UNBLOCK"),
		block(1, "BLPOP l 0"), do(0, "LPUSH l foo"), read(1),
	}},
	{"CLIENT UNBLOCK of a RESP3 client", []blockStep{
		{c: 1, cmd: "HELLO 3", skip: true}, block(1, "BLPOP l 0"), do(0, "CLIENT UNBLOCK $1"), read(1),
		block(1, "BRPOPLPUSH l m 0"), do(0, "CLIENT UNBLOCK $1 TIMEOUT"), read(1),
	}},
	{"an unblocked client is not served", []blockStep{
		block(1, "BLPOP l 0"), block(2, "BLPOP l 0"), do(0, "CLIENT UNBLOCK $1"), do(0, "RPUSH l x"),
		read(1), read(2), do(0, "LLEN l"),
	}},
	{"timeouts", []blockStep{
		block(1, "BLMOVE a b LEFT LEFT 0.05"), read(1), block(1, "BRPOPLPUSH a b 0.05"), read(1),
		block(1, "BLPOP a 0.05"), read(1), block(1, "BZMPOP 0.05 1 z MIN"), read(1),
		{c: 1, cmd: "HELLO 3", skip: true}, block(1, "BLMOVE a b LEFT LEFT 0.05"), read(1),
		block(1, "BZPOPMAX z 0.05"), read(1),
	}},
	{"inside a transaction, no blocking", []blockStep{
		do(1, "MULTI"), do(1, "BLMOVE a b LEFT LEFT 0"), do(1, "BRPOPLPUSH a b 0"), do(1, "BLPOP a 0"),
		do(1, "BZMPOP 0 1 z MIN"), do(1, "EXEC"),
	}},
	{"a write to a key nobody waits on serves nobody", []blockStep{
		block(1, "BLPOP k 0"), do(0, "RPUSH other x"), read(1), do(0, "SET k x"), read(1),
		do(0, "DEL k"), do(0, "RPUSH k y"), read(1),
	}},
}

// TestBlockedClientsServedAsRedis: each blockCase, on redis-server and
// through HandleMulti with the dispatcher's part played by the test (a
// parked request run again once Unpark says so), answers alike.
func TestBlockedClientsServedAsRedis(t *testing.T) {
	addr := redistest.StartRedis(t)
	for _, tc := range blockCases {
		t.Run(tc.name, func(t *testing.T) {
			want := runBlockCaseRedis(t, addr, tc)
			got := runBlockCasePsp(t, tc)
			for i, st := range tc.steps {
				if st.skip || got[i] == want[i] {
					continue
				}
				what := st.cmd
				if st.read {
					what = "read"
				}
				t.Errorf("step %d (client %d %s): psp %q, redis-server %q", i, st.c, what, got[i], want[i])
			}
		})
	}
}

// withIDs returns cmd's arguments, $N replaced by ids[N].
func withIDs(cmd string, ids []string) []string {
	args := redistest.Args(cmd)
	for i, a := range args {
		if n, err := strconv.Atoi(strings.TrimPrefix(a, "$")); err == nil && strings.HasPrefix(a, "$") && n < len(ids) {
			args[i] = ids[n]
		}
	}
	return args
}

// blockCaseClients is how many clients a case has.
func blockCaseClients(tc blockCase) int {
	n := 0
	for _, st := range tc.steps {
		n = max(n, st.c+1)
	}
	return n
}

// runBlockCaseRedis runs tc on redis-server at addr and returns each
// step's reply ("" for a block step).
func runBlockCaseRedis(t *testing.T, addr string, tc blockCase) []string {
	t.Helper()
	conns := make([]*redistest.Conn, blockCaseClients(tc))
	ids := make([]string, len(conns))
	for i := range conns {
		c, err := redistest.Dial(addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		conns[i] = c
		id, err := c.Do("CLIENT", "ID")
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = strings.Trim(string(id), ":\r\n")
	}
	ctl, err := redistest.Dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer ctl.Close()
	if _, err := ctl.Do("FLUSHALL"); err != nil {
		t.Fatal(err)
	}
	out := make([]string, len(tc.steps))
	for i, st := range tc.steps {
		c := conns[st.c]
		switch {
		case st.block:
			if err := c.Send(redistest.Command(withIDs(st.cmd, ids)...)); err != nil {
				t.Fatal(err)
			}
			// On to the next step once redis-server has it blocked.
			testenv.WaitFor(t, "client "+ids[st.c]+" blocked", 5*time.Second, func() bool {
				l, err := ctl.Do("CLIENT", "LIST", "ID", ids[st.c])
				if err != nil {
					t.Fatal(err)
				}
				return strings.Contains(string(l), " flags=b ")
			})
		case st.read:
			c.Timeout = readWait
			r, err := c.Read(1)
			var ne net.Error
			switch {
			case err == nil:
				out[i] = string(r)
			case errors.As(err, &ne) && ne.Timeout() && len(r) == 0:
				out[i] = "<blocked>"
			default:
				t.Fatalf("step %d: %q %v", i, r, err)
			}
			c.Timeout = 5 * time.Second
		default:
			r, err := c.Do(withIDs(st.cmd, ids)...)
			if err != nil {
				t.Fatalf("step %d %s: %v", i, st.cmd, err)
			}
			out[i] = string(r)
		}
	}
	return out
}

// runBlockCasePsp runs tc through a server's HandleMulti, each client a
// connection of its own, and returns each step's reply.
func runBlockCasePsp(t *testing.T, tc blockCase) []string {
	t.Helper()
	s := openTest(t, Config{Workers: 2})
	callers := make([]*caller, blockCaseClients(tc))
	ids := make([]string, len(callers))
	for i := range callers {
		c := newCaller(s, i%2)
		c.conn = s.NewConn(uint64(100+i), netip.MustParseAddrPort("127.0.0.1:1")).(*Conn)
		callers[i] = c
		ids[i] = strconv.Itoa(100 + i)
	}
	parked := make([]bool, len(callers))
	parkedAt := make([]time.Time, len(callers))
	out := make([]string, len(tc.steps))
	for i, st := range tc.steps {
		c := callers[st.c]
		switch {
		case st.block:
			if r := c.do(withIDs(st.cmd, ids)...); r != "<parked>" {
				t.Fatalf("step %d %s: %q, want it parked", i, st.cmd, r)
			}
			parked[st.c], parkedAt[st.c] = true, time.Now()
		case st.read:
			out[i] = "<blocked>"
			limit := c.r.parkAfter
			if parked[st.c] && !s.Unpark(&c.b) && limit > 0 && limit <= readWait {
				// Its time limit passes before redis-server's read
				// gives up: the dispatcher runs it again then.
				time.Sleep(time.Until(parkedAt[st.c].Add(limit)))
			}
			if !parked[st.c] {
				out[i] = "<answered already>"
			} else if s.Unpark(&c.b) || (limit > 0 && time.Since(parkedAt[st.c]) >= limit) {
				if r := c.resume(); r != "<parked>" {
					out[i] = r
					parked[st.c] = false
				}
			}
		default:
			out[i] = c.do(withIDs(st.cmd, ids)...)
		}
	}
	return out
}
