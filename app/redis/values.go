package redis

import (
	"strconv"
)

// list is a double-ended queue of elements (a ring buffer).
type list struct {
	buf  [][]byte
	head int
	n    int
}

func (l *list) len() int { return l.n }

// index resolves a LINDEX or LSET index (negative: from the end).
func (l *list) index(i int64) (int, bool) {
	if i < 0 {
		i += int64(l.n)
	}
	if i < 0 || i >= int64(l.n) {
		return 0, false
	}
	return int(i), true
}

func (l *list) at(i int) []byte { return l.buf[(l.head+i)%len(l.buf)] }

func (l *list) set(i int, v []byte) { l.buf[(l.head+i)%len(l.buf)] = v }

func (l *list) grow() {
	if l.n < len(l.buf) {
		return
	}
	nb := make([][]byte, max(8, 2*len(l.buf)))
	for i := 0; i < l.n; i++ {
		nb[i] = l.at(i)
	}
	l.buf, l.head = nb, 0
}

func (l *list) pushFront(v []byte) {
	l.grow()
	l.head = (l.head - 1 + len(l.buf)) % len(l.buf)
	l.buf[l.head] = v
	l.n++
}

func (l *list) pushBack(v []byte) {
	l.grow()
	l.buf[(l.head+l.n)%len(l.buf)] = v
	l.n++
}

func (l *list) popFront() []byte {
	v := l.buf[l.head]
	l.buf[l.head] = nil
	l.head = (l.head + 1) % len(l.buf)
	l.n--
	l.shrink()
	return v
}

func (l *list) popBack() []byte {
	i := (l.head + l.n - 1) % len(l.buf)
	v := l.buf[i]
	l.buf[i] = nil
	l.n--
	l.shrink()
	return v
}

// insert inserts v before element i (0 <= i <= n), moving the shorter
// side of the list by one place.
func (l *list) insert(i int, v []byte) {
	if i == 0 {
		l.pushFront(v)
		return
	}
	if i == l.n {
		l.pushBack(v)
		return
	}
	l.grow()
	if i < l.n/2 {
		l.head = (l.head - 1 + len(l.buf)) % len(l.buf)
		for j := 0; j < i; j++ {
			l.set(j, l.at(j+1))
		}
	} else {
		for j := l.n; j > i; j-- {
			l.set(j, l.at(j-1))
		}
	}
	l.set(i, v)
	l.n++
}

// shrink halves the ring when it is mostly empty.
func (l *list) shrink() {
	if len(l.buf) > 64 && l.n < len(l.buf)/4 {
		nb := make([][]byte, len(l.buf)/2)
		for i := 0; i < l.n; i++ {
			nb[i] = l.at(i)
		}
		l.buf, l.head = nb, 0
	}
}

// keep keeps the elements [start, end) and drops the rest.
func (l *list) keep(start, end int) {
	nb := make([][]byte, max(8, end-start))
	for i := start; i < end; i++ {
		nb[i-start] = l.at(i)
	}
	l.buf, l.head, l.n = nb, 0, end-start
}

// hashObj is a hash: its fields in insertion order, as redis-server keeps
// a small hash (a listpack), with an index once it is large.
type hashObj struct {
	fields []hashField
	idx    map[string]int // nil while small
}

type hashField struct {
	name  string
	value []byte
}

// Encoding thresholds of redis-server 7.0, its defaults
// (hash-max-listpack-entries 512 and -value 64, set-max-intset-entries
// 512, zset-max-listpack-entries 128 and -value 64): past them a
// collection's order is no longer insertion (or numeric) order in
// redis-server either.
const (
	hashSmallEntries = 512
	zsetSmallEntries = 128
	smallValue       = 64
	intsetMax        = 512
)

func (h *hashObj) find(name []byte) int {
	if h.idx != nil {
		if i, ok := h.idx[string(name)]; ok {
			return i
		}
		return -1
	}
	for i := range h.fields {
		if h.fields[i].name == string(name) {
			return i
		}
	}
	return -1
}

// set sets a field and reports whether it is new.
func (h *hashObj) set(name, value []byte) bool {
	if i := h.find(name); i >= 0 {
		h.fields[i].value = value
		h.index(len(name), len(value))
		return false
	}
	f := hashField{name: string(name), value: value}
	h.fields = append(h.fields, f)
	if h.idx != nil {
		h.idx[f.name] = len(h.fields) - 1
	}
	h.index(len(name), len(value))
	return true
}

// index builds the index once the hash is no longer small.
func (h *hashObj) index(nameLen, valueLen int) {
	if h.idx != nil || (len(h.fields) <= hashSmallEntries && nameLen <= smallValue && valueLen <= smallValue) {
		return
	}
	h.idx = make(map[string]int, len(h.fields))
	for i, f := range h.fields {
		h.idx[f.name] = i
	}
}

// del removes field i: in order while the hash is small, by moving the
// last field into its place once it is large.
func (h *hashObj) del(i int) {
	if h.idx == nil {
		h.fields = append(h.fields[:i], h.fields[i+1:]...)
		return
	}
	delete(h.idx, h.fields[i].name)
	last := len(h.fields) - 1
	if i != last {
		h.fields[i] = h.fields[last]
		h.idx[h.fields[i].name] = i
	}
	h.fields[last] = hashField{}
	h.fields = h.fields[:last]
}

// setObj is a set: an intset (sorted integers) while every member is an
// integer and there are at most intsetMax, as redis-server keeps one, and
// otherwise its members with an index.
type setObj struct {
	ints    []int64 // while intset
	intset  bool
	members []string
	idx     map[string]int
}

func newSetObj() *setObj { return &setObj{intset: true} }

func (s *setObj) card() int {
	if s.intset {
		return len(s.ints)
	}
	return len(s.members)
}

// member returns member i (in SMEMBERS order).
func (s *setObj) member(i int, scratch []byte) []byte {
	if s.intset {
		return strconv.AppendInt(scratch[:0], s.ints[i], 10)
	}
	return []byte(s.members[i])
}

func (s *setObj) memberString(i int) string {
	if s.intset {
		return strconv.FormatInt(s.ints[i], 10)
	}
	return s.members[i]
}

func (s *setObj) searchInt(v int64) (int, bool) {
	lo, hi := 0, len(s.ints)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if s.ints[m] < v {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo, lo < len(s.ints) && s.ints[lo] == v
}

func (s *setObj) has(m []byte) bool {
	if s.intset {
		v, ok := string2ll(m)
		if !ok {
			return false
		}
		_, found := s.searchInt(v)
		return found
	}
	_, ok := s.idx[string(m)]
	return ok
}

// add adds a member and reports whether it is new.
func (s *setObj) add(m []byte) bool {
	if s.intset {
		if v, ok := string2ll(m); ok {
			i, found := s.searchInt(v)
			if found {
				return false
			}
			if len(s.ints) < intsetMax {
				s.ints = append(s.ints, 0)
				copy(s.ints[i+1:], s.ints[i:])
				s.ints[i] = v
				return true
			}
		}
		s.convert()
	}
	if _, ok := s.idx[string(m)]; ok {
		return false
	}
	k := string(m)
	s.idx[k] = len(s.members)
	s.members = append(s.members, k)
	return true
}

// convert turns an intset into a set of strings.
func (s *setObj) convert() {
	s.members = make([]string, len(s.ints))
	s.idx = make(map[string]int, len(s.ints))
	for i, v := range s.ints {
		s.members[i] = strconv.FormatInt(v, 10)
		s.idx[s.members[i]] = i
	}
	s.ints, s.intset = nil, false
}

// remove removes a member and reports whether it was there.
func (s *setObj) remove(m []byte) bool {
	if s.intset {
		v, ok := string2ll(m)
		if !ok {
			return false
		}
		i, found := s.searchInt(v)
		if !found {
			return false
		}
		s.ints = append(s.ints[:i], s.ints[i+1:]...)
		return true
	}
	i, ok := s.idx[string(m)]
	if !ok {
		return false
	}
	s.removeAt(i)
	return true
}

// removeAt removes member i.
func (s *setObj) removeAt(i int) {
	if s.intset {
		s.ints = append(s.ints[:i], s.ints[i+1:]...)
		return
	}
	delete(s.idx, s.members[i])
	last := len(s.members) - 1
	if i != last {
		s.members[i] = s.members[last]
		s.idx[s.members[i]] = i
	}
	s.members[last] = ""
	s.members = s.members[:last]
}

// clone returns a copy of l (COPY).
func (l *list) clone() *list {
	d := &list{buf: make([][]byte, max(8, l.n)), n: l.n}
	for i := range l.n {
		d.buf[i] = copyBytes(l.at(i))
	}
	return d
}

// clone returns a copy of h, indexed as h is (COPY).
func (h *hashObj) clone() *hashObj {
	d := &hashObj{fields: make([]hashField, len(h.fields))}
	for i, f := range h.fields {
		d.fields[i] = hashField{name: f.name, value: copyBytes(f.value)}
	}
	if h.idx != nil {
		d.idx = make(map[string]int, len(h.fields))
		for i, f := range d.fields {
			d.idx[f.name] = i
		}
	}
	return d
}
