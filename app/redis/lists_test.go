package redis

import (
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// TestListMovesAreAtomic: workers move elements between two lists at
// once, in opposite directions (RPOPLPUSH, LMOVE, and LMPOP of both keys
// pushed back): no element is lost or doubled.
func TestListMovesAreAtomic(t *testing.T) {
	s := openTest(t, Config{Workers: 3})
	const n = 50
	push := []string{"RPUSH", "a"}
	for i := range n {
		push = append(push, "e"+strconv.Itoa(i))
	}
	newCaller(s, 0).do(push...)
	var wg sync.WaitGroup
	moves := [][][]string{
		{{"RPOPLPUSH", "a", "b"}, {"LMOVE", "b", "a", "LEFT", "RIGHT"}},
		{{"LMOVE", "b", "a", "RIGHT", "LEFT"}, {"RPOPLPUSH", "a", "b"}},
		{{"LMPOP", "2", "b", "a", "LEFT", "COUNT", "3"}},
	}
	for w, cmds := range moves {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := newCaller(s, w)
			for i := range 3000 {
				args := cmds[i%len(cmds)]
				r := c.do(args...)
				if args[0] != "LMPOP" || r == "*-1\r\n" {
					continue
				}
				// Push what LMPOP took back onto the other list.
				elems := replyElems([]byte(r))
				key := string(bulkBody(elems[0]))
				back := []string{"RPUSH", map[string]string{"a": "b", "b": "a"}[key]}
				for _, e := range replyElems(elems[1]) {
					back = append(back, string(bulkBody(e)))
				}
				c.do(back...)
			}
		}()
	}
	wg.Wait()
	c := newCaller(s, 0)
	var all []string
	for _, k := range []string{"a", "b"} {
		for _, e := range replyElems([]byte(c.do("LRANGE", k, "0", "-1"))) {
			all = append(all, string(bulkBody(e)))
		}
	}
	slices.Sort(all)
	want := slices.Clone(push[2:])
	slices.Sort(want)
	if !slices.Equal(all, want) {
		t.Errorf("after the moves the lists hold %d elements %v, want the %d pushed", len(all), all, n)
	}
}

// TestListAndBitmapAccounting: what LINSERT, LMOVE, RPOPLPUSH and LMPOP
// add and take is accounted as LPUSH and LPOP account it, and a string
// SETBIT grows is accounted as the string it holds: deleting everything
// gives every byte back.
func TestListAndBitmapAccounting(t *testing.T) {
	s := openTest(t, Config{Workers: 1})
	c := newCaller(s, 0)
	used := func() int64 { return s.db.used.Load() }
	base := used()
	c.do("RPUSH", "l", "a", "b", "c")
	withB := used()
	c.do("LINSERT", "l", "BEFORE", "b", "inserted")
	c.do("LREM", "l", "0", "inserted")
	if used() != withB {
		t.Errorf("LINSERT then LREM: %d bytes more", used()-withB)
	}
	c.do("LMOVE", "l", "m", "LEFT", "RIGHT")
	c.do("RPOPLPUSH", "m", "l")
	c.do("LMOVE", "l", "l", "LEFT", "LEFT")
	if used() != withB {
		t.Errorf("LMOVE to a new key and back: %d bytes more", used()-withB)
	}
	c.do("LMPOP", "1", "l", "RIGHT", "COUNT", "2")
	c.do("RPUSH", "l", "b", "a")
	if used() != withB {
		t.Errorf("LMPOP and RPUSH back: %d bytes more", used()-withB)
	}
	c.do("SETBIT", "bits", "100000", "1")
	sh, _ := s.db.shardOf([]byte("bits"))
	sh.mu.RLock()
	e := sh.m["bits"]
	size, want := e.size, stringSize([]byte("bits"), e.str)
	sh.mu.RUnlock()
	if len(e.str) != 100000/8+1 || size != want {
		t.Errorf("SETBIT's string: %d bytes, accounted %d, want %d", len(e.str), size, want)
	}
	if r := c.do("BITCOUNT", "bits"); r != ":1\r\n" {
		t.Errorf("BITCOUNT after SETBIT: %q", r)
	}
	c.do("DEL", "l", "bits")
	if used() != base {
		t.Errorf("after DEL: %d bytes left", used()-base)
	}
}

// TestLcsLongStrings: LCS of strings of a few thousand bytes (a table of
// millions of cells) agrees with a direct computation, and a table past
// proto-max-bulk-len is refused with redis-server's error, as is a SETBIT
// whose byte is past it once CONFIG SET has lowered it.
func TestLcsLongStrings(t *testing.T) {
	s := openTest(t, Config{Workers: 1})
	c := newCaller(s, 0)
	a := strings.Repeat("abcde", 600)
	b := strings.Repeat("aebdc", 600)
	c.do("SET", "a", a)
	c.do("SET", "b", b)
	if r, want := c.do("LCS", "a", "b", "LEN"), ":"+strconv.Itoa(lcsLen(a, b))+"\r\n"; r != want {
		t.Errorf("LCS LEN: %q, want %q", r, want)
	}
	big := strings.Repeat("x", 12000)
	c.do("SET", "big", big)
	c.do("CONFIG", "SET", "proto-max-bulk-len", "1mb")
	if r := c.do("LCS", "big", "big", "LEN"); r != "-ERR Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len\r\n" {
		t.Errorf("LCS past proto-max-bulk-len: %q", r)
	}
	if r := c.do("SETBIT", "bits", "8388608", "1"); r != "-ERR bit offset is not an integer or out of range\r\n" {
		t.Errorf("SETBIT past proto-max-bulk-len: %q", r)
	}
	if r := c.do("SETBIT", "bits", "8388607", "1"); r != ":0\r\n" {
		t.Errorf("SETBIT of the last bit below proto-max-bulk-len: %q", r)
	}
	if r := c.do("STRLEN", "bits"); r != ":1048576\r\n" {
		t.Errorf("STRLEN after SETBIT 8388607: %q", r)
	}
}

// lcsLen is the length of the longest common subsequence of a and b, two
// rows at a time.
func lcsLen(a, b string) int {
	prev, cur := make([]int, len(b)+1), make([]int, len(b)+1)
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			if a[i-1] == b[j-1] {
				cur[j] = prev[j-1] + 1
			} else {
				cur[j] = max(prev[j], cur[j-1])
			}
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// TestListAndBitmapCommandsAllocateNothing: reading and setting bits of
// an existing string, LPOS without COUNT and rotating a list allocate
// nothing.
func TestListAndBitmapCommandsAllocateNothing(t *testing.T) {
	s := openTest(t, Config{Workers: 1})
	c := newCaller(s, 0)
	c.do("SET", "k", "some bits \xff\x00")
	c.do("RPUSH", "l", "a", "b", "c")
	checkNoAllocs(t, c, [][]string{
		{"GETBIT", "k", "5"}, {"SETBIT", "k", "5", "1"}, {"BITCOUNT", "k"}, {"BITCOUNT", "k", "3", "75", "BIT"},
		{"BITPOS", "k", "0", "3", "75", "BIT"}, {"BITPOS", "k", "1", "-2"}, {"LPOS", "l", "b", "RANK", "-1"},
		{"LMOVE", "l", "l", "LEFT", "RIGHT"}, {"RPOPLPUSH", "l", "l"},
	})
}
