package redis

import (
	"math"
	"slices"
	"strings"
)

// zsrc is an input of ZUNION, ZINTER, ZDIFF and their kin: a sorted set,
// a set (each member scored 1), or nothing (a missing key).
type zsrc struct {
	z      *zsetObj
	s      *setObj
	weight float64
}

func (src *zsrc) length() int {
	switch {
	case src.z != nil:
		return src.z.card()
	case src.s != nil:
		return src.s.card()
	}
	return 0
}

// same reports whether two inputs are one key given twice.
func (src *zsrc) same(o *zsrc) bool {
	return (src.z != nil && src.z == o.z) || (src.s != nil && src.s == o.s)
}

func (src *zsrc) find(m string) (float64, bool) {
	switch {
	case src.z != nil:
		s, ok := src.z.scores[m]
		return s, ok
	case src.s != nil:
		return 1, src.s.has(stringBytes(m))
	}
	return 0, false
}

// each calls f with each member and its score until f returns false.
func (src *zsrc) each(f func(m string, score float64) bool) {
	switch {
	case src.z != nil:
		for x := src.z.zsl.header.level[0].forward; x != nil; x = x.level[0].forward {
			if !f(x.member, x.score) {
				return
			}
		}
	case src.s != nil:
		for i := range src.s.card() {
			if !f(src.s.memberString(i), 1) {
				return
			}
		}
	}
}

// Aggregates of ZUNION and ZINTER.
const (
	aggrSum = iota
	aggrMin
	aggrMax
)

// aggregate is redis-server's zunionInterAggregate.
func aggregate(target *float64, val float64, aggr int) {
	switch aggr {
	case aggrSum:
		*target += val
		if math.IsNaN(*target) { // inf + -inf
			*target = 0
		}
	case aggrMin:
		if val < *target {
			*target = val
		}
	case aggrMax:
		if val > *target {
			*target = val
		}
	}
}

// zscored is a member of a computed sorted set.
type zscored struct {
	member string
	score  float64
}

// Set operations of cmdZsetop.
const (
	opUnion = iota
	opInter
	opDiff
)

// cmdZsetop answers ZUNION, ZINTER, ZDIFF, ZUNIONSTORE, ZINTERSTORE,
// ZDIFFSTORE and ZINTERCARD, as redis-server's
// zunionInterDiffGenericCommand does: every key's shard is locked
// together (for writing for a STORE), so the result is that of one
// moment.
func cmdZsetop(c *ctx) {
	name := c.cmd.name
	store := strings.HasSuffix(name, "store")
	cardOnly := name == "zintercard"
	op := opUnion
	switch {
	case strings.HasPrefix(name, "zinter"):
		op = opInter
	case strings.HasPrefix(name, "zdiff"):
		op = opDiff
	}
	numIdx := 1
	if store {
		numIdx = 2
	}
	setnum, ok := c.intArg(numIdx)
	if !ok {
		return
	}
	if setnum < 1 {
		c.o.err("at least 1 input key is needed for '" + name + "' command")
		return
	}
	if setnum > int64(len(c.argv)-(numIdx+1)) {
		c.o.writeString(errSyntax)
		return
	}
	keys := c.argv[numIdx+1 : numIdx+1+int(setnum)]
	if store {
		all := append(c.w.keys[:0], c.argv[1])
		all = append(all, keys...)
		c.w.keys = all[:0]
		c.lockKeys(all, true)
		defer c.unlockKeys(true)
	} else {
		c.lockKeys(keys, false)
		defer func() {
			c.unlockKeys(false)
			if c.reap {
				c.reapKeys(keys)
			}
		}()
	}
	src := make([]zsrc, len(keys))
	for i, k := range keys {
		sh, _ := c.shardFor(k)
		var e *entry
		if store {
			e = c.s.db.lookupWrite(sh, k, &c.clk)
		} else {
			e = c.lookup(sh, k)
		}
		c.countLookup(e)
		src[i].weight = 1
		if e == nil {
			continue
		}
		switch e.kind {
		case kindZSet:
			src[i].z = e.obj.(*zsetObj)
		case kindSet:
			src[i].s = e.obj.(*setObj)
		default:
			c.o.writeString(errWrongType)
			return
		}
	}
	aggr, withScores, limit := aggrSum, false, int64(0)
	for j := numIdx + 1 + len(keys); j < len(c.argv); {
		left := len(c.argv) - j
		opt := c.argv[j]
		switch {
		case op != opDiff && !cardOnly && left >= len(keys)+1 && equalFold(opt, "weights"):
			j++
			for i := range src {
				w, ok := parseDouble(c.argv[j])
				if !ok {
					c.o.err("weight value is not a float")
					return
				}
				src[i].weight = w
				j++
			}
		case op != opDiff && !cardOnly && left >= 2 && equalFold(opt, "aggregate"):
			switch a := c.argv[j+1]; {
			case equalFold(a, "sum"):
				aggr = aggrSum
			case equalFold(a, "min"):
				aggr = aggrMin
			case equalFold(a, "max"):
				aggr = aggrMax
			default:
				c.o.writeString(errSyntax)
				return
			}
			j += 2
		case !store && !cardOnly && equalFold(opt, "withscores"):
			withScores = true
			j++
		case cardOnly && left >= 2 && equalFold(opt, "limit"):
			v, ok := string2ll(c.argv[j+1])
			if !ok || v < 0 {
				c.o.err("LIMIT can't be negative")
				return
			}
			limit = v
			j += 2
		default:
			c.o.writeString(errSyntax)
			return
		}
	}
	if op != opDiff {
		// From the smallest input to the largest (a stable sort, as
		// glibc's qsort of a small array is: the order of equal
		// sizes decides that of a sum's terms).
		slices.SortStableFunc(src, func(a, b zsrc) int { return a.length() - b.length() })
	}
	var res []zscored
	switch op {
	case opInter:
		var card int64
		src[0].each(func(m string, s float64) bool {
			score := src[0].weight * s
			if math.IsNaN(score) {
				score = 0
			}
			for j := 1; j < len(src); j++ {
				var value float64
				if src[j].same(&src[0]) {
					value = s * src[j].weight
				} else if v, ok := src[j].find(m); ok {
					value = v * src[j].weight
				} else {
					return true
				}
				aggregate(&score, value, aggr)
			}
			if cardOnly {
				card++
				return limit == 0 || card < limit
			}
			res = append(res, zscored{m, score})
			return true
		})
		if cardOnly {
			c.o.integer(card)
			return
		}
	case opUnion:
		acc := make(map[string]int)
		for i := range src {
			src[i].each(func(m string, s float64) bool {
				score := src[i].weight * s
				if math.IsNaN(score) {
					score = 0
				}
				if k, ok := acc[m]; ok {
					aggregate(&res[k].score, score, aggr)
				} else {
					acc[m] = len(res)
					res = append(res, zscored{m, score})
				}
				return true
			})
		}
	case opDiff:
		for j := 1; j < len(src); j++ {
			if src[j].same(&src[0]) {
				src[0] = zsrc{} // nothing is left
			}
		}
		src[0].each(func(m string, s float64) bool {
			for j := 1; j < len(src); j++ {
				if _, ok := src[j].find(m); ok {
					return true
				}
			}
			res = append(res, zscored{m, s})
			return true
		})
	}
	slices.SortFunc(res, func(a, b zscored) int {
		switch {
		case a.score < b.score:
			return -1
		case a.score > b.score:
			return 1
		}
		return strings.Compare(a.member, b.member)
	})
	if store {
		// Built as a skip list, then made a listpack when it is small
		// enough (zsetConvertToListpackIfNeeded).
		z := newZSetObj()
		for _, r := range res {
			z.big = z.big || len(r.member) > smallValue
		}
		z.big = z.big || len(res) > zsetSmallEntries
		for _, r := range res {
			z.add(r.member, r.score)
		}
		c.storeZset(c.argv[1], z)
		return
	}
	if withScores {
		c.o.pairs(len(res))
	} else {
		c.o.arrayLen(len(res))
	}
	for _, r := range res {
		if c.o.failed {
			return
		}
		if withScores {
			c.o.pair()
		}
		c.o.bulkString(r.member)
		if withScores {
			c.o.double(r.score)
		}
	}
}

// reapKeys deletes those of keys that have expired (a command that read
// them with their shards read-locked found them so), as reapExpired does
// for the keys a command's table entry locates.
func (c *ctx) reapKeys(keys [][]byte) {
	for _, k := range keys {
		sh, _ := c.shardFor(k)
		sh.mu.Lock()
		c.s.db.lookupWrite(sh, k, &c.clk)
		sh.mu.Unlock()
	}
	c.reap = false
}

// cmdZmpop answers ZMPOP: from the first of its keys holding a sorted
// set, its lowest or highest members, as redis-server's genericZpopCommand
// pops them; every key's shard is write-locked together.
func cmdZmpop(c *ctx) {
	keys, max, count, ok := c.mpopArgs(1, "min", "max")
	if !ok {
		return
	}
	if !c.zmpop(keys, max, count) {
		c.o.nullArray()
	}
}

// zmpop pops up to count members of the first of keys holding a sorted
// set and answers them with its name, or answers the error that stops
// it (for a client blocked already, a key of another type is passed
// over); popped is false, with nothing answered, when no key holds one.
func (c *ctx) zmpop(keys [][]byte, max bool, count int64) (popped bool) {
	c.lockKeys(keys, true)
	defer c.unlockKeys(true)
	k, sh, e, done := c.firstOfKind(keys, kindZSet)
	if e == nil {
		return done
	}
	z := e.obj.(*zsetObj)
	n := min(count, int64(z.card()))
	c.o.arrayLen(2)
	c.o.bulk(k)
	c.o.arrayLen(int(n))
	for range n {
		x := z.zsl.header.level[0].forward
		if max {
			x = z.zsl.tail
		}
		m, s := x.member, x.score
		z.remove(m)
		c.s.db.resize(e, e.size-zmemberSize(m))
		c.o.arrayLen(2)
		c.o.bulkString(m)
		c.o.double(s)
	}
	c.dropIfEmpty(sh, e, z)
	sh.modified(k)
	return true
}

func cmdZmscore(c *ctx) {
	sh, z, ok := readValue[*zsetObj](c, c.argv[1], kindZSet, "")
	defer sh.mu.RUnlock()
	if !ok {
		return
	}
	c.o.arrayLen(len(c.argv) - 2)
	for _, m := range c.argv[2:] {
		if s, found := z.scoreOf(m); found {
			c.o.double(s)
		} else {
			c.o.null()
		}
	}
}

// scoreOf is member m's score (z nil: a missing key, no member).
func (z *zsetObj) scoreOf(m []byte) (float64, bool) {
	if z == nil {
		return 0, false
	}
	s, ok := z.scores[string(m)]
	return s, ok
}

// randCountArgs parses the count and the flag (WITHSCORES, WITHVALUES)
// of ZRANDMEMBER and HRANDFIELD, as redis-server's zrandmemberCommand
// and hrandfieldCommand do; given is false without a count.
func (c *ctx) randCountArgs(flag string) (count int64, with, given, ok bool) {
	if len(c.argv) < 3 {
		return 0, false, false, true
	}
	l, ok := string2ll(c.argv[2])
	if !ok {
		c.o.writeString(errNotInt)
		return 0, false, true, false
	}
	if l < -math.MaxInt64 {
		c.o.err("value is out of range, value must between -9223372036854775807 and 9223372036854775807")
		return 0, false, true, false
	}
	if len(c.argv) > 4 || (len(c.argv) == 4 && !equalFold(c.argv[3], flag)) {
		c.o.writeString(errSyntax)
		return 0, false, true, false
	}
	if len(c.argv) == 4 {
		if l < -math.MaxInt64/2 || l > math.MaxInt64/2 {
			c.o.err("value is out of range")
			return 0, false, true, false
		}
		with = true
	}
	return l, with, true, true
}

// randomPicks answers count picks of n elements (count negative: -count
// picks, repetitions allowed; positive: distinct ones, at most n), as
// redis-server's ZRANDMEMBER and HRANDFIELD do; write writes element i.
// The whole collection is answered in its order, from its end when rev
// (redis-server walks a sorted set from its highest member).
func (c *ctx) randomPicks(count int64, n int, with, rev bool, write func(i int)) {
	header := c.o.arrayLen
	if with {
		// (member, score) pairs, nested in RESP3.
		header = c.o.pairs
		inner := write
		write = func(i int) {
			c.o.pair()
			inner(i)
		}
	}
	if count == 0 {
		c.o.writeString(emptyArray)
		return
	}
	if count < 0 || count == 1 {
		if count < 0 {
			count = -count
		}
		header(int(count))
		for range count {
			write(c.w.rng.IntN(n))
			if c.o.failed {
				return
			}
		}
		return
	}
	if count >= int64(n) {
		header(n)
		for i := range n {
			if rev {
				write(n - 1 - i)
			} else {
				write(i)
			}
		}
		return
	}
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	header(int(count))
	for k := range int(count) {
		j := k + c.w.rng.IntN(n-k)
		idx[k], idx[j] = idx[j], idx[k]
		write(idx[k])
	}
}

// cmdZrandmember answers ZRANDMEMBER (a count, WITHSCORES).
func cmdZrandmember(c *ctx) {
	count, with, given, ok := c.randCountArgs("withscores")
	if !ok {
		return
	}
	missing := nullBulk
	if given {
		missing = emptyArray
	}
	sh, z, ok := readValue[*zsetObj](c, c.argv[1], kindZSet, missing)
	defer sh.mu.RUnlock()
	if !ok {
		return
	}
	if !given {
		c.o.bulkString(z.zsl.byRank(uint64(c.w.rng.IntN(z.card())) + 1).member)
		return
	}
	// Picks with repetitions find each node by its rank; distinct
	// picks index the nodes, listed in order.
	var nodes []*zslNode
	if count > 1 {
		nodes = make([]*zslNode, 0, z.card())
		for x := z.zsl.header.level[0].forward; x != nil; x = x.level[0].forward {
			nodes = append(nodes, x)
		}
	}
	c.randomPicks(count, z.card(), with, true, func(i int) {
		var x *zslNode
		if nodes != nil {
			x = nodes[i]
		} else {
			x = z.zsl.byRank(uint64(i) + 1)
		}
		c.o.bulkString(x.member)
		if with {
			c.o.double(x.score)
		}
	})
}
