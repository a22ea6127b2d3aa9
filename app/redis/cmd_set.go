package redis

import (
	"slices"
	"strconv"
)

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
	if added > 0 {
		sh.modified(key)
	}
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
	if deleted > 0 {
		sh.modified(c.argv[1])
	}
	c.o.integer(int64(deleted))
}

// cmdSmembers answers in the order redis-server answers an intset
// (ascending) and otherwise in the set's own order.
func cmdSmembers(c *ctx) {
	sh, s, ok := readValue[*setObj](c, c.argv[1], kindSet, emptySet)
	defer sh.mu.RUnlock()
	if !ok {
		return
	}
	c.o.setLen(s.card())
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
		missing = emptySet
	}
	sh, e, ok = c.writeKind(c.argv[1], kindSet, missing)
	defer sh.mu.Unlock()
	if !ok {
		return
	}
	s := e.obj.(*setObj)
	if hasCount && count == 0 {
		c.o.shared(emptySet)
		return
	}
	defer sh.modified(c.argv[1])
	if !hasCount {
		i := c.w.rng.IntN(s.card())
		c.writeMember(s, i)
		c.popMember(sh, e, s, i)
		return
	}
	if count >= int64(s.card()) {
		c.o.setLen(s.card())
		for i := range s.card() {
			c.writeMember(s, i)
		}
		c.s.db.remove(sh, e)
		return
	}
	c.o.setLen(int(count))
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

// memberBytes is member i of s, formatted into scratch when s is an
// intset; the bytes must not be modified.
func (s *setObj) memberBytes(i int, scratch *[20]byte) []byte {
	if s.intset {
		return strconv.AppendInt(scratch[:0], s.ints[i], 10)
	}
	return stringBytes(s.members[i])
}

// size is the bytes accounted for s's members (memberSize of each).
func (s *setObj) size() int64 {
	n := int64(s.card()) * (elemOverhead + 32)
	if s.intset {
		for i := range s.ints {
			n += int64(s.memberLen(i))
		}
		return n
	}
	for _, m := range s.members {
		n += int64(len(m))
	}
	return n
}

// clone returns a copy of s, of the same encoding (COPY).
func (s *setObj) clone() *setObj {
	d := &setObj{intset: s.intset}
	if s.intset {
		d.ints = append(make([]int64, 0, len(s.ints)), s.ints...)
		return d
	}
	d.members = append(make([]string, 0, len(s.members)), s.members...)
	d.idx = make(map[string]int, len(s.idx))
	for k, v := range s.idx {
		d.idx[k] = v
	}
	return d
}

// setArgs looks keys up as sets, their shards held by the caller (for
// writing when write), as redis-server's set algebra does: every key is
// looked up (a missing one is a nil set) until one holds another type,
// which is answered WRONGTYPE (ok false).
func (c *ctx) setArgs(keys [][]byte, write bool) (sets []*setObj, ok bool) {
	sets = make([]*setObj, len(keys))
	for i, k := range keys {
		sh, _ := c.shardFor(k)
		var e *entry
		if write {
			e = c.s.db.lookupWrite(sh, k, &c.clk)
		} else {
			e = c.lookup(sh, k)
		}
		if e == nil {
			c.w.stats.misses.Add(1)
			continue
		}
		c.w.stats.hits.Add(1)
		if c.wrongType(e, kindSet) {
			return nil, false
		}
		sets[i] = e.obj.(*setObj)
	}
	return sets, true
}

// sinter visits the members of the intersection of sets (none nil) as
// redis-server's sinterGenericCommand finds them: the members of the
// smallest set (the first of the smallest), in its order, that every
// other set holds. visit returns false to stop.
func sinter(sets []*setObj, visit func(s *setObj, i int) bool) {
	slices.SortStableFunc(sets, func(a, b *setObj) int { return a.card() - b.card() })
	first := sets[0]
	var b [20]byte
	for i := range first.card() {
		m := first.memberBytes(i, &b)
		all := true
		for _, t := range sets[1:] {
			if t != first && !t.has(m) {
				all = false
				break
			}
		}
		if all && !visit(first, i) {
			return
		}
	}
}

// cmdSinter answers SINTER: the members in the smallest set's order.
func cmdSinter(c *ctx) {
	keys := c.argv[1:]
	c.lockKeys(keys, false)
	defer c.unlockKeys(false)
	sets, ok := c.setArgs(keys, false)
	if !ok {
		return
	}
	if slices.Contains(sets, nil) {
		c.o.shared(emptySet)
		return
	}
	var found []int
	var first *setObj
	sinter(sets, func(s *setObj, i int) bool {
		first = s
		found = append(found, i)
		return true
	})
	c.o.setLen(len(found))
	for _, i := range found {
		c.writeMember(first, i)
	}
}

// cmdSintercard answers SINTERCARD numkeys key [key ...] [LIMIT limit].
func cmdSintercard(c *ctx) {
	n, ok := string2ll(c.argv[1])
	if !ok || n < 1 {
		c.o.err("numkeys should be greater than 0")
		return
	}
	if n > int64(len(c.argv)-2) {
		c.o.err("Number of keys can't be greater than number of args")
		return
	}
	keys := c.argv[2 : 2+n]
	var limit int64
	for j := 2 + int(n); j < len(c.argv); j++ {
		if !equalFold(c.argv[j], "limit") || j == len(c.argv)-1 {
			c.o.writeString(errSyntax)
			return
		}
		j++
		if limit, ok = string2ll(c.argv[j]); !ok || limit < 0 {
			c.o.err("LIMIT can't be negative")
			return
		}
	}
	c.lockKeys(keys, false)
	sets, ok := c.setArgs(keys, false)
	if ok {
		card := int64(0)
		if !slices.Contains(sets, nil) {
			sinter(sets, func(*setObj, int) bool {
				card++
				return limit == 0 || card < limit
			})
		}
		c.o.integer(card)
	}
	c.unlockKeys(false)
	if c.reap {
		// The command's keys are not at fixed places: reapExpired
		// cannot find them.
		c.reap = false
		for _, k := range keys {
			sh, _ := c.s.db.shardOf(k)
			sh.mu.Lock()
			c.s.db.lookupWrite(sh, k, &c.clk)
			sh.mu.Unlock()
		}
	}
}

// cmdSinterstore answers SINTERSTORE: the destination is replaced by the
// intersection, whatever it held, or deleted when it is empty.
func cmdSinterstore(c *ctx) {
	c.lockKeys(c.argv[1:], true)
	defer c.unlockKeys(true)
	sets, ok := c.setArgs(c.argv[2:], true)
	if !ok {
		return
	}
	res := newSetObj()
	if !slices.Contains(sets, nil) {
		var b [20]byte
		sinter(sets, func(s *setObj, i int) bool {
			res.add(s.memberBytes(i, &b))
			return true
		})
	}
	c.storeSet(c.argv[1], res)
}

// storeSet replaces dst (its shard held for writing) by res, or deletes
// it when res is empty, and answers res's size.
func (c *ctx) storeSet(dst []byte, res *setObj) {
	sh, h := c.shardFor(dst)
	old := c.s.db.lookupWrite(sh, dst, &c.clk)
	if old != nil {
		c.s.db.remove(sh, old)
	}
	n := res.card()
	if n == 0 {
		if old != nil {
			sh.modified(dst)
		}
		c.o.writeString(czero)
		return
	}
	e := c.s.db.add(sh, dst, h, kindSet)
	e.obj = res
	c.s.db.resize(e, e.size+res.size())
	sh.modified(dst)
	c.o.integer(int64(n))
}

// sunion is the union of sets (nil: empty), built as redis-server's
// sunionDiffGenericCommand builds it (an intset while it can be).
func sunion(sets []*setObj) *setObj {
	res := newSetObj()
	var b [20]byte
	for _, s := range sets {
		if s == nil {
			continue
		}
		for i := range s.card() {
			res.add(s.memberBytes(i, &b))
		}
	}
	return res
}

// sdiff is the members of sets[0] that no other set holds (nil: empty),
// built as redis-server's sunionDiffGenericCommand builds it: by the
// algorithm it picks, which decides whether the result is still an
// intset (its second adds all of sets[0] first).
func sdiff(sets []*setObj) *setObj {
	res := newSetObj()
	first := sets[0]
	if first == nil || slices.Contains(sets[1:], first) {
		return res
	}
	var one, two int
	for _, s := range sets {
		if s != nil {
			one += first.card()
			two += s.card()
		}
	}
	var b [20]byte
	if one/2 <= two {
		for i := range first.card() {
			m := first.memberBytes(i, &b)
			held := false
			for _, s := range sets[1:] {
				if s != nil && s.has(m) {
					held = true
					break
				}
			}
			if !held {
				res.add(m)
			}
		}
		return res
	}
	for j, s := range sets {
		if s == nil {
			continue
		}
		for i := range s.card() {
			if j == 0 {
				res.add(s.memberBytes(i, &b))
			} else {
				res.remove(s.memberBytes(i, &b))
			}
		}
		if res.card() == 0 {
			break
		}
	}
	return res
}

// cmdSunion answers SUNION and SDIFF: the result in its own order
// (ascending while it is an intset).
func cmdSunion(c *ctx) {
	keys := c.argv[1:]
	c.lockKeys(keys, false)
	defer c.unlockKeys(false)
	sets, ok := c.setArgs(keys, false)
	if !ok {
		return
	}
	var res *setObj
	if c.cmd.name == "sdiff" {
		res = sdiff(sets)
	} else {
		res = sunion(sets)
	}
	c.o.setLen(res.card())
	for i := range res.card() {
		c.writeMember(res, i)
	}
}

// cmdSunionstore answers SUNIONSTORE and SDIFFSTORE.
func cmdSunionstore(c *ctx) {
	c.lockKeys(c.argv[1:], true)
	defer c.unlockKeys(true)
	sets, ok := c.setArgs(c.argv[2:], true)
	if !ok {
		return
	}
	if c.cmd.name == "sdiffstore" {
		c.storeSet(c.argv[1], sdiff(sets))
	} else {
		c.storeSet(c.argv[1], sunion(sets))
	}
}

// cmdSmove moves a member from one set to another, both keys' shards
// held.
func cmdSmove(c *ctx) {
	src, dst, m := c.argv[1], c.argv[2], c.argv[3]
	c.lockKeys(c.argv[1:3], true)
	defer c.unlockKeys(true)
	ssh, _ := c.shardFor(src)
	se := c.s.db.lookupWrite(ssh, src, &c.clk)
	dsh, dh := c.shardFor(dst)
	de := c.s.db.lookupWrite(dsh, dst, &c.clk)
	if se == nil {
		c.o.writeString(czero)
		return
	}
	if c.wrongType(se, kindSet) || c.wrongType(de, kindSet) {
		return
	}
	ss := se.obj.(*setObj)
	if se == de {
		if ss.has(m) {
			c.o.writeString(cone)
		} else {
			c.o.writeString(czero)
		}
		return
	}
	if !ss.remove(m) {
		c.o.writeString(czero)
		return
	}
	c.s.db.resize(se, se.size-memberSize(m))
	if ss.card() == 0 {
		c.s.db.remove(ssh, se)
	}
	if de == nil {
		de = c.s.db.add(dsh, dst, dh, kindSet)
		de.obj = newSetObj()
	}
	ssh.modified(src)
	if de.obj.(*setObj).add(m) {
		c.s.db.resize(de, de.size+memberSize(m))
		dsh.modified(dst)
	}
	c.o.writeString(cone)
}
