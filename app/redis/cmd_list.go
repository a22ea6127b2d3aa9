package redis

// copyBytes returns a copy of p that the store can keep (arguments point
// into the request's buffer).
func copyBytes(p []byte) []byte { return append(make([]byte, 0, len(p)), p...) }

func elemSize(p []byte) int64 { return elemOverhead + int64(len(p)) }

// cmdPush answers LPUSH, RPUSH, LPUSHX and RPUSHX.
func cmdPush(c *ctx) {
	name := c.cmd.name
	front, onlyExisting := name[0] == 'l', name[len(name)-1] == 'x'
	key := c.argv[1]
	sh, h, e := c.writeEntry(key)
	defer sh.mu.Unlock()
	if c.wrongType(e, kindList) {
		return
	}
	if e == nil {
		if onlyExisting {
			c.o.writeString(czero)
			return
		}
		e = c.s.db.add(sh, key, h, kindList)
		e.obj = &list{}
	}
	l := e.obj.(*list)
	var grow int64
	for _, v := range c.argv[2:] {
		v = copyBytes(v)
		if front {
			l.pushFront(v)
		} else {
			l.pushBack(v)
		}
		grow += elemSize(v)
	}
	c.s.db.resize(e, e.size+grow)
	sh.modified(key)
	c.o.integer(int64(l.len()))
}

// cmdPop answers LPOP and RPOP, with or without a count.
func cmdPop(c *ctx) {
	front := c.cmd.name[0] == 'l'
	if len(c.argv) > 3 {
		c.o.err("wrong number of arguments for '" + c.cmd.name + "' command")
		return
	}
	count, hasCount, ok := c.countArg()
	if !ok {
		return
	}
	var sh *shard
	var e *entry
	missing := nullBulk
	if hasCount {
		missing = nullArray
	}
	sh, e, ok = c.writeKind(c.argv[1], kindList, missing)
	defer sh.mu.Unlock()
	if !ok {
		return
	}
	if hasCount && count == 0 {
		c.o.writeString(emptyArray)
		return
	}
	l := e.obj.(*list)
	n := 1
	if hasCount {
		n = int(min(count, int64(l.len())))
		c.o.arrayLen(n)
	}
	var shrink int64
	for range n {
		var v []byte
		if front {
			v = l.popFront()
		} else {
			v = l.popBack()
		}
		c.o.bulk(v)
		shrink += elemSize(v)
	}
	c.s.db.shrink(sh, e, l.len() == 0, shrink)
	sh.modified(c.argv[1])
}

func cmdLlen(c *ctx) {
	sh, e, ok := c.readKind(c.argv[1], kindList, czero)
	defer sh.mu.RUnlock()
	if !ok {
		return
	}
	c.o.integer(int64(e.obj.(*list).len()))
}

// listRange normalizes a start and end index as redis-server does; ok is
// false for an empty range.
func listRange(start, end, n int64) (int64, int64, bool) {
	if start < 0 {
		start += n
	}
	if end < 0 {
		end += n
	}
	if start < 0 {
		start = 0
	}
	if start > end || start >= n {
		return 0, 0, false
	}
	if end >= n {
		end = n - 1
	}
	return start, end, true
}

func cmdLrange(c *ctx) {
	start, end, ok := c.intArgs(2, 3)
	if !ok {
		return
	}
	sh, e, ok := c.readKind(c.argv[1], kindList, emptyArray)
	defer sh.mu.RUnlock()
	if !ok {
		return
	}
	l := e.obj.(*list)
	start, end, ok = listRange(start, end, int64(l.len()))
	if !ok {
		c.o.writeString(emptyArray)
		return
	}
	c.o.arrayLen(int(end - start + 1))
	for i := start; i <= end; i++ {
		c.o.bulk(l.at(int(i)))
	}
}

func cmdLindex(c *ctx) {
	sh, e, ok := c.readKind(c.argv[1], kindList, nullBulk)
	defer sh.mu.RUnlock()
	if !ok {
		return
	}
	i, ok := c.intArg(2)
	if !ok {
		return
	}
	l := e.obj.(*list)
	at, ok := l.index(i)
	if !ok {
		c.o.null()
		return
	}
	c.o.bulk(l.at(at))
}

func cmdLset(c *ctx) {
	sh, e, ok := c.writeKind(c.argv[1], kindList, errNoKey)
	defer sh.mu.Unlock()
	if !ok {
		return
	}
	i, ok := c.intArg(2)
	if !ok {
		return
	}
	l := e.obj.(*list)
	at, ok := l.index(i)
	if !ok {
		c.o.writeString(errRange)
		return
	}
	old := l.at(at)
	v := copyBytes(c.argv[3])
	l.set(at, v)
	c.s.db.resize(e, e.size-elemSize(old)+elemSize(v))
	sh.modified(c.argv[1])
	c.o.ok()
}

func cmdLrem(c *ctx) {
	toRemove, ok := c.intArg(2)
	if !ok {
		return
	}
	sh, e, ok := c.writeKind(c.argv[1], kindList, czero)
	defer sh.mu.Unlock()
	if !ok {
		return
	}
	l := e.obj.(*list)
	val := c.argv[3]
	n := l.len()
	keep := make([]bool, n)
	removed := int64(0)
	var shrink int64
	fromTail := toRemove < 0
	if fromTail {
		toRemove = -toRemove
		if toRemove < 0 {
			// -LLONG_MIN wraps to itself in redis-server's lremCommand
			// too, and its count of removals never reaches it: every
			// match goes.
			toRemove = 0
		}
	}
	for k := 0; k < n; k++ {
		i := k
		if fromTail {
			i = n - 1 - k
		}
		v := l.at(i)
		if (toRemove == 0 || removed < toRemove) && string(v) == string(val) {
			removed++
			shrink += elemSize(v)
			continue
		}
		keep[i] = true
	}
	if removed > 0 {
		nl := &list{}
		for i := 0; i < n; i++ {
			if keep[i] {
				nl.pushBack(l.at(i))
			}
		}
		e.obj = nl
		c.s.db.shrink(sh, e, nl.len() == 0, shrink)
		sh.modified(c.argv[1])
	}
	c.o.integer(removed)
}

func cmdLtrim(c *ctx) {
	start, end, ok := c.intArgs(2, 3)
	if !ok {
		return
	}
	sh, e, ok := c.writeKind(c.argv[1], kindList, okReply)
	defer sh.mu.Unlock()
	if !ok {
		return
	}
	l := e.obj.(*list)
	n := int64(l.len())
	start, end, ok = listRange(start, end, n)
	if !ok {
		c.s.db.remove(sh, e)
		sh.modified(c.argv[1])
		c.o.ok()
		return
	}
	var shrink int64
	for i := int64(0); i < n; i++ {
		if i < start || i > end {
			shrink += elemSize(l.at(int(i)))
		}
	}
	l.keep(int(start), int(end+1))
	c.s.db.resize(e, e.size-shrink)
	sh.modified(c.argv[1])
	c.o.ok()
}

// cmdLinsert answers LINSERT: the syntax is checked before the key is
// read, and the value goes next to the first element equal to the pivot,
// from the head.
func cmdLinsert(c *ctx) {
	var after bool
	switch {
	case equalFold(c.argv[2], "after"):
		after = true
	case equalFold(c.argv[2], "before"):
	default:
		c.o.writeString(errSyntax)
		return
	}
	sh, e, ok := c.writeKind(c.argv[1], kindList, czero)
	defer sh.mu.Unlock()
	if !ok {
		return
	}
	l := e.obj.(*list)
	pivot := c.argv[3]
	for i := 0; i < l.len(); i++ {
		if string(l.at(i)) != string(pivot) {
			continue
		}
		if after {
			i++
		}
		v := copyBytes(c.argv[4])
		l.insert(i, v)
		c.s.db.resize(e, e.size+elemSize(v))
		sh.modified(c.argv[1])
		c.o.integer(int64(l.len()))
		return
	}
	c.o.integer(-1)
}

// cmdLpos answers LPOS as redis-server's lposCommand does: options
// parsed before the key is read, a negative RANK searching from the tail
// (-RANK wrapping for the least integer, as it does in redis-server).
func cmdLpos(c *ctx) {
	rank, count, maxlen := int64(1), int64(-1), int64(0)
	for j := 3; j < len(c.argv); j++ {
		opt, more := c.argv[j], j < len(c.argv)-1
		switch {
		case more && equalFold(opt, "rank"):
			j++
			var ok bool
			if rank, ok = c.intArg(j); !ok {
				return
			}
			if rank == 0 {
				c.o.err("RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list")
				return
			}
		case more && equalFold(opt, "count"):
			j++
			v, ok := string2ll(c.argv[j])
			if !ok || v < 0 {
				c.o.err("COUNT can't be negative")
				return
			}
			count = v
		case more && equalFold(opt, "maxlen"):
			j++
			v, ok := string2ll(c.argv[j])
			if !ok || v < 0 {
				c.o.err("MAXLEN can't be negative")
				return
			}
			maxlen = v
		default:
			c.o.writeString(errSyntax)
			return
		}
	}
	fromTail := rank < 0
	if fromTail {
		rank = -rank
	}
	sh, e, ok := c.readKind(c.argv[1], kindList, "")
	defer sh.mu.RUnlock()
	if !ok {
		return
	}
	if e == nil {
		if count != -1 {
			c.o.writeString(emptyArray)
		} else {
			c.o.null()
		}
		return
	}
	l := e.obj.(*list)
	n := l.len()
	ele := c.argv[2]
	var found []int64 // with COUNT
	matches, at := int64(0), int64(-1)
	for k := 0; k < n && (maxlen == 0 || int64(k) < maxlen); k++ {
		i := k
		if fromTail {
			i = n - 1 - k
		}
		if string(l.at(i)) != string(ele) {
			continue
		}
		matches++
		if matches < rank {
			continue
		}
		if count == -1 {
			at = int64(i)
			break
		}
		found = append(found, int64(i))
		if count != 0 && matches-rank+1 >= count {
			break
		}
	}
	switch {
	case count != -1:
		c.o.arrayLen(len(found))
		for _, i := range found {
			c.o.integer(i)
		}
	case at >= 0:
		c.o.integer(at)
	default:
		c.o.null()
	}
}

// listSide parses LEFT or RIGHT (front: LEFT), answering a syntax error
// for anything else.
func (c *ctx) listSide(i int) (front, ok bool) {
	switch {
	case equalFold(c.argv[i], "left"):
		return true, true
	case equalFold(c.argv[i], "right"):
		return false, true
	}
	c.o.writeString(errSyntax)
	return false, false
}

func (l *list) pop(front bool) []byte {
	if front {
		return l.popFront()
	}
	return l.popBack()
}

func (l *list) push(front bool, v []byte) {
	if front {
		l.pushFront(v)
	} else {
		l.pushBack(v)
	}
}

// cmdLmove answers LMOVE and RPOPLPUSH atomically: both keys' shards are
// held. As in redis-server, an absent source is answered before the
// destination's type is checked, and a list moved onto itself rotates.
func cmdLmove(c *ctx) {
	fromFront, toFront := false, true // RPOPLPUSH
	if c.cmd.name == "lmove" {
		var ok bool
		if fromFront, ok = c.listSide(3); !ok {
			return
		}
		if toFront, ok = c.listSide(4); !ok {
			return
		}
	}
	if !c.lmove(fromFront, toFront) {
		c.o.null()
	}
}

// lmove moves an element from argv[1] to argv[2] and answers it, or
// answers the error that stops it; moved is false, with nothing answered,
// when the source is absent (or, for a client blocked already, not a
// list).
func (c *ctx) lmove(fromFront, toFront bool) (moved bool) {
	src, dst := c.argv[1], c.argv[2]
	c.lockKeys(c.argv[1:3], true)
	defer c.unlockKeys(true)
	ssh, _ := c.shardFor(src)
	se := c.s.db.lookupWrite(ssh, src, &c.clk)
	if se == nil || (c.waiting && se.kind != kindList) {
		return false
	}
	if c.wrongType(se, kindList) {
		return true
	}
	dsh, dh := c.shardFor(dst)
	de := c.s.db.lookupWrite(dsh, dst, &c.clk)
	if c.wrongType(de, kindList) {
		return true
	}
	sl := se.obj.(*list)
	v := sl.pop(fromFront)
	if de == nil {
		de = c.s.db.add(dsh, dst, dh, kindList)
		de.obj = &list{}
	}
	de.obj.(*list).push(toFront, v)
	c.s.db.resize(de, de.size+elemSize(v))
	dsh.modified(dst)
	c.o.bulk(v)
	c.s.db.shrink(ssh, se, sl.len() == 0, elemSize(v))
	ssh.modified(src)
	return true
}

// mpopArgs parses LMPOP's and ZMPOP's arguments as redis-server's
// lmpopGenericCommand and zmpopGenericCommand do: numkeys, the keys, the
// side (first or second: LEFT or RIGHT, MIN or MAX) and an optional COUNT
// (1 when not given), answering the error of the first that is wrong.
// numkeys is argv[at] (2 for BLMPOP and BZMPOP, after the timeout).
func (c *ctx) mpopArgs(at int, first, second string) (keys [][]byte, isSecond bool, count int64, ok bool) {
	numkeys, ok := string2ll(c.argv[at])
	if !ok || numkeys < 1 {
		c.o.err("numkeys should be greater than 0")
		return nil, false, 0, false
	}
	if numkeys >= int64(len(c.argv)-at-1) {
		c.o.writeString(errSyntax)
		return nil, false, 0, false
	}
	where := at + 1 + int(numkeys)
	switch w := c.argv[where]; {
	case equalFold(w, first):
	case equalFold(w, second):
		isSecond = true
	default:
		c.o.writeString(errSyntax)
		return nil, false, 0, false
	}
	count = -1
	for j := where + 1; j < len(c.argv); j++ {
		if count == -1 && equalFold(c.argv[j], "count") && j < len(c.argv)-1 {
			j++
			v, ok := string2ll(c.argv[j])
			if !ok || v < 1 {
				c.o.err("count should be greater than 0")
				return nil, false, 0, false
			}
			count = v
			continue
		}
		c.o.writeString(errSyntax)
		return nil, false, 0, false
	}
	return c.argv[at+1 : where], isSecond, max(count, 1), true
}

// cmdLmpop answers LMPOP with every key's shard write-locked: the first
// key holding a list, in the order given, is popped.
func cmdLmpop(c *ctx) {
	keys, right, count, ok := c.mpopArgs(1, "left", "right")
	if !ok {
		return
	}
	if !c.lmpop(keys, !right, count) {
		c.o.nullArray()
	}
}

// lmpop pops up to count elements of the first of keys holding a list
// and answers them with its name, or answers the error that stops it (for
// a client blocked already, a key of another type is passed over);
// popped is false, with nothing answered, when no key holds a list.
func (c *ctx) lmpop(keys [][]byte, front bool, count int64) (popped bool) {
	c.lockKeys(keys, true)
	defer c.unlockKeys(true)
	k, sh, e, done := c.firstOfKind(keys, kindList)
	if e == nil {
		return done
	}
	l := e.obj.(*list)
	n := int(min(count, int64(l.len())))
	c.o.arrayLen(2)
	c.o.bulk(k)
	c.o.arrayLen(n)
	var shrink int64
	for range n {
		v := l.pop(front)
		c.o.bulk(v)
		shrink += elemSize(v)
	}
	c.s.db.shrink(sh, e, l.len() == 0, shrink)
	sh.modified(k)
	return true
}
