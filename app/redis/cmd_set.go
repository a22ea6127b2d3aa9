package redis

import "strconv"

func memberSize(m []byte) int64 { return elemOverhead + 16 + int64(len(m)) }

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

// readSet read-locks key's shard and returns its set (nil when absent),
// ok false after WRONGTYPE; the caller read-unlocks sh.
func (c *ctx) readSet(key []byte) (sh *shard, s *setObj, ok bool) {
	sh, e := c.readEntry(key)
	if c.wrongType(e, kindSet) {
		return sh, nil, false
	}
	if e == nil {
		return sh, nil, true
	}
	return sh, e.obj.(*setObj), true
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
	sh, _, e := c.writeEntry(c.argv[1])
	defer sh.mu.Unlock()
	if e == nil {
		c.o.writeString(czero)
		return
	}
	if c.wrongType(e, kindSet) {
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
	sh, s, ok := c.readSet(c.argv[1])
	defer sh.mu.RUnlock()
	if !ok {
		return
	}
	if s == nil {
		c.o.writeString(emptyArray)
		return
	}
	c.o.arrayLen(s.card())
	for i := range s.card() {
		c.writeMember(s, i)
	}
}

func cmdSismember(c *ctx) {
	sh, s, ok := c.readSet(c.argv[1])
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
	sh, s, ok := c.readSet(c.argv[1])
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
	sh, s, ok := c.readSet(c.argv[1])
	defer sh.mu.RUnlock()
	if !ok {
		return
	}
	if s == nil {
		c.o.writeString(czero)
		return
	}
	c.o.integer(int64(s.card()))
}

func cmdSpop(c *ctx) {
	if len(c.argv) > 3 {
		c.o.writeString(errSyntax)
		return
	}
	hasCount := len(c.argv) == 3
	var count int64
	if hasCount {
		v, ok := string2ll(c.argv[2])
		if !ok || v < 0 {
			c.o.err("value is out of range, must be positive")
			return
		}
		count = v
	}
	sh, _, e := c.writeEntry(c.argv[1])
	defer sh.mu.Unlock()
	if e == nil {
		if hasCount {
			c.o.writeString(emptyArray)
		} else {
			c.o.null()
		}
		return
	}
	if c.wrongType(e, kindSet) {
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
	c.s.db.resize(e, e.size-elemOverhead-16-int64(s.memberLen(i)))
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
		sh, s, ok := c.readSet(c.argv[1])
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
	sh, s, ok := c.readSet(c.argv[1])
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

// cmdSscan returns the whole set in one call, with cursor 0, as
// redis-server does for an intset.
func cmdSscan(c *ctx) {
	if _, ok := parseCursor(c.argv[2]); !ok {
		c.o.err("invalid cursor")
		return
	}
	sh, s, ok := c.readSet(c.argv[1])
	defer sh.mu.RUnlock()
	if !ok {
		return
	}
	if s == nil {
		c.o.writeString(emptyScan)
		return
	}
	_, pat, _, ok := scanOptions(c, 3, false)
	if !ok {
		return
	}
	var b [20]byte
	match := func(i int) bool {
		if pat == nil {
			return true
		}
		if s.intset {
			return stringMatch(pat, strconv.AppendInt(b[:0], s.ints[i], 10))
		}
		return stringMatch(pat, stringBytes(s.members[i]))
	}
	n := 0
	for i := range s.card() {
		if match(i) {
			n++
		}
	}
	c.o.writeString("*2\r\n$1\r\n0\r\n")
	c.o.arrayLen(n)
	for i := range s.card() {
		if match(i) {
			c.writeMember(s, i)
		}
	}
}
