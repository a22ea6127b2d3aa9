package redis

import (
	"math"
)

func zmemberSize(m string) int64 { return 3*elemOverhead + int64(len(m)) }

// ZADD's input flags.
const (
	zaddNX = 1 << iota
	zaddXX
	zaddGT
	zaddLT
	zaddIncr
)

// cmdZadd answers ZADD (with NX, XX, GT, LT, CH, INCR) and ZINCRBY, as
// redis-server's zaddGenericCommand does.
func cmdZadd(c *ctx) {
	flags, ch := 0, false
	if c.cmd.name == "zincrby" {
		flags = zaddIncr
	}
	// ZINCRBY's arguments are read for options too, as redis-server's
	// zaddGenericCommand reads them: "ZINCRBY k XX 1" is a syntax error.
	i := 2
options:
	for ; i < len(c.argv); i++ {
		switch opt := c.argv[i]; {
		case equalFold(opt, "nx"):
			flags |= zaddNX
		case equalFold(opt, "xx"):
			flags |= zaddXX
		case equalFold(opt, "ch"):
			ch = true
		case equalFold(opt, "incr"):
			flags |= zaddIncr
		case equalFold(opt, "gt"):
			flags |= zaddGT
		case equalFold(opt, "lt"):
			flags |= zaddLT
		default:
			break options
		}
	}
	elements := len(c.argv) - i
	if elements%2 != 0 || elements == 0 {
		c.o.writeString(errSyntax)
		return
	}
	elements /= 2
	incr, nx, xx, gt, lt := flags&zaddIncr != 0, flags&zaddNX != 0, flags&zaddXX != 0, flags&zaddGT != 0, flags&zaddLT != 0
	switch {
	case nx && xx:
		c.o.err("XX and NX options at the same time are not compatible")
		return
	case (gt && nx) || (lt && nx) || (gt && lt):
		c.o.err("GT, LT, and/or NX options at the same time are not compatible")
		return
	case incr && elements > 1:
		c.o.err("INCR option supports a single increment-element pair")
		return
	}
	for j := 0; j < elements; j++ {
		if _, ok := parseDouble(c.argv[i+2*j]); !ok {
			c.o.writeString(errNotFloat)
			return
		}
	}
	key := c.argv[1]
	sh, h, e := c.writeEntry(key)
	defer sh.mu.Unlock()
	if c.wrongType(e, kindZSet) {
		return
	}
	added, updated, processed := 0, 0, 0
	var score float64
	if e == nil && !xx {
		e = c.s.db.add(sh, key, h, kindZSet)
		z := newZSetObj()
		// A first member longer than a listpack's values makes a
		// skip list from the start (zaddGenericCommand).
		z.big = len(c.argv[i+1]) > smallValue
		e.obj = z
	}
	if e != nil {
		z := e.obj.(*zsetObj)
		for j := 0; j < elements; j++ {
			score, _ = parseDouble(c.argv[i+2*j])
			member := c.argv[i+2*j+1]
			cur, exists := z.scores[string(member)]
			if exists {
				if nx {
					continue
				}
				if incr {
					score += cur
					if math.IsNaN(score) {
						c.o.err("resulting score is not a number (NaN)")
						c.dropIfEmpty(sh, e, z)
						return
					}
				}
				if (lt && score >= cur) || (gt && score <= cur) {
					continue
				}
				processed++
				if score != cur {
					z.add(string(member), score)
					updated++
				}
				continue
			}
			if xx {
				continue
			}
			m := string(member)
			z.add(m, score)
			c.s.db.resize(e, e.size+zmemberSize(m))
			added++
			processed++
		}
		c.dropIfEmpty(sh, e, z)
		if added+updated > 0 {
			sh.modified(key)
		}
	}
	if incr {
		if processed > 0 {
			c.o.double(score)
		} else {
			c.o.null()
		}
		return
	}
	if ch {
		c.o.integer(int64(added + updated))
	} else {
		c.o.integer(int64(added))
	}
}

// dropIfEmpty deletes a sorted set left empty (created by a ZADD that
// added nothing).
func (c *ctx) dropIfEmpty(sh *shard, e *entry, z *zsetObj) {
	if z.card() == 0 {
		c.s.db.remove(sh, e)
	}
}

func cmdZrem(c *ctx) {
	sh, e, ok := c.writeKind(c.argv[1], kindZSet, czero)
	defer sh.mu.Unlock()
	if !ok {
		return
	}
	z := e.obj.(*zsetObj)
	deleted := 0
	for _, m := range c.argv[2:] {
		if z.remove(string(m)) {
			deleted++
			c.s.db.resize(e, e.size-zmemberSize(string(m)))
		}
		if z.card() == 0 {
			c.s.db.remove(sh, e)
			break
		}
	}
	if deleted > 0 {
		sh.modified(c.argv[1])
	}
	c.o.integer(int64(deleted))
}

func cmdZscore(c *ctx) {
	sh, z, ok := readValue[*zsetObj](c, c.argv[1], kindZSet, nullBulk)
	defer sh.mu.RUnlock()
	if !ok {
		return
	}
	if s, found := z.scores[string(c.argv[2])]; found {
		c.o.double(s)
	} else {
		c.o.null()
	}
}

func cmdZcard(c *ctx) {
	sh, z, ok := readValue[*zsetObj](c, c.argv[1], kindZSet, czero)
	defer sh.mu.RUnlock()
	if !ok {
		return
	}
	c.o.integer(int64(z.card()))
}

// cmdZrank answers ZRANK and ZREVRANK.
func cmdZrank(c *ctx) {
	sh, z, ok := readValue[*zsetObj](c, c.argv[1], kindZSet, nullBulk)
	defer sh.mu.RUnlock()
	if !ok {
		return
	}
	m := c.argv[2]
	s, found := z.scores[string(m)]
	if !found {
		c.o.null()
		return
	}
	r := int64(z.zsl.rank(s, string(m))) - 1
	if c.cmd.name == "zrevrank" {
		r = int64(z.card()) - 1 - r
	}
	c.o.integer(r)
}

func cmdZcount(c *ctx) {
	var r scoreRange
	var ok1, ok2 bool
	r.min, r.minex, ok1 = parseRangeBound(c.argv[2])
	r.max, r.maxex, ok2 = parseRangeBound(c.argv[3])
	if !ok1 || !ok2 {
		c.o.err("min or max is not a float")
		return
	}
	sh, z, ok := readValue[*zsetObj](c, c.argv[1], kindZSet, czero)
	defer sh.mu.RUnlock()
	if !ok {
		return
	}
	var n int64
	if first := z.zsl.firstIn(&r); first != nil {
		last := z.zsl.lastIn(&r)
		n = int64(z.zsl.rank(last.score, last.member)) - int64(z.zsl.rank(first.score, first.member)) + 1
	}
	c.o.integer(n)
}

// cmdZpop answers ZPOPMIN and ZPOPMAX.
func cmdZpop(c *ctx) {
	if len(c.argv) > 3 {
		c.o.writeString(errSyntax)
		return
	}
	count, hasCount, ok := c.countArg()
	if !ok {
		return
	}
	if !hasCount {
		count = -1
	}
	sh, e, ok := c.writeKind(c.argv[1], kindZSet, emptyArray)
	defer sh.mu.Unlock()
	if !ok {
		return
	}
	if count == 0 {
		c.o.writeString(emptyArray)
		return
	}
	if count == -1 {
		count = 1
	}
	z := e.obj.(*zsetObj)
	n := min(count, int64(z.card()))
	// A count's pairs are nested in RESP3, as redis-server's.
	nested := c.o.resp3 && hasCount
	if nested {
		c.o.arrayLen(int(n))
	} else {
		c.o.arrayLen(int(2 * n))
	}
	for range n {
		var x *zslNode
		if c.cmd.name == "zpopmax" {
			x = z.zsl.tail
		} else {
			x = z.zsl.header.level[0].forward
		}
		m, s := x.member, x.score
		z.remove(m)
		c.s.db.resize(e, e.size-zmemberSize(m))
		if nested {
			c.o.pair()
		}
		c.o.bulkString(m)
		c.o.double(s)
	}
	c.dropIfEmpty(sh, e, z)
	sh.modified(c.argv[1])
}

// cmdZscan returns the whole sorted set in one call (see scanWhole), its
// scores as redis-server stores a small one's.
func cmdZscan(c *ctx) {
	scanWhole(c, kindZSet, 2, func(z *zsetObj, match func([]byte) bool) {
		var b [32]byte
		for x := z.zsl.header.level[0].forward; x != nil; x = x.level[0].forward {
			if match(stringBytes(x.member)) {
				c.o.bulkString(x.member)
				c.o.bulk(d2string(b[:0], x.score))
			}
		}
	})
}
