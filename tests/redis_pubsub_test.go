package tests

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/persephone-go/psp/app/redis/redistest"
	"github.com/persephone-go/psp/internal/testenv"
)

// psStep is one step of a pub/sub sequence: a write of commands on one
// of the sequence's connections (none: only a read), then n replies read
// on it (n3 in RESP3, when it differs: a message to the publisher itself).
type psStep struct {
	on    int
	cmd   string // commands separated by " ; ", sent in one write
	n, n3 int
	// sorted: the order redis-server leaves to its hash tables (a
	// message matching several patterns, PUBSUB CHANNELS): one reply's
	// elements, or the replies, are compared sorted.
	sorted bool
}

// psCase is a pub/sub sequence on three connections: 0 and 1 subscribe,
// 2 publishes.
type psCase struct {
	name  string
	steps []psStep
}

var pubsubCases = []psCase{
	{"channels and patterns", []psStep{
		{on: 0, cmd: "SUBSCRIBE a b", n: 2},
		{on: 1, cmd: "SUBSCRIBE a", n: 1},
		{on: 2, cmd: "PUBLISH a hello", n: 1},
		{on: 0, n: 1}, {on: 1, n: 1},
		{on: 2, cmd: "PUBLISH c nobody", n: 1},
		{on: 0, cmd: "PSUBSCRIBE h* a* h*", n: 3},
		{on: 2, cmd: "PUBLISH a both", n: 1},
		{on: 0, n: 2}, {on: 1, n: 1},
		{on: 2, cmd: "PUBLISH hello \"h\\r\\nx\"", n: 1},
		{on: 0, n: 1},
		{on: 2, cmd: "PUBSUB NUMSUB a b c", n: 1},
		{on: 2, cmd: "PUBSUB NUMSUB", n: 1},
		{on: 2, cmd: "PUBSUB NUMPAT", n: 1},
		{on: 2, cmd: "PUBSUB CHANNELS", n: 1, sorted: true},
		{on: 2, cmd: "PUBSUB CHANNELS a*", n: 1},
		{on: 2, cmd: "PUBSUB CHANNELS nomatch*", n: 1},
		{on: 0, cmd: "UNSUBSCRIBE a nosuch", n: 2},
		{on: 2, cmd: "PUBLISH a pattern-only", n: 1},
		{on: 0, n: 1}, {on: 1, n: 1},
		{on: 0, cmd: "PUNSUBSCRIBE", n: 2},
		{on: 0, cmd: "PUNSUBSCRIBE", n: 1},
		{on: 0, cmd: "UNSUBSCRIBE", n: 1},
		{on: 0, cmd: "UNSUBSCRIBE", n: 1},
		{on: 0, cmd: "PING", n: 1},
		{on: 1, cmd: "UNSUBSCRIBE a", n: 1},
		{on: 2, cmd: "PUBLISH a gone", n: 1},
		{on: 2, cmd: "PUBSUB NUMPAT", n: 1},
		{on: 2, cmd: "PUBSUB CHANNELS", n: 1},
	}},
	{"subscribed context", []psStep{
		{on: 0, cmd: "SUBSCRIBE a", n: 1},
		{on: 0, cmd: "PING", n: 1},
		{on: 0, cmd: "PING hi", n: 1},
		{on: 0, cmd: "PING a b", n: 1},
		{on: 0, cmd: "GET k", n: 1},
		{on: 0, cmd: "CLIENT GETNAME", n: 1},
		{on: 0, cmd: "PUBLISH a self", n: 1, n3: 2},
		{on: 0, cmd: "NOSUCH x", n: 1},
		{on: 0, cmd: "SUBSCRIBE", n: 1},
		{on: 0, cmd: "RESET", n: 1},
		{on: 0, cmd: "GET k", n: 1},
		{on: 2, cmd: "PUBLISH a after-reset", n: 1},
		{on: 0, cmd: "PSUBSCRIBE p*", n: 1},
		{on: 0, cmd: "SET k v", n: 1},
		{on: 0, cmd: "QUIT", n: 1},
		{on: 2, cmd: "PING", n: 1},
	}},
	{"pipelined", []psStep{
		{on: 0, cmd: "SUBSCRIBE a ; PING ; PSUBSCRIBE x? ; PING p ; UNSUBSCRIBE a ; PUNSUBSCRIBE x? ; PING", n: 7},
		{on: 0, cmd: "SUBSCRIBE a b c", n: 3},
		{on: 2, cmd: "PUBLISH a 1 ; PUBLISH b 2 ; PUBLISH c 3 ; PUBLISH xy 4", n: 4},
		{on: 0, n: 3},
		{on: 0, cmd: "UNSUBSCRIBE b c ; UNSUBSCRIBE a", n: 3},
	}},
	{"transaction", []psStep{
		{on: 0, cmd: "MULTI", n: 1},
		{on: 0, cmd: "SUBSCRIBE a", n: 1},
		{on: 0, cmd: "PUBLISH a in-exec", n: 1},
		{on: 0, cmd: "EXEC", n: 2}, // EXEC's array holds the message too; PUBLISH's count follows it
		{on: 0, cmd: "MULTI", n: 1},
		{on: 0, cmd: "UNSUBSCRIBE", n: 1},
	}},
	{"names and patterns", []psStep{
		{on: 0, cmd: "SUBSCRIBE \"\" \"\\x00\\xff\"", n: 2},
		{on: 1, cmd: "PSUBSCRIBE h[ae]llo x? \\* [^a]*", n: 4},
		{on: 2, cmd: "PUBLISH \"\" \"\"", n: 1},
		{on: 0, n: 1},
		{on: 2, cmd: "PUBLISH hello 1", n: 1},
		{on: 1, n: 2, sorted: true},
		{on: 2, cmd: "PUBLISH hallo 2 ; PUBLISH xy 3 ; PUBLISH * 4 ; PUBLISH abc 5", n: 4},
		{on: 1, n: 6, sorted: true},
		{on: 2, cmd: "PUBLISH \"\\x00\\xff\" bin", n: 1},
		{on: 0, n: 1},
		{on: 2, cmd: "PUBSUB NUMSUB \"\" \"\\x00\\xff\"", n: 1},
		{on: 2, cmd: "PUBSUB NUMPAT", n: 1},
	}},
	{"errors and help", []psStep{
		{on: 2, cmd: "PUBSUB", n: 1},
		{on: 2, cmd: "PUBSUB HELP", n: 1},
		{on: 2, cmd: "PUBSUB help extra", n: 1},
		{on: 2, cmd: "PUBSUB CHANNELS a b", n: 1},
		{on: 2, cmd: "PUBSUB NUMPAT x", n: 1},
		{on: 2, cmd: "PUBSUB NOSUCH", n: 1},
		{on: 2, cmd: "PUBSUB SHARDCHANNELS", n: 1},
		{on: 2, cmd: "PUBSUB SHARDNUMSUB a", n: 1},
		{on: 2, cmd: "PUBLISH a", n: 1},
		{on: 2, cmd: "PUBLISH a b c", n: 1},
		{on: 2, cmd: "UNSUBSCRIBE", n: 1},
		{on: 2, cmd: "PUNSUBSCRIBE x", n: 1},
		{on: 2, cmd: "PSUBSCRIBE", n: 1},
	}},
}

// TestRedisPubSubWithRedis runs each pub/sub sequence against
// redis-server and against psp serve --app redis, on three connections
// each, and compares every reply and message byte for byte, in RESP2 and
// in RESP3. After each sequence every connection still open answers a
// PING, so that a message psp sent and redis-server did not would show.
func TestRedisPubSubWithRedis(t *testing.T) {
	real := redistest.StartRedis(t)
	_, psp := startRedisServer(t)
	for _, c := range pubsubCases {
		for _, proto := range []int{2, 3} {
			t.Run(fmt.Sprintf("%s RESP%d", c.name, proto), func(t *testing.T) {
				comparePubSub(t, real, psp, c, proto)
			})
		}
	}
}

func comparePubSub(t *testing.T, real, psp string, c psCase, proto int) {
	var conns [2][3]*redistest.Conn
	for s, addr := range []string{real, psp} {
		for i := range conns[s] {
			cn, err := redistest.Dial(addr)
			if err != nil {
				t.Fatal(err)
			}
			defer cn.Close()
			if proto == 3 {
				if _, err := cn.Do("HELLO", "3"); err != nil {
					t.Fatal(err)
				}
			}
			conns[s][i] = cn
		}
	}
	closed := [3]bool{}
	for i, st := range c.steps {
		var got [2][]byte
		for s := range conns {
			cn := conns[s][st.on]
			if st.cmd != "" {
				var req []byte
				for _, cmd := range strings.Split(st.cmd, " ; ") {
					req = append(req, redistest.Command(redistest.Args(cmd)...)...)
				}
				if err := cn.Send(req); err != nil {
					t.Fatalf("step %d %q: %v", i, st.cmd, err)
				}
			}
			n := st.n
			if proto == 3 && st.n3 != 0 {
				n = st.n3
			}
			var replies [][]byte
			for range n {
				b, err := cn.Read(1)
				if err != nil {
					t.Fatalf("step %d %q on %s: %v (read %q)", i, st.cmd, []string{"redis-server", "psp"}[s], err, b)
				}
				if st.sorted && n == 1 {
					b = redistest.SortedReply(b)
				}
				replies = append(replies, b)
			}
			if st.sorted {
				slices.SortFunc(replies, bytes.Compare)
			}
			got[s] = bytes.Join(replies, nil)
		}
		if !bytes.Equal(got[0], got[1]) {
			t.Errorf("step %d: conn %d %q:\nredis-server %q\npsp          %q", i, st.on, st.cmd, got[0], got[1])
		}
		if strings.HasPrefix(st.cmd, "QUIT") {
			closed[st.on] = true
		}
	}
	for i := range 3 {
		if closed[i] {
			continue
		}
		var got [2][]byte
		for s := range conns {
			// UNSUBSCRIBE and PUNSUBSCRIBE first: a subscribed
			// RESP2 connection answers PING with an array.
			b, err := conns[s][i].Do("PING", "end")
			if err != nil {
				t.Fatalf("final PING on conn %d: %v", i, err)
			}
			got[s] = b
		}
		if !bytes.Equal(got[0], got[1]) {
			t.Errorf("final PING on conn %d (a message left unread?):\nredis-server %q\npsp          %q", i, got[0], got[1])
		}
	}
}

// TestRedisPyPubSub: redis-py's PubSub (get_message, handlers run by
// run_in_thread) against redis-server, so that the script's checks are
// known to hold for Redis, and against psp.
func TestRedisPyPubSub(t *testing.T) {
	redistest.RunRedisPyPubSub(t, redistest.StartRedis(t))
	_, addr := startRedisServer(t)
	redistest.RunRedisPyPubSub(t, addr)
}

// TestRedisPubSubSubscriberThatNeverReads: a subscriber that reads
// nothing while PUBLISH floods its channel is closed once its unread
// messages pass the output bound (--tcp-max-output), as redis-server
// closes a pubsub client past client-output-buffer-limit, and leaves the
// channel; another client is served throughout.
func TestRedisPubSubSubscriberThatNeverReads(t *testing.T) {
	const maxOutput = 1 << 20
	_, addr := startRedisServer(t, "--tcp-max-output", fmt.Sprint(maxOutput))
	sub, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if _, err := sub.Write(redistest.Command("SUBSCRIBE", "flood")); err != nil {
		t.Fatal(err)
	}
	sub.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := redistest.ReadReply(bufio.NewReader(sub)); err != nil {
		t.Fatal(err)
	}
	pub, err := redistest.Dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	other, err := redistest.Dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	msg := strings.Repeat("m", 8<<10)
	var batch []byte
	const perBatch = 64
	for range perBatch {
		batch = append(batch, redistest.Command("PUBLISH", "flood", msg)...)
	}
	published := 0
	for closed := false; !closed; {
		if published > 256<<20 {
			t.Fatalf("the subscriber still receives after %d bytes published", published)
		}
		if err := pub.Send(batch); err != nil {
			t.Fatal(err)
		}
		replies, err := pub.Read(perBatch)
		if err != nil {
			t.Fatal(err)
		}
		published += perBatch * len(msg)
		closed = strings.HasSuffix(string(replies), ":0\r\n")
		start := time.Now()
		if got, err := other.Do("INCR", "served"); err != nil || got[0] != ':' {
			t.Fatalf("the other client: %q %v", got, err)
		}
		if el := time.Since(start); el > 2*time.Second {
			t.Errorf("the other client waited %v", el)
		}
	}
	t.Logf("the subscriber was closed after %d MiB published to it (output bound %d MiB)", published>>20, maxOutput>>20)
	// What its socket had taken comes, then the end.
	sub.SetReadDeadline(time.Now().Add(10 * time.Second))
	n, err := io.Copy(io.Discard, sub)
	t.Logf("it read %d bytes before the end", n)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("the subscriber's connection is still open after %d bytes", n)
	}
	if got, err := other.Do("PUBSUB", "NUMSUB", "flood"); err != nil || string(got) != "*2\r\n$5\r\nflood\r\n:0\r\n" {
		t.Errorf("PUBSUB NUMSUB after the close: %q %v", got, err)
	}
}

// TestRedisPubSubCloseUnsubscribes: a subscriber that closes its
// connection, or only its sending half, leaves its channels and patterns.
func TestRedisPubSubCloseUnsubscribes(t *testing.T) {
	_, addr := startRedisServer(t)
	pub, err := redistest.Dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	for _, half := range []bool{false, true} {
		sub, err := redistest.Dial(addr)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := sub.Do("SUBSCRIBE", "a"); err != nil {
			t.Fatal(err)
		}
		if _, err := sub.Do("PSUBSCRIBE", "p*"); err != nil {
			t.Fatal(err)
		}
		if got, err := pub.Do("PUBLISH", "pa", "x"); err != nil || string(got) != ":1\r\n" {
			t.Fatalf("PUBLISH to the pattern: %q %v", got, err)
		}
		if half {
			sub.CloseWrite()
		} else {
			sub.Close()
		}
		testenv.WaitFor(t, "the subscriber gone", 5*time.Second, func() bool {
			a, _ := pub.Do("PUBLISH", "a", "x")
			p, _ := pub.Do("PUBSUB", "NUMPAT")
			return string(a) == ":0\r\n" && string(p) == ":0\r\n"
		})
		sub.Close()
	}
}
