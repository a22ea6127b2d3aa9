package redis

// Range kinds and directions of ZRANGE and its kin (redis-server's
// zrange_type and zrange_direction).
const (
	zrangeAuto = iota
	zrangeRank
	zrangeScore
	zrangeLex
)

const (
	zrangeDirAuto = 0
	zrangeForward = 1
	zrangeReverse = -1
)

// cmdZrange answers ZRANGE (BYSCORE, BYLEX, REV, LIMIT, WITHSCORES),
// ZREVRANGE, ZRANGEBYSCORE, ZREVRANGEBYSCORE, ZRANGEBYLEX, ZREVRANGEBYLEX
// and ZRANGESTORE, as redis-server's zrangeGenericCommand does.
func cmdZrange(c *ctx) {
	switch c.cmd.name {
	case "zrange":
		c.zrange(1, false, zrangeAuto, zrangeDirAuto)
	case "zrevrange":
		c.zrange(1, false, zrangeRank, zrangeReverse)
	case "zrangebyscore":
		c.zrange(1, false, zrangeScore, zrangeForward)
	case "zrevrangebyscore":
		c.zrange(1, false, zrangeScore, zrangeReverse)
	case "zrangebylex":
		c.zrange(1, false, zrangeLex, zrangeForward)
	case "zrevrangebylex":
		c.zrange(1, false, zrangeLex, zrangeReverse)
	case "zrangestore":
		c.zrange(2, true, zrangeAuto, zrangeDirAuto)
	}
}

// zrange is zrangeGenericCommand: the source key is argument src, its
// range's ends the two after it, then the options; store: the range is
// stored at argument 1 (ZRANGESTORE) instead of answered.
func (c *ctx) zrange(src int, store bool, kind, dir int) {
	withScores := false
	offset, limit := int64(0), int64(-1)
	for j := src + 3; j < len(c.argv); j++ {
		left := len(c.argv) - j - 1
		opt := c.argv[j]
		switch {
		case !store && equalFold(opt, "withscores"):
			withScores = true
		case equalFold(opt, "limit") && left >= 2:
			var ok bool
			if offset, ok = c.intArg(j + 1); !ok {
				return
			}
			if limit, ok = c.intArg(j + 2); !ok {
				return
			}
			j += 2
		case dir == zrangeDirAuto && equalFold(opt, "rev"):
			dir = zrangeReverse
		case kind == zrangeAuto && equalFold(opt, "bylex"):
			kind = zrangeLex
		case kind == zrangeAuto && equalFold(opt, "byscore"):
			kind = zrangeScore
		default:
			c.o.writeString(errSyntax)
			return
		}
	}
	if dir == zrangeDirAuto {
		dir = zrangeForward
	}
	if kind == zrangeAuto {
		kind = zrangeRank
	}
	rev := dir == zrangeReverse
	if limit != -1 && kind == zrangeRank {
		c.o.err("syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX")
		return
	}
	if withScores && kind == zrangeLex {
		c.o.err("syntax error, WITHSCORES not supported in combination with BYLEX")
		return
	}
	minArg, maxArg := c.argv[src+1], c.argv[src+2]
	if rev && kind != zrangeRank {
		minArg, maxArg = maxArg, minArg
	}
	var start, end int64
	var sr scoreRange
	var lr lexRange
	switch kind {
	case zrangeRank:
		var ok bool
		if start, end, ok = c.intArgs(src+1, src+2); !ok {
			return
		}
	case zrangeScore:
		var ok1, ok2 bool
		sr.min, sr.minex, ok1 = parseRangeBound(minArg)
		sr.max, sr.maxex, ok2 = parseRangeBound(maxArg)
		if !ok1 || !ok2 {
			c.o.err("min or max is not a float")
			return
		}
	case zrangeLex:
		var ok bool
		if lr, ok = parseLexRange(minArg, maxArg); !ok {
			c.o.err("min or max not valid string range item")
			return
		}
	}

	var z *zsetObj
	if store {
		c.lockKeys(c.argv[1:3], true)
		defer c.unlockKeys(true)
		sh, _ := c.shardFor(c.argv[src])
		e := c.s.db.lookupWrite(sh, c.argv[src], &c.clk)
		c.countLookup(e)
		if c.wrongType(e, kindZSet) {
			return
		}
		if e == nil {
			c.storeZset(c.argv[1], nil)
			return
		}
		z = e.obj.(*zsetObj)
	} else {
		sh, v, ok := readValue[*zsetObj](c, c.argv[src], kindZSet, emptyArray)
		defer sh.mu.RUnlock()
		if !ok {
			return
		}
		z = v
	}

	var first *zslNode
	var n int64
	switch kind {
	case zrangeRank:
		first, n = z.rankRange(start, end, rev)
	case zrangeScore:
		first, n = z.scoreRange(&sr, offset, limit, rev)
	case zrangeLex:
		first, n = z.lexRange(&lr, offset, limit, rev)
	}
	if store {
		dst := newZSetObj()
		// A range of more members than a listpack holds is stored as
		// a skip list from the start (zrangeResultBeginStore).
		dst.big = kind == zrangeRank && n > zsetSmallEntries
		for x := first; n > 0; x, n = step(x, rev), n-1 {
			dst.add(x.member, x.score)
		}
		c.storeZset(c.argv[1], dst)
		return
	}
	c.writeNodes(first, n, rev, withScores)
}

// step is the node after x going forward, or before it when rev.
func step(x *zslNode, rev bool) *zslNode {
	if rev {
		return x.backward
	}
	return x.level[0].forward
}

// writeNodes answers n nodes from first, with their scores or not.
func (c *ctx) writeNodes(first *zslNode, n int64, rev, withScores bool) {
	if withScores {
		c.o.pairs(int(n))
	} else {
		c.o.arrayLen(int(n))
	}
	for x := first; n > 0 && !c.o.failed; x, n = step(x, rev), n-1 {
		if withScores {
			c.o.pair()
		}
		c.o.bulkString(x.member)
		if withScores {
			c.o.double(x.score)
		}
	}
}

// rankRange is the first node and the length of the ranks [start, end]
// (negative: from the end), counted from the end when rev.
func (z *zsetObj) rankRange(start, end int64, rev bool) (*zslNode, int64) {
	n := int64(z.card())
	start, end, ok := listRange(start, end, n)
	if !ok {
		return nil, 0
	}
	if rev {
		return z.zsl.byRank(uint64(n - start)), end - start + 1
	}
	return z.zsl.byRank(uint64(start + 1)), end - start + 1
}

// scoreRange is the first node and the number of nodes in r, after
// offset of them, at most limit (negative: all), as redis-server's
// genericZrangebyscoreCommand walks them.
func (z *zsetObj) scoreRange(r *scoreRange, offset, limit int64, rev bool) (*zslNode, int64) {
	if offset > 0 && offset >= int64(z.card()) {
		return nil, 0
	}
	var first *zslNode
	if rev {
		first = z.zsl.lastIn(r)
	} else {
		first = z.zsl.firstIn(r)
	}
	for ; first != nil && offset != 0; offset-- {
		first = step(first, rev)
	}
	var n int64
	for x, l := first, limit; x != nil && l != 0; x, l = step(x, rev), l-1 {
		if (rev && !r.gteMin(x.score)) || (!rev && !r.lteMax(x.score)) {
			break
		}
		n++
	}
	return first, n
}

// lexRange is scoreRange for a lex range (genericZrangebylexCommand).
func (z *zsetObj) lexRange(r *lexRange, offset, limit int64, rev bool) (*zslNode, int64) {
	var first *zslNode
	if rev {
		first = z.lastInLex(r)
	} else {
		first = z.firstInLex(r)
	}
	for ; first != nil && offset != 0; offset-- {
		first = step(first, rev)
	}
	var n int64
	for x, l := first, limit; x != nil && l != 0; x, l = step(x, rev), l-1 {
		if (rev && !r.gteMin(x.member)) || (!rev && !r.lteMax(x.member)) {
			break
		}
		n++
	}
	return first, n
}

// countLookup counts a keyspace hit or miss for a key looked up for
// reading by a command holding its shard already.
func (c *ctx) countLookup(e *entry) {
	if e == nil {
		c.w.stats.misses.Add(1)
	} else {
		c.w.stats.hits.Add(1)
	}
}

// storeZset replaces key (its shard write-locked by the caller), whatever
// it holds, with z, or deletes it when z is nil or empty, as
// redis-server's STORE commands do (the new key has no expiry), and
// answers z's size.
func (c *ctx) storeZset(key []byte, z *zsetObj) {
	sh, h := c.shardFor(key)
	old := c.s.db.lookupWrite(sh, key, &c.clk)
	if old != nil {
		c.s.db.remove(sh, old)
	}
	if z == nil || z.card() == 0 {
		if old != nil {
			sh.modified(key)
		}
		c.o.writeString(czero)
		return
	}
	e := c.s.db.add(sh, key, h, kindZSet)
	e.obj = z
	size := e.size
	for x := z.zsl.header.level[0].forward; x != nil; x = x.level[0].forward {
		size += zmemberSize(x.member)
	}
	c.s.db.resize(e, size)
	sh.modified(key)
	c.o.integer(int64(z.card()))
}

// cmdZlexcount answers ZLEXCOUNT.
func cmdZlexcount(c *ctx) {
	r, ok := parseLexRange(c.argv[2], c.argv[3])
	if !ok {
		c.o.err("min or max not valid string range item")
		return
	}
	sh, z, ok := readValue[*zsetObj](c, c.argv[1], kindZSet, czero)
	defer sh.mu.RUnlock()
	if !ok {
		return
	}
	var n int64
	if first := z.firstInLex(&r); first != nil {
		if !z.big {
			for x := first; x != nil && r.lteMax(x.member); x = x.level[0].forward {
				n++
			}
		} else {
			n = int64(z.card()) - int64(z.zsl.rank(first.score, first.member)) + 1
			if last := z.lastInLex(&r); last != nil {
				n -= int64(z.card()) - int64(z.zsl.rank(last.score, last.member))
			}
		}
	}
	c.o.integer(n)
}

// cmdZremrange answers ZREMRANGEBYRANK, ZREMRANGEBYSCORE and
// ZREMRANGEBYLEX, as redis-server's zremrangeGenericCommand does.
func cmdZremrange(c *ctx) {
	var start, end int64
	var sr scoreRange
	var lr lexRange
	name := c.cmd.name
	switch name {
	case "zremrangebyrank":
		var ok bool
		if start, end, ok = c.intArgs(2, 3); !ok {
			return
		}
	case "zremrangebyscore":
		var ok1, ok2 bool
		sr.min, sr.minex, ok1 = parseRangeBound(c.argv[2])
		sr.max, sr.maxex, ok2 = parseRangeBound(c.argv[3])
		if !ok1 || !ok2 {
			c.o.err("min or max is not a float")
			return
		}
	default:
		var ok bool
		if lr, ok = parseLexRange(c.argv[2], c.argv[3]); !ok {
			c.o.err("min or max not valid string range item")
			return
		}
	}
	sh, e, ok := c.writeKind(c.argv[1], kindZSet, czero)
	defer sh.mu.Unlock()
	if !ok {
		return
	}
	z := e.obj.(*zsetObj)
	var first *zslNode
	var n int64
	switch name {
	case "zremrangebyrank":
		first, n = z.rankRange(start, end, false)
	case "zremrangebyscore":
		first = z.zsl.firstIn(&sr)
		for x := first; x != nil && sr.lteMax(x.score); x = x.level[0].forward {
			n++
		}
	default:
		first = z.firstToDeleteByLex(&lr)
		for x := first; x != nil && lr.lteMax(x.member); x = x.level[0].forward {
			n++
		}
	}
	deleted := n
	for x := first; n > 0; n-- {
		next := x.level[0].forward
		z.remove(x.member)
		c.s.db.resize(e, e.size-zmemberSize(x.member))
		x = next
	}
	c.dropIfEmpty(sh, e, z)
	if deleted > 0 {
		sh.modified(c.argv[1])
	}
	c.o.integer(deleted)
}
