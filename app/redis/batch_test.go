package redis

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/persephone-go/psp/app/redis/redistest"
	"github.com/persephone-go/psp/nic"
)

// cmds joins the multibulk encodings of inline-style commands ("SET k v").
func cmds(lines ...string) string {
	var b strings.Builder
	for _, l := range lines {
		b.Write(redistest.Command(strings.Fields(l)...))
	}
	return b.String()
}

// TestFrameBatches: a run of the same batchable command is framed as one
// request, within the command's argument bound, batchCommands and
// batchBytes; anything else ends the run, and nothing incomplete is taken.
func TestFrameBatches(t *testing.T) {
	s := openTest(t, Config{})
	many := make([]string, 40)
	for i := range many {
		many[i] = "GET k"
	}
	long := "SET k " + strings.Repeat("v", 300)
	for _, c := range []struct {
		name string
		in   string
		want []int // commands per request framed
	}{
		{"one", cmds("GET k"), []int{1}},
		{"a run", cmds("GET k", "GET a", "GET b"), []int{3}},
		{"runs of two commands", cmds("SET a 1", "SET b 2", "GET a", "GET b", "INCR x", "INCR x"), []int{2, 2, 2}},
		{"wrong arity runs with its batch", cmds("SET a 1", "SET a", "SET b 2"), []int{3}},
		{"past the argument bound", cmds("GET a", "GET a b c", "GET a"), []int{1, 1, 1}},
		{"other casing", cmds("GET a", "get a", "get b"), []int{1, 2}},
		{"not batched", cmds("MGET a", "MGET a", "KEYS *", "KEYS *", "DEL a", "DEL a"), []int{1, 1, 1, 1, 1, 1}},
		{"inline", "GET a\r\nGET a\r\n", []int{1, 1}},
		{"multibulk then inline", cmds("GET a") + "GET a\r\n" + cmds("GET a"), []int{1, 1, 1}},
		{"at most batchCommands", cmds(many...), []int{batchCommands, batchCommands, 40 - 2*batchCommands}},
		{"at most batchBytes", cmds(long, long, long, long, long), []int{3, 2}},
		{"a protocol error ends the run", cmds("GET a", "GET a") + "*1\r\n$x\r\n", []int{2}},
	} {
		t.Run(c.name, func(t *testing.T) {
			conn := s.NewConn(1, netipAddrPort()).(*Conn)
			in := []byte(c.in)
			var got []int
			for len(in) > 0 {
				f := conn.Frame(in, 1<<20)
				if f.Kind == nic.FrameClose {
					break
				}
				if f.Kind != nic.FrameRequest {
					t.Fatalf("frame %v at %.40q", f.Kind, in)
				}
				got = append(got, countCommands(in[:f.Len]))
				in = in[f.Len:]
			}
			if len(got) != len(c.want) {
				t.Fatalf("commands per request %v, want %v", got, c.want)
			}
			for i := range got {
				if got[i] != c.want[i] {
					t.Fatalf("commands per request %v, want %v", got, c.want)
				}
			}
		})
	}
	// A run whose next request is incomplete stops before it: the rest
	// comes with the next read.
	conn := s.NewConn(1, netipAddrPort()).(*Conn)
	whole := cmds("GET a", "GET b")
	partial := cmds("GET c")
	in := []byte(whole + partial[:len(partial)-3])
	if f := conn.Frame(in, 1<<20); f.Kind != nic.FrameRequest || f.Len != len(whole) {
		t.Fatalf("before an incomplete request: %+v, want a request of %d bytes", f, len(whole))
	}
}

// TestBatchRunsEachCommand: a batch's commands run in order, each
// answered as alone, errors included.
func TestBatchRunsEachCommand(t *testing.T) {
	s := openTest(t, Config{})
	c := newCaller(s, 0)
	c.load([]byte(cmds("INCR x", "INCR x", "INCR x x", "INCR x")))
	if !s.HandleMulti(0, 0, &c.b, &c.r) {
		t.Fatal("dropped")
	}
	want := ":1\r\n:2\r\n-ERR wrong number of arguments for 'incr' command\r\n:3\r\n"
	if got := string(c.b.Payload()); got != want {
		t.Fatalf("replies %q, want %q", got, want)
	}
	if got := c.do("GET", "x"); got != "$1\r\n3\r\n" {
		t.Fatalf("x after the batch: %q", got)
	}
}

// TestBatchOverloaded: a shed batch is answered with one BusyReply for
// each of its commands, even when they do not fit its buffer.
func TestBatchOverloaded(t *testing.T) {
	s := openTest(t, Config{})
	for _, room := range []int{4096, 100} {
		req := cmds("GET a", "GET b", "GET c", "GET d", "GET e")
		b := &nic.Buffer{Data: make([]byte, max(room, len(req))), Flags: nic.FromStream}
		b.Len = copy(b.Data, req)
		if !s.ReplyOverloaded(0, b) {
			t.Fatalf("room %d: no reply", room)
		}
		if got := string(b.Payload()); got != strings.Repeat(BusyReply, 5) {
			t.Fatalf("room %d: %q", room, got)
		}
	}
	b := &nic.Buffer{Data: make([]byte, 4096)} // a datagram: one command
	b.Len = copy(b.Data, cmds("GET a"))
	if !s.ReplyOverloaded(0, b) || string(b.Payload()) != BusyReply {
		t.Fatalf("one command: %q", b.Payload())
	}
}

// TestBatchDifferential sends random pipelines of runs of one command
// (the same name, random arguments: valid ones, wrong arities, wrong
// types, bad numbers), in one write each, to redis-server and to psp, and
// compares every byte of their replies: batched commands answer as
// redis-server answers them one by one.
func TestBatchDifferential(t *testing.T) {
	real := redistest.StartRedis(t)
	psp := serveTest(t, openTest(t, Config{}))
	rng := rand.New(rand.NewPCG(7, 11))
	pick := func(s ...string) string { return s[rng.IntN(len(s))] }
	key := func() string { return pick("k", "l", "h", "s", "z", "n") }
	num := func() string { return pick("1", "-3", "0", "x", "9223372036854775807", "1.5", "") }
	gens := map[string]func() []string{
		"GET": func() []string { return []string{key()} },
		"SET": func() []string {
			return append([]string{key(), pick("v", "12", "")}, pick("", "NX", "XX", "GET", "EX 100", "KEEPTTL", "PX x"))
		},
		"INCR":      func() []string { return []string{key()} },
		"INCRBY":    func() []string { return []string{key(), num()} },
		"DECR":      func() []string { return []string{pick(key(), "")} },
		"APPEND":    func() []string { return []string{key(), pick("ab", "")} },
		"EXISTS":    func() []string { return []string{key()} },
		"LPUSH":     func() []string { return []string{key(), pick("a", "b"), pick("", "c")} },
		"RPUSH":     func() []string { return []string{key(), "x"} },
		"LPOP":      func() []string { return []string{key()} },
		"RPOP":      func() []string { return []string{key()} },
		"LLEN":      func() []string { return []string{key()} },
		"SADD":      func() []string { return []string{key(), pick("m1", "m2"), pick("", "m3")} },
		"SREM":      func() []string { return []string{key(), pick("m1", "m2")} },
		"SISMEMBER": func() []string { return []string{key(), pick("m1", "m2")} },
		"HSET":      func() []string { return []string{key(), pick("f", "g"), pick("1", "x"), pick("", "h 2", "h")} },
		"HGET":      func() []string { return []string{key(), pick("f", "g")} },
		"HINCRBY":   func() []string { return []string{key(), pick("f", "g"), num()} },
		"ZADD":      func() []string { return []string{key(), pick("1", "2.5", "x", "NX 1", "inf"), pick("a", "b")} },
		"ZINCRBY":   func() []string { return []string{key(), num(), pick("a", "b")} },
		"ZSCORE":    func() []string { return []string{key(), pick("a", "b")} },
		"ZPOPMIN":   func() []string { return []string{key()} },
		"TYPE":      func() []string { return []string{key()} },
		"PING":      func() []string { return []string{pick("", "hi")} },
		"DEL":       func() []string { return []string{key()} }, // not batched: ends runs
	}
	names := make([]string, 0, len(gens))
	for name := range gens {
		names = append(names, name)
	}
	slices.Sort(names)
	for i := range 150 {
		in := string(redistest.Command("FLUSHALL"))
		commands := 1
		for range 1 + rng.IntN(8) {
			name := names[rng.IntN(len(names))]
			if rng.IntN(4) == 0 {
				name = strings.ToLower(name)
			}
			for range 1 + rng.IntN(20) {
				var args []string
				for _, a := range gens[strings.ToUpper(name)]() {
					args = append(args, strings.Fields(a)...)
				}
				in += string(redistest.Command(append([]string{name}, args...)...))
				commands++
			}
		}
		want := exchange(t, real, in, false)
		got := exchange(t, psp, in, false)
		if !bytes.Equal(got, want) {
			t.Fatalf("pipeline %d (%d commands):\n%s\npsp:          %q\nredis-server: %q", i, commands, in, got, want)
		}
	}
}

// TestNoBatch: with Config.NoBatch every command is a request of its own.
func TestNoBatch(t *testing.T) {
	s := openTest(t, Config{NoBatch: true})
	conn := s.NewConn(1, netipAddrPort()).(*Conn)
	in := []byte(cmds("GET a", "GET a", "GET a"))
	for i := 0; len(in) > 0; i++ {
		f := conn.Frame(in, 1<<20)
		if f.Kind != nic.FrameRequest || countCommands(in[:f.Len]) != 1 {
			t.Fatalf("request %d: %+v, %d commands", i, f, countCommands(in[:f.Len]))
		}
		in = in[f.Len:]
	}
}
