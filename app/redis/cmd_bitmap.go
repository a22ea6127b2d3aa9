package redis

import (
	"math/bits"
	"slices"
)

// The bitmap commands read a string as bits, the first bit being the
// most significant of its first byte, as redis-server's bitops.c does.

// bitOffset parses a SETBIT or GETBIT offset as redis-server's
// getBitOffsetFromArgument does: a non-negative integer whose byte is
// below proto-max-bulk-len.
func (c *ctx) bitOffset(i int) (uint64, bool) {
	v, ok := string2ll(c.argv[i])
	if !ok || v < 0 || v>>3 >= c.s.maxBulk.Load() {
		c.o.err("bit offset is not an integer or out of range")
		return 0, false
	}
	return uint64(v), true
}

func cmdSetbit(c *ctx) {
	offset, ok := c.bitOffset(2)
	if !ok {
		return
	}
	on, ok := string2ll(c.argv[3])
	if !ok || on&^1 != 0 {
		c.o.err("bit is not an integer or out of range")
		return
	}
	key := c.argv[1]
	sh, h, e := c.writeEntry(key)
	defer sh.mu.Unlock()
	if c.wrongType(e, kindString) {
		return
	}
	byteAt := int(offset >> 3)
	grown := e == nil // or longer: the key is modified whatever the bit
	if e == nil {
		e = c.s.db.add(sh, key, h, kindString)
	}
	if n := byteAt + 1; n > len(e.str) {
		grown = true
		// Grown as redis-server's sdsgrowzero grows it, with room to
		// spare (counted: stringSize counts the capacity), so that bits
		// set one after the other do not copy the string each time.
		old := len(e.str)
		e.str = slices.Grow(e.str, n-old)[:n]
		clear(e.str[old:])
		c.s.db.resize(e, stringSize(key, e.str))
	}
	mask := byte(1) << (7 - offset&7)
	old := e.str[byteAt]&mask != 0
	if on == 1 {
		e.str[byteAt] |= mask
	} else {
		e.str[byteAt] &^= mask
	}
	if grown || old != (on == 1) {
		sh.modified(key)
	}
	if old {
		c.o.writeString(cone)
	} else {
		c.o.writeString(czero)
	}
}

func cmdGetbit(c *ctx) {
	offset, ok := c.bitOffset(2)
	if !ok {
		return
	}
	sh, e, ok := c.readKind(c.argv[1], kindString, czero)
	defer sh.mu.RUnlock()
	if !ok {
		return
	}
	byteAt := offset >> 3
	if byteAt < uint64(len(e.str)) && e.str[byteAt]&(1<<(7-offset&7)) != 0 {
		c.o.writeString(cone)
		return
	}
	c.o.writeString(czero)
}

// bitRangeUnit parses BITCOUNT's or BITPOS's BIT or BYTE (isBit: BIT),
// answering a syntax error for anything else.
func (c *ctx) bitRangeUnit(i int) (isBit, ok bool) {
	switch {
	case equalFold(c.argv[i], "bit"):
		return true, true
	case equalFold(c.argv[i], "byte"):
		return false, true
	}
	c.o.writeString(errSyntax)
	return false, false
}

// bitRange clamps start and end (bits when isBit, else bytes) to a string
// of n bytes, as redis-server's BITCOUNT and BITPOS do, and converts a
// range of bits to the bytes it spans, with the masks of the bits of its
// first and last byte outside it.
func bitRange(start, end, n int64, isBit bool) (s, e int64, firstMask, lastMask byte) {
	total := n
	if isBit {
		total <<= 3
	}
	if start < 0 {
		start += total
	}
	if end < 0 {
		end += total
	}
	start, end = max(start, 0), max(end, 0)
	if end >= total {
		end = total - 1
	}
	if isBit && start <= end {
		firstMask = byte(^(int64(1)<<(8-start&7) - 1) & 0xff)
		lastMask = byte(int64(1)<<(7-end&7) - 1)
		start >>= 3
		end >>= 3
	}
	return start, end, firstMask, lastMask
}

func popcount(p []byte) int64 {
	var n int
	for len(p) >= 8 {
		n += bits.OnesCount64(uint64(p[0]) | uint64(p[1])<<8 | uint64(p[2])<<16 | uint64(p[3])<<24 |
			uint64(p[4])<<32 | uint64(p[5])<<40 | uint64(p[6])<<48 | uint64(p[7])<<56)
		p = p[8:]
	}
	for _, b := range p {
		n += bits.OnesCount8(b)
	}
	return int64(n)
}

// cmdBitcount answers BITCOUNT as redis-server's bitcountCommand does: an
// absent key is 0 whatever the arguments, and the range's numbers are
// read before its unit.
func cmdBitcount(c *ctx) {
	sh, e, ok := c.readKind(c.argv[1], kindString, czero)
	defer sh.mu.RUnlock()
	if !ok {
		return
	}
	p := e.str
	var start, end int64
	var firstMask, lastMask byte
	switch len(c.argv) {
	case 2:
		start, end = 0, int64(len(p))-1
	case 4, 5:
		if start, end, ok = c.intArgs(2, 3); !ok {
			return
		}
		if start < 0 && end < 0 && start > end {
			c.o.writeString(czero)
			return
		}
		isBit := false
		if len(c.argv) == 5 {
			if isBit, ok = c.bitRangeUnit(4); !ok {
				return
			}
		}
		start, end, firstMask, lastMask = bitRange(start, end, int64(len(p)), isBit)
	default:
		c.o.writeString(errSyntax)
		return
	}
	if start > end {
		c.o.writeString(czero)
		return
	}
	n := popcount(p[start : end+1])
	n -= int64(bits.OnesCount8(p[start]&firstMask) + bits.OnesCount8(p[end]&lastMask))
	c.o.integer(n)
}

// bitpos is redis-server's redisBitpos: the position of the first bit
// equal to bit in p, the bits past p read as zeros: len(p)*8 when bit is
// 0 and every bit of p is set, -1 when bit is 1 and none is.
func bitpos(p []byte, bit int64) int64 {
	skip := byte(0)
	if bit == 0 {
		skip = 0xff
	}
	for i, b := range p {
		if b == skip {
			continue
		}
		if bit == 0 {
			b = ^b
		}
		return int64(i)*8 + int64(bits.LeadingZeros8(b))
	}
	if bit == 1 {
		return -1
	}
	return int64(len(p)) * 8
}

// cmdBitpos answers BITPOS as redis-server's bitposCommand does, its
// treatment of the range's edge bytes included.
func cmdBitpos(c *ctx) {
	bit, ok := c.intArg(2)
	if !ok {
		return
	}
	if bit != 0 && bit != 1 {
		c.o.err("The bit argument must be 1 or 0.")
		return
	}
	sh, e, ok := c.readKind(c.argv[1], kindString, "")
	defer sh.mu.RUnlock()
	if !ok {
		return
	}
	if e == nil {
		c.o.integer(-bit)
		return
	}
	p := e.str
	var start, end int64
	var firstMask, lastMask byte
	endGiven := false
	switch len(c.argv) {
	case 3:
		start, end = 0, int64(len(p))-1
	case 4, 5, 6:
		if start, ok = c.intArg(3); !ok {
			return
		}
		isBit := false
		if len(c.argv) == 6 {
			if isBit, ok = c.bitRangeUnit(5); !ok {
				return
			}
		}
		end = int64(len(p)) - 1 // BIT needs an end: it is given then
		if len(c.argv) >= 5 {
			if end, ok = c.intArg(4); !ok {
				return
			}
			endGiven = true
		}
		start, end, firstMask, lastMask = bitRange(start, end, int64(len(p)), isBit)
	default:
		c.o.writeString(errSyntax)
		return
	}
	if start > end {
		c.o.integer(-1)
		return
	}
	c.o.integer(bitposRange(p, bit, start, end, firstMask, lastMask, endGiven))
}

// bitposRange is the search of bitposCommand over the bytes [start, end]
// of p, the bits of the first and last byte in firstMask and lastMask
// left out.
func bitposRange(p []byte, bit, start, end int64, firstMask, lastMask byte, endGiven bool) int64 {
	bytes := end - start + 1
	var pos int64
	edge := func(b byte, mask byte) byte {
		if bit == 1 {
			return b &^ mask
		}
		return b | mask
	}
	done := false
	if firstMask != 0 {
		b := edge(p[start], firstMask)
		if lastMask != 0 && bytes == 1 {
			b = edge(b, lastMask)
		}
		pos = bitpos([]byte{b}, bit)
		if bytes == 1 || (pos != -1 && pos != 8) {
			done = true
		} else {
			start++
			bytes--
		}
	}
	if !done {
		cur := bytes
		if lastMask != 0 {
			cur--
		}
		if cur > 0 {
			pos = bitpos(p[start:start+cur], bit)
			if bytes == cur || (pos != -1 && pos != cur<<3) {
				done = true
			} else {
				start += cur
				bytes -= cur
			}
		}
	}
	if !done {
		pos = bitpos([]byte{edge(p[end], lastMask)}, bit)
	}
	if endGiven && bit == 0 && pos == bytes<<3 {
		return -1
	}
	if pos != -1 {
		pos += start << 3
	}
	return pos
}
