package redis

import (
	"math"
	"slices"
	"unsafe"
)

// readEntry read-locks key's shard and returns the shard and the key's
// live entry (nil when absent), counting a hit or a miss; the caller
// read-unlocks the shard.
func (c *ctx) readEntry(key []byte) (*shard, *entry) {
	sh, _ := c.s.db.shardOf(key)
	sh.mu.RLock()
	e := c.lookup(sh, key)
	if e == nil {
		c.w.stats.misses.Add(1)
	} else {
		c.w.stats.hits.Add(1)
	}
	return sh, e
}

// writeEntry write-locks key's shard and returns the shard, the key's
// hash and its live entry (nil when absent); the caller unlocks the shard.
func (c *ctx) writeEntry(key []byte) (*shard, uint64, *entry) {
	sh, h := c.s.db.shardOf(key)
	sh.mu.Lock()
	return sh, h, c.s.db.lookupWrite(sh, key, &c.clk)
}

// readKind read-locks key's shard and returns the shard and the key's
// entry, of kind k. ok is false, the reply written, when the key is of
// another kind (WRONGTYPE) or absent and missing is not empty (the reply
// for an absent key); with missing empty an absent key is a nil entry. The
// caller read-unlocks the shard in every case.
func (c *ctx) readKind(key []byte, k kind, missing string) (sh *shard, e *entry, ok bool) {
	sh, e = c.readEntry(key)
	return sh, e, c.present(e, k, missing)
}

// writeKind is readKind for a write: the shard is write-locked.
func (c *ctx) writeKind(key []byte, k kind, missing string) (sh *shard, e *entry, ok bool) {
	sh, _, e = c.writeEntry(key)
	return sh, e, c.present(e, k, missing)
}

// present checks e for readKind and writeKind.
func (c *ctx) present(e *entry, k kind, missing string) bool {
	switch {
	case c.wrongType(e, k):
		return false
	case e == nil && missing != "":
		c.o.shared(missing)
		return false
	}
	return true
}

// readValue is readKind for a collection: its value, of type T (the zero
// T when the key is absent and missing is empty).
func readValue[T any](c *ctx, key []byte, k kind, missing string) (sh *shard, v T, ok bool) {
	sh, e, ok := c.readKind(key, k, missing)
	if ok && e != nil {
		v = e.obj.(T)
	}
	return sh, v, ok
}

// wrongType writes WRONGTYPE when e exists and is not of kind k.
func (c *ctx) wrongType(e *entry, k kind) bool {
	if e != nil && e.kind != k {
		c.o.writeString(errWrongType)
		return true
	}
	return false
}

// intArg parses argument i as redis-server's getLongLongFromObjectOrReply
// does, answering its error when it is not an integer.
func (c *ctx) intArg(i int) (int64, bool) {
	v, ok := string2ll(c.argv[i])
	if !ok {
		c.o.writeString(errNotInt)
	}
	return v, ok
}

// countArg parses the count of LPOP, RPOP, SPOP, ZPOPMIN and ZPOPMAX
// (argument 2, when given), as redis-server's
// getPositiveLongFromObjectOrReply does.
func (c *ctx) countArg() (count int64, given, ok bool) {
	if len(c.argv) != 3 {
		return 0, false, true
	}
	v, ok := string2ll(c.argv[2])
	if !ok || v < 0 {
		c.o.err("value is out of range, must be positive")
		return 0, true, false
	}
	return v, true, true
}

// intArgs parses arguments i and j with intArg, i first.
func (c *ctx) intArgs(i, j int) (int64, int64, bool) {
	a, ok := c.intArg(i)
	if !ok {
		return 0, 0, false
	}
	b, ok := c.intArg(j)
	return a, b, ok
}

// lockKeys locks the shards of keys (for writing, or for reading), in
// shard order; unlockKeys releases them.
func (c *ctx) lockKeys(keys [][]byte, write bool) {
	c.w.ss.collect(c.s.db, keys)
	if write {
		c.w.ss.lock(c.s.db)
	} else {
		c.w.ss.rlock(c.s.db)
	}
}

func (c *ctx) unlockKeys(write bool) {
	if write {
		c.w.ss.unlock(c.s.db)
	} else {
		c.w.ss.runlock(c.s.db)
	}
}

// shardFor returns key's shard (already locked by lockKeys) and hash.
func (c *ctx) shardFor(key []byte) (*shard, uint64) { return c.s.db.shardOf(key) }

func cmdDel(c *ctx) {
	keys := c.argv[1:]
	c.lockKeys(keys, true)
	n := 0
	for _, k := range keys {
		sh, _ := c.shardFor(k)
		if e := c.s.db.lookupWrite(sh, k, &c.clk); e != nil {
			c.s.db.remove(sh, e)
			sh.modified(k)
			n++
		}
	}
	c.unlockKeys(true)
	c.o.integer(int64(n))
}

// cmdExists answers EXISTS and TOUCH.
func cmdExists(c *ctx) {
	keys := c.argv[1:]
	c.lockKeys(keys, false)
	n := 0
	for _, k := range keys {
		sh, _ := c.shardFor(k)
		if c.lookup(sh, k) != nil {
			n++
		}
	}
	c.unlockKeys(false)
	c.o.integer(int64(n))
}

func cmdType(c *ctx) {
	sh, e := c.readEntry(c.argv[1])
	defer sh.mu.RUnlock()
	if e == nil {
		c.o.simple("none")
		return
	}
	c.o.simple(e.kind.typeName())
}

// cmdExpire answers EXPIRE, PEXPIRE, EXPIREAT and PEXPIREAT.
func cmdExpire(c *ctx) {
	name := c.cmd.name
	var nx, xx, gt, lt bool
	for _, opt := range c.argv[3:] {
		switch {
		case equalFold(opt, "nx"):
			nx = true
		case equalFold(opt, "xx"):
			xx = true
		case equalFold(opt, "gt"):
			gt = true
		case equalFold(opt, "lt"):
			lt = true
		default:
			c.o.errBytes(append([]byte("Unsupported option "), cstr(opt)...))
			return
		}
	}
	if nx && (xx || gt || lt) {
		c.o.err("NX and XX, GT or LT options at the same time are not compatible")
		return
	}
	if gt && lt {
		c.o.err("GT and LT options at the same time are not compatible")
		return
	}
	when, ok := c.intArg(2)
	if !ok {
		return
	}
	seconds := name == "expire" || name == "expireat"
	if seconds {
		if when > math.MaxInt64/1000 || when < math.MinInt64/1000 {
			c.o.err("invalid expire time in '" + name + "' command")
			return
		}
		when *= 1000
	}
	var base int64
	if name == "expire" || name == "pexpire" {
		base = c.now()
	}
	if when > math.MaxInt64-base {
		c.o.err("invalid expire time in '" + name + "' command")
		return
	}
	when += base
	sh, _, e := c.writeEntry(c.argv[1])
	defer sh.mu.Unlock()
	if e == nil {
		c.o.writeString(czero)
		return
	}
	cur := e.expire
	switch {
	case nx && cur != 0, xx && cur == 0,
		gt && (cur == 0 || when <= cur),
		lt && cur != 0 && when >= cur:
		c.o.writeString(czero)
		return
	}
	if when <= c.now() {
		c.s.db.remove(sh, e)
	} else {
		sh.setExpire(e, when)
	}
	sh.modified(c.argv[1])
	c.o.writeString(cone)
}

// cmdTTL answers TTL and PTTL.
func cmdTTL(c *ctx) {
	sh, e := c.readEntry(c.argv[1])
	defer sh.mu.RUnlock()
	switch {
	case e == nil:
		c.o.integer(-2)
	case e.expire == 0:
		c.o.integer(-1)
	default:
		ttl := max(e.expire-c.now(), 0)
		if c.cmd.name == "ttl" {
			ttl = (ttl + 500) / 1000
		}
		c.o.integer(ttl)
	}
}

func cmdPersist(c *ctx) {
	sh, _, e := c.writeEntry(c.argv[1])
	defer sh.mu.Unlock()
	if e == nil || e.expire == 0 {
		c.o.writeString(czero)
		return
	}
	sh.setExpire(e, 0)
	sh.modified(c.argv[1])
	c.o.writeString(cone)
}

// cmdRename answers RENAME and RENAMENX, atomically: both keys' shards
// are held.
func cmdRename(c *ctx) {
	nx := c.cmd.name == "renamenx"
	src, dst := c.argv[1], c.argv[2]
	keys := c.argv[1:3]
	c.lockKeys(keys, true)
	defer c.unlockKeys(true)
	ssh, _ := c.shardFor(src)
	e := c.s.db.lookupWrite(ssh, src, &c.clk)
	if e == nil {
		c.o.writeString(errNoKey)
		return
	}
	if string(src) == string(dst) {
		if nx {
			c.o.writeString(czero)
		} else {
			c.o.ok()
		}
		return
	}
	dsh, dh := c.shardFor(dst)
	if old := c.s.db.lookupWrite(dsh, dst, &c.clk); old != nil {
		if nx {
			c.o.writeString(czero)
			return
		}
		c.s.db.remove(dsh, old)
	}
	expire := e.expire
	c.s.db.remove(ssh, e)
	ne := c.s.db.add(dsh, dst, dh, e.kind)
	ne.str, ne.obj = e.str, e.obj
	c.s.db.resize(ne, e.size-int64(len(src))+int64(len(dst)))
	if expire != 0 {
		dsh.setExpire(ne, expire)
	}
	ssh.modified(src)
	dsh.modified(dst)
	if nx {
		c.o.writeString(cone)
	} else {
		c.o.ok()
	}
}

// cmdKeys walks the keyspace one shard at a time: the shard being read
// is read-locked, the others are free. A key present for the whole walk
// is returned once; one created or deleted during it may or may not be.
// The names of each shard's matching keys are collected while it is held
// (references: a key's name never changes), then written.
func cmdKeys(c *ctx) {
	pat := compileGlob(c.argv[1])
	var keys keyList
	keys.reset(c.w, c.s.db.keys.Load())
	for i := range c.s.db.shards {
		sh := &c.s.db.shards[i]
		sh.mu.RLock()
		switch {
		case pat.all() && sh.volatile == 0:
			for _, o := range sh.order {
				keys.add(o.key)
			}
		case sh.volatile == 0:
			for _, o := range sh.order {
				if pat.match(stringBytes(o.key)) {
					keys.add(o.key)
				}
			}
		default:
			for _, o := range sh.order {
				if o.e.live(&c.clk) && pat.match(stringBytes(o.key)) {
					keys.add(o.key)
				}
			}
		}
		sh.mu.RUnlock()
	}
	keys.write(c.o)
	keys.release(c.w)
}

// keyList collects the names of keys of the store: references to their
// immutable strings, in a worker's scratch space.
type keyList struct {
	names []string
}

// reset starts a list for about n keys.
func (l *keyList) reset(w *worker, n int64) {
	l.names = w.names[:0]
	if n > int64(cap(l.names)) {
		l.names = make([]string, 0, min(n, 1<<24))
	}
}

func (l *keyList) add(k string) { l.names = append(l.names, k) }

func (l *keyList) write(o *out) {
	o.arrayLen(len(l.names))
	for _, k := range l.names {
		o.bulkString(k)
	}
}

// keepScratch is the most a worker keeps of the space a KEYS or SCAN
// used, for the next one: a KEYS of millions of keys does not hold its
// peak for good.
const keepScratch = 16 << 20

// release gives the space back to the worker, holding no key: a key
// deleted later is not kept alive by it.
func (l *keyList) release(w *worker) {
	clear(l.names)
	w.names = nil
	if cap(l.names)*int(unsafe.Sizeof("")) <= keepScratch {
		w.names = l.names[:0]
	}
}

// cmdScan walks the keyspace in hash order from the cursor, the hash of
// the next key to return: at least COUNT keys are visited (then MATCH and
// TYPE filter them), each shard read-locked only while it is read. Every
// key present from the first call to the last is returned, once.
func cmdScan(c *ctx) {
	cursor, ok := parseCursor(c.argv[1])
	if !ok {
		c.o.err("invalid cursor")
		return
	}
	count, pat, typ, ok := scanOptions(c, 2, true)
	if !ok {
		return
	}
	db := c.s.db
	var keys keyList
	keys.reset(c.w, int64(min(count, 1<<16)))
	visited := 0
	next := cursor
	for {
		si := shardIndex(next)
		sh := &db.shards[si]
		sh.mu.RLock()
		from := next
		i, _ := slices.BinarySearchFunc(sh.order, next, func(o slot, h uint64) int {
			return cmpUint64(o.hash, h)
		})
		expired := false
		for i < len(sh.order) && visited < count {
			h := sh.order[i].hash // keys of one hash are returned together
			for ; i < len(sh.order) && sh.order[i].hash == h; i++ {
				o := &sh.order[i]
				visited++
				if !pat.match(stringBytes(o.key)) {
					continue
				}
				if sh.volatile != 0 && !o.e.live(&c.clk) {
					// Deleted below, as redis-server's SCAN deletes an
					// expired key it meets; its TYPE filter reads the
					// key first, deleting it, so that the key's type is
					// "none" and TYPE none returns it.
					expired = true
					if typ != nil && equalFold(typ, "none") {
						keys.add(o.key)
					}
					continue
				}
				if typ == nil || equalFold(typ, o.e.kind.typeName()) {
					keys.add(o.key)
				}
			}
		}
		stopped := i < len(sh.order)
		if stopped {
			next = sh.order[i].hash
		}
		sh.mu.RUnlock()
		if expired {
			to := uint64(0) // the shard's end
			if stopped {
				to = next
			}
			db.reapRange(sh, from, to, pat, &c.clk)
		}
		if stopped {
			break
		}
		if si == numShards-1 {
			next = 0
			break
		}
		next = uint64(si+1) << (64 - shardBits)
		if visited >= count {
			break
		}
	}
	c.o.arrayLen(2)
	c.o.bulkString(uitoa(next))
	keys.write(c.o)
	keys.release(c.w)
}

func cmpUint64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func uitoa(v uint64) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + v%10)
		v /= 10
		if v == 0 {
			break
		}
	}
	return string(b[i:])
}

// scanOptions parses SCAN's (and HSCAN's, SSCAN's, ZSCAN's) options from
// argument i: COUNT, MATCH, and TYPE for SCAN. A MATCH of "*" is no
// pattern.
func scanOptions(c *ctx, i int, keyspace bool) (count int, pat glob, typ []byte, ok bool) {
	count = 10
	for i < len(c.argv) {
		left := len(c.argv) - i
		switch {
		case equalFold(c.argv[i], "count") && left >= 2:
			n, ok := c.intArg(i + 1)
			if !ok {
				return 0, glob{}, nil, false
			}
			if n < 1 {
				c.o.writeString(errSyntax)
				return 0, glob{}, nil, false
			}
			count = int(min(n, math.MaxInt32))
			i += 2
		case equalFold(c.argv[i], "match") && left >= 2:
			pat = compileGlob(c.argv[i+1])
			i += 2
		case equalFold(c.argv[i], "type") && keyspace && left >= 2:
			typ = cstr(c.argv[i+1])
			i += 2
		default:
			c.o.writeString(errSyntax)
			return 0, glob{}, nil, false
		}
	}
	return count, pat, typ, true
}

// cmdRandomkey picks a random shard, then a random key of it, skipping
// empty shards and expired keys.
func cmdRandomkey(c *ctx) {
	db := c.s.db
	if db.keys.Load() == 0 {
		c.o.null()
		return
	}
	start := c.w.rng.IntN(numShards)
	for tries := 0; tries < 2*numShards; tries++ {
		sh := &db.shards[(start+tries)%numShards]
		sh.mu.RLock()
		if n := len(sh.order); n > 0 {
			for k := 0; k < 4; k++ {
				e := sh.order[c.w.rng.IntN(n)].e
				if e.live(&c.clk) {
					c.o.bulkString(e.key)
					sh.mu.RUnlock()
					return
				}
			}
		}
		sh.mu.RUnlock()
	}
	c.o.null()
}

// cmdExpiretime answers EXPIRETIME and PEXPIRETIME: the key's expire
// time, unix seconds (rounded) or milliseconds.
func cmdExpiretime(c *ctx) {
	sh, e := c.readEntry(c.argv[1])
	defer sh.mu.RUnlock()
	switch {
	case e == nil:
		c.o.integer(-2)
	case e.expire == 0:
		c.o.integer(-1)
	case c.cmd.name == "expiretime":
		// (expire+500)/1000 without overflowing: an expire near the
		// largest time answers as redis-server's does.
		c.o.integer(e.expire/1000 + (e.expire%1000+500)/1000)
	default:
		c.o.integer(e.expire)
	}
}

// cmdCopy answers COPY source destination [DB db] [REPLACE], both keys'
// shards held. psp has one database: DB 0 is the only one.
func cmdCopy(c *ctx) {
	replace := false
	for j := 3; j < len(c.argv); j++ {
		switch {
		case equalFold(c.argv[j], "replace"):
			replace = true
		case equalFold(c.argv[j], "db") && j < len(c.argv)-1:
			j++
			id, ok := c.intArg(j)
			if !ok {
				return
			}
			if id < math.MinInt32 || id > math.MaxInt32 {
				c.o.err("value is out of range, value must between -2147483648 and 2147483647")
				return
			}
			if id != 0 {
				c.o.err("DB index is out of range")
				return
			}
		default:
			c.o.writeString(errSyntax)
			return
		}
	}
	src, dst := c.argv[1], c.argv[2]
	if string(src) == string(dst) {
		c.o.err("source and destination objects are the same")
		return
	}
	c.lockKeys(c.argv[1:3], true)
	defer c.unlockKeys(true)
	ssh, _ := c.shardFor(src)
	e := c.s.db.lookupWrite(ssh, src, &c.clk)
	if e == nil {
		c.w.stats.misses.Add(1)
		c.o.writeString(czero)
		return
	}
	c.w.stats.hits.Add(1)
	dsh, dh := c.shardFor(dst)
	if old := c.s.db.lookupWrite(dsh, dst, &c.clk); old != nil {
		if !replace {
			c.o.writeString(czero)
			return
		}
		c.s.db.remove(dsh, old)
	}
	ne := c.s.db.add(dsh, dst, dh, e.kind)
	size := e.size - int64(len(src)) + int64(len(dst))
	switch e.kind {
	case kindString:
		ne.str = copyBytes(e.str)
		size = stringSize(dst, ne.str)
	case kindList:
		ne.obj = e.obj.(*list).clone()
	case kindHash:
		ne.obj = e.obj.(*hashObj).clone()
	case kindSet:
		ne.obj = e.obj.(*setObj).clone()
	case kindZSet:
		ne.obj = e.obj.(*zsetObj).clone()
	case kindStream:
		ne.obj = e.obj.(*streamObj).clone()
	}
	c.s.db.resize(ne, size)
	if e.expire != 0 {
		dsh.setExpire(ne, e.expire)
	}
	dsh.modified(dst)
	c.o.writeString(cone)
}
