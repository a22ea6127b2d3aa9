package redis

import (
	"math/big"
)

// The blocking list and sorted-set commands (BLPOP, BRPOP, BRPOPLPUSH,
// BLMOVE, BLMPOP, BZPOPMIN, BZPOPMAX, BZMPOP). Their arguments are checked
// in redis-server's order, a key of another type answers WRONGTYPE, and
// when one of their keys holds data they pop and answer at once. When
// none does they block (blocking.go): the request parks until a key is
// written or the timeout passes; inside a transaction (EXEC) they answer
// at once as on a timeout, as redis-server does for a client that may not
// block.

// blockTimeout parses a blocking command's timeout (seconds) as
// redis-server's getTimeoutFromObjectOrReply does: a long double, times
// 1000 rounded up to whole milliseconds, which must not be negative (a
// value past a long long's range converts to the most negative one, so is
// negative too). It returns the timeout in ms (0: none).
func (c *ctx) blockTimeout(p []byte) (ms int64, ok bool) {
	f, ok := parseLongDouble(p)
	if !ok {
		c.o.err("timeout is not a float or out of range")
		return 0, false
	}
	m := new(big.Float).SetPrec(ldPrec).Mul(f, big.NewFloat(1000))
	if m.IsInf() || m.Cmp(big.NewFloat(-1)) <= 0 || m.Cmp(new(big.Float).SetInt64(1<<63-1)) > 0 {
		c.o.err("timeout is negative")
		return 0, false
	}
	i, acc := m.Int64()
	if acc == big.Below {
		i++ // rounded up, as ceill
	}
	return max(i, 0), true
}

// cmdBpop answers BLPOP and BRPOP: the first of the keys holding a list
// gives up its first (last) element, answered with the key's name.
func cmdBpop(c *ctx) {
	front := c.cmd.name == "blpop"
	last := len(c.argv) - 1
	timeout, ok := c.blockTimeout(c.argv[last])
	if !ok {
		return
	}
	c.block(c.argv[1:last], timeout, blockOp{kind: blockPop, front: front})
}

// bpop pops one element of the first of keys holding a list and answers
// [key, element], or answers WRONGTYPE (for a client blocked already, a
// key of another type is passed over); popped is false, with nothing
// answered, when no key holds a list.
func (c *ctx) bpop(keys [][]byte, front bool) (popped bool) {
	c.lockKeys(keys, true)
	defer c.unlockKeys(true)
	k, sh, e, done := c.firstOfKind(keys, kindList)
	if e == nil {
		return done
	}
	l := e.obj.(*list)
	v := l.pop(front)
	c.o.arrayLen(2)
	c.o.bulk(k)
	c.o.bulk(v)
	c.s.db.shrink(sh, e, l.len() == 0, elemSize(v))
	sh.modified(k)
	return true
}

// firstOfKind finds the first of keys (write-locked by the caller) that
// holds a value. Of kind k, it returns the key, its shard and its entry.
// Of another kind, it answers WRONGTYPE and reports done, except for a
// client blocked already (c.waiting), which passes over it. A nil entry
// with done false: no key holds a value of kind k.
func (c *ctx) firstOfKind(keys [][]byte, k kind) (key []byte, sh *shard, e *entry, done bool) {
	for _, key := range keys {
		sh, _ := c.shardFor(key)
		e := c.s.db.lookupWrite(sh, key, &c.clk)
		switch {
		case e == nil:
		case e.kind == k:
			return key, sh, e, false
		case !c.waiting:
			c.o.writeString(errWrongType)
			return nil, nil, nil, true
		}
	}
	return nil, nil, nil, false
}

// cmdBlmove answers BLMOVE and BRPOPLPUSH as LMOVE and RPOPLPUSH when the
// source holds a list.
func cmdBlmove(c *ctx) {
	fromFront, toFront := false, true // BRPOPLPUSH
	at := 3
	if c.cmd.name == "blmove" {
		var ok bool
		if fromFront, ok = c.listSide(3); !ok {
			return
		}
		if toFront, ok = c.listSide(4); !ok {
			return
		}
		at = 5
	}
	timeout, ok := c.blockTimeout(c.argv[at])
	if !ok {
		return
	}
	c.block(c.argv[1:2], timeout, blockOp{kind: blockMove, front: fromFront, toFront: toFront, dst: c.argv[2]})
}

// cmdBlmpop answers BLMPOP as LMPOP (its timeout is checked after the
// other arguments, as redis-server checks it).
func cmdBlmpop(c *ctx) {
	keys, right, count, ok := c.mpopArgs(2, "left", "right")
	if !ok {
		return
	}
	timeout, ok := c.blockTimeout(c.argv[1])
	if !ok {
		return
	}
	c.block(keys, timeout, blockOp{kind: blockMpop, front: !right, count: count})
}

// cmdBzpop answers BZPOPMIN and BZPOPMAX: the first of the keys holding
// a sorted set gives up its lowest (highest) member, answered as [key,
// member, score].
func cmdBzpop(c *ctx) {
	max := c.cmd.name == "bzpopmax"
	last := len(c.argv) - 1
	timeout, ok := c.blockTimeout(c.argv[last])
	if !ok {
		return
	}
	c.block(c.argv[1:last], timeout, blockOp{kind: blockZpop, max: max})
}

// bzpop pops the lowest (highest) member of the first of keys holding a
// sorted set and answers [key, member, score], or answers WRONGTYPE (for
// a client blocked already, a key of another type is passed over);
// popped is false, with nothing answered, when no key holds a sorted set.
func (c *ctx) bzpop(keys [][]byte, max bool) (popped bool) {
	c.lockKeys(keys, true)
	defer c.unlockKeys(true)
	k, sh, e, done := c.firstOfKind(keys, kindZSet)
	if e == nil {
		return done
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
	sh.modified(k)
	return true
}

// cmdBzmpop answers BZMPOP as ZMPOP.
func cmdBzmpop(c *ctx) {
	keys, max, count, ok := c.mpopArgs(2, "min", "max")
	if !ok {
		return
	}
	timeout, ok := c.blockTimeout(c.argv[1])
	if !ok {
		return
	}
	c.block(keys, timeout, blockOp{kind: blockZmpop, max: max, count: count})
}
