package darc

import "math/bits"

// bitset is a set of worker ids, one bit per worker, in 64-bit words.
// Sets of one policy all have the same number of words.
type bitset []uint64

func words(n int) int { return (n + 63) / 64 }

func (b bitset) set(i int)      { b[i>>6] |= 1 << (uint(i) & 63) }
func (b bitset) clear(i int)    { b[i>>6] &^= 1 << (uint(i) & 63) }
func (b bitset) has(i int) bool { return b[i>>6]&(1<<(uint(i)&63)) != 0 }

func (b bitset) reset() {
	for i := range b {
		b[i] = 0
	}
}

// setRange adds ids lo..hi-1.
func (b bitset) setRange(lo, hi int) {
	for i := lo; i < hi; i++ {
		b.set(i)
	}
}

// first returns the lowest id in b, or -1.
func (b bitset) first() int {
	for i, w := range b {
		if w != 0 {
			return i<<6 + bits.TrailingZeros64(w)
		}
	}
	return -1
}

// firstAnd returns the lowest id in both a and b, or -1.
func firstAnd(a, b bitset) int {
	b = b[:len(a)]
	for i, w := range a {
		if x := w & b[i]; x != 0 {
			return i<<6 + bits.TrailingZeros64(x)
		}
	}
	return -1
}

// lastAnd returns the highest id in both a and b, or -1.
func lastAnd(a, b bitset) int {
	b = b[:len(a)]
	for i := len(a) - 1; i >= 0; i-- {
		if x := a[i] & b[i]; x != 0 {
			return i<<6 + 63 - bits.LeadingZeros64(x)
		}
	}
	return -1
}

func (b bitset) count() int {
	n := 0
	for _, w := range b {
		n += bits.OnesCount64(w)
	}
	return n
}

// appendIDs appends the ids in b, ascending, to dst.
func (b bitset) appendIDs(dst []int) []int {
	for i, w := range b {
		for w != 0 {
			dst = append(dst, i<<6+bits.TrailingZeros64(w))
			w &= w - 1
		}
	}
	return dst
}
