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
	if l.len() == 0 {
		c.s.db.remove(sh, e)
		return
	}
	c.s.db.resize(e, e.size-shrink)
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
		if nl.len() == 0 {
			c.s.db.remove(sh, e)
		} else {
			c.s.db.resize(e, e.size-shrink)
		}
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
	c.o.ok()
}
