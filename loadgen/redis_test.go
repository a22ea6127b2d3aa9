package loadgen

import (
	"bufio"
	"bytes"
	"errors"
	"strings"
	"testing"
)

func TestRedisMix(t *testing.T) {
	w, err := RedisMix("get:0.99,scan10000:0.01")
	if err != nil {
		t.Fatal(err)
	}
	if len(w.Types) != 2 || w.Types[0].Name != "GET" || w.Types[1].Name != "SCAN10000" {
		t.Fatalf("%+v", w.Types)
	}
	for _, bad := range []string{"", "get", "get:x", "get:-1", "nosuch:1", "scan0:1", "get5:1", "get:0.5,,set:0.5"} {
		if _, err := RedisMix(bad); !errors.Is(err, ErrBadSpec) {
			t.Errorf("%q: %v, want ErrBadSpec", bad, err)
		}
	}
}

// TestRedisStream: each command of a mix is encoded as redis-server reads
// it, and replies of every shape are read whole, BUSY as overloaded.
func TestRedisStream(t *testing.T) {
	w, err := RedisMix("get:1,set:1,incr:1,ping:1,mget3:1,scan50:1,keys:1,zrange5:1,lrange2:1")
	if err != nil {
		t.Fatal(err)
	}
	sched := &Schedule{Types: make([]Type, len(w.Types))}
	for i, ty := range w.Types {
		sched.Types[i] = Type{Name: ty.Name}
		sched.Requests = append(sched.Requests, Request{Type: uint16(i)})
	}
	spec := Spec{Server: "tcp://127.0.0.1:1", Format: FormatRedis, RedisKeys: 10, ValueSize: 3}.withDefaults(sched)
	if err := spec.validate(sched); err != nil {
		t.Fatal(err)
	}
	r := newRun(spec, sched, nil)
	var all []byte
	for id := range sched.Requests {
		all = redisStream{}.encode(r, all, id)
	}
	for _, want := range []string{"*2\r\n$3\r\nGET\r\n$5\r\nkey:", "*3\r\n$3\r\nSET\r\n", "$3\r\nvvv\r\n", "*1\r\n$4\r\nPING\r\n",
		"*4\r\n$4\r\nMGET\r\n", "*4\r\n$4\r\nSCAN\r\n$1\r\n0\r\n$5\r\nCOUNT\r\n$2\r\n50\r\n", "*2\r\n$4\r\nKEYS\r\n$1\r\n*\r\n",
		"*4\r\n$6\r\nZRANGE\r\n$4\r\nzset\r\n$1\r\n0\r\n$1\r\n4\r\n", "*4\r\n$6\r\nLRANGE\r\n$4\r\nlist\r\n$1\r\n0\r\n$1\r\n1\r\n"} {
		if !bytes.Contains(all, []byte(want)) {
			t.Errorf("no %q in %q", want, all)
		}
	}
	replies := "+OK\r\n$-1\r\n*2\r\n$1\r\n0\r\n*2\r\n$1\r\na\r\n$0\r\n\r\n:5\r\n-ERR x\r\n-BUSY y\r\n*-1\r\n"
	rd := bufio.NewReader(strings.NewReader(replies))
	for i, want := range []int{replyAnswer, replyAnswer, replyAnswer, replyAnswer, replyError, replyOverloaded, replyAnswer} {
		got, err := redisStream{}.reply(r, rd, 0)
		if err != nil || got != want {
			t.Fatalf("reply %d: %d %v, want %d", i, got, err, want)
		}
	}
	if _, err := (redisStream{}).reply(r, bufio.NewReader(strings.NewReader("?bad\r\n")), 0); err == nil {
		t.Error("a reply that is not RESP was read")
	}
}
