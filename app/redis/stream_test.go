package redis

import (
	"strconv"
	"strings"
	"testing"
)

// TestStreamAccounting: each entry XADD adds is accounted, XDEL and
// XTRIM (exact and ~) give its bytes back down to the empty stream's,
// COPY accounts the copy as its source, and DEL returns to the start.
func TestStreamAccounting(t *testing.T) {
	s := openTest(t, Config{Workers: 1})
	c := newCaller(s, 0)
	used := func() int64 { return s.db.used.Load() }
	base := used()
	c.do("XADD", "s", "1-1", "f", "v")
	c.do("XDEL", "s", "1-1")
	empty := used() - base
	if r := c.do("TYPE", "s"); r != "+stream\r\n" {
		t.Fatalf("TYPE of an emptied stream: %q", r)
	}
	for i := 2; i < 400; i++ {
		c.do("XADD", "s", strconv.Itoa(i)+"-1", "f", strings.Repeat("x", i%50), "g", strconv.Itoa(i))
	}
	full := used() - base
	if full <= empty+398*40 {
		t.Fatalf("398 entries accounted %d bytes, the empty stream %d", full, empty)
	}
	c.do("COPY", "s", "d")
	if got := used() - base - full; got != full {
		t.Errorf("COPY accounted %d bytes, the source %d", got, full)
	}
	c.do("DEL", "d")
	c.do("XDEL", "s", "5-1", "6-1", "9999-1")
	if used()-base >= full {
		t.Errorf("XDEL of two entries gave nothing back: %d bytes of %d", used()-base, full)
	}
	if r := c.do("XTRIM", "s", "MAXLEN", "~", "150"); r == ":0\r\n" {
		t.Fatalf("XTRIM MAXLEN ~ 150 of 396 entries deleted nothing")
	}
	c.do("XTRIM", "s", "MINID", "350")
	c.do("XTRIM", "s", "MAXLEN", "0")
	if got := used() - base; got != empty {
		t.Errorf("emptied by XTRIM: %d bytes accounted, an emptied stream %d", got, empty)
	}
	c.do("DEL", "s")
	if used() != base {
		t.Errorf("%d bytes left after DEL", used()-base)
	}
}
