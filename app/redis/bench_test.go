package redis

import (
	"strconv"
	"testing"

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

// benchCommand runs one command per iteration on a server holding
// 100,000 keys.
func benchCommand(b *testing.B, room int, args ...string) {
	s := openTest(b, Config{Workers: 1})
	c := newCaller(s, 0)
	fill(c, 100000)
	c.r.room = room
	req := redistest.Command(args...)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		c.load(req)
		s.HandleMulti(0, 0, &c.b, &c.r)
	}
}

func BenchmarkGet(b *testing.B)       { benchCommand(b, testRoom, "GET", "key:77") }
func BenchmarkSet(b *testing.B)       { benchCommand(b, testRoom, "SET", "key:77", "value") }
func BenchmarkScan10000(b *testing.B) { benchCommand(b, 1<<20, "SCAN", "0", "COUNT", "10000") }
func BenchmarkKeysAll(b *testing.B)   { benchCommand(b, 1<<20, "KEYS", "*") }
