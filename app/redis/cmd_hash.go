package redis

import (
	"math/big"
	"strconv"
)

func fieldSize(name string, value []byte) int64 {
	return 2*elemOverhead + int64(len(name)) + int64(len(value))
}

// writeHash write-locks key's shard and returns the shard and key's hash,
// created when absent (redis-server's hashTypeLookupWriteOrCreate); e is
// nil after WRONGTYPE. The caller unlocks the shard.
func (c *ctx) writeHash(key []byte) (sh *shard, e *entry, hv *hashObj) {
	sh, h, e := c.writeEntry(key)
	if c.wrongType(e, kindHash) {
		return sh, nil, nil
	}
	if e == nil {
		e = c.s.db.add(sh, key, h, kindHash)
		e.obj = &hashObj{}
	}
	return sh, e, e.obj.(*hashObj)
}

// hsetField sets one field and accounts for it; it reports whether the
// field is new.
func (c *ctx) hsetField(e *entry, hv *hashObj, name, value []byte) bool {
	value = copyBytes(value)
	if i := hv.find(name); i >= 0 {
		old := hv.fields[i].value
		hv.set(name, value)
		c.s.db.resize(e, e.size-int64(len(old))+int64(len(value)))
		return false
	}
	hv.set(name, value)
	c.s.db.resize(e, e.size+fieldSize(string(name), value))
	return true
}

// cmdHset answers HSET (the number of new fields) and HMSET (OK).
func cmdHset(c *ctx) {
	if len(c.argv)%2 == 1 {
		c.o.err("wrong number of arguments for '" + c.cmd.name + "' command")
		return
	}
	sh, e, hv := c.writeHash(c.argv[1])
	defer sh.mu.Unlock()
	if e == nil {
		return
	}
	created := 0
	for i := 2; i < len(c.argv); i += 2 {
		if c.hsetField(e, hv, c.argv[i], c.argv[i+1]) {
			created++
		}
	}
	sh.modified(c.argv[1])
	if c.cmd.name == "hset" {
		c.o.integer(int64(created))
	} else {
		c.o.ok()
	}
}

func cmdHsetnx(c *ctx) {
	sh, e, hv := c.writeHash(c.argv[1])
	defer sh.mu.Unlock()
	if e == nil {
		return
	}
	if hv.find(c.argv[2]) >= 0 {
		c.o.writeString(czero)
		return
	}
	c.hsetField(e, hv, c.argv[2], c.argv[3])
	sh.modified(c.argv[1])
	c.o.writeString(cone)
}

func cmdHget(c *ctx) {
	sh, hv, ok := readValue[*hashObj](c, c.argv[1], kindHash, nullBulk)
	defer sh.mu.RUnlock()
	if !ok {
		return
	}
	if i := hv.find(c.argv[2]); i >= 0 {
		c.o.bulk(hv.fields[i].value)
	} else {
		c.o.null()
	}
}

func cmdHmget(c *ctx) {
	sh, hv, ok := readValue[*hashObj](c, c.argv[1], kindHash, "")
	defer sh.mu.RUnlock()
	if !ok {
		return
	}
	c.o.arrayLen(len(c.argv) - 2)
	for _, f := range c.argv[2:] {
		i := -1
		if hv != nil {
			i = hv.find(f)
		}
		if i >= 0 {
			c.o.bulk(hv.fields[i].value)
		} else {
			c.o.null()
		}
	}
}

func cmdHdel(c *ctx) {
	sh, e, ok := c.writeKind(c.argv[1], kindHash, czero)
	defer sh.mu.Unlock()
	if !ok {
		return
	}
	hv := e.obj.(*hashObj)
	deleted := 0
	for _, f := range c.argv[2:] {
		i := hv.find(f)
		if i < 0 {
			continue
		}
		c.s.db.resize(e, e.size-fieldSize(hv.fields[i].name, hv.fields[i].value))
		hv.del(i)
		deleted++
		if len(hv.fields) == 0 {
			c.s.db.remove(sh, e)
			break
		}
	}
	if deleted > 0 {
		sh.modified(c.argv[1])
	}
	c.o.integer(int64(deleted))
}

func cmdHlen(c *ctx) {
	sh, hv, ok := readValue[*hashObj](c, c.argv[1], kindHash, czero)
	defer sh.mu.RUnlock()
	if !ok {
		return
	}
	c.o.integer(int64(len(hv.fields)))
}

func cmdHstrlen(c *ctx) {
	sh, hv, ok := readValue[*hashObj](c, c.argv[1], kindHash, "")
	defer sh.mu.RUnlock()
	if !ok {
		return
	}
	n := 0
	if hv != nil {
		if i := hv.find(c.argv[2]); i >= 0 {
			n = len(hv.fields[i].value)
		}
	}
	c.o.integer(int64(n))
}

// cmdHgetall answers HGETALL, HKEYS and HVALS, in the order redis-server
// answers a small hash: the fields' insertion order.
func cmdHgetall(c *ctx) {
	keys, vals := c.cmd.name != "hvals", c.cmd.name != "hkeys"
	missing := emptyArray
	if keys && vals {
		missing = emptyMap
	}
	sh, hv, ok := readValue[*hashObj](c, c.argv[1], kindHash, missing)
	defer sh.mu.RUnlock()
	if !ok {
		return
	}
	if keys && vals {
		c.o.mapLen(len(hv.fields))
	} else {
		c.o.arrayLen(len(hv.fields))
	}
	for _, f := range hv.fields {
		if keys {
			c.o.bulkString(f.name)
		}
		if vals {
			c.o.bulk(f.value)
		}
	}
}

func cmdHexists(c *ctx) {
	sh, hv, ok := readValue[*hashObj](c, c.argv[1], kindHash, "")
	defer sh.mu.RUnlock()
	if !ok {
		return
	}
	if hv != nil && hv.find(c.argv[2]) >= 0 {
		c.o.writeString(cone)
	} else {
		c.o.writeString(czero)
	}
}

func cmdHincrby(c *ctx) {
	incr, ok := c.intArg(3)
	if !ok {
		return
	}
	sh, e, hv := c.writeHash(c.argv[1])
	defer sh.mu.Unlock()
	if e == nil {
		return
	}
	var old int64
	if i := hv.find(c.argv[2]); i >= 0 {
		v, ok := string2ll(hv.fields[i].value)
		if !ok {
			c.o.err("hash value is not an integer")
			return
		}
		old = v
	}
	v, ok := c.incrInt(old, incr)
	if !ok {
		return
	}
	var b [20]byte
	c.hsetField(e, hv, c.argv[2], strconv.AppendInt(b[:0], v, 10))
	sh.modified(c.argv[1])
	c.o.integer(v)
}

func cmdHincrbyfloat(c *ctx) {
	incr, ok := parseLongDouble(c.argv[3])
	if !ok {
		c.o.writeString(errNotFloat)
		return
	}
	if incr.IsInf() {
		c.o.err("value is NaN or Infinity")
		return
	}
	sh, e, hv := c.writeHash(c.argv[1])
	defer sh.mu.Unlock()
	if e == nil {
		return
	}
	value := new(big.Float).SetPrec(ldPrec)
	if i := hv.find(c.argv[2]); i >= 0 {
		v, ok := parseLongDouble(hv.fields[i].value)
		if !ok {
			c.o.err("hash value is not a float")
			return
		}
		value = v
	}
	if value.IsInf() {
		c.o.err("increment would produce NaN or Infinity")
		return
	}
	sum, ok := c.incrFloat(value, incr)
	if !ok {
		return
	}
	s := []byte(formatLongDouble(sum))
	c.hsetField(e, hv, c.argv[2], s)
	sh.modified(c.argv[1])
	c.o.bulk(s)
}

// cmdHscan returns the whole hash in one call (see scanWhole).
func cmdHscan(c *ctx) {
	scanWhole(c, kindHash, 2, func(hv *hashObj, match func([]byte) bool) {
		for _, f := range hv.fields {
			if match(stringBytes(f.name)) {
				c.o.bulkString(f.name)
				c.o.bulk(f.value)
			}
		}
	})
}

// scanWhole answers HSCAN, SSCAN and ZSCAN: the whole collection in one
// call, with cursor 0, as redis-server answers for a small collection.
// each walks the collection, asking match about each element's name and
// writing the element (per items) when match says so: once to count,
// once to write.
func scanWhole[T any](c *ctx, k kind, per int, each func(v T, match func(name []byte) bool)) {
	if _, ok := parseCursor(c.argv[2]); !ok {
		c.o.err("invalid cursor")
		return
	}
	sh, v, ok := readValue[T](c, c.argv[1], k, emptyScan)
	defer sh.mu.RUnlock()
	if !ok {
		return
	}
	_, pat, _, ok := scanOptions(c, 3, false)
	if !ok {
		return
	}
	n := 0
	each(v, func(name []byte) bool {
		if pat.match(name) {
			n++
		}
		return false
	})
	c.o.writeString("*2\r\n$1\r\n0\r\n")
	c.o.arrayLen(per * n)
	each(v, func(name []byte) bool { return pat.match(name) })
}

// cmdHrandfield answers HRANDFIELD (a count, WITHVALUES); the whole hash
// is answered in its fields' order.
func cmdHrandfield(c *ctx) {
	count, with, given, ok := c.randCountArgs("withvalues")
	if !ok {
		return
	}
	missing := nullBulk
	if given {
		missing = emptyArray
	}
	sh, hv, ok := readValue[*hashObj](c, c.argv[1], kindHash, missing)
	defer sh.mu.RUnlock()
	if !ok {
		return
	}
	if !given {
		c.o.bulkString(hv.fields[c.w.rng.IntN(len(hv.fields))].name)
		return
	}
	c.randomPicks(count, len(hv.fields), with, false, func(i int) {
		c.o.bulkString(hv.fields[i].name)
		if with {
			c.o.bulk(hv.fields[i].value)
		}
	})
}
