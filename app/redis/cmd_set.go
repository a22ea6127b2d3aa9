package redis

import "strconv"

func memberSize(m []byte) int64 { return elemOverhead + 32 + int64(len(m)) }

// writeMember writes member i of s.
func (c *ctx) writeMember(s *setObj, i int) {
	if s.intset {
		var b [20]byte
		c.o.bulk(strconv.AppendInt(b[:0], s.ints[i], 10))
		return
	}
	c.o.bulkString(s.members[i])
}

func (s *setObj) memberLen(i int) int {
	if s.intset {
		var b [20]byte
		return len(strconv.AppendInt(b[:0], s.ints[i], 10))
	}
	return len(s.members[i])
}

func cmdSadd(c *ctx) {
	key := c.argv[1]
	sh, h, e := c.writeEntry(key)
	defer sh.mu.Unlock()
	if c.wrongType(e, kindSet) {
		return
	}
	if e == nil {
		e = c.s.db.add(sh, key, h, kindSet)
		e.obj = newSetObj()
	}
	s := e.obj.(*setObj)
	added := 0
	var grow int64
	for _, m := range c.argv[2:] {
		if s.add(m) {
			added++
			grow += memberSize(m)
		}
	}
	c.s.db.resize(e, e.size+grow)
	c.o.integer(int64(added))
}

func cmdSrem(c *ctx) {
	sh, e, ok := c.writeKind(c.argv[1], kindSet, czero)
	defer sh.mu.Unlock()
	if !ok {
		return
	}
	s := e.obj.(*setObj)
	deleted := 0
	for _, m := range c.argv[2:] {
		if s.remove(m) {
			deleted++
			c.s.db.resize(e, e.size-memberSize(m))
			if s.card() == 0 {
				c.s.db.remove(sh, e)
				break
			}
		}
	}
	c.o.integer(int64(deleted))
}

// cmdSmembers answers in the order redis-server answers an intset
// (ascending) and otherwise in the set's own order.
func cmdSmembers(c *ctx) {
	sh, s, ok := readValue[*setObj](c, c.argv[1], kindSet, emptyArray)
	defer sh.mu.RUnlock()
	if !ok {
		return
	}
	c.o.arrayLen(s.card())
	for i := range s.card() {
		c.writeMember(s, i)
	}
}

func cmdSismember(c *ctx) {
	sh, s, ok := readValue[*setObj](c, c.argv[1], kindSet, "")
	defer sh.mu.RUnlock()
	if !ok {
		return
	}
	if s != nil && s.has(c.argv[2]) {
		c.o.writeString(cone)
	} else {
		c.o.writeString(czero)
	}
}

func cmdSmismember(c *ctx) {
	sh, s, ok := readValue[*setObj](c, c.argv[1], kindSet, "")
	defer sh.mu.RUnlock()
	if !ok {
		return
	}
	c.o.arrayLen(len(c.argv) - 2)
	for _, m := range c.argv[2:] {
		if s != nil && s.has(m) {
			c.o.writeString(cone)
		} else {
			c.o.writeString(czero)
		}
	}
}

func cmdScard(c *ctx) {
	sh, s, ok := readValue[*setObj](c, c.argv[1], kindSet, czero)
	defer sh.mu.RUnlock()
	if !ok {
		return
	}
	c.o.integer(int64(s.card()))
}

func cmdSpop(c *ctx) {
	if len(c.argv) > 3 {
		c.o.writeString(errSyntax)
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
		missing = emptyArray
	}
	sh, e, ok = c.writeKind(c.argv[1], kindSet, missing)
	defer sh.mu.Unlock()
	if !ok {
		return
	}
	s := e.obj.(*setObj)
	if hasCount && count == 0 {
		c.o.writeString(emptyArray)
		return
	}
	if !hasCount {
		i := c.w.rng.IntN(s.card())
		c.writeMember(s, i)
		c.popMember(sh, e, s, i)
		return
	}
	if count >= int64(s.card()) {
		c.o.arrayLen(s.card())
		for i := range s.card() {
			c.writeMember(s, i)
		}
		c.s.db.remove(sh, e)
		return
	}
	c.o.arrayLen(int(count))
	for range count {
		i := c.w.rng.IntN(s.card())
		c.writeMember(s, i)
		c.popMember(sh, e, s, i)
	}
}

// popMember removes member i and accounts for it, deleting the key when
// the set is left empty.
func (c *ctx) popMember(sh *shard, e *entry, s *setObj, i int) {
	c.s.db.resize(e, e.size-elemOverhead-32-int64(s.memberLen(i)))
	s.removeAt(i)
	if s.card() == 0 {
		c.s.db.remove(sh, e)
	}
}

func cmdSrandmember(c *ctx) {
	if len(c.argv) > 3 {
		c.o.writeString(errSyntax)
		return
	}
	if len(c.argv) == 2 {
		sh, s, ok := readValue[*setObj](c, c.argv[1], kindSet, "")
		defer sh.mu.RUnlock()
		if !ok {
			return
		}
		if s == nil {
			c.o.null()
			return
		}
		c.writeMember(s, c.w.rng.IntN(s.card()))
		return
	}
	l, ok := string2ll(c.argv[2])
	if !ok {
		c.o.writeString(errNotInt)
		return
	}
	if l < -(1<<63 - 1) {
		c.o.err("value is out of range, value must between -9223372036854775807 and 9223372036854775807")
		return
	}
	sh, s, ok := readValue[*setObj](c, c.argv[1], kindSet, "")
	defer sh.mu.RUnlock()
	if !ok {
		return
	}
	if s == nil || l == 0 {
		c.o.writeString(emptyArray)
		return
	}
	n := s.card()
	if l < 0 || l == 1 { // repetitions allowed
		count := -l
		if l == 1 {
			count = 1
		}
		c.o.arrayLen(int(count))
		for range count {
			c.writeMember(s, c.w.rng.IntN(n))
			if c.o.failed {
				return
			}
		}
		return
	}
	if l >= int64(n) {
		c.o.arrayLen(n)
		for i := range n {
			c.writeMember(s, i)
		}
		return
	}
	// Distinct members: a partial shuffle of the indexes.
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	c.o.arrayLen(int(l))
	for k := range int(l) {
		j := k + c.w.rng.IntN(n-k)
		idx[k], idx[j] = idx[j], idx[k]
		c.writeMember(s, idx[k])
	}
}

// cmdSscan returns the whole set in one call (see scanWhole).
func cmdSscan(c *ctx) {
	scanWhole(c, kindSet, 1, func(s *setObj, match func([]byte) bool) {
		var b [20]byte
		for i := range s.card() {
			name := b[:0]
			if s.intset {
				name = strconv.AppendInt(name, s.ints[i], 10)
			} else {
				name = stringBytes(s.members[i])
			}
			if match(name) {
				c.o.bulk(name)
			}
		}
	})
}
