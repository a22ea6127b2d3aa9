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

// next returns the lowest id in b at or above i, or -1.
func (b bitset) next(i int) int {
	k := i >> 6
	if i < 0 || k >= len(b) {
		return -1
	}
	if w := b[k] >> (uint(i) & 63); w != 0 {
		return i + bits.TrailingZeros64(w)
	}
	for k++; k < len(b); k++ {
		if b[k] != 0 {
			return k<<6 + bits.TrailingZeros64(b[k])
		}
	}
	return -1
}

// sparseSet is a bitset that finds its next id in a few words however
// large it is: summary has a bit per word of ids that may be non-zero.
type sparseSet struct {
	ids, summary bitset
}

func newSparseSet(n int) sparseSet {
	return sparseSet{ids: make(bitset, words(n)), summary: make(bitset, words(words(n)))}
}

func (s *sparseSet) set(i int) {
	s.ids.set(i)
	s.summary.set(i >> 6)
}

func (s *sparseSet) clear(i int) {
	s.ids.clear(i)
	if s.ids[i>>6] == 0 {
		s.summary.clear(i >> 6)
	}
}

func (s *sparseSet) reset() {
	for k := s.summary.next(0); k >= 0; k = s.summary.next(k + 1) {
		s.ids[k] = 0
	}
	s.summary.reset()
}

// next returns the lowest id at or above i, or -1.
func (s *sparseSet) next(i int) int {
	k := i >> 6
	if i < 0 || k >= len(s.ids) {
		return -1
	}
	if w := s.ids[k] >> (uint(i) & 63); w != 0 {
		return i + bits.TrailingZeros64(w)
	}
	if k = s.summary.next(k + 1); k < 0 {
		return -1
	}
	return k<<6 + bits.TrailingZeros64(s.ids[k])
}
