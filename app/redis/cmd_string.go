package redis

import (
	"math"
	"math/big"
	"strconv"
)

// stringSize is what a string key holds.
func stringSize(key []byte, val []byte) int64 {
	return entryOverhead + int64(len(key)) + int64(cap(val))
}

// setString stores val (copied) as key's value, creating the key when e is
// nil; the key's expire is cleared unless keepTTL.
func (c *ctx) setString(sh *shard, h uint64, e *entry, key, val []byte, keepTTL bool) *entry {
	if e == nil {
		e = c.s.db.add(sh, key, h, kindString)
	} else if !keepTTL {
		sh.setExpire(e, 0)
	}
	if e.kind != kindString {
		e.kind, e.obj, e.str = kindString, nil, nil
	}
	if cap(e.str) >= len(val) && cap(e.str) <= 2*len(val)+32 {
		e.str = append(e.str[:0], val...)
	} else {
		e.str = append(make([]byte, 0, len(val)), val...)
	}
	c.s.db.resize(e, stringSize(key, e.str))
	return e
}

func cmdGet(c *ctx) {
	sh, e, ok := c.readKind(c.argv[1], kindString, nullBulk)
	defer sh.mu.RUnlock()
	if ok {
		c.o.bulk(e.str)
	}
}

// SET's options.
const (
	setNX = 1 << iota
	setXX
	setGet
	setKeepTTL
	setEX
	setPX
	setEXAT
	setPXAT
	setPersist
)

// parseSetOptions parses SET's (getex false) or GETEX's options from
// argument i, as redis-server's parseExtendedStringArgumentsOrReply does,
// and returns the flags and the expire argument's index (0: none).
func parseSetOptions(c *ctx, i int, getex bool) (flags, expireArg int, ok bool) {
	for ; i < len(c.argv); i++ {
		opt := c.argv[i]
		hasNext := i < len(c.argv)-1
		exp := flags & (setEX | setPX | setEXAT | setPXAT)
		switch {
		case !getex && equalFold(opt, "nx") && flags&setXX == 0:
			flags |= setNX
		case !getex && equalFold(opt, "xx") && flags&setNX == 0:
			flags |= setXX
		case !getex && equalFold(opt, "get"):
			flags |= setGet
		case !getex && equalFold(opt, "keepttl") && flags&setPersist == 0 && exp == 0:
			flags |= setKeepTTL
		case getex && equalFold(opt, "persist") && exp == 0 && flags&setKeepTTL == 0:
			flags |= setPersist
		case hasNext && flags&(setKeepTTL|setPersist) == 0 && (exp == 0 || exp == setEX) && equalFold(opt, "ex"):
			flags |= setEX
			expireArg = i + 1
			i++
		case hasNext && flags&(setKeepTTL|setPersist) == 0 && (exp == 0 || exp == setPX) && equalFold(opt, "px"):
			flags |= setPX
			expireArg = i + 1
			i++
		case hasNext && flags&(setKeepTTL|setPersist) == 0 && (exp == 0 || exp == setEXAT) && equalFold(opt, "exat"):
			flags |= setEXAT
			expireArg = i + 1
			i++
		case hasNext && flags&(setKeepTTL|setPersist) == 0 && (exp == 0 || exp == setPXAT) && equalFold(opt, "pxat"):
			flags |= setPXAT
			expireArg = i + 1
			i++
		default:
			c.o.writeString(errSyntax)
			return 0, 0, false
		}
	}
	return flags, expireArg, true
}

// expireAt converts an expire argument to unix ms, as redis-server's
// getExpireMillisecondsOrReply does.
func (c *ctx) expireAt(i, flags int) (int64, bool) {
	ms, ok := c.intArg(i)
	if !ok {
		return 0, false
	}
	seconds := flags&(setEX|setEXAT) != 0
	if ms <= 0 || (seconds && ms > math.MaxInt64/1000) {
		c.o.err("invalid expire time in '" + c.cmd.name + "' command")
		return 0, false
	}
	if seconds {
		ms *= 1000
	}
	if flags&(setEX|setPX) != 0 {
		ms += c.now()
	}
	if ms <= 0 {
		c.o.err("invalid expire time in '" + c.cmd.name + "' command")
		return 0, false
	}
	return ms, true
}

func cmdSet(c *ctx) {
	flags, expArg, ok := parseSetOptions(c, 3, false)
	if !ok {
		return
	}
	c.set(flags, c.argv[1], c.argv[2], expArg, "+OK\r\n", "$-1\r\n")
}

// set is redis-server's setGenericCommand.
func (c *ctx) set(flags int, key, val []byte, expArg int, okReply, abortReply string) {
	var when int64
	if expArg > 0 {
		var ok bool
		if when, ok = c.expireAt(expArg, flags); !ok {
			return
		}
	}
	sh, h, e := c.writeEntry(key)
	defer sh.mu.Unlock()
	if flags&setGet != 0 {
		switch {
		case e == nil:
			c.o.null()
		case e.kind != kindString:
			c.o.writeString(errWrongType)
			return
		default:
			c.o.bulk(e.str)
		}
	}
	if (flags&setNX != 0 && e != nil) || (flags&setXX != 0 && e == nil) {
		if flags&setGet == 0 {
			c.o.shared(abortReply)
		}
		return
	}
	e = c.setString(sh, h, e, key, val, flags&setKeepTTL != 0)
	if expArg > 0 {
		sh.setExpire(e, when)
	}
	sh.modified(key)
	if flags&setGet == 0 {
		c.o.writeString(okReply)
	}
}

func cmdSetnx(c *ctx) { c.set(setNX, c.argv[1], c.argv[2], 0, cone, czero) }

// cmdSetex answers SETEX and PSETEX.
func cmdSetex(c *ctx) {
	flags := setEX
	if c.cmd.name == "psetex" {
		flags = setPX
	}
	c.set(flags, c.argv[1], c.argv[3], 2, "+OK\r\n", "$-1\r\n")
}

func cmdGetset(c *ctx) { c.set(setGet, c.argv[1], c.argv[2], 0, "", "") }

func cmdGetdel(c *ctx) {
	sh, _, e := c.writeEntry(c.argv[1])
	defer sh.mu.Unlock()
	switch {
	case e == nil:
		c.o.null()
	case e.kind != kindString:
		c.o.writeString(errWrongType)
	default:
		c.o.bulk(e.str)
		c.s.db.remove(sh, e)
		sh.modified(c.argv[1])
	}
}

func cmdGetex(c *ctx) {
	flags, expArg, ok := parseSetOptions(c, 2, true)
	if !ok {
		return
	}
	sh, e, ok := c.writeKind(c.argv[1], kindString, nullBulk)
	defer sh.mu.Unlock()
	if !ok {
		return
	}
	var when int64
	if expArg > 0 {
		if when, ok = c.expireAt(expArg, flags); !ok {
			return
		}
	}
	c.o.bulk(e.str)
	switch {
	case flags&(setEXAT|setPXAT) != 0 && when <= c.now():
		c.s.db.remove(sh, e)
	case expArg > 0:
		sh.setExpire(e, when)
	case flags&setPersist != 0 && e.expire != 0:
		sh.setExpire(e, 0)
	default:
		return
	}
	sh.modified(c.argv[1])
}

// cmdMget reads every key with their shards read-locked together: it
// never sees half of an MSET.
func cmdMget(c *ctx) {
	keys := c.argv[1:]
	c.lockKeys(keys, false)
	defer c.unlockKeys(false)
	c.o.arrayLen(len(keys))
	for _, k := range keys {
		sh, _ := c.shardFor(k)
		e := c.lookup(sh, k)
		if e == nil || e.kind != kindString {
			c.w.stats.misses.Add(1)
			c.o.null()
			continue
		}
		c.w.stats.hits.Add(1)
		c.o.bulk(e.str)
	}
}

// cmdMset answers MSET and MSETNX with every key's shard write-locked:
// no command sees some of the keys set and not the others.
func cmdMset(c *ctx) {
	if len(c.argv)%2 == 0 {
		c.o.err("wrong number of arguments for '" + c.cmd.name + "' command")
		return
	}
	nx := c.cmd.name == "msetnx"
	keys := c.w.keys[:0]
	for i := 1; i < len(c.argv); i += 2 {
		keys = append(keys, c.argv[i])
	}
	c.w.keys = keys[:0]
	c.lockKeys(keys, true)
	defer c.unlockKeys(true)
	if nx {
		for _, k := range keys {
			sh, _ := c.shardFor(k)
			if c.s.db.lookupWrite(sh, k, &c.clk) != nil {
				c.o.writeString(czero)
				return
			}
		}
	}
	for i := 1; i < len(c.argv); i += 2 {
		k := c.argv[i]
		sh, h := c.shardFor(k)
		c.setString(sh, h, c.s.db.lookupWrite(sh, k, &c.clk), k, c.argv[i+1], false)
		sh.modified(k)
	}
	if nx {
		c.o.writeString(cone)
	} else {
		c.o.ok()
	}
}

// checkLength is redis-server's checkStringLength: a string may not grow
// past the longest argument accepted.
func (c *ctx) checkLength(size, add int64) bool {
	total := size + add
	if total > c.s.maxBulk.Load() || total < size || total < add {
		c.o.err("string exceeds maximum allowed size (proto-max-bulk-len)")
		return false
	}
	return true
}

func cmdAppend(c *ctx) {
	key, val := c.argv[1], c.argv[2]
	sh, h, e := c.writeEntry(key)
	defer sh.mu.Unlock()
	if e == nil {
		e = c.setString(sh, h, nil, key, val, false)
		sh.modified(key)
		c.o.integer(int64(len(e.str)))
		return
	}
	if c.wrongType(e, kindString) || !c.checkLength(int64(len(e.str)), int64(len(val))) {
		return
	}
	e.str = append(e.str, val...)
	c.s.db.resize(e, stringSize(key, e.str))
	sh.modified(key)
	c.o.integer(int64(len(e.str)))
}

func cmdStrlen(c *ctx) {
	sh, e, ok := c.readKind(c.argv[1], kindString, czero)
	defer sh.mu.RUnlock()
	if !ok {
		return
	}
	c.o.integer(int64(len(e.str)))
}

// cmdIncr answers INCR, DECR, INCRBY and DECRBY.
func cmdIncr(c *ctx) {
	incr := int64(1)
	switch c.cmd.name {
	case "decr":
		incr = -1
	case "incrby", "decrby":
		v, ok := c.intArg(2)
		if !ok {
			return
		}
		if c.cmd.name == "decrby" {
			if v == math.MinInt64 {
				c.o.err("decrement would overflow")
				return
			}
			v = -v
		}
		incr = v
	}
	key := c.argv[1]
	sh, h, e := c.writeEntry(key)
	defer sh.mu.Unlock()
	if c.wrongType(e, kindString) {
		return
	}
	var old int64
	if e != nil {
		v, ok := string2ll(e.str)
		if !ok {
			c.o.writeString(errNotInt)
			return
		}
		old = v
	}
	v, ok := c.incrInt(old, incr)
	if !ok {
		return
	}
	if e == nil {
		e = c.s.db.add(sh, key, h, kindString)
		e.str = make([]byte, 0, 20)
	}
	e.str = strconv.AppendInt(e.str[:0], v, 10)
	c.s.db.resize(e, stringSize(key, e.str))
	sh.modified(key)
	c.o.integer(v)
}

func cmdIncrbyfloat(c *ctx) {
	key := c.argv[1]
	sh, h, e := c.writeEntry(key)
	defer sh.mu.Unlock()
	if c.wrongType(e, kindString) {
		return
	}
	value := new(big.Float).SetPrec(ldPrec)
	if e != nil {
		v, ok := parseLongDouble(e.str)
		if !ok {
			c.o.writeString(errNotFloat)
			return
		}
		value = v
	}
	incr, ok := parseLongDouble(c.argv[2])
	if !ok {
		c.o.writeString(errNotFloat)
		return
	}
	if value.IsInf() && incr.IsInf() && value.Sign() != incr.Sign() {
		c.o.err("increment would produce NaN or Infinity")
		return
	}
	sum, ok := c.incrFloat(value, incr)
	if !ok {
		return
	}
	s := formatLongDouble(sum)
	e = c.setString(sh, h, e, key, []byte(s), true)
	sh.modified(key)
	c.o.bulk(e.str)
}

// cmdGetrange answers GETRANGE and SUBSTR.
func cmdGetrange(c *ctx) {
	start, end, ok := c.intArgs(2, 3)
	if !ok {
		return
	}
	sh, e, ok := c.readKind(c.argv[1], kindString, emptyBulk)
	defer sh.mu.RUnlock()
	if !ok {
		return
	}
	n := int64(len(e.str))
	if start < 0 && end < 0 && start > end {
		c.o.writeString(emptyBulk)
		return
	}
	if start < 0 {
		start += n
	}
	if end < 0 {
		end += n
	}
	start, end = max(start, 0), max(end, 0)
	if end >= n {
		end = n - 1
	}
	if start > end || n == 0 {
		c.o.writeString(emptyBulk)
		return
	}
	c.o.bulk(e.str[start : end+1])
}

func cmdSetrange(c *ctx) {
	key, val := c.argv[1], c.argv[3]
	offset, ok := c.intArg(2)
	if !ok {
		return
	}
	if offset < 0 {
		c.o.err("offset is out of range")
		return
	}
	sh, h, e := c.writeEntry(key)
	defer sh.mu.Unlock()
	if e == nil {
		if len(val) == 0 {
			c.o.writeString(czero)
			return
		}
		if !c.checkLength(offset, int64(len(val))) {
			return
		}
		e = c.s.db.add(sh, key, h, kindString)
	} else {
		if c.wrongType(e, kindString) {
			return
		}
		if len(val) == 0 {
			c.o.integer(int64(len(e.str)))
			return
		}
		if !c.checkLength(offset, int64(len(val))) {
			return
		}
	}
	if need := int(offset) + len(val); need > len(e.str) {
		if need > cap(e.str) {
			ns := make([]byte, need)
			copy(ns, e.str)
			e.str = ns
		} else {
			old := len(e.str)
			e.str = e.str[:need]
			clear(e.str[old:])
		}
	}
	copy(e.str[offset:], val)
	c.s.db.resize(e, stringSize(key, e.str))
	sh.modified(key)
	c.o.integer(int64(len(e.str)))
}

// incrInt returns old+incr, or replies redis-server's overflow error and
// returns false.
func (c *ctx) incrInt(old, incr int64) (int64, bool) {
	if (incr < 0 && old < 0 && incr < math.MinInt64-old) || (incr > 0 && old > 0 && incr > math.MaxInt64-old) {
		c.o.err("increment or decrement would overflow")
		return 0, false
	}
	return old + incr, true
}

// incrFloat returns value+incr at long double precision, or replies
// redis-server's error and returns false when the sum overflows it. The
// caller has refused infinities whose sum is NaN.
func (c *ctx) incrFloat(value, incr *big.Float) (*big.Float, bool) {
	sum := new(big.Float).SetPrec(ldPrec).Add(value, incr)
	if ldOverflows(sum) {
		c.o.err("increment would produce NaN or Infinity")
		return nil, false
	}
	return sum, true
}

// cmdLcs answers LCS as redis-server's lcsCommand does, with both keys'
// shards read-locked together: the keys are read first (a key of another
// type is refused before the options are parsed), and the table of the
// longest common subsequences of their prefixes is bounded by
// proto-max-bulk-len.
func cmdLcs(c *ctx) {
	c.lockKeys(c.argv[1:3], false)
	defer c.unlockKeys(false)
	var strs [2]*entry
	for i, k := range c.argv[1:3] {
		sh, _ := c.shardFor(k)
		if strs[i] = c.lookup(sh, k); strs[i] == nil {
			c.w.stats.misses.Add(1)
		} else {
			c.w.stats.hits.Add(1)
		}
	}
	var a, b []byte
	for i, e := range strs {
		switch {
		case e == nil:
		case e.kind != kindString:
			c.o.err("The specified keys must contain string values")
			return
		case i == 0:
			a = e.str
		default:
			b = e.str
		}
	}
	var getLen, getIdx, withMatchLen bool
	minMatchLen := int64(0)
	for j := 3; j < len(c.argv); j++ {
		opt := c.argv[j]
		switch {
		case equalFold(opt, "idx"):
			getIdx = true
		case equalFold(opt, "len"):
			getLen = true
		case equalFold(opt, "withmatchlen"):
			withMatchLen = true
		case equalFold(opt, "minmatchlen") && j < len(c.argv)-1:
			v, ok := c.intArg(j + 1)
			if !ok {
				return
			}
			minMatchLen = max(v, 0)
			j++
		default:
			c.o.writeString(errSyntax)
			return
		}
	}
	if getLen && getIdx {
		c.o.err("If you want both the length and indexes, please just use IDX.")
		return
	}
	if uint64(len(a)) >= math.MaxUint32-1 || uint64(len(b)) >= math.MaxUint32-1 {
		c.o.err("String too long for LCS")
		return
	}
	alen, blen := uint32(len(a)), uint32(len(b))
	if (uint64(alen)+1)*(uint64(blen)+1)*4 > uint64(c.s.maxBulk.Load()) {
		c.o.err("Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len")
		return
	}
	// lcs[j+(blen+1)*i] is the length of the LCS of a[:i] and b[:j].
	w := blen + 1
	lcs := make([]uint32, (uint64(alen)+1)*uint64(w))
	for i := uint32(1); i <= alen; i++ {
		for j := uint32(1); j <= blen; j++ {
			switch {
			case a[i-1] == b[j-1]:
				lcs[j+w*i] = lcs[j-1+w*(i-1)] + 1
			default:
				lcs[j+w*i] = max(lcs[j+w*(i-1)], lcs[j-1+w*i])
			}
		}
	}
	length := lcs[blen+w*alen]
	if getLen {
		c.o.integer(int64(length))
		return
	}
	// Walked back from the end as redis-server walks it, which picks
	// the same subsequence and ranges among the longest.
	idx := length
	result := make([]byte, idx)
	type matchRange struct{ aStart, aEnd, bStart, bEnd uint32 }
	var ranges []matchRange
	cur := matchRange{aStart: alen} // aStart == alen: no range yet
	i, j := alen, blen
	for i > 0 && j > 0 {
		emit := false
		if a[i-1] == b[j-1] {
			result[idx-1] = a[i-1]
			switch {
			case cur.aStart == alen:
				cur = matchRange{i - 1, i - 1, j - 1, j - 1}
			case cur.aStart == i && cur.bStart == j:
				cur.aStart--
				cur.bStart--
			default:
				emit = true
			}
			if cur.aStart == 0 || cur.bStart == 0 {
				emit = true
			}
			idx--
			i--
			j--
		} else {
			if lcs[j+w*(i-1)] > lcs[j-1+w*i] {
				i--
			} else {
				j--
			}
			if cur.aStart != alen {
				emit = true
			}
		}
		if emit {
			if matchLen := cur.aEnd - cur.aStart + 1; minMatchLen == 0 || int64(matchLen) >= minMatchLen {
				ranges = append(ranges, cur)
			}
			cur.aStart = alen
		}
	}
	if !getIdx {
		c.o.bulk(result)
		return
	}
	c.o.mapLen(2)
	c.o.bulkString("matches")
	c.o.arrayLen(len(ranges))
	for _, r := range ranges {
		if withMatchLen {
			c.o.arrayLen(3)
		} else {
			c.o.arrayLen(2)
		}
		c.o.arrayLen(2)
		c.o.integer(int64(r.aStart))
		c.o.integer(int64(r.aEnd))
		c.o.arrayLen(2)
		c.o.integer(int64(r.bStart))
		c.o.integer(int64(r.bEnd))
		if withMatchLen {
			c.o.integer(int64(r.aEnd - r.aStart + 1))
		}
	}
	c.o.bulkString("len")
	c.o.integer(int64(length))
}
