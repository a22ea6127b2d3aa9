package redis

import (
	"math/big"
	"strings"
)

// The blocking list and sorted-set commands (BLPOP, BRPOP, BRPOPLPUSH,
// BLMOVE, BLMPOP, BZPOPMIN, BZPOPMAX, BZMPOP) without blocking: psp never
// parks a request (it would hold a worker), so each does what
// redis-server does up to the point where it would block. Its arguments
// are checked in redis-server's order, a key of another type answers
// WRONGTYPE, and when one of its keys holds data it pops and answers at
// once, as redis-server does. When none does, inside a transaction (EXEC)
// it answers as if its timeout had passed, as redis-server does for a
// client that may not block; anywhere else it answers an error saying it
// would block.

// blockTimeout checks a blocking command's timeout (seconds) as
// redis-server's getTimeoutFromObjectOrReply does: a long double, times
// 1000 rounded up to whole milliseconds, which must not be negative (a
// value past a long long's range converts to the most negative one, so is
// negative too).
func (c *ctx) blockTimeout(p []byte) bool {
	f, ok := parseLongDouble(p)
	if !ok {
		c.o.err("timeout is not a float or out of range")
		return false
	}
	ms := new(big.Float).SetPrec(ldPrec).Mul(f, big.NewFloat(1000))
	if ms.IsInf() || ms.Cmp(big.NewFloat(-1)) <= 0 || ms.Cmp(new(big.Float).SetInt64(1<<63-1)) > 0 {
		c.o.err("timeout is negative")
		return false
	}
	return true
}

// wouldBlock answers a blocking command none of whose keys holds data:
// inside EXEC, as redis-server answers a timeout (null, a null array for
// the pops); elsewhere, an error saying psp does not block.
func (c *ctx) wouldBlock(nullArray bool) {
	switch {
	case !c.inExec:
		c.o.err(strings.ToUpper(c.cmd.name) + " would block: psp does not block clients (no key given holds data)")
	case nullArray:
		c.o.nullArray()
	default:
		c.o.null()
	}
}

// cmdBpop answers BLPOP and BRPOP: the first of the keys holding a list
// gives up its first (last) element, answered with the key's name.
func cmdBpop(c *ctx) {
	front := c.cmd.name == "blpop"
	last := len(c.argv) - 1
	if !c.blockTimeout(c.argv[last]) {
		return
	}
	keys := c.argv[1:last]
	if !c.bpop(keys, front) {
		c.wouldBlock(true)
	}
}

// bpop pops one element of the first of keys holding a list and answers
// [key, element], or answers WRONGTYPE; popped is false, with nothing
// answered, when no key holds a list.
func (c *ctx) bpop(keys [][]byte, front bool) (popped bool) {
	c.lockKeys(keys, true)
	defer c.unlockKeys(true)
	for _, k := range keys {
		sh, _ := c.shardFor(k)
		e := c.s.db.lookupWrite(sh, k, &c.clk)
		if e == nil {
			continue
		}
		if c.wrongType(e, kindList) {
			return true
		}
		l := e.obj.(*list)
		v := l.pop(front)
		c.o.arrayLen(2)
		c.o.bulk(k)
		c.o.bulk(v)
		if l.len() == 0 {
			c.s.db.remove(sh, e)
		} else {
			c.s.db.resize(e, e.size-elemSize(v))
		}
		return true
	}
	return false
}

// cmdBlmove answers BLMOVE and BRPOPLPUSH as LMOVE and RPOPLPUSH when the
// source holds a list.
func cmdBlmove(c *ctx) {
	fromFront, toFront := false, true // BRPOPLPUSH
	timeout := 3
	if c.cmd.name == "blmove" {
		var ok bool
		if fromFront, ok = c.listSide(3); !ok {
			return
		}
		if toFront, ok = c.listSide(4); !ok {
			return
		}
		timeout = 5
	}
	if !c.blockTimeout(c.argv[timeout]) {
		return
	}
	if !c.lmove(fromFront, toFront) {
		c.wouldBlock(false)
	}
}

// cmdBlmpop answers BLMPOP as LMPOP (its timeout is checked after the
// other arguments, as redis-server checks it).
func cmdBlmpop(c *ctx) {
	keys, right, count, ok := c.mpopArgs(2, "left", "right")
	if !ok || !c.blockTimeout(c.argv[1]) {
		return
	}
	if !c.lmpop(keys, !right, count) {
		c.wouldBlock(true)
	}
}

// cmdBzpop answers BZPOPMIN and BZPOPMAX: the first of the keys holding
// a sorted set gives up its lowest (highest) member, answered as [key,
// member, score].
func cmdBzpop(c *ctx) {
	max := c.cmd.name == "bzpopmax"
	last := len(c.argv) - 1
	if !c.blockTimeout(c.argv[last]) {
		return
	}
	if !c.bzpop(c.argv[1:last], max) {
		c.wouldBlock(true)
	}
}

func (c *ctx) bzpop(keys [][]byte, max bool) (popped bool) {
	c.lockKeys(keys, true)
	defer c.unlockKeys(true)
	for _, k := range keys {
		sh, _ := c.shardFor(k)
		e := c.s.db.lookupWrite(sh, k, &c.clk)
		if e == nil {
			continue
		}
		if c.wrongType(e, kindZSet) {
			return true
		}
		z := e.obj.(*zsetObj)
		x := z.zsl.header.level[0].forward
		if max {
			x = z.zsl.tail
		}
		m, s := x.member, x.score
		c.o.arrayLen(3)
		c.o.bulk(k)
		c.o.bulkString(m)
		c.o.double(s)
		z.remove(m)
		c.s.db.resize(e, e.size-zmemberSize(m))
		c.dropIfEmpty(sh, e, z)
		return true
	}
	return false
}

// cmdBzmpop answers BZMPOP as ZMPOP.
func cmdBzmpop(c *ctx) {
	keys, max, count, ok := c.mpopArgs(2, "min", "max")
	if !ok || !c.blockTimeout(c.argv[1]) {
		return
	}
	if !c.zmpop(keys, max, count) {
		c.wouldBlock(true)
	}
}
