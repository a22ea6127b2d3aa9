package redis

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/persephone-go/psp/app"
	"github.com/persephone-go/psp/app/redis/redistest"
)

// awaitingType are commands the server runs that the classifier does not
// type yet (UNKNOWN): new commands, typed together later.
var awaitingType = map[string]bool{}

// TestClassifierTypes: the typed commands are sorted (the type ids follow
// their order), each is a command the server runs, and every command of the
// conformance sequences that the server runs (not refused) has a type.
func TestClassifierTypes(t *testing.T) {
	if !slices.IsSorted(commandTypes[:]) {
		t.Fatal("commandTypes is not sorted")
	}
	cmds, _ := commandTable()
	for _, name := range commandTypes {
		if cmds[strings.ToLower(name)] == nil {
			t.Errorf("type %s: no such command", name)
		}
	}
	for _, c := range redistest.Cases {
		for _, line := range c.Commands {
			args := redistest.Args(line)
			cmd := cmds[strings.ToLower(args[0])]
			if cmd == nil || cmd.run == nil || cmd.refused {
				continue
			}
			typ := Classify(redistest.Command(args...))
			switch untyped := awaitingType[strings.ToLower(args[0])]; {
			case typ == app.Unknown && !untyped:
				t.Errorf("%q is UNKNOWN", line)
			case typ != app.Unknown && untyped:
				t.Errorf("%q has a type: %s is no longer awaiting one", line, args[0])
			}
		}
	}
	if n := len(TypeNames()); n != NumTypes {
		t.Errorf("%d names, %d types", n, NumTypes)
	}
}

// TestClassifyBatchAgrees: a batch types each request as Classify alone
// does, whatever came before it in the batch (the same command named with
// another case or size, another command, garbage).
func TestClassifyBatchAgrees(t *testing.T) {
	var payloads [][]byte
	for _, c := range redistest.Cases {
		for _, line := range c.Commands {
			payloads = append(payloads, redistest.Command(redistest.Args(line)...), []byte(line+"\r\n"))
		}
	}
	for _, args := range [][]string{{"GET", "k"}, {"get", "k"}, {"GET"}, {"SCAN", "0", "COUNT", "10"}, {"SCAN", "0", "COUNT", "100000"},
		{"SCAN", "0"}, {"LRANGE", "l", "0", "-1"}, {"LRANGE", "l", "0", "9"}, {"MGET", "a"}, {"NOSUCH"}, {"nosuch"}} {
		payloads = append(payloads, redistest.Command(args...), redistest.Command(args...))
	}
	payloads = append(payloads, []byte("*1\r\n$3\r\nGE"), []byte(""), []byte("*x\r\n"))
	for round := range 3 {
		if round > 0 {
			rand.New(rand.NewPCG(uint64(round), 0)).Shuffle(len(payloads), func(i, j int) { payloads[i], payloads[j] = payloads[j], payloads[i] })
		}
		out := make([]app.Type, len(payloads))
		Classifier{}.ClassifyBatch(payloads, out)
		for i, p := range payloads {
			if want := Classify(p); out[i] != want {
				t.Errorf("%q after %q: batch %s, alone %s", p, payloads[max(i-1, 0)], typeNames[out[i]], typeNames[want])
			}
		}
	}
}

func TestClassifyAllocatesNothing(t *testing.T) {
	payloads := [][]byte{redistest.Command("GET", "k"), redistest.Command("SCAN", "0", "COUNT", "10000"),
		[]byte("ZRANGE z 0 -1 WITHSCORES\r\n"), redistest.Command("MGET", "a", "b")}
	out := make([]app.Type, len(payloads))
	if n := testing.AllocsPerRun(100, func() { Classifier{}.ClassifyBatch(payloads, out) }); n != 0 {
		t.Errorf("%.1f allocations per batch", n)
	}
}

// TestEveryCommandRuns: every command and subcommand of the table has a
// runner (a container's own is reached only with its name alone, which
// its arity refuses).
func TestEveryCommandRuns(t *testing.T) {
	cmds, _ := commandTable()
	for name, c := range cmds {
		if c.subs == nil && c.run == nil {
			t.Errorf("%s: no runner", name)
		}
		if c.subs != nil && c.run == nil && c.arity > -2 {
			t.Errorf("%s: a container without a runner that its arity lets run alone", name)
		}
		for sub, sc := range c.subs {
			if sc.run == nil {
				t.Errorf("%s %s: no runner", name, sub)
			}
		}
	}
}

// TestNameTable: every command name finds its own type, and names that
// are not commands (a prefix, an extension, a NUL inside or after, a
// longer name) find none.
func TestNameTable(t *testing.T) {
	for i, name := range commandTypes {
		if got := commandType.typeOf(name); got != app.Type(1+i) {
			t.Errorf("%s: type %d, want %d", name, got, 1+i)
		}
		for _, other := range []string{name[:len(name)-1], name + "X", name + "\x00", "\x00" + name} {
			if len(other) == 0 || len(other) > maxName {
				continue
			}
			if got := commandType.typeOf(other); got != app.Unknown && typeNames[got] != other {
				t.Errorf("%q: type %s, want none", other, typeNames[got])
			}
		}
	}
}
