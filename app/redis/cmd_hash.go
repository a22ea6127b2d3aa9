package redis

import (
	"math"
	"math/big"
	"strconv"
)

func fieldSize(name string, value []byte) int64 {
	return 2*elemOverhead + int64(len(name)) + int64(len(value))
}

// hashForWrite returns key's hash for a write, creating it when absent
// (redis-server's hashTypeLookupWriteOrCreate), or nil after WRONGTYPE.
func (c *ctx) hashForWrite(sh *shard, h uint64, e *entry, key []byte) (*entry, *hashObj) {
	if c.wrongType(e, kindHash) {
		return nil, nil
	}
	if e == nil {
		e = c.s.db.add(sh, key, h, kindHash)
		e.obj = &hashObj{}
	}
	return e, e.obj.(*hashObj)
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
	key := c.argv[1]
	sh, h, e := c.writeEntry(key)
	defer sh.mu.Unlock()
	e, hv := c.hashForWrite(sh, h, e, key)
	if e == nil {
		return
	}
	created := 0
	for i := 2; i < len(c.argv); i += 2 {
		if c.hsetField(e, hv, c.argv[i], c.argv[i+1]) {
			created++
		}
	}
	if c.cmd.name == "hset" {
		c.o.integer(int64(created))
	} else {
		c.o.ok()
	}
}

func cmdHsetnx(c *ctx) {
	key := c.argv[1]
	sh, h, e := c.writeEntry(key)
	defer sh.mu.Unlock()
	e, hv := c.hashForWrite(sh, h, e, key)
	if e == nil {
		return
	}
	if hv.find(c.argv[2]) >= 0 {
		c.o.writeString(czero)
		return
	}
	c.hsetField(e, hv, c.argv[2], c.argv[3])
	c.o.writeString(cone)
}

// readHash read-locks key's shard and returns its hash (nil when absent),
// ok false after WRONGTYPE; the caller read-unlocks sh.
func (c *ctx) readHash(key []byte) (sh *shard, hv *hashObj, ok bool) {
	sh, e := c.readEntry(key)
	if c.wrongType(e, kindHash) {
		return sh, nil, false
	}
	if e == nil {
		return sh, nil, true
	}
	return sh, e.obj.(*hashObj), true
}

func cmdHget(c *ctx) {
	sh, hv, ok := c.readHash(c.argv[1])
	defer sh.mu.RUnlock()
	if !ok {
		return
	}
	if hv == nil {
		c.o.null()
		return
	}
	if i := hv.find(c.argv[2]); i >= 0 {
		c.o.bulk(hv.fields[i].value)
	} else {
		c.o.null()
	}
}

func cmdHmget(c *ctx) {
	sh, hv, ok := c.readHash(c.argv[1])
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
	sh, _, e := c.writeEntry(c.argv[1])
	defer sh.mu.Unlock()
	if e == nil {
		c.o.writeString(czero)
		return
	}
	if c.wrongType(e, kindHash) {
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
	c.o.integer(int64(deleted))
}

func cmdHlen(c *ctx) {
	sh, hv, ok := c.readHash(c.argv[1])
	defer sh.mu.RUnlock()
	if !ok {
		return
	}
	if hv == nil {
		c.o.writeString(czero)
		return
	}
	c.o.integer(int64(len(hv.fields)))
}

func cmdHstrlen(c *ctx) {
	sh, hv, ok := c.readHash(c.argv[1])
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
	sh, hv, ok := c.readHash(c.argv[1])
	defer sh.mu.RUnlock()
	if !ok {
		return
	}
	if hv == nil {
		c.o.writeString(emptyArray)
		return
	}
	keys, vals := c.cmd.name != "hvals", c.cmd.name != "hkeys"
	n := len(hv.fields)
	if keys && vals {
		n *= 2
	}
	c.o.arrayLen(n)
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
	sh, hv, ok := c.readHash(c.argv[1])
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
	key := c.argv[1]
	sh, h, e := c.writeEntry(key)
	defer sh.mu.Unlock()
	e, hv := c.hashForWrite(sh, h, e, key)
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
	if (incr < 0 && old < 0 && incr < math.MinInt64-old) || (incr > 0 && old > 0 && incr > math.MaxInt64-old) {
		c.o.err("increment or decrement would overflow")
		return
	}
	v := old + incr
	var b [20]byte
	c.hsetField(e, hv, c.argv[2], strconv.AppendInt(b[:0], v, 10))
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
	key := c.argv[1]
	sh, h, e := c.writeEntry(key)
	defer sh.mu.Unlock()
	e, hv := c.hashForWrite(sh, h, e, key)
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
	sum := new(big.Float).SetPrec(ldPrec).Add(value, incr)
	if ldOverflows(sum) {
		c.o.err("increment would produce NaN or Infinity")
		return
	}
	s := []byte(formatLongDouble(sum))
	c.hsetField(e, hv, c.argv[2], s)
	c.o.bulk(s)
}

// cmdHscan returns the whole hash in one call, with cursor 0, as
// redis-server does for a small hash (see the package doc).
func cmdHscan(c *ctx) {
	if _, ok := parseCursor(c.argv[2]); !ok {
		c.o.err("invalid cursor")
		return
	}
	sh, hv, ok := c.readHash(c.argv[1])
	defer sh.mu.RUnlock()
	if !ok {
		return
	}
	if hv == nil {
		c.o.writeString(emptyScan)
		return
	}
	_, pat, _, ok := scanOptions(c, 3, false)
	if !ok {
		return
	}
	n := 0
	for _, f := range hv.fields {
		if pat == nil || stringMatch(pat, stringBytes(f.name)) {
			n++
		}
	}
	c.o.writeString("*2\r\n$1\r\n0\r\n")
	c.o.arrayLen(2 * n)
	for _, f := range hv.fields {
		if pat == nil || stringMatch(pat, stringBytes(f.name)) {
			c.o.bulkString(f.name)
			c.o.bulk(f.value)
		}
	}
}
