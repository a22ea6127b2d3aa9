package redis

import (
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
