package redis

import "math/rand/v2"

// zsetObj is a sorted set: a skip list ordered by (score, member), with
// spans for ranks, and each member's score by name (redis-server's
// zskiplist and dict).
type zsetObj struct {
	scores map[string]float64
	zsl    skiplist
	// big: redis-server would hold the set as a skip list, not a
	// listpack: it has had more than zsetSmallEntries members, or one longer
	// than smallValue bytes (it never goes back). A listpack stores a
	// score that is an integer as one, so that -0 reads back as 0.
	big bool
}

func newZSetObj() *zsetObj {
	z := &zsetObj{scores: make(map[string]float64)}
	z.zsl.init()
	return z
}

func (z *zsetObj) card() int { return int(z.zsl.length) }

const (
	zslMaxLevel  = 32
	zslThreshold = 0xFFFF / 4 // ZSKIPLIST_P = 0.25
)

type zslNode struct {
	member   string
	score    float64
	backward *zslNode
	level    []zslLevel
}

type zslLevel struct {
	forward *zslNode
	span    uint64
}

type skiplist struct {
	header *zslNode
	tail   *zslNode
	length uint64
	level  int
}

func (zsl *skiplist) init() {
	zsl.header = &zslNode{level: make([]zslLevel, zslMaxLevel)}
	zsl.level = 1
}

func randomLevel() int {
	level := 1
	for level < zslMaxLevel && rand.Uint32()&0xFFFF < zslThreshold {
		level++
	}
	return level
}

// less reports whether (score, member) sorts before node x.
func before(x *zslNode, score float64, member string) bool {
	return x.score < score || (x.score == score && x.member < member)
}

// insert adds a member that is not in the list.
func (zsl *skiplist) insert(score float64, member string) *zslNode {
	var update [zslMaxLevel]*zslNode
	var rank [zslMaxLevel]uint64
	x := zsl.header
	for i := zsl.level - 1; i >= 0; i-- {
		if i != zsl.level-1 {
			rank[i] = rank[i+1]
		}
		for x.level[i].forward != nil && before(x.level[i].forward, score, member) {
			rank[i] += x.level[i].span
			x = x.level[i].forward
		}
		update[i] = x
	}
	level := randomLevel()
	if level > zsl.level {
		for i := zsl.level; i < level; i++ {
			rank[i] = 0
			update[i] = zsl.header
			update[i].level[i].span = zsl.length
		}
		zsl.level = level
	}
	x = &zslNode{member: member, score: score, level: make([]zslLevel, level)}
	for i := 0; i < level; i++ {
		x.level[i].forward = update[i].level[i].forward
		update[i].level[i].forward = x
		x.level[i].span = update[i].level[i].span - (rank[0] - rank[i])
		update[i].level[i].span = (rank[0] - rank[i]) + 1
	}
	for i := level; i < zsl.level; i++ {
		update[i].level[i].span++
	}
	if update[0] != zsl.header {
		x.backward = update[0]
	}
	if x.level[0].forward != nil {
		x.level[0].forward.backward = x
	} else {
		zsl.tail = x
	}
	zsl.length++
	return x
}

func (zsl *skiplist) deleteNode(x *zslNode, update *[zslMaxLevel]*zslNode) {
	for i := 0; i < zsl.level; i++ {
		if update[i].level[i].forward == x {
			update[i].level[i].span += x.level[i].span - 1
			update[i].level[i].forward = x.level[i].forward
		} else {
			update[i].level[i].span--
		}
	}
	if x.level[0].forward != nil {
		x.level[0].forward.backward = x.backward
	} else {
		zsl.tail = x.backward
	}
	for zsl.level > 1 && zsl.header.level[zsl.level-1].forward == nil {
		zsl.level--
	}
	zsl.length--
}

// delete removes (score, member) and reports whether it was there.
func (zsl *skiplist) delete(score float64, member string) bool {
	var update [zslMaxLevel]*zslNode
	x := zsl.header
	for i := zsl.level - 1; i >= 0; i-- {
		for x.level[i].forward != nil && before(x.level[i].forward, score, member) {
			x = x.level[i].forward
		}
		update[i] = x
	}
	x = x.level[0].forward
	if x != nil && x.score == score && x.member == member {
		zsl.deleteNode(x, &update)
		return true
	}
	return false
}

// rank returns the 1-based rank of (score, member), 0 when absent.
func (zsl *skiplist) rank(score float64, member string) uint64 {
	var rank uint64
	x := zsl.header
	for i := zsl.level - 1; i >= 0; i-- {
		for x.level[i].forward != nil && (before(x.level[i].forward, score, member) ||
			(x.level[i].forward.score == score && x.level[i].forward.member == member)) {
			rank += x.level[i].span
			x = x.level[i].forward
		}
		if x != zsl.header && x.member == member {
			return rank
		}
	}
	return 0
}

// byRank returns the node of 1-based rank r.
func (zsl *skiplist) byRank(r uint64) *zslNode {
	var traversed uint64
	x := zsl.header
	for i := zsl.level - 1; i >= 0; i-- {
		for x.level[i].forward != nil && traversed+x.level[i].span <= r {
			traversed += x.level[i].span
			x = x.level[i].forward
		}
		if traversed == r {
			return x
		}
	}
	return nil
}

// scoreRange is a score interval, each end open or closed.
type scoreRange struct {
	min, max     float64
	minex, maxex bool
}

func (r *scoreRange) gteMin(v float64) bool {
	if r.minex {
		return v > r.min
	}
	return v >= r.min
}

func (r *scoreRange) lteMax(v float64) bool {
	if r.maxex {
		return v < r.max
	}
	return v <= r.max
}

// empty reports whether no score can be in r.
func (r *scoreRange) empty() bool {
	return r.min > r.max || (r.min == r.max && (r.minex || r.maxex))
}

// firstIn returns the first node in r, or nil.
func (zsl *skiplist) firstIn(r *scoreRange) *zslNode {
	if r.empty() {
		return nil
	}
	x := zsl.header
	for i := zsl.level - 1; i >= 0; i-- {
		for x.level[i].forward != nil && !r.gteMin(x.level[i].forward.score) {
			x = x.level[i].forward
		}
	}
	x = x.level[0].forward
	if x == nil || !r.lteMax(x.score) {
		return nil
	}
	return x
}

// lastIn returns the last node in r, or nil.
func (zsl *skiplist) lastIn(r *scoreRange) *zslNode {
	if r.empty() {
		return nil
	}
	x := zsl.header
	for i := zsl.level - 1; i >= 0; i-- {
		for x.level[i].forward != nil && r.lteMax(x.level[i].forward.score) {
			x = x.level[i].forward
		}
	}
	if x == zsl.header || !r.gteMin(x.score) {
		return nil
	}
	return x
}

// add sets member's score, and reports whether the member is new.
func (z *zsetObj) add(member string, score float64) bool {
	old, ok := z.scores[member]
	if !ok && !z.big && (z.card()+1 > zsetSmallEntries || len(member) > smallValue) {
		z.big = true // zsetAdd converts before it inserts
	}
	if score == 0 && !z.big {
		score = 0 // a listpack's integer 0 (zzlInsertAt's double2ll)
	}
	if ok {
		if old != score {
			z.zsl.delete(old, member)
			z.zsl.insert(score, member)
			z.scores[member] = score
		}
		return false
	}
	z.scores[member] = score
	z.zsl.insert(score, member)
	return true
}

// remove removes member and reports whether it was there.
func (z *zsetObj) remove(member string) bool {
	score, ok := z.scores[member]
	if !ok {
		return false
	}
	delete(z.scores, member)
	z.zsl.delete(score, member)
	return true
}

// lexBound is one end of a lex range: a member, or (inf -1 and 1) the
// smallest and the largest string there is (redis-server's "-" and "+").
type lexBound struct {
	s   string
	inf int8
}

// cmpLex compares two bounds as redis-server's sdscmplex does.
func cmpLex(a, b lexBound) int {
	switch {
	case a.inf != 0 && a.inf == b.inf:
		return 0
	case a.inf == -1 || b.inf == 1:
		return -1
	case a.inf == 1 || b.inf == -1:
		return 1
	}
	switch {
	case a.s < b.s:
		return -1
	case a.s > b.s:
		return 1
	}
	return 0
}

// lexRange is a member interval of ZRANGEBYLEX and its kin.
type lexRange struct {
	min, max     lexBound
	minex, maxex bool
}

// parseLexBound reads one end of a lex range as redis-server's
// zslParseLexRangeItem does: "-", "+", or '(' (exclusive) or '['
// (inclusive) before a member; "+" and "-" are read as C strings.
func parseLexBound(p []byte) (b lexBound, ex, ok bool) {
	if len(p) == 0 {
		return b, false, false
	}
	switch p[0] {
	case '+', '-':
		if len(p) > 1 && p[1] != 0 {
			return b, false, false
		}
		b.inf = 1
		if p[0] == '-' {
			b.inf = -1
		}
		return b, true, true
	case '(':
		return lexBound{s: string(p[1:])}, true, true
	case '[':
		return lexBound{s: string(p[1:])}, false, true
	}
	return b, false, false
}

// parseLexRange reads a lex range's two ends.
func parseLexRange(lo, hi []byte) (r lexRange, ok bool) {
	var ok1, ok2 bool
	r.min, r.minex, ok1 = parseLexBound(lo)
	r.max, r.maxex, ok2 = parseLexBound(hi)
	return r, ok1 && ok2
}

func (r *lexRange) gteMin(m string) bool {
	c := cmpLex(lexBound{s: m}, r.min)
	if r.minex {
		return c > 0
	}
	return c >= 0
}

func (r *lexRange) lteMax(m string) bool {
	c := cmpLex(lexBound{s: m}, r.max)
	if r.maxex {
		return c < 0
	}
	return c <= 0
}

// inLexRange is redis-server's zslIsInLexRange: whether some of the
// list may be in r, judged by its ends.
func (zsl *skiplist) inLexRange(r *lexRange) bool {
	c := cmpLex(r.min, r.max)
	if c > 0 || (c == 0 && (r.minex || r.maxex)) {
		return false
	}
	if zsl.tail == nil || !r.gteMin(zsl.tail.member) {
		return false
	}
	return r.lteMax(zsl.header.level[0].forward.member)
}

// firstInLex returns the first node in r, or nil. A set redis-server
// holds as a listpack (linear) is walked from its start, as
// zzlFirstInLexRange walks it, otherwise the list is descended as
// zslFirstInLexRange descends it: the two differ only when the members
// have different scores, where a lex range means nothing.
func (z *zsetObj) firstInLex(r *lexRange) *zslNode {
	zsl := &z.zsl
	if !zsl.inLexRange(r) {
		return nil
	}
	var x *zslNode
	if !z.big {
		for x = zsl.header.level[0].forward; x != nil && !r.gteMin(x.member); x = x.level[0].forward {
		}
	} else {
		x = zsl.header
		for i := zsl.level - 1; i >= 0; i-- {
			for x.level[i].forward != nil && !r.gteMin(x.level[i].forward.member) {
				x = x.level[i].forward
			}
		}
		x = x.level[0].forward
	}
	if x == nil || !r.lteMax(x.member) {
		return nil
	}
	return x
}

// lastInLex returns the last node in r, or nil (see firstInLex).
func (z *zsetObj) lastInLex(r *lexRange) *zslNode {
	zsl := &z.zsl
	if !zsl.inLexRange(r) {
		return nil
	}
	var x *zslNode
	if !z.big {
		for x = zsl.tail; x != nil && !r.lteMax(x.member); x = x.backward {
		}
	} else {
		x = zsl.header
		for i := zsl.level - 1; i >= 0; i-- {
			for x.level[i].forward != nil && r.lteMax(x.level[i].forward.member) {
				x = x.level[i].forward
			}
		}
		if x == zsl.header {
			x = nil
		}
	}
	if x == nil || !r.gteMin(x.member) {
		return nil
	}
	return x
}

// firstToDeleteByLex is where ZREMRANGEBYLEX starts deleting: the first
// node in r for a listpack, and for a skip list the node after those
// below r's minimum, which zslDeleteRangeByLex finds without first
// checking the list's ends.
func (z *zsetObj) firstToDeleteByLex(r *lexRange) *zslNode {
	if !z.big {
		return z.firstInLex(r)
	}
	zsl := &z.zsl
	x := zsl.header
	for i := zsl.level - 1; i >= 0; i-- {
		for x.level[i].forward != nil && !r.gteMin(x.level[i].forward.member) {
			x = x.level[i].forward
		}
	}
	return x.level[0].forward
}

// clone returns a copy of z, a listpack's or a skip list's as z is
// (COPY).
func (z *zsetObj) clone() *zsetObj {
	d := newZSetObj()
	d.big = z.big
	for x := z.zsl.header.level[0].forward; x != nil; x = x.level[0].forward {
		d.scores[x.member] = x.score
		d.zsl.insert(x.score, x.member)
	}
	return d
}
