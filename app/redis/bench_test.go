package redis

import (
	"strconv"
	"testing"
	"time"

	"github.com/persephone-go/psp/app"
	"github.com/persephone-go/psp/app/redis/redistest"
)

// fill sets n keys "key:<i>" through c.
func fill(c *caller, n int) {
	for i := 0; i < n; i += 1000 {
		args := []string{"MSET"}
		for j := i; j < min(i+1000, n); j++ {
			args = append(args, "key:"+strconv.Itoa(j), "v")
		}
		c.do(args...)
	}
}

// benchReply is a dataplane's reply path for benchmarks: each chunk is
// copied into one buffer, as the dataplane copies it into one of its own,
// and forgotten.
type benchReply struct {
	buf  []byte
	sent int
}

func (r *benchReply) Send(p []byte) error {
	if len(p) > len(r.buf) {
		return app.ErrReplyTooLong
	}
	r.sent += copy(r.buf, p)
	return nil
}
func (r *benchReply) Room() int          { return len(r.buf) }
func (r *benchReply) NoReply()           {}
func (r *benchReply) Park(time.Duration) {}

// benchCommand runs one command per iteration on a server holding
// 100,000 keys, with the TCP dataplane's default buffer room (a long reply
// leaves in chunks of that size), after running setup's commands.
func benchCommand(b *testing.B, setup [][]string, args ...string) {
	s := openTest(b, Config{Workers: 1})
	c := newCaller(s, 0)
	fill(c, 100000)
	for _, cmd := range setup {
		c.do(cmd...)
	}
	r := &benchReply{buf: make([]byte, testRoom)}
	req := redistest.Command(args...)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		c.load(req)
		s.HandleMulti(0, 0, &c.b, r)
	}
	b.ReportMetric(float64(r.sent+c.b.Len*b.N)/float64(b.N), "reply-bytes/op")
}

// zsetOf returns ZADD commands making a sorted set of n members at key.
func zsetOf(key string, n int) [][]string {
	var cmds [][]string
	for i := 0; i < n; i += 1000 {
		args := []string{"ZADD", key}
		for j := i; j < min(i+1000, n); j++ {
			args = append(args, strconv.Itoa(j), "member:"+strconv.Itoa(j))
		}
		cmds = append(cmds, args)
	}
	return cmds
}

func BenchmarkGet(b *testing.B)       { benchCommand(b, nil, "GET", "key:77") }
func BenchmarkSet(b *testing.B)       { benchCommand(b, nil, "SET", "key:77", "value") }
func BenchmarkScan10000(b *testing.B) { benchCommand(b, nil, "SCAN", "0", "COUNT", "10000") }
func BenchmarkKeysAll(b *testing.B)   { benchCommand(b, nil, "KEYS", "*") }
func BenchmarkKeysPattern(b *testing.B) {
	benchCommand(b, nil, "KEYS", "key:1*")
}
func BenchmarkZrange10000(b *testing.B) {
	benchCommand(b, zsetOf("zset", 10000), "ZRANGE", "zset", "0", "-1", "WITHSCORES")
}

// BenchmarkRequestPath is what psp does with one pipelined command in this
// package: the framer cuts it from the connection's input, the native
// classifier types it, and the handler runs it.
func BenchmarkRequestPath(b *testing.B) {
	for _, args := range [][]string{{"GET", "key:77"}, {"SET", "key:77", "value"}, {"LRANGE", "list", "0", "99"}} {
		b.Run(args[0], func(b *testing.B) {
			s := openTest(b, Config{Workers: 1})
			c := newCaller(s, 0)
			fill(c, 100000)
			r := &benchReply{buf: make([]byte, testRoom)}
			req := redistest.Command(args...)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				f := c.conn.Frame(req, len(req))
				if Classify(req[:f.Len]) == app.Unknown {
					b.Fatal("unknown")
				}
				c.load(req[:f.Len])
				s.HandleMulti(0, 0, &c.b, r)
			}
		})
	}
}

// BenchmarkRequestPathBatch is BenchmarkRequestPath for a pipeline of 16
// GETs or SETs, which the framer cuts as one request (Conn.batch): the
// figure is per command.
func BenchmarkRequestPathBatch(b *testing.B) {
	for _, args := range [][]string{{"GET", "key:77"}, {"SET", "key:77", "value"}} {
		b.Run(args[0], func(b *testing.B) {
			s := openTest(b, Config{Workers: 1})
			c := newCaller(s, 0)
			fill(c, 100000)
			r := &benchReply{buf: make([]byte, testRoom)}
			var req []byte
			for range batchCommands {
				req = append(req, redistest.Command(args...)...)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i += batchCommands {
				f := c.conn.Frame(req, len(req))
				if f.Len != len(req) || Classify(req[:f.Len]) == app.Unknown {
					b.Fatalf("framed %d of %d bytes", f.Len, len(req))
				}
				c.load(req[:f.Len])
				s.HandleMulti(0, 0, &c.b, r)
			}
		})
	}
}

// BenchmarkClassify types a mix of commands with the native classifier.
func BenchmarkClassify(b *testing.B) {
	var reqs [][]byte
	for _, args := range [][]string{{"GET", "key:77"}, {"set", "key:77", "value"}, {"LRANGE", "list", "0", "99"},
		{"SCAN", "0", "COUNT", "10000"}, {"ZREVRANGEBYSCORE", "z", "+inf", "-inf"}, {"NOSUCH", "x"}} {
		reqs = append(reqs, redistest.Command(args...))
	}
	b.ReportAllocs()
	for b.Loop() {
		for _, r := range reqs {
			Classify(r)
		}
	}
}
